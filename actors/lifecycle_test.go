package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Names no catalog can store are refused where they come in: a 40 KB
// pchannel name passed NewProps and then every save failed with bbolt's
// "key too large", retried forever.
func TestNamesValidated(t *testing.T) {
	cat := persistence.NewMemory()
	for name, pch := range map[string]string{"40 KB": strings.Repeat("p", 40<<10), "NUL": "p\x00", "not UTF-8": "p\xff"} {
		_, err := NewProps(pch, wal.Kafka, cat)
		require.ErrorIs(t, err, ErrInvalidOption, name)
		require.ErrorIs(t, err, persistence.ErrInvalidArgument, name)
		require.Less(t, len(err.Error()), 300, "the error does not repeat the name whole")
	}
	_, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{strings.Repeat("v", 1000): wal.KafkaID(1)}))
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)

	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.StopFuture(pid).Wait()) }()
	err = Request(ctxtest.Within(5*time.Second), system.Root, pid, &messages.AddVChannel{VChannel: strings.Repeat("v", persistence.MaxNameLen+1), Checkpoint: wal.KafkaID(0)})
	require.ErrorIs(t, err, persistence.ErrInvalidArgument)
	st, err := GetState(ctxtest.Within(5*time.Second), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(1)}, st.Checkpoints, "a rejected Add changes nothing")
}

// The crashes kept for the restart delay are bounded: protoactor's
// RestartStatistics grew by one time.Time per crash, forever.
func TestCrashesBounded(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second, Multiplier: 1.5}
	limit := crashesToCap(saveplan.Backoff(b))
	require.Equal(t, 13, limit, "100 ms × 1.5^12 > 10 s")
	require.Equal(t, b.Max, restartDelay(saveplan.Backoff(b), limit))
	require.Less(t, restartDelay(saveplan.Backoff(b), limit-1), b.Max)

	now := time.Now()
	var recent []time.Time
	for i := range 10_000 {
		recent = recentCrashes(recent, now.Add(time.Duration(i)*time.Millisecond), limit)
		require.LessOrEqual(t, len(recent), limit)
	}
	require.Equal(t, limit, len(recent))
	// A minute later, the old ones are gone.
	recent = recentCrashes(recent, now.Add(time.Hour), limit)
	require.Len(t, recent, 1)
	require.Equal(t, 1, crashesToCap(saveplan.Backoff{Initial: time.Second, Max: time.Second, Multiplier: 1}))
	require.Equal(t, 1024, crashesToCap(saveplan.Backoff{Initial: time.Nanosecond, Max: time.Hour, Multiplier: 1.0001}))

	// HandleFailure leaves protoactor's statistics alone.
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	cfg, err := newConfig("p", wal.Kafka, persistence.NewMemory(), []Option{WithBackoff(b)})
	require.NoError(t, err)
	from, err := newSpawn(wal.Kafka, nil)
	require.NoError(t, err)
	p := newPChannel(cfg, from)
	p.events, p.phase = system.EventStream, stopping
	rs := actor.NewRestartStatistics()
	for range 1000 {
		p.HandleFailure(system, nil, nil, rs, "boom", nil)
	}
	require.Zero(t, rs.FailureCount())
	require.LessOrEqual(t, len(p.crash.recent), limit)
	require.Equal(t, 1000, p.crash.restarts)
}

// stubborn is a catalog whose Load or Save ignores its context: it blocks
// until released, as third-party code may. The rest is a real Memory.
type stubborn struct {
	*persistence.Memory
	load, save bool
	entered    chan struct{}
	release    chan struct{}
	once       sync.Once
}

func newStubborn(load, save bool) *stubborn {
	return &stubborn{Memory: persistence.NewMemory(), load: load, save: save, entered: make(chan struct{}, 16), release: make(chan struct{})}
}

func (s *stubborn) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if s.load {
		s.entered <- struct{}{}
		<-s.release
		return nil, errors.New("stubborn load returned late")
	}
	return s.Memory.Load(ctx, pchannel)
}

func (s *stubborn) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if s.save {
		s.entered <- struct{}{}
		<-s.release
		return errors.New("stubborn save returned late")
	}
	return s.Memory.Save(ctx, pchannel, v)
}

func (s *stubborn) unblock() { s.once.Do(func() { close(s.release) }) }

