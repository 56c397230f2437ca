package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// pchannelFixture is one pchannel, "orders-dml-0", on a catalog that can go
// down, with fast retries.
type pchannelFixture struct {
	system  *actor.ActorSystem
	catalog *faultinject.Catalog
	events  chan any
}

func newPChannelFixture(t *testing.T, stored wal.MessageID) *pchannelFixture {
	t.Helper()
	mem := persistence.NewMemory()
	if stored != nil {
		require.NoError(t, mem.Save(context.Background(), "orders-dml-0", stored))
	}
	f := &pchannelFixture{
		// Dead letters (a request to the stopped pchannel) are counted
		// by a goroutine that lives for the throttle interval.
		system: actor.NewActorSystem(actor.WithLoggerFactory(actors.LoggerFactory(zap.NewNop())),
			actor.WithDeadLetterThrottleInterval(time.Millisecond)),
		catalog: faultinject.Wrap(mem),
		events:  make(chan any, 1024),
	}
	sub := f.system.EventStream.Subscribe(func(ev any) {
		select {
		case f.events <- ev:
		default:
		}
	})
	t.Cleanup(func() {
		f.system.EventStream.Unsubscribe(sub)
		f.system.Shutdown()
		require.NoError(t, f.catalog.Close())
	})
	return f
}

func (f *pchannelFixture) spawn(t *testing.T, vchannels map[string]wal.MessageID, opts ...actors.Option) *actor.PID {
	t.Helper()
	b := actors.DefaultBackoff()
	b.Initial, b.Max = time.Millisecond, 10*time.Millisecond
	opts = append([]actors.Option{actors.WithVChannels(vchannels), actors.WithBackoff(b)}, opts...)
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, f.catalog, opts...)
	require.NoError(t, err)
	pid := f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(pid).Wait() })
	return pid
}

// waitFor returns the first event of type T, failing the test after 10 s.
func waitFor[T any](t *testing.T, events <-chan any) T {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if e, ok := ev.(T); ok {
				return e
			}
		case <-deadline:
			var zero T
			t.Fatalf("no %T within 10 s", zero)
			return zero
		}
	}
}

func within(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartMessageIDIsWhereConsumptionRestarts(t *testing.T) {
	vchannels := map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)}
	for name, tc := range map[string]struct {
		stored    wal.MessageID
		vchannels map[string]wal.MessageID
		want      wal.MessageID
	}{
		"the stored checkpoint":                  {wal.KafkaID(140), vchannels, wal.KafkaID(140)},
		"stored, and the vchannels above it":     {wal.KafkaID(90), vchannels, wal.KafkaID(90)},
		"nothing stored: the vchannels' minimum": {nil, vchannels, wal.KafkaID(100)},
		"nothing stored and no vchannel":         {nil, nil, nil},
	} {
		t.Run(name, func(t *testing.T) {
			f := newPChannelFixture(t, tc.stored)
			pid := f.spawn(t, tc.vchannels)
			got, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want, waitFor[*messages.Recovered](t, f.events).StartMessageID)
		})
	}
}

// The reference read the catalog before its constructor returned, and
// failed when it could not. Here the actor retries, and StartMessageID
// waits through the failures for as long as its context allows.
func TestStartMessageIDWaitsOutACatalogThatIsDown(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(140))
	f.catalog.SetDown(true)
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(150)})
	waitFor[*messages.RecoveryFailed](t, f.events)

	// Down for longer than the caller waits: the error says why.
	_, err := actors.StartMessageID(within(t, 50*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, faultinject.ErrInjected)
	require.ErrorContains(t, err, `pchannel "orders-dml-0" did not say it had read its stored checkpoint`)
	require.ErrorContains(t, err, "the last failed read it was told of")

	// Up again while the caller waits: it gets the stored checkpoint.
	type result struct {
		id  wal.MessageID
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
		done <- result{id, err}
	}()
	for range 3 { // the waiting call has seen failures of its own
		waitFor[*messages.RecoveryFailed](t, f.events)
	}
	select {
	case r := <-done:
		t.Fatalf("StartMessageID returned %v, %v while the catalog was down", r.id, r.err)
	default:
	}
	f.catalog.SetDown(false)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, wal.KafkaID(140), r.id)
	case <-time.After(10 * time.Second):
		t.Fatal("StartMessageID did not return within 10 s of the catalog coming back")
	}
}

