package actors_test

import (
	"context"
	"errors"
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

// commitsWhenCancelled is a catalog whose Save commits only once its
// context is cancelled, and then reports success, as a store whose commit
// was already on its way does.
type commitsWhenCancelled struct {
	*persistence.Memory
	entered chan struct{}
}

func (c *commitsWhenCancelled) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	close(c.entered)
	<-ctx.Done()
	return c.Memory.Save(context.Background(), pchannel, id)
}

// A hard stop joins the save in flight: when the catalog acknowledged it,
// Stopped reports it persisted, not dropped, and CheckpointPersisted says so.
func TestHardStopCountsAJoinedSave(t *testing.T) {
	cat := &commitsWhenCancelled{Memory: persistence.NewMemory(), entered: make(chan struct{})}
	system := actor.NewActorSystem()
	defer system.Shutdown()
	sub, err := events.Subscribe(system.EventStream, events.Lossless())
	require.NoError(t, err)
	props, err := actors.NewProps("p", wal.Kafka, cat,
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no save started")
	}
	require.NoError(t, system.Root.StopFuture(pid).Wait())
	sub.Close()

	var stopped *messages.Stopped
	var persisted []wal.MessageID
	for ev := range sub.C() {
		switch ev := ev.(type) {
		case *messages.Stopped:
			stopped = ev
		case *messages.CheckpointPersisted:
			persisted = append(persisted, ev.Value)
		}
	}
	stored, err := cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), stored)
	require.NotNil(t, stopped)
	require.Equal(t, wal.KafkaID(10), stopped.LastPersisted, "the catalog holds it: %+v", stopped)
	require.True(t, stopped.Flushed)
	require.Nil(t, stopped.Dropped)
	require.Equal(t, []wal.MessageID{wal.KafkaID(10)}, persisted)
}

// Request and GetState refuse what cannot be asked, at once and typed.
func TestRequestRefusesNothingToAsk(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ctx := context.Background()
	pid := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer func() { _ = system.Root.StopFuture(pid).Wait() }()
	require.ErrorIs(t, actors.Request(ctx, system.Root, pid, nil), messages.ErrNilCommand)
	require.ErrorIs(t, actors.Request(ctx, system.Root, nil, &messages.DropVChannel{VChannel: "a"}), actors.ErrNoPChannel)
	_, err := actors.GetState(ctx, nil, pid)
	require.ErrorIs(t, err, actors.ErrNoPChannel)
	// A nil *actor.RootContext is no sender either: it panicked as used.
	var root *actor.RootContext
	require.ErrorIs(t, actors.Request(ctx, root, pid, &messages.DropVChannel{VChannel: "a"}), actors.ErrNoPChannel)
	_, err = actors.GetState(ctx, root, pid)
	require.ErrorIs(t, err, actors.ErrNoPChannel)
}

// A catalog that panics with an error keeps that error reachable.
func TestCatalogPanicUnwraps(t *testing.T) {
	cause := errors.New("disk on fire")
	var err error = &actors.CatalogPanicError{Op: "Save", Value: cause}
	require.ErrorIs(t, err, actors.ErrCatalogPanicked)
	require.ErrorIs(t, err, cause)
	require.EqualError(t, err, "lowwater: catalog panicked in Save: disk on fire")
	require.ErrorIs(t, &actors.CatalogPanicError{Op: "Load", Value: "boom"}, actors.ErrCatalogPanicked)
}

