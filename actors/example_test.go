package actors_test

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Spawn a pchannel, move its vchannels forward, watch the low-water mark
// reach the catalog, and stop gracefully.
func Example() {
	logger := zap.NewNop()
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(logger)))
	catalog := persistence.NewMemory()

	// Events off the actor's goroutine, through a buffer of their own.
	sub, err := events.Subscribe(system.EventStream, events.WithFilter(func(ev messages.Event) bool {
		_, ok := ev.(*messages.CheckpointPersisted)
		return ok
	}))
	if err != nil {
		panic(err)
	}
	persisted := func() wal.MessageID { return (<-sub.C()).(*messages.CheckpointPersisted).Value }

	props, err := actors.NewProps("orders-dml-0", wal.Kafka, catalog,
		actors.WithLogger(logger),
		actors.WithVChannels(map[string]wal.MessageID{
			"orders-shard-a": wal.KafkaID(100),
			"orders-shard-b": wal.KafkaID(120),
		}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)

	fmt.Println(persisted()) // the minimum at spawn
	system.Root.Send(pchannel, &messages.UpdateCheckpoint{VChannel: "orders-shard-a", Checkpoint: wal.KafkaID(130)})
	fmt.Println(persisted()) // shard-b is now the slowest

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = actors.Request(ctx, system.Root, pchannel, &messages.UpdateCheckpoint{VChannel: "orders-shard-b", Checkpoint: wal.KafkaID(1)})
	fmt.Println(err)

	_ = system.Root.PoisonFuture(pchannel).Wait() // flushes what is pending
	sub.Close()
	system.Shutdown()
	// Output:
	// kafka:100
	// kafka:120
	// lowwater: checkpoint rollback: vchannel "orders-shard-b" from kafka:120 to kafka:1
}