func TestStartMessageIDOfAPChannelThatStops(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(140))
	f.catalog.SetDown(true)
	pid := f.spawn(t, nil)
	waitFor[*messages.RecoveryFailed](t, f.events)

	// A caller waiting as the pchannel stops is told at once, not at its
	// deadline, with the last failed read it heard of: one published once
	// it had subscribed (the stream tells each subscriber in turn, within
	// one publish, before the actor takes the stop).
	subscribers := f.system.EventStream.Length()
	done := make(chan error, 1)
	go func() {
		_, err := actors.StartMessageID(within(t, time.Minute), f.system, pid)
		done <- err
	}()
	require.Eventually(t, func() bool { return f.system.EventStream.Length() > subscribers }, 10*time.Second, time.Millisecond)
	for len(f.events) > 0 {
		<-f.events
	}
	waitFor[*messages.RecoveryFailed](t, f.events)
	require.NoError(t, f.system.Root.StopFuture(pid).Wait())
	select {
	case err := <-done:
		require.ErrorIs(t, err, actor.ErrDeadLetter)
		require.ErrorIs(t, err, faultinject.ErrInjected)
	case <-time.After(10 * time.Second):
		t.Fatal("StartMessageID still waits 10 s after the pchannel stopped")
	}

	// And one asking after the stop.
	_, err := actors.StartMessageID(within(t, time.Minute), f.system, pid)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
}

func TestStartMessageIDAndPoisonRefuseWhatIsMissing(t *testing.T) {
	f := newPChannelFixture(t, nil)
	pid := f.spawn(t, nil)
	var noContext context.Context // nil, as a caller's bug passes it
	for name, call := range map[string]func(context.Context, *actor.ActorSystem, *actor.PID) error{
		"StartMessageID": func(ctx context.Context, s *actor.ActorSystem, p *actor.PID) error {
			_, err := actors.StartMessageID(ctx, s, p)
			return err
		},
		"Poison": func(ctx context.Context, s *actor.ActorSystem, p *actor.PID) error {
			_, err := actors.Poison(ctx, s, p)
			return err
		},
	} {
		require.ErrorIs(t, call(noContext, f.system, pid), actors.ErrNilContext, name)
		require.ErrorIs(t, call(context.Background(), nil, pid), actors.ErrNoPChannel, name)
		require.ErrorIs(t, call(context.Background(), f.system, nil), actors.ErrNoPChannel, name)
	}
	_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid) // still running: nothing was sent
	require.NoError(t, err)
}

// The subscription StartMessageID takes is gone when it returns, however
// it returns.
func TestStartMessageIDLeavesNoSubscriber(t *testing.T) {
	f := newPChannelFixture(t, nil)
	pid := f.spawn(t, nil)
	before := f.system.EventStream.Length()
	_, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, before, f.system.EventStream.Length())
	f.catalog.SetDown(true)
	require.NoError(t, f.system.Root.StopFuture(pid).Wait())
	_, err = actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.Error(t, err)
	require.Equal(t, before, f.system.EventStream.Length())
}

// A raw subscriber before StartMessageID's that panics on Recovered hides
// it: the call still returns soon after, asking again, and says nothing
// of the reads that failed before.
func TestStartMessageIDWithRecoveredHidden(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(140))
	f.catalog.SetDown(true)
	hide := f.system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			panic("a raw subscriber panics on Recovered")
		}
	})
	defer f.system.EventStream.Unsubscribe(hide)
	pid := f.spawn(t, nil)
	waitFor[*messages.RecoveryFailed](t, f.events) // before the raw one, f's sees it

	done := make(chan error, 1)
	var got wal.MessageID
	go func() {
		var err error
		got, err = actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
		done <- err
	}()
	waitFor[*messages.RecoveryFailed](t, f.events)
	f.catalog.SetDown(false)
	select {
	case err := <-done:
		require.NoError(t, err)
		require.Equal(t, wal.KafkaID(140), got)
	case <-time.After(5 * time.Second):
		t.Fatal("StartMessageID did not return within 5 s of the recovery")
	}
}

