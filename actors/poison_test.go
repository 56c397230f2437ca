package actors_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// The reference's Close dropped a rise not saved yet; Poison saves it, and
// says so.
func TestPoisonSavesThePendingMinimumAndSaysSo(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(100))
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))
	before := f.system.EventStream.Length()

	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, "orders-dml-0", stopped.PChannel)
	require.True(t, stopped.Graceful)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
	require.Nil(t, stopped.Dropped)
	require.NoError(t, stopped.Reason)
	stored, err := f.catalog.Load(context.Background(), "orders-dml-0")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(150), stored)
	require.Equal(t, before, f.system.EventStream.Length(), "Poison left its subscriber")

	// Gone now: nothing to stop, and nothing sent to it, which protoactor
	// would log as a dead letter.
	dead := deadLetters(t, f.system)
	_, err = actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.Empty(t, dead(), "dead letters")
}

// pendingOnADownCatalog spawns a pchannel stopping within flush, stored
// at 100, and raises its minimum to 150 once its catalog is down: 150 is
// pending, and stays so until the catalog is up again.
func pendingOnADownCatalog(t *testing.T, flush time.Duration) (*pchannelFixture, *actor.PID) {
	t.Helper()
	f := newPChannelFixture(t, wal.KafkaID(100))
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}, actors.WithStopFlushTimeout(flush))
	_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	f.catalog.SetDown(true)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))
	return f, pid
}

func TestPoisonOnACatalogThatIsDownSaysWhatWasDropped(t *testing.T) {
	f, pid := pendingOnADownCatalog(t, 100*time.Millisecond)
	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.False(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(100), stopped.LastPersisted)
	require.Equal(t, wal.KafkaID(150), stopped.Dropped)
	require.ErrorIs(t, stopped.Reason, messages.ErrFlushTimeout)
}

// A caller that waits less than the stop takes is told, and the stop goes
// on.
func TestPoisonWithinAShortContextLetsTheStopGoOn(t *testing.T) {
	f, pid := pendingOnADownCatalog(t, 5*time.Second)
	_, err := actors.Poison(within(t, 50*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `pchannel "orders-dml-0" has not stopped yet`)

	f.catalog.SetDown(false) // the flush still under way saves it
	stopped := waitFor[*messages.Stopped](t, f.events)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
}

// A Poison that returned before the stop ended leaves its watcher in
// place until the actor's Terminated reaches it: removed at once, the
// watcher made the Terminated a dead letter, which protoactor logs.
func TestPoisonWithinAShortContextLeavesNoDeadLetter(t *testing.T) {
	f, pid := pendingOnADownCatalog(t, 5*time.Second)
	dead := deadLetters(t, f.system)
	_, err := actors.Poison(within(t, 50*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, hasPoisonWatcher(f.system), "Poison's watcher waits for the Terminated")

	// Watched after Poison's watcher, told after it: once this one is,
	// Poison's has been.
	terminated := make(chan struct{})
	watcher := f.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			c.Watch(pid)
		case *actor.Terminated:
			close(terminated)
		}
	}))
	defer f.system.Root.Stop(watcher)
	f.catalog.SetDown(false)
	select {
	case <-terminated:
	case <-time.After(10 * time.Second):
		t.Fatal("the pchannel did not stop within 10 s")
	}
	require.Empty(t, dead(), "dead letters")
	require.False(t, hasPoisonWatcher(f.system), "the watcher left with the Terminated")
}

// deadLetters collects the dead letters system's event stream publishes
// from now on, as "Id: type" lines.
func deadLetters(t *testing.T, system *actor.ActorSystem) func() []string {
	var mu sync.Mutex
	var got []string
	sub := system.EventStream.Subscribe(func(ev any) {
		if d, ok := ev.(*actor.DeadLetterEvent); ok {
			mu.Lock()
			got = append(got, fmt.Sprintf("%s: %T", d.PID.GetId(), d.Message))
			mu.Unlock()
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// hasPoisonWatcher reports whether system's registry holds a watcher of
// Poison's.
func hasPoisonWatcher(system *actor.ActorSystem) bool {
	for _, shard := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id := range shard.Items() {
			if strings.HasPrefix(id, "poison") {
				return true
			}
		}
	}
	return false
}

// Poison's Stopped is the one its actor tells it, not one of the same
// pchannel name on the event stream: here another actor of the name stops
// while this one's event is hidden from Poison's subscriber by a raw one
// that panics on it.
func TestPoisonReturnsItsOwnActorsStopped(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(100))
	a := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}, actors.WithStopFlushTimeout(100*time.Millisecond))
	b := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	for _, pid := range []*actor.PID{a, b} {
		_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
		require.NoError(t, err)
	}
	f.catalog.SetDown(true) // a's flush fails: its Stopped is not b's
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, a,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))

	hide := f.system.EventStream.Subscribe(func(ev any) {
		if s, ok := ev.(*messages.Stopped); ok && s.Graceful {
			_ = f.system.Root.StopFuture(b).Wait() // b's Stopped reaches Poison's subscriber
			panic("a raw subscriber panics on a's Stopped")
		}
	})
	defer f.system.EventStream.Unsubscribe(hide)

	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, a)
	require.NoError(t, err)
	require.True(t, stopped.Graceful)
	require.False(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(150), stopped.Dropped)
	require.ErrorIs(t, stopped.Reason, messages.ErrFlushTimeout)
}

