package actors_test

import (
	"context"
	"errors"
	"runtime"
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

// heldSave is a catalog whose save of kafka:30 waits for release, and
// fails the first time if failFirst is set; every other call goes
// through.
type heldSave struct {
	*persistence.Memory
	release   chan struct{}
	failFirst bool
	failed    atomic.Bool
}

var errHeldSave = errors.New("held save failed")

func (h *heldSave) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if id.EQ(wal.KafkaID(30)) {
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
		if h.failFirst && h.failed.CompareAndSwap(false, true) {
			return errHeldSave
		}
	}
	return h.Memory.Save(ctx, pchannel, id)
}

// A persister that fails while a graceful stop waits for its flush (here
// a subscriber that ends the persister's goroutine, as t.FailNow does) is
// restarted at once and asked again, and the stop ends as soon as the
// minimum is saved. The stop used to wait out its flush timeout (20 s
// here): the failure waited for the pchannel, which was waiting for the
// flush, and the minimum, when the failure came before its save, was
// left unsaved.
func TestAPersisterThatFailsDuringTheFlushIsRestartedAtOnce(t *testing.T) {
	for name, failOn := range map[string]func(messages.Event) bool{
		"after the save": func(ev messages.Event) bool {
			p, ok := ev.(*messages.CheckpointPersisted)
			return ok && p.Value.EQ(wal.KafkaID(30))
		},
		"before the save": func(ev messages.Event) bool {
			f, ok := ev.(*messages.PersistFailed)
			return ok && f.Value.EQ(wal.KafkaID(30))
		},
	} {
		t.Run(name, func(t *testing.T) {
			cat := &heldSave{Memory: persistence.NewMemory(), release: make(chan struct{}), failFirst: name == "before the save"}
			system, sub, pid := spawnOnCatalog(t, cat)
			var once atomic.Bool
			raw := system.EventStream.Subscribe(func(ev any) {
				if e, ok := ev.(messages.Event); ok && failOn(e) && once.CompareAndSwap(false, true) {
					runtime.Goexit()
				}
			})
			defer system.EventStream.Unsubscribe(raw)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))

			stop := system.Root.PoisonFuture(pid)
			// The pchannel refuses requests once it waits for the flush;
			// one that came before waits for the stop's end.
			require.Eventually(t, func() bool {
				ask, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
				_, err := actors.GetState(ask, system.Root, pid)
				return errors.Is(err, actor.ErrDeadLetter)
			}, 10*time.Second, time.Millisecond)
			close(cat.release)
			stopped := make(chan error, 1)
			go func() { stopped <- stop.Wait() }()
			select {
			case err := <-stopped:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the stop waited for a persister that had failed (flush timeout: 20 s)")
			}

			var restarted *messages.PersisterRestarted
			var last *messages.Stopped
			for ev := range eventsUntilStopped(t, sub) {
				switch ev := ev.(type) {
				case *messages.PersisterRestarted:
					require.Nil(t, restarted, "one failure, one restart")
					restarted = ev
				case *messages.Stopped:
					last = ev
				}
			}
			sub.Close()
			require.NotNil(t, restarted, "the restart is told before Stopped")
			require.Equal(t, 1, restarted.Restarts)
			require.ErrorIs(t, restarted.Reason.(error), actors.ErrGoexit)
			require.True(t, last.Graceful)
			require.True(t, last.Flushed, "%v", last.Reason)
			require.Equal(t, wal.KafkaID(30), last.LastPersisted)
			stored, err := cat.Memory.Load(context.Background(), "p")
			require.NoError(t, err)
			require.Equal(t, wal.KafkaID(30), stored)
		})
	}
}

// failingSaves fails every save of kafka:30.
type failingSaves struct{ *persistence.Memory }

func (f failingSaves) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if id.EQ(wal.KafkaID(30)) {
		return errHeldSave
	}
	return f.Memory.Save(ctx, pchannel, id)
}

