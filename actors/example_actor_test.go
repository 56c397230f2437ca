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

// consumer is an actor of the application's that owns a pchannel as its
// child: it asks with ctx.Request, hears the answers in its mailbox, and
// poisons the pchannel as it stops, so that the pending minimum is saved
// before protoactor stops its children hard.
type consumer struct {
	catalog  persistence.Catalog
	pchannel *actor.PID
	answers  chan<- string
}

func (c *consumer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		props, err := actors.NewProps("orders-dml-0", wal.Kafka, c.catalog,
			actors.WithVChannels(map[string]wal.MessageID{"orders-shard-a": wal.KafkaID(100)}))
		if err != nil {
			panic(err)
		}
		c.pchannel = ctx.Spawn(props)
	case messages.Command: // what the application decided
		ctx.Request(c.pchannel, m)
	case *messages.Applied: // a command applied in full
		c.answers <- fmt.Sprintf("applied %T", m.Command)
	case error: // a command rejected
		c.answers <- m.Error()
	case *actor.Stopping:
		stopped, err := actors.Poison(context.Background(), ctx.ActorSystem(), c.pchannel)
		if err != nil {
			panic(err)
		}
		c.answers <- fmt.Sprintf("flushed %v at %v", stopped.Flushed, stopped.LastPersisted)
	}
}

// An actor of the application's owns a pchannel: its requests are
// answered in its mailbox, and its stop saves the pchannel's minimum.
func Example_fromAnActor() {
	// protoactor's Stop to the child, poisoned by then, is a dead letter,
	// whose throttle would outlive the example by a second.
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	catalog := persistence.NewMemory()
	answers := make(chan string, 4)
	owner := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &consumer{catalog: catalog, answers: answers}
	}))

	system.Root.Send(owner, &messages.UpdateCheckpoint{VChannel: "orders-shard-a", Checkpoint: wal.KafkaID(130)})
	fmt.Println(<-answers)
	system.Root.Send(owner, &messages.UpdateCheckpoint{VChannel: "orders-shard-a", Checkpoint: wal.KafkaID(1)})
	fmt.Println(<-answers)
	_ = system.Root.PoisonFuture(owner).Wait()
	fmt.Println(<-answers)
	system.Shutdown()
	// Output:
	// applied *messages.UpdateCheckpoint
	// lowwater: checkpoint rollback: vchannel "orders-shard-a" from kafka:130 to kafka:1
	// flushed true at kafka:130
}