// A restart between Poison's word to the actor and its poison hands the
// word on: the incarnation that stops tells Poison its Stopped, though a
// raw subscriber hides the event.
func TestPoisonSurvivesARestartOfThePChannel(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(100))
	b := actors.DefaultBackoff()
	b.Initial, b.Max = time.Millisecond, 10*time.Millisecond
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, f.catalog, actors.WithBackoff(b),
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(100)}))
	require.NoError(t, err)
	var panicked atomic.Bool
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			next(c, env)
			// Poison's word, taken: the next message is its poison.
			if fmt.Sprintf("%T", env.Message) == "*actors.tellStoppedTo" && panicked.CompareAndSwap(false, true) {
				panic("a middleware panics once, after the actor took Poison's word")
			}
		}
	}))
	pid := f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(pid).Wait() })
	_, err = actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))
	hide := f.system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Stopped); ok {
			panic("a raw subscriber panics on Stopped")
		}
	})
	defer f.system.EventStream.Unsubscribe(hide)

	stopped, err := actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.True(t, panicked.Load(), "the middleware never panicked: no restart was tried")
	require.True(t, stopped.Graceful)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
}

// A pchannel busy past Poison's context (here a raw subscriber holds it,
// with updates queued behind) is poisoned all the same: the wait ends
// with the context, the stop goes on, and the pill comes after the
// updates queued before it, whose minimum the stop saves. Poison asked
// the actor for its state first, behind the same backlog, and when the
// context ended before the answer it sent nothing: the pchannel ran on.
func TestPoisonBehindABacklogLetsTheStopGoOn(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(100))
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)

	held, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	defer released.Do(func() { close(release) }) // on a failure, before the fixture's cleanup
	hold := f.system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.MinimumAdvanced); ok {
			once.Do(func() {
				close(held)
				<-release
			})
		}
	})
	defer f.system.EventStream.Unsubscribe(hold)
	f.system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(101)})
	<-held
	for i := range 1000 {
		f.system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(102 + int64(i))})
	}

	_, err = actors.GetState(within(t, 50*time.Millisecond), f.system.Root, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualError(t, err, `lowwater: pchannel "orders-dml-0" did not answer GetState: it is busy (a backlog of raw Sends before the request, `+
		`or an event subscriber or a middleware that holds it?): context deadline exceeded`)

	_, err = actors.Poison(within(t, 50*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, `pchannel "orders-dml-0" has not stopped yet`)

	released.Do(func() { close(release) })
	stopped := waitFor[*messages.Stopped](t, f.events)
	require.True(t, stopped.Graceful)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(1101), stopped.LastPersisted)
	stored, err := f.catalog.Load(context.Background(), "orders-dml-0")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1101), stored)
}

// A PID another actor system made, whose id one of this system's
// pchannels has too: protoactor sends to the actor the PID first reached,
// the other system's. Poison stopped that one, and named this system's;
// now it knows only the PIDs this system made, asks through the PID,
// gets no answer (the other system cannot answer this one), and stops
// neither.
func TestPoisonOfAnotherSystemsPID(t *testing.T) {
	mine, theirs := newPChannelFixture(t, wal.KafkaID(100)), newPChannelFixture(t, wal.KafkaID(100))
	pid := mine.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	other := theirs.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	require.Equal(t, pid.Id, other.Id)
	for _, f := range []struct {
		f   *pchannelFixture
		pid *actor.PID
	}{{mine, pid}, {theirs, other}} {
		_, err := actors.StartMessageID(within(t, 10*time.Second), f.f.system, f.pid)
		require.NoError(t, err)
	}

	_, err := actors.Poison(within(t, 200*time.Millisecond), mine.system, other)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "Poison sent it nothing")
	for _, f := range []struct {
		f   *pchannelFixture
		pid *actor.PID
	}{{mine, pid}, {theirs, other}} {
		_, err := actors.GetState(within(t, 10*time.Second), f.f.system.Root, f.pid)
		require.NoError(t, err, "still running")
	}
}
