package events_test

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Watch one pchannel's checkpoints become durable from a channel, without
// ever slowing the pchannel down: the subscription's handler only buffers.
func Example() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))
	sub, err := events.Subscribe(system.EventStream,
		events.ForPChannels("orders-dml-0"),
		events.WithFilter(func(ev messages.Event) bool { // runs on the actor: quick
			switch ev.(type) {
			case *messages.Recovered, *messages.CheckpointPersisted, *messages.Stopped:
				return true
			}
			return false
		}))
	if err != nil {
		panic(err)
	}

	props, err := actors.NewProps("orders-dml-0", wal.Kafka, persistence.NewMemory(),
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)

	show := func(ev messages.Event) {
		switch e := ev.(type) {
		case *messages.Recovered:
			fmt.Println("recovered: start at", e.StartMessageID, "from catalog:", e.FromCatalog)
		case *messages.CheckpointPersisted:
			fmt.Println("durable:", e.Value)
		case *messages.Stopped:
			fmt.Println("stopped: last persisted", e.LastPersisted, "flushed:", e.Flushed)
		}
	}
	show(<-sub.C()) // recovered
	show(<-sub.C()) // the minimum at spawn is saved
	system.Root.Send(pchannel, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(130)})
	show(<-sub.C()) // shard-b is now the slowest

	_ = system.Root.PoisonFuture(pchannel).Wait()
	sub.Close()
	for ev := range sub.C() { // what was still buffered
		show(ev)
	}
	fmt.Println("dropped:", sub.Dropped())
	system.Shutdown()
	// Output:
	// recovered: start at kafka:100 from catalog: false
	// durable: kafka:100
	// durable: kafka:120
	// stopped: last persisted kafka:120 flushed: true
	// dropped: 0
}
