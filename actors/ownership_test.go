package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// An ownership that ends while a graceful stop waits for its flush ends
// the wait and is told, as in any other phase: another owner may be
// saving already, and each save of ours is refused. Before, the stop
// waited out its flush timeout on a save that could only fail, its
// reason said only that, and no OwnershipLost was published (so
// lowwater_ownership_lost_total missed it), whenever the application,
// told of the loss too, poisoned the actor before the actor heard of it.
func TestAnOwnershipEndingDuringTheFlushEndsIt(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := quietSystem(t)
	lost := subscribed[*messages.OwnershipLost](t, system)
	owned, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sessionEnded := errors.New("owner session ended")
	const flush = time.Minute
	props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(time.Hour), WithStopFlushTimeout(flush),
		WithOwnership(owned), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	// The ownership ends as the stop begins: once the mailbox has handed
	// the pill on, the actor reads no message, the loss's own among them,
	// until the stop is done.
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopping); ok {
				cancel(sessionEnded)
			}
			next(c, env)
		}
	}))
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered: // the save of kafka:7 hangs
	case <-time.After(10 * time.Second):
		t.Fatal("the save never started")
	}

	began := time.Now()
	ctx, done := context.WithTimeout(context.Background(), flush/2)
	defer done()
	stopped, err := Poison(ctx, system, pid)
	require.NoError(t, err, "the stop waited for its flush")
	require.Less(t, time.Since(began), flush/2)
	require.False(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(7), stopped.Dropped)
	require.ErrorIs(t, stopped.Reason, sessionEnded)
	l := nextOf(t, lost)
	require.ErrorIs(t, l.Cause, sessionEnded)
	select {
	case again := <-lost:
		t.Fatalf("a second OwnershipLost: %v", again.Cause)
	default:
	}
}
