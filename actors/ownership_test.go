package actors

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
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
	const flush = time.Minute
	pid, sessionEnded := ownedUntilItStops(t, system, cat, WithStopFlushTimeout(flush))

	stopped := stopTellsTheLoss(t, system, pid, flush, lost, sessionEnded)
	require.Equal(t, wal.KafkaID(7), stopped.Dropped)
	require.True(t, stopped.Recovered)
}

// ownedUntilItStops spawns pchannel p on cat (a stubborn one, whose
// saves hang) with vchannel a at kafka:7, under an ownership that ends,
// with sessionEnded, as the actor's stop begins: once the mailbox has
// handed the pill on, the actor reads no message, the loss's own among
// them, until the stop is done. It returns once the save of kafka:7
// hangs.
func ownedUntilItStops(t *testing.T, system *actor.ActorSystem, cat *stubborn, opts ...Option) (pid *actor.PID, sessionEnded error) {
	t.Helper()
	owned, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	sessionEnded = errors.New("owner session ended")
	props, err := NewProps("p", wal.Kafka, cat, append([]Option{WithSaveTimeout(time.Hour),
		WithOwnership(owned), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)})}, opts...)...)
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopping); ok {
				cancel(sessionEnded)
			}
			next(c, env)
		}
	}))
	pid = system.Root.Spawn(props)
	select {
	case <-cat.entered: // the save of kafka:7 hangs
	case <-time.After(10 * time.Second):
		t.Fatal("the save never started")
	}
	return pid, sessionEnded
}

// stopTellsTheLoss poisons pid and requires that the stop ended well
// within its flush timeout, not flushed, for cause, told by exactly one
// OwnershipLost.
func stopTellsTheLoss(t *testing.T, system *actor.ActorSystem, pid *actor.PID, flush time.Duration,
	lost <-chan *messages.OwnershipLost, cause error) *messages.Stopped {
	t.Helper()
	began := time.Now()
	ctx, done := context.WithTimeout(context.Background(), flush/2)
	defer done()
	stopped, err := Poison(ctx, system, pid)
	require.NoError(t, err, "the stop waited out its flush timeout")
	require.Less(t, time.Since(began), flush/2)
	require.False(t, stopped.Flushed)
	require.ErrorIs(t, stopped.Reason, cause)
	l := nextOf(t, lost)
	require.ErrorIs(t, l.Cause, cause)
	select {
	case again := <-lost:
		t.Fatalf("a second OwnershipLost: %v", again.Cause)
	default:
	}
	return stopped
}

// A graceful stop that comes before recovery ended reads the stored
// checkpoint first, and an ownership that ends meanwhile ends that read's
// wait, or the wait for the next read after a failed one, and is told, as
// it is during the flush: nothing read would be saved.
func TestAnOwnershipEndingDuringTheStopsReadEndsIt(t *testing.T) {
	sessionEnded := errors.New("owner session ended")
	for _, tc := range []struct {
		name string
		// catalog returns the catalog and a channel on which each of its
		// reads is told; end ends the ownership.
		catalog func(end func()) (persistence.Catalog, <-chan struct{})
		// endAtStop ends the ownership as the stop begins, where the
		// catalog does not.
		endAtStop bool
	}{
		{name: "the read hangs", endAtStop: true, catalog: func(func()) (persistence.Catalog, <-chan struct{}) {
			cat := newStubborn(true, false)
			t.Cleanup(cat.unblock)
			return cat, cat.entered
		}},
		{name: "waiting to read again", catalog: func(end func()) (persistence.Catalog, <-chan struct{}) {
			cat := &failingReads{Memory: persistence.NewMemory(), read: make(chan struct{}, 16)}
			// The stop's read, after the first failed and its retry
			// waits: the stop waits the backoff after it, within its
			// flush timeout.
			cat.second = end
			return cat, cat.read
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system := quietSystem(t)
			lost := subscribed[*messages.OwnershipLost](t, system)
			owned, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			end := func() { cancel(sessionEnded) }
			cat, read := tc.catalog(end)
			const flush = time.Minute
			props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(time.Hour), WithStopFlushTimeout(flush),
				WithBackoff(Backoff{Initial: flush / 3, Max: flush / 3, Multiplier: 1}),
				WithOwnership(owned), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
			require.NoError(t, err)
			props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
				return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
					if _, ok := env.Message.(*actor.Stopping); ok && tc.endAtStop {
						end()
					}
					next(c, env)
				}
			}))
			pid := system.Root.Spawn(props)
			select {
			case <-read: // the first read hangs, or failed
			case <-time.After(10 * time.Second):
				t.Fatal("recovery never read")
			}

			stopped := stopTellsTheLoss(t, system, pid, flush, lost, sessionEnded)
			require.False(t, stopped.Recovered, "the stored checkpoint was never read")
			require.Nil(t, stopped.LastPersisted)
		})
	}
}