// subscribed feeds the events of type E that system publishes into a
// channel, until the test ends. A full channel drops them: no actor ever
// waits on the test.
func subscribed[E any](t *testing.T, system *actor.ActorSystem) <-chan E {
	ch := make(chan E, 64)
	sub := system.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(E); ok {
			select {
			case ch <- e:
			default:
			}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	return ch
}

// nextOf waits for the next of evs, failing the test after 10 s.
func nextOf[E any](t *testing.T, evs <-chan E) E {
	t.Helper()
	select {
	case e := <-evs:
		return e
	case <-time.After(10 * time.Second):
		var zero E
		t.Fatalf("no %T within 10 s", zero)
		return zero
	}
}

// spawnStuck spawns pchannel p on cat, tracking a at kafka:7, and returns
// once its first catalog call has entered cat, where it hangs.
func spawnStuck(t *testing.T, system *actor.ActorSystem, cat *stubborn, opts ...Option) *actor.PID {
	t.Helper()
	props, err := NewProps("p", wal.Kafka, cat, append([]Option{WithSaveTimeout(time.Hour),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)})}, opts...)...)
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the catalog call never started")
	}
	return pid
}

// Every stop returns within the documented bound, stop flush timeout +
// joinGrace, whatever a catalog does with its context; the abandoned call
// is counted and its late result ignored. Before, a Load ignoring its
// context made every stop wait forever, and a Save ignoring it made a
// graceful stop take the flush timeout plus the save timeout.
func TestStopBoundedWhateverTheCatalog(t *testing.T) {
	const flush = 300 * time.Millisecond
	// slack covers scheduling on a loaded 2-core machine under -race.
	const slack = 400 * time.Millisecond
	for _, tc := range []struct {
		name       string
		load, save bool
		graceful   bool
		bound      time.Duration
	}{
		{"load/graceful", true, false, true, flush + joinGrace},
		{"load/hard", true, false, false, joinGrace},
		{"save/graceful", false, true, true, flush + joinGrace},
		{"save/hard", false, true, false, joinGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := newStubborn(tc.load, tc.save)
			defer cat.unblock()
			// The late result is a dead letter: quietSystem's throttle
			// waits one interval for it, on a goroutine of its own.
			system := quietSystem(t)
			var c Counters
			stopped := stoppedOf(t, system)
			pid := spawnStuck(t, system, cat, WithCounters(&c), WithStopFlushTimeout(flush))
			stop := system.Root.StopFuture
			if tc.graceful {
				stop = system.Root.PoisonFuture
			}
			began := time.Now()
			require.NoError(t, stop(pid).Wait())
			took := time.Since(began)
			t.Logf("%s: stop took %v (bound %v)", tc.name, took, tc.bound)
			require.GreaterOrEqual(t, took, tc.bound, "the stop waited flush and grace")
			require.Less(t, took, tc.bound+slack)
			require.Equal(t, uint64(1), c.AbandonedCalls())
			s := stopped()
			require.False(t, s.Flushed)
			require.Equal(t, wal.KafkaID(7), s.Dropped)
			switch {
			case !tc.graceful:
				require.ErrorIs(t, s.Reason, messages.ErrHardStop)
			case tc.load:
				require.ErrorIs(t, s.Reason, messages.ErrNotRecovered)
			default:
				// The deadline, and the save it waited for, not
				// protoactor's "future: timeout" after it.
				require.ErrorIs(t, s.Reason, messages.ErrFlushTimeout)
				require.EqualError(t, s.Reason, messages.ErrFlushTimeout.Error()+": the catalog had not answered the save in flight")
			}
			cat.unblock() // the late result goes nowhere
		})
	}
}

// A graceful stop that waits for a recovery read whose catalog ignores its
// context reports the read overdue as the watchdog would, RecoveryFailed
// with ErrCatalogOverdue and an Error line, and its Stopped says what kept
// the read, whether the report came before the Poison or during its wait.
// Before, the wait held the mailbox, and neither was said.
func TestAStopWaitingForAnOverdueReadSaysSo(t *testing.T) {
	const timeout, flush = 100 * time.Millisecond, time.Second
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("reported before the poison=%v", before), func(t *testing.T) {
			cat := newStubborn(true, false)
			defer cat.unblock()
			system := quietSystem(t)
			stopped := stoppedOf(t, system)
			failed := subscribed[*messages.RecoveryFailed](t, system)
			core, logs := observer.New(zap.ErrorLevel)
			pid := spawnStuck(t, system, cat, WithSaveTimeout(timeout), WithStopFlushTimeout(flush), WithLogger(zap.New(core)))
			if before {
				require.ErrorIs(t, nextOf(t, failed).Err, ErrCatalogOverdue)
			}
			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
			s := stopped()
			require.False(t, s.Recovered)
			require.False(t, s.Flushed)
			require.ErrorIs(t, s.Reason, messages.ErrNotRecovered)
			require.ErrorIs(t, s.Reason, ErrCatalogOverdue, "what kept the read")
			if !before {
				f := nextOf(t, failed)
				require.ErrorIs(t, f.Err, ErrCatalogOverdue)
				require.Equal(t, 1, f.Attempt)
			}
			require.Len(t, logs.FilterMessage("recovery read overran its deadline; waiting for the catalog").All(), 1)
		})
	}
}

