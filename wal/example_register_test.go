package wal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Register a WAL lowwater does not ship, PostgreSQL's, and keep the
// checkpoint of a replication slot's consumers with it: the actors, a bbolt
// catalog and the events take it like a built-in WAL.
func ExampleRegister() {
	lsn := func(text string) wal.MessageID {
		id, err := wal.Parse("pglsn", text)
		if err != nil {
			panic(err)
		}
		return id
	}

	dir, err := os.MkdirTemp("", "lowwater-pglsn")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "checkpoints.db")
	catalog, err := persistence.OpenBolt(path)
	if err != nil {
		panic(err)
	}

	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	sub, err := events.Subscribe(system.EventStream, events.ForPChannels("pg-slot-0"))
	if err != nil {
		panic(err)
	}
	// next waits for the next event want accepts, skipping the others.
	next := func(want func(messages.Event) bool) messages.Event {
		for ev := range sub.C() {
			if want(ev) {
				return ev
			}
		}
		panic("subscription closed")
	}

	props, err := actors.NewProps("pg-slot-0", "pglsn", catalog,
		actors.WithVChannels(map[string]wal.MessageID{
			"orders": lsn("16/B374D848"),
			"users":  lsn("16/B3000000"),
		}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)
	recovered := next(func(ev messages.Event) bool { _, ok := ev.(*messages.Recovered); return ok }).(*messages.Recovered)
	fmt.Println("start at", recovered.StartMessageID)

	// A new vchannel, then everyone moves past the 32-bit boundary of the
	// low half: the order is the 64-bit value's.
	request := func(cmd messages.Command) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := actors.Request(ctx, system.Root, pchannel, cmd); err != nil {
			panic(err)
		}
	}
	request(&messages.AddVChannel{VChannel: "billing", Checkpoint: lsn("16/B4000000")})
	request(&messages.UpdateCheckpoint{VChannel: "users", Checkpoint: lsn("17/0")})
	request(&messages.UpdateCheckpoint{VChannel: "orders", Checkpoint: lsn("17/10")})
	want := lsn("16/B4000000") // billing is now the slowest
	next(func(ev messages.Event) bool {
		p, ok := ev.(*messages.CheckpointPersisted)
		return ok && p.Value.EQ(want)
	})
	fmt.Println("durable:", want)

	// users now holds the minimum, 17/0; a graceful stop flushes it.
	request(&messages.UpdateCheckpoint{VChannel: "billing", Checkpoint: lsn("18/0")})
	if err := system.Root.PoisonFuture(pchannel).Wait(); err != nil {
		panic(err)
	}
	stopped := next(func(ev messages.Event) bool { _, ok := ev.(*messages.Stopped); return ok }).(*messages.Stopped)
	fmt.Println("stopped: last persisted", stopped.LastPersisted, "flushed:", stopped.Flushed)
	sub.Close()
	system.Shutdown()
	if err := catalog.Close(); err != nil {
		panic(err)
	}

	// What a restarted process would read back.
	reopened, err := persistence.OpenBolt(path, persistence.WithReadOnly(true))
	if err != nil {
		panic(err)
	}
	defer reopened.Close()
	stored, err := reopened.Load(context.Background(), "pg-slot-0")
	fmt.Println("stored:", stored, err)
	// Output:
	// start at pglsn:16/B3000000
	// durable: pglsn:16/B4000000
	// stopped: last persisted pglsn:17/0 flushed: true
	// stored: pglsn:17/0 <nil>
}