// A persister that fails on every try of the flush is restarted after the
// crash delay from its second failure on, and the stop ends at its flush
// timeout, saying why. Each failure is told once: the Failures that come
// after the stop's handler change nothing.
func TestAPersisterThatKeepsFailingDuringTheFlushEndsTheStopAtItsTimeout(t *testing.T) {
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	defer system.Shutdown()
	sub, err := events.Subscribe(system.EventStream, events.Lossless(), events.WithBuffer(256))
	require.NoError(t, err)
	const flushTimeout = time.Second
	props, err := actors.NewProps("p", wal.Kafka, failingSaves{persistence.NewMemory()},
		actors.WithStopFlushTimeout(flushTimeout),
		actors.WithBackoff(actors.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond, Multiplier: 2}),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	var exits atomic.Int64
	stopping := make(chan struct{})
	raw := system.EventStream.Subscribe(func(ev any) {
		if f, ok := ev.(*messages.PersistFailed); ok && f.Value.EQ(wal.KafkaID(30)) {
			select {
			case <-stopping:
				exits.Add(1)
				runtime.Goexit()
			default:
			}
		}
	})
	defer system.EventStream.Unsubscribe(raw)
	persistedAt(t, sub, wal.KafkaID(10))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))
	close(stopping)
	began := time.Now()
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	took := time.Since(began)

	restarts := 0
	var last *messages.Stopped
	for ev := range eventsUntilStopped(t, sub) {
		switch ev := ev.(type) {
		case *messages.PersisterRestarted:
			restarts++
			require.Equal(t, restarts, ev.Restarts)
		case *messages.Stopped:
			last = ev
		}
	}
	sub.Close()
	require.GreaterOrEqual(t, took, flushTimeout-100*time.Millisecond, "the stop ended before its flush timeout")
	// At once, then 50, 100, 200, 200… ms: no more than a try per 50 ms.
	require.Equal(t, int(exits.Load()), restarts, "each failure told once")
	require.GreaterOrEqual(t, restarts, 2)
	require.LessOrEqual(t, restarts, int(flushTimeout/(50*time.Millisecond))+1)
	require.False(t, last.Flushed)
	require.Equal(t, wal.KafkaID(10), last.LastPersisted)
	require.Equal(t, wal.KafkaID(30), last.Dropped)
	require.ErrorIs(t, last.Reason, messages.ErrFlushTimeout)
	require.ErrorIs(t, last.Reason, actors.ErrGoexit, "the stop says why it timed out")
}

// A persister that is gone (stopped by name) is not waited for: the flush
// learns it from the dead letter its request gets, and the stop ends at
// once, saying so.
func TestAGracefulStopDoesNotWaitForAPersisterThatIsGone(t *testing.T) {
	system, sub, pid := spawnOnCatalog(t, persistence.NewMemory())
	persistedAt(t, sub, wal.KafkaID(10))
	persister := actor.NewPID(pid.Address, pid.Id+"/persister")
	require.NoError(t, system.Root.StopFuture(persister).Wait())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))

	began := time.Now()
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.Less(t, time.Since(began), 5*time.Second, "the stop waited for a persister that is gone (flush timeout: 20 s)")
	last := stoppedOn(t, sub)
	sub.Close()
	require.False(t, last.Flushed)
	require.Equal(t, wal.KafkaID(10), last.LastPersisted)
	require.Equal(t, wal.KafkaID(30), last.Dropped)
	require.ErrorIs(t, last.Reason, messages.ErrFlushTimeout)
	require.ErrorIs(t, last.Reason, actor.ErrDeadLetter)
}

// savedOnCancel is a catalog whose save of kafka:30 commits only once its
// context ends, as one whose reply is late does: the persister joins it as
// it stops, and learns it durable then.
type savedOnCancel struct{ *persistence.Memory }

func (s savedOnCancel) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if id.EQ(wal.KafkaID(30)) {
		<-ctx.Done()
	}
	return s.Memory.Save(context.Background(), pchannel, id)
}

// A subscriber that ends its goroutine on the CheckpointPersisted that a
// stopping persister publishes, for the save it joined, ends no stop: it
// was published on the goroutine protoactor stops the persister on, which
// then never told its parent, and the stop never ended.
func TestASubscriberThatEndsItsGoroutineAsThePersisterStopsEndsNoStop(t *testing.T) {
	system, sub, pid := spawnOnCatalog(t, savedOnCancel{persistence.NewMemory()})
	var exited atomic.Bool
	raw := system.EventStream.Subscribe(func(ev any) {
		if p, ok := ev.(*messages.CheckpointPersisted); ok && p.Value.EQ(wal.KafkaID(30)) {
			exited.Store(true)
			runtime.Goexit()
		}
	})
	defer system.EventStream.Unsubscribe(raw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))
	require.Eventually(t, func() bool {
		st, err := actors.GetState(ctx, system.Root, pid)
		return err == nil && st.SaveInFlight
	}, 10*time.Second, time.Millisecond, "the save of kafka:30 never started")

	require.NoError(t, system.Root.StopFuture(pid).Wait())
	last := stoppedOn(t, sub)
	sub.Close()
	require.True(t, exited.Load())
	require.Equal(t, wal.KafkaID(30), last.LastPersisted, "the save joined is durable")
	require.True(t, last.Flushed)
}

// persistedAt waits up to 10 s for the CheckpointPersisted of id.
func persistedAt(t *testing.T, sub *events.Subscription, id wal.MessageID) {
	t.Helper()
	for ev := range eventsUntilStopped(t, sub) {
		if p, ok := ev.(*messages.CheckpointPersisted); ok && p.Value.EQ(id) {
			return
		}
	}
	t.Fatalf("stopped before %v was persisted", id)
}

// stoppedOn waits up to 10 s for the Stopped event.
func stoppedOn(t *testing.T, sub *events.Subscription) *messages.Stopped {
	t.Helper()
	for ev := range eventsUntilStopped(t, sub) {
		if s, ok := ev.(*messages.Stopped); ok {
			return s
		}
	}
	panic("unreachable: eventsUntilStopped yields Stopped or fails the test")
}