// An actor that is no pchannel never answers: the error says so.
func TestStartMessageIDOfAnActorThatIsNoPChannel(t *testing.T) {
	f := newPChannelFixture(t, nil)
	pid := f.system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	defer func() { _ = f.system.Root.StopFuture(pid).Wait() }()
	_, err := actors.StartMessageID(within(t, 100*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "did not answer GetState (is it a pchannel's?)")
	_, err = actors.Poison(within(t, 100*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualError(t, err, `lowwater: actor "`+pid.Id+`" did not answer GetState (is it a pchannel's?): context deadline exceeded; Poison sent it nothing`)
}

// A context done already is told so, not that the actor did not answer.
// StartMessageID then asks nothing; Poison still stops the pchannel, as
// a shutdown whose deadline is spent needs it to.
func TestStartMessageIDAndPoisonWithADoneContext(t *testing.T) {
	f := newPChannelFixture(t, nil)
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100)})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := actors.StartMessageID(done, f.system, pid)
	require.Equal(t, context.Canceled, err)
	_, err = actors.StartMessageID(within(t, 10*time.Second), f.system, pid) // still running: nothing was sent
	require.NoError(t, err)
	require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid,
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(150)}))

	_, err = actors.Poison(done, f.system, pid)
	require.ErrorIs(t, err, context.Canceled)
	require.EqualError(t, err, `lowwater: pchannel "orders-dml-0" has not stopped yet, and its stop goes on: context canceled`)
	stopped := waitFor[*messages.Stopped](t, f.events)
	require.True(t, stopped.Flushed)
	require.Equal(t, wal.KafkaID(150), stopped.LastPersisted)
	_, err = actors.Poison(within(t, 10*time.Second), f.system, pid)
	require.ErrorIs(t, err, actor.ErrDeadLetter)
}

// Added during recovery above the spawn's minimum, or moved up: the
// start is the spawn's minimum, as in the reference.
func TestStartMessageIDIsTheSpawnsMinimumOtherwise(t *testing.T) {
	f := newPChannelFixture(t, nil)
	f.catalog.SetDown(true)
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(100), "shard-b": wal.KafkaID(120)})
	waitFor[*messages.RecoveryFailed](t, f.events)
	for _, cmd := range []messages.Command{
		&messages.AddVChannel{VChannel: "shard-c", Checkpoint: wal.KafkaID(150)},
		&messages.UpdateCheckpoint{VChannel: "shard-a", Checkpoint: wal.KafkaID(130)},
	} {
		require.NoError(t, actors.Request(within(t, 10*time.Second), f.system.Root, pid, cmd))
	}
	f.catalog.SetDown(false)
	start, err := actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(100), start)
}

// A read that found the catalog closed is never made again: the
// pchannel never recovers, and StartMessageID says so at once, where it
// waited out its context and named no read, the failure having come
// before the call. GetState tells why, too.
func TestStartMessageIDOfAPChannelWhoseCatalogIsClosed(t *testing.T) {
	f := newPChannelFixture(t, nil)
	closed := persistence.NewMemory()
	require.NoError(t, closed.Close())
	props, err := actors.NewProps("orders-dml-0", wal.Kafka, closed,
		actors.WithVChannels(map[string]wal.MessageID{"shard-a": wal.KafkaID(150)}))
	require.NoError(t, err)
	pid := f.system.Root.Spawn(props)
	t.Cleanup(func() { _ = f.system.Root.StopFuture(pid).Wait() })
	require.Zero(t, waitFor[*messages.RecoveryFailed](t, f.events).NextRetry)

	_, err = actors.StartMessageID(within(t, 10*time.Second), f.system, pid)
	require.ErrorIs(t, err, persistence.ErrClosed)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.EqualError(t, err, `lowwater: pchannel "orders-dml-0" does not recover: its catalog was closed as it read the stored checkpoint: persistence: catalog closed`)

	s, err := actors.GetState(within(t, 10*time.Second), f.system.Root, pid)
	require.NoError(t, err)
	require.False(t, s.Recovered)
	require.True(t, s.RecoveryClosed)
	require.ErrorIs(t, s.RecoveryFailure, persistence.ErrClosed)
}

// A read that failed before the call, with no other since (the next one
// an hour away), is still the one an error names, and GetState's.
func TestStartMessageIDNamesAReadThatFailedBeforeIt(t *testing.T) {
	f := newPChannelFixture(t, wal.KafkaID(140))
	f.catalog.SetDown(true)
	b := actors.DefaultBackoff()
	b.Initial, b.Max = time.Hour, time.Hour
	pid := f.spawn(t, map[string]wal.MessageID{"shard-a": wal.KafkaID(150)}, actors.WithBackoff(b))
	failed := waitFor[*messages.RecoveryFailed](t, f.events)

	_, err := actors.StartMessageID(within(t, 50*time.Millisecond), f.system, pid)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, faultinject.ErrInjected)
	require.ErrorContains(t, err, "the last failed read it was told of")

	s, err := actors.GetState(within(t, 10*time.Second), f.system.Root, pid)
	require.NoError(t, err)
	require.False(t, s.Recovered)
	require.False(t, s.RecoveryClosed)
	require.Equal(t, failed.Err, s.RecoveryFailure)

	f.catalog.SetDown(false)
}