// A graceful stop during recovery with no vchannel has no minimum to save:
// it does not wait for a read that hangs, is Flushed, and says that it
// never recovered. One with a vchannel waits for the read, up to the
// flush timeout, and names ErrNotRecovered. Before, the stop with none
// waited out the whole flush timeout and looked like a clean one.
func TestAStopBeforeRecoveryWithNothingToSaveDoesNotWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		vchannels map[string]wal.MessageID
		// flush is the stop flush timeout: an hour where the stop must
		// not wait, so that a wait fails the test rather than slows it.
		flush time.Duration
	}{
		{"no vchannel", map[string]wal.MessageID{}, time.Hour},
		{"a vchannel", map[string]wal.MessageID{"a": wal.KafkaID(7)}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := newStubborn(true, false)
			defer cat.unblock()
			system := quietSystem(t)
			stopped := stoppedOf(t, system)
			pid := spawnStuck(t, system, cat, WithVChannels(tc.vchannels), WithStopFlushTimeout(tc.flush))
			began := time.Now()
			require.NoError(t, system.Root.PoisonFuture(pid).Wait(), "the stop ended within the future's 10 s")
			took := time.Since(began)
			s := stopped()
			require.False(t, s.Recovered)
			require.Nil(t, s.LastPersisted)
			if len(tc.vchannels) == 0 {
				require.True(t, s.Flushed)
				require.Nil(t, s.Dropped)
				require.NoError(t, s.Reason)
				return
			}
			require.GreaterOrEqual(t, took, tc.flush, "a minimum to save: the read is waited for")
			require.False(t, s.Flushed)
			require.Equal(t, wal.KafkaID(7), s.Dropped)
			require.ErrorIs(t, s.Reason, messages.ErrNotRecovered)
		})
	}
}

// A request that comes while a graceful stop waits for its flush is
// refused at once, as one to a stopped actor is, rather than held until
// the wait ends: a dashboard polling GetState stalled for the whole stop
// flush timeout on every graceful stop.
func TestRequestDuringAStopsWaitIsRefusedAtOnce(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := quietSystem(t)
	pid := spawnStuck(t, system, cat, WithStopFlushTimeout(time.Minute))
	stop := system.Root.PoisonFuture(pid)

	// A request queued behind the pill waits for the stop; those sent once
	// the flush waits are refused. Each is asked with a short deadline
	// until one is refused, within ten seconds of a minute-long wait.
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for !errors.Is(last, actor.ErrDeadLetter) {
		require.True(t, time.Now().Before(deadline), "no request refused during the wait; last: %v", last)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, last = GetState(ctx, system.Root, pid)
		cancel()
		if last == nil {
			continue // answered: the stop had not begun
		}
		require.True(t, errors.Is(last, actor.ErrDeadLetter) || errors.Is(last, context.DeadlineExceeded), "GetState: %v", last)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Request(ctx, system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(8)})
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	require.Less(t, time.Since(began), 5*time.Second, "refused at once, not at the wait's end")

	// The save still hangs: the wait goes on until a hard stop cuts it.
	system.Root.Stop(pid)
	require.NoError(t, stop.Wait())
}

// deafOnce is a Memory whose first Save ignores its context: it blocks
// until released, then saves as asked.
type deafOnce struct {
	*persistence.Memory
	calls   atomic.Int32
	release chan struct{}
}

func (d *deafOnce) Save(_ context.Context, pchannel string, v wal.MessageID) error {
	if d.calls.Add(1) == 1 {
		<-d.release
	}
	return d.Memory.Save(context.Background(), pchannel, v)
}

