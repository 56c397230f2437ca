package wal_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// LSN is a PostgreSQL log sequence number, a position in the write-ahead
// log of a logical replication slot. It is a 64-bit value, written as two
// hexadecimal halves: 16/B374D848.
type LSN uint64

func (LSN) WALName() wal.Name { return "pglsn" }

func (l LSN) LT(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l < v
}

func (l LSN) LTE(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l <= v
}

func (l LSN) EQ(o wal.MessageID) bool {
	v, ok := o.(LSN)
	return ok && l == v
}

func (l LSN) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(l)) }

func (l LSN) String() string { return fmt.Sprintf("pglsn:%X/%X", uint32(l>>32), uint32(l)) }

// lsnCodec reads what Marshal and String write.
var lsnCodec = wal.Codec[LSN]{
	Unmarshal: func(b []byte) (LSN, error) {
		if len(b) != 8 {
			return 0, fmt.Errorf("LSN is 8 bytes, got %d", len(b))
		}
		return LSN(binary.BigEndian.Uint64(b)), nil
	},
	Parse: func(text string) (LSN, error) {
		hi, lo, ok := strings.Cut(text, "/")
		if !ok {
			return 0, fmt.Errorf("want XXX/XXX")
		}
		h, err := strconv.ParseUint(hi, 16, 32)
		if err != nil {
			return 0, err
		}
		l, err := strconv.ParseUint(lo, 16, 32)
		if err != nil {
			return 0, err
		}
		return LSN(h<<32 | l), nil
	},
}

// Register the WAL at program start, before any actor or catalog meets it.
func init() {
	if err := wal.Register("pglsn", lsnCodec); err != nil {
		panic(err)
	}
}

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
