package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestRestartAfterAPanicOnStarted: a receiver middleware that passed the
// first Started on and then panicked made protoactor restart the actor,
// handing the new incarnation its Started itself: the mailbox, which had
// not seen Started handled, then held every user message for good.
func TestRestartAfterAPanicOnStarted(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	cat := persistence.NewMemory()
	props, err := actors.NewProps("p", wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
	require.NoError(t, err)
	var once atomic.Bool
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			next(c, env)
			if _, ok := env.Message.(*actor.Started); ok && once.CompareAndSwap(false, true) {
				panic("once, after Started")
			}
		}
	}))
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(7)}))
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	stored, err := cat.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), stored)
}

// TestCallersMailboxStillSaves: on a mailbox of the caller's, which never
// tells the actor it drained, no rise after recovery was handed to the
// persister: the checkpoint never moved.
func TestCallersMailboxStillSaves(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	cat := persistence.NewMemory()
	sub, err := events.Subscribe(system.EventStream, events.WithFilter(func(ev messages.Event) bool {
		p, ok := ev.(*messages.CheckpointPersisted)
		return ok && p.Value == wal.KafkaID(9)
	}))
	require.NoError(t, err)
	defer sub.Close()
	// Preloaded, it recovers in its Started handler: the rise below comes
	// after recovery, which is what went unsaved.
	props, err := actors.NewProps("p", wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
		actors.WithPreloaded(nil))
	require.NoError(t, err)
	props.Configure(actor.WithMailbox(actor.Unbounded()))
	pid := system.Root.Spawn(props)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := actors.GetState(ctx, system.Root, pid)
	require.NoError(t, err)
	require.True(t, st.Recovered)
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(9)}))
	select {
	case <-sub.C():
	case <-ctx.Done():
		t.Fatal("the rise to kafka:9 was never saved")
	}
	require.NoError(t, system.Root.StopFuture(pid).Wait())
}