// A save that overruns its deadline and ignores cancellation is reported
// at once, as a PersistFailed with ErrCatalogOverdue and no retry, and is
// still waited for: no second save of the pchannel starts meanwhile, and
// its result counts when it comes, marked Late.
func TestOverdueSaveIsReportedAndWaitedFor(t *testing.T) {
	cat := &deafOnce{Memory: persistence.NewMemory(), release: make(chan struct{})}
	released := false
	defer func() {
		if !released {
			close(cat.release)
		}
	}()
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	evs := make(chan messages.Event, 64)
	sub := system.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.PersistFailed, *messages.CheckpointPersisted:
			evs <- e.(messages.Event)
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(50*time.Millisecond),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	// Before the spawn: the save may start before Spawn returns.
	began := time.Now()
	pid := system.Root.Spawn(props)
	next := func() messages.Event {
		t.Helper()
		select {
		case ev := <-evs:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10 s")
			return nil
		}
	}

	failed, ok := next().(*messages.PersistFailed)
	require.True(t, ok, "want PersistFailed first")
	require.ErrorIs(t, failed.Err, ErrCatalogOverdue)
	require.Equal(t, wal.KafkaID(7), failed.Value)
	require.Zero(t, failed.NextRetry)
	require.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond+joinGrace)

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(9)}))
	st, err := GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err)
	require.True(t, st.SaveInFlight)
	require.Equal(t, int32(1), cat.calls.Load(), "a second save started while the first ran")

	released = true
	close(cat.release)
	for i, want := range []wal.MessageID{wal.KafkaID(7), wal.KafkaID(9)} {
		p, ok := next().(*messages.CheckpointPersisted)
		require.True(t, ok, "want CheckpointPersisted of %v", want)
		require.Equal(t, want, p.Value)
		require.Equal(t, i == 0, p.Late, "Late marks the save reported overdue, and it alone")
	}
	require.Equal(t, []wal.MessageID{wal.KafkaID(7), wal.KafkaID(9)}, cat.History("p"))
}

// A recovery read that overruns its deadline and ignores cancellation is
// reported as a save is: RecoveryFailed with ErrCatalogOverdue, no retry.
func TestOverdueLoadIsReported(t *testing.T) {
	cat := newStubborn(true, false)
	defer cat.unblock()
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	defer system.Shutdown()
	failed := subscribed[*messages.RecoveryFailed](t, system)
	props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(50*time.Millisecond),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	f := nextOf(t, failed)
	require.ErrorIs(t, f.Err, ErrCatalogOverdue)
	require.Equal(t, 1, f.Attempt)
	require.Zero(t, f.NextRetry)
	require.False(t, f.Late)
	require.Len(t, cat.entered, 1, "read once, still waited for")

	// The read returns at last, failing: its outcome is the same attempt,
	// marked Late, and the next read is not.
	cat.unblock()
	f = nextOf(t, failed)
	require.ErrorContains(t, f.Err, "stubborn load returned late")
	require.Equal(t, 1, f.Attempt)
	require.True(t, f.Late)
	require.Positive(t, f.NextRetry)
	f = nextOf(t, failed)
	require.Equal(t, 2, f.Attempt)
	require.False(t, f.Late)
	require.NoError(t, system.Root.StopFuture(pid).Wait())
}

// A save that overran its deadline and then fails publishes its failure
// as Late, the same attempt as the overdue report; the retry after it is
// an attempt of its own, not Late.
func TestOverdueSaveThatFailsIsLate(t *testing.T) {
	cat := newStubborn(false, true)
	defer cat.unblock()
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	defer system.Shutdown()
	failed := subscribed[*messages.PersistFailed](t, system)
	props, err := NewProps("p", wal.Kafka, cat, WithSaveTimeout(50*time.Millisecond),
		WithBackoff(Backoff{Initial: 5 * time.Millisecond, Max: time.Second, Multiplier: 10}),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.StopFuture(pid).Wait()) }()

	f := nextOf(t, failed)
	require.ErrorIs(t, f.Err, ErrCatalogOverdue)
	require.Equal(t, 1, f.Attempt)
	require.False(t, f.Late)
	cat.unblock()
	f = nextOf(t, failed)
	require.ErrorContains(t, f.Err, "stubborn save returned late")
	require.Equal(t, 1, f.Attempt)
	require.True(t, f.Late)
	require.Positive(t, f.NextRetry)
	f = nextOf(t, failed)
	require.ErrorContains(t, f.Err, "stubborn save returned late")
	require.Equal(t, 2, f.Attempt)
	require.False(t, f.Late)
}
