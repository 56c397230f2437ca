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

// Find who holds a pchannel back: when the minimum has not risen for the
// stall-after duration, MinimumStalled names the vchannel at it; when it
// moves again, MinimumResumed ends the stall. GetState names the holder at
// any time.
func ExampleWithStallAfter() {
	system := actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())))

	stalls := make(chan messages.Event, 16)
	sub := system.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.MinimumStalled, *messages.MinimumResumed:
			stalls <- e.(messages.Event) // handlers run on the actor's goroutine: be quick
		}
	})

	props, err := actors.NewProps("orders-dml-0", wal.Kafka, persistence.NewMemory(),
		actors.WithStallAfter(50*time.Millisecond), // in production: minutes
		actors.WithVChannels(map[string]wal.MessageID{
			"orders-shard-a": wal.KafkaID(130),
			"orders-shard-b": wal.KafkaID(120),
		}))
	if err != nil {
		panic(err)
	}
	pchannel := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// shard-b does not move.
	s := (<-stalls).(*messages.MinimumStalled)
	fmt.Printf("stalled: %s at %s, for at least 50ms: %t\n", s.Holder, s.Checkpoint, s.For >= 50*time.Millisecond)
	st, _ := actors.GetState(ctx, system.Root, pchannel)
	fmt.Printf("state: holder %s, minimum %s, stalled %t\n", st.Holder, st.Minimum, st.Stalled)

	// It moves again: the stall ends, and shard-a holds the minimum now.
	system.Root.Send(pchannel, &messages.UpdateCheckpoint{VChannel: "orders-shard-b", Checkpoint: wal.KafkaID(140)})
	r := (<-stalls).(*messages.MinimumResumed)
	fmt.Printf("resumed: %s\n", r.Holder)
	st, _ = actors.GetState(ctx, system.Root, pchannel)
	fmt.Printf("state: holder %s, minimum %s, stalled %t\n", st.Holder, st.Minimum, st.Stalled)

	_ = system.Root.PoisonFuture(pchannel).Wait()
	system.EventStream.Unsubscribe(sub)
	system.Shutdown()
	// Output:
	// stalled: orders-shard-b at kafka:120, for at least 50ms: true
	// state: holder orders-shard-b, minimum kafka:120, stalled true
	// resumed: orders-shard-b
	// state: holder orders-shard-a, minimum kafka:130, stalled false
}