// failingReads is a catalog whose every read fails; second, if set, runs
// in its second read, before it fails.
type failingReads struct {
	*persistence.Memory
	read   chan struct{}
	reads  atomic.Int32
	second func()
}

func (f *failingReads) Load(context.Context, string) (wal.MessageID, error) {
	if f.reads.Add(1) == 2 && f.second != nil {
		f.second()
	}
	f.read <- struct{}{}
	return nil, errors.New("read failed")
}

// A flush that ends before its answer came (here, the ownership ended)
// keeps taking that answer until the actor has stopped, and with it the
// persister: removed at once, a late answer, or the dead-letter response
// to a request the persister never read, went to protoactor's dead
// letters, which logged a line naming lowwater's internal PIDs.
func TestAFlushCutShortLeavesNoDeadLetter(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := quietSystem(t)
	var toFlush atomic.Int32
	sub := system.EventStream.Subscribe(func(ev any) {
		if dl, ok := ev.(*actor.DeadLetterEvent); ok && dl.PID != nil && strings.HasPrefix(dl.PID.Id, "flush") {
			toFlush.Add(1)
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	lost := subscribed[*messages.OwnershipLost](t, system)
	const flush = time.Minute
	pid, sessionEnded := ownedUntilItStops(t, system, cat, WithStopFlushTimeout(flush))
	stopTellsTheLoss(t, system, pid, flush, lost, sessionEnded)
	cat.unblock() // the save returns, and the persister, stopping, may answer
	// A dead letter is published on the sender's goroutine: one more
	// message through the system after the stop comes after it.
	_, err := system.Root.RequestFuture(system.NewLocalPID("nobody"), "ping", time.Second).Result()
	require.Error(t, err)
	require.Zero(t, toFlush.Load(), "dead letters to a flush's reply PID")
	require.False(t, registered(system, "flush"), "a flush's reply process is left in the registry")
}

// The end of an ownership is the pchannel's to act on only from its own
// watch (or its persister): a watch of an actor of the same name before
// it, which fired as that one stopped, reaches it by name, and fenced a
// pchannel whose own ownership lives on.
func TestAnOwnershipEndOfAnotherWatchIsNotOurs(t *testing.T) {
	system := quietSystem(t)
	lost := subscribed[*messages.OwnershipLost](t, system)
	owned, release := context.WithCancelCause(context.Background())
	defer release(nil)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithOwnership(owned),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	_, err = StartMessageID(ctx10s(t), system, pid)
	require.NoError(t, err)

	system.Root.Send(pid, &ownershipLost{cause: errors.New("another actor's"), watch: nextSeq()})
	st, err := GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err, "still running: the end was not its own")
	require.Equal(t, wal.KafkaID(1), st.Minimum)
	select {
	case ev := <-lost:
		t.Fatalf("OwnershipLost for another watch's end: %v", ev.Cause)
	default:
	}

	ended := errors.New("ours")
	release(ended)
	require.ErrorIs(t, nextOf(t, lost).Cause, ended)
}
