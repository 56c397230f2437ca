package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Stop gracefully, which flushes the pending checkpoint, then start again
// on the same catalog: consumption restarts from the stored checkpoint, not
// from the vchannels' older positions.
func Example_stopAndRecover() {
	catalog := persistence.NewMemory() // in production: persistence.OpenBolt(path)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// run spawns the pchannel in a fresh actor system, as a process would,
	// and returns once it has read its stored checkpoint.
	run := func(vchannels map[string]wal.MessageID) (*actor.ActorSystem, *actor.PID) {
		system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
		props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog, actors.WithVChannels(vchannels))
		if err != nil {
			panic(err)
		}
		pid := system.Root.Spawn(props)
		start, err := actors.StartMessageID(ctx, system, pid) // where the consumer opens its WAL
		if err != nil {
			panic(err)
		}
		fmt.Println("start at", start)
		return system, pid
	}

	system, pid := run(map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)})
	_ = actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)})
	_ = actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "shard-b", Checkpoint: wal.KafkaID(140)})
	_ = system.Root.PoisonFuture(pid).Wait() // graceful: the minimum, kafka:140, is flushed
	system.Shutdown()
	stored, _ := catalog.Load(ctx, "orders-dml-0")
	fmt.Println("stored", stored)

	// After the restart the vchannels report older positions; the stored
	// checkpoint is the floor, and where consumption restarts.
	system, pid = run(map[string]wal.MessageID{"shard-a": wal.KafkaID(130), "shard-b": wal.KafkaID(140)})
	_ = system.Root.PoisonFuture(pid).Wait()
	system.Shutdown()
	// Output:
	// start at kafka:100
	// stored kafka:140
	// start at kafka:140
}