// spawnOnCatalog spawns pchannel p on cat, vchannel a at kafka:10, with a
// stop flush timeout of 20 s, and subscribes to every event, losslessly.
func spawnOnCatalog(t *testing.T, cat persistence.Catalog) (*actor.ActorSystem, *events.Subscription, *actor.PID) {
	t.Helper()
	// Dead letters (a request refused as the actor stops) are logged by a
	// throttle on a goroutine of its own: 1 ms here, so goleak finds none.
	system := actor.NewActorSystem(actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(system.Shutdown)
	sub, err := events.Subscribe(system.EventStream, events.Lossless(), events.WithBuffer(64))
	require.NoError(t, err)
	props, err := actors.NewProps("p", wal.Kafka, cat, actors.WithStopFlushTimeout(20*time.Second),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	return system, sub, system.Root.Spawn(props)
}

// countingSaves counts the saves its catalog is asked for.
type countingSaves struct {
	*persistence.Memory
	saves atomic.Int64
}

func (c *countingSaves) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.saves.Add(1)
	return c.Memory.Save(ctx, pchannel, id)
}

// A catalog closed under a running pchannel (a service that closes it
// before its actors) fails the save in flight once: no save is tried
// again, and a graceful stop reports the minimum left unsaved at once,
// with the closed catalog as its reason, where it retried on the backoff
// and the stop waited out its flush timeout.
func TestAClosedCatalogIsNotRetried(t *testing.T) {
	cat := &countingSaves{Memory: persistence.NewMemory()}
	system, sub, pid := spawnOnCatalog(t, cat)
	next := func() messages.Event {
		t.Helper()
		select {
		case ev := <-sub.C():
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10 s")
			return nil
		}
	}
	for ev := next(); ; ev = next() {
		if p, ok := ev.(*messages.CheckpointPersisted); ok && p.Value == wal.KafkaID(10) {
			break
		}
	}
	require.NoError(t, cat.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))
	var failed *messages.PersistFailed
	for failed == nil {
		failed, _ = next().(*messages.PersistFailed)
	}
	require.ErrorIs(t, failed.Err, persistence.ErrClosed)
	require.Equal(t, time.Duration(0), failed.NextRetry)
	require.NoError(t, actors.Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)}))

	began := time.Now()
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.Less(t, time.Since(began), 5*time.Second, "the stop waited for a catalog that is closed")
	var stopped *messages.Stopped
	for stopped == nil {
		switch ev := next().(type) {
		case *messages.Stopped:
			stopped = ev
		case *messages.PersistFailed:
			t.Fatalf("a save tried again: %v", ev.Err)
		}
	}
	sub.Close()
	require.True(t, stopped.Graceful)
	require.False(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(10), stopped.LastPersisted)
	require.Equal(t, wal.KafkaID(30), stopped.Dropped)
	require.ErrorIs(t, stopped.Reason, persistence.ErrClosed)
	require.Equal(t, int64(2), cat.saves.Load(), "kafka:10, then kafka:20 once")
}

// A catalog closed before the pchannel recovered is not read again, not
// even by a graceful stop, which does not wait out its flush timeout
// either: it says why nothing was recovered. The stop read it once more,
// and published a second RecoveryFailed (recovery_failures_total 2).
func TestAStopDoesNotWaitOnAClosedCatalogToRecover(t *testing.T) {
	cat := &countingLoads{Memory: persistence.NewMemory()}
	require.NoError(t, cat.Close())
	system, sub, pid := spawnOnCatalog(t, cat)
	var stopped *messages.Stopped
	failures := 0
	for stopped == nil {
		select {
		case ev := <-sub.C():
			switch ev := ev.(type) {
			case *messages.RecoveryFailed:
				require.ErrorIs(t, ev.Err, persistence.ErrClosed)
				require.Zero(t, ev.NextRetry, "a closed catalog read again")
				if failures++; failures == 1 {
					began := time.Now()
					require.NoError(t, system.Root.PoisonFuture(pid).Wait())
					require.Less(t, time.Since(began), 5*time.Second, "the stop re-read a closed catalog until its deadline")
				}
			case *messages.Stopped:
				stopped = ev
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no Stopped within 10 s")
		}
	}
	sub.Close()
	require.Equal(t, 1, failures, "RecoveryFailed events")
	require.Equal(t, int64(1), cat.loads.Load(), "reads of the closed catalog")
	require.False(t, stopped.Flushed)
	require.ErrorIs(t, stopped.Reason, messages.ErrNotRecovered)
	require.ErrorIs(t, stopped.Reason, persistence.ErrClosed)
}

// countingLoads counts the catalog's reads.
type countingLoads struct {
	*persistence.Memory
	loads atomic.Int64
}

func (c *countingLoads) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	c.loads.Add(1)
	return c.Memory.Load(ctx, pchannel)
}
