package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/internal/testkit/syncbuf"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// boomVChannel is the vchannel whose updates panicky's middleware panics on:
// a third party's middleware with a bug, the one way left to panic a
// pchannel from outside.
const boomVChannel = "boom"

// quietSystem is an actor system that logs nothing, shut down at the
// test's end. A restart or stop leaves messages to a persister that has
// stopped as dead letters, and protoactor's throttle then waits one
// interval on a goroutine of its own: 1 ms here, so goleak finds none.
func quietSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(system.Shutdown)
	return system
}

// spawnPanicky spawns a Kafka pchannel on catalog, tracking vchannels,
// behind a receiver middleware that panics on any update of boomVChannel.
func spawnPanicky(t *testing.T, catalog persistence.Catalog, vchannels map[string]wal.MessageID, opts ...Option) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	system := quietSystem(t)
	props, err := NewProps("p", wal.Kafka, catalog, append(opts, WithVChannels(vchannels))...)
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch m := env.Message.(type) {
			case *messages.UpdateCheckpoint:
				if m.VChannel == boomVChannel {
					panic("middleware bug")
				}
			case *messages.UpdateBatch:
				for _, u := range m.Updates {
					if u.VChannel == boomVChannel {
						panic("middleware bug")
					}
				}
			}
			next(c, env)
		}
	}))
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	return system, pid
}

// stoppedOf subscribes to the Stopped events of system for the test, and
// returns a wait for the next one, with a deadline.
func stoppedOf(t *testing.T, system *actor.ActorSystem) func() *messages.Stopped {
	t.Helper()
	stopped := make(chan *messages.Stopped, 1)
	sub := system.EventStream.Subscribe(func(ev any) {
		if s, ok := ev.(*messages.Stopped); ok {
			stopped <- s
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	return func() *messages.Stopped {
		t.Helper()
		select {
		case s := <-stopped:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no Stopped within 10 s")
			return nil
		}
	}
}

// A request whose handling panics the pchannel is answered at once with a
// PChannelPanicError, and a Sender whose batch did so carries on once the
// pchannel has restarted.
func TestRequestThatPanicsThePChannelIsAnswered(t *testing.T) {
	system, pid := spawnPanicky(t, persistence.NewMemory(), map[string]wal.MessageID{"v": wal.KafkaID(1), boomVChannel: wal.KafkaID(1)})

	start := time.Now()
	err := Request(ctxtest.Within(time.Minute), system.Root, pid, &messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(2)})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	var pe *PChannelPanicError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, "*messages.UpdateCheckpoint", pe.Command)
	require.Less(t, time.Since(start), 30*time.Second, "answered at once, not at the deadline")

	s := newTestSender(t, system, pid)
	require.NoError(t, s.Update(boomVChannel, wal.KafkaID(3)))
	err = s.Flush(ctxtest.Within(time.Minute))
	require.ErrorIs(t, err, ErrPChannelPanicked)
	var be *messages.BatchError
	require.ErrorAs(t, err, &be)
	require.Len(t, be.Rejected, 1)
	require.Equal(t, boomVChannel, be.Rejected[0].VChannel, "the update that may be lost is named")
	require.NoError(t, s.Update("v", wal.KafkaID(20)))
	require.NoError(t, s.Flush(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": wal.KafkaID(20), boomVChannel: wal.KafkaID(1)}, st.Checkpoints)
}

// A pchannel restarted after a panic goes on with the vchannels as they
// were: one added since spawn is still there, one dropped is still gone,
// and no minimum above a live vchannel is ever saved (I1). It used to
// start over from the vchannels given at spawn.
func TestRestartKeepsTheVChannels(t *testing.T) {
	catalog := persistence.NewMemory()
	core, logs := observer.New(zap.WarnLevel)
	system, pid := spawnPanicky(t, catalog, map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20), "gone": wal.KafkaID(1), boomVChannel: wal.KafkaID(50)},
		WithLogger(zap.New(core)))
	req := func(c messages.Command) error { return Request(ctx10s(t), system.Root, pid, c) }
	require.NoError(t, req(&messages.AddVChannel{VChannel: "c", Checkpoint: wal.KafkaID(5)}))
	require.NoError(t, req(&messages.DropVChannel{VChannel: "gone"}))
	require.NoError(t, req(&messages.UpdateCheckpoint{VChannel: "b", Checkpoint: wal.KafkaID(30)}))

	recovered := make(chan *messages.Recovered, 2)
	sub := system.EventStream.Subscribe(func(ev any) {
		if r, ok := ev.(*messages.Recovered); ok {
			recovered <- r
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	require.ErrorIs(t, req(&messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(60)}), ErrPChannelPanicked)
	deadline := time.After(10 * time.Second)
	for restarted := false; !restarted; {
		select {
		case <-recovered:
			// The first incarnation may recover after the commands above
			// (its catalog read is answered through the mailbox); the
			// restart is said before its successor recovers.
			restarted = logs.FilterMessageSnippet("pchannel restarting").Len() > 0
		case <-deadline:
			t.Fatal("the pchannel did not recover after its restart within 10 s")
		}
	}
	// The restart is said, at warn: protoactor's own line is at info.
	restarts := logs.FilterMessageSnippet("pchannel restarting").All()
	require.Len(t, restarts, 1, "%v", logs.All())
	require.Equal(t, zap.WarnLevel, restarts[0].Level)
	require.Equal(t, "p", restarts[0].ContextMap()["pchannel"])
	require.Contains(t, restarts[0].Message, "after it panicked")
	require.Equal(t, "middleware bug", restarts[0].ContextMap()["reason"], "the restart says why")

	require.NoError(t, req(&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(100)}))
	require.NoError(t, req(&messages.UpdateCheckpoint{VChannel: "b", Checkpoint: wal.KafkaID(100)}))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(100), "b": wal.KafkaID(100), "c": wal.KafkaID(5), boomVChannel: wal.KafkaID(50)}, st.Checkpoints)
	require.Equal(t, wal.KafkaID(5), st.Minimum)
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	for _, v := range catalog.History("p") {
		require.LessOrEqual(t, int64(v.(wal.KafkaID)), int64(5), "saved %v above vchannel c at kafka:5: history %v", v, catalog.History("p"))
	}
}

// brittleID is the ID of a WAL whose comparison panics on brittleMark: a
// third-party ID type with a bug.
type brittleID int64

const (
	brittleWAL  wal.Name  = "brittle-test"
	brittleMark brittleID = 13
)

// brittleCalm, while set, keeps brittleID's comparison from panicking: a
// test stores brittleMark with it, as an older build or damage could have,
// since a catalog now refuses an ID that cannot be compared (wal.Marshal).
var brittleCalm atomic.Bool

// brittlePanic is what a brittle comparison panics with: a megabyte of
// escape sequences, which errors and events must carry cut and quoted.
var brittlePanic = "brittle comparison\x1b[2J" + strings.Repeat("\x1b", 1<<20)

func (brittleID) WALName() wal.Name { return brittleWAL }
func (b brittleID) LT(o wal.MessageID) bool {
	if !brittleCalm.Load() && (b == brittleMark || o.(brittleID) == brittleMark) {
		panic(brittlePanic)
	}
	return b < o.(brittleID)
}
func (b brittleID) LTE(o wal.MessageID) bool { return !o.LT(b) }
func (b brittleID) EQ(o wal.MessageID) bool  { return b == o.(brittleID) }
func (b brittleID) Marshal() []byte          { return strconv.AppendInt(nil, int64(b), 10) }
func (b brittleID) String() string           { return fmt.Sprintf("%s:%d", brittleWAL, int64(b)) }

var registerBrittle = sync.OnceValue(func() error { return registerDecimal[brittleID](brittleWAL) })

// registerDecimal registers a test WAL whose IDs are integers, marshalled
// and parsed as decimal text.
func registerDecimal[ID interface {
	~int64
	wal.MessageID
}](name wal.Name) error {
	parse := func(s string) (ID, error) { n, err := strconv.ParseInt(s, 10, 64); return ID(n), err }
	return wal.Register(name, wal.Codec[ID]{
		Unmarshal: func(b []byte) (ID, error) { return parse(string(b)) },
		Parse:     parse,
	})
}

// spawnBrittle spawns a pchannel of the brittle WAL, tracking v at 1.
func spawnBrittle(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	require.NoError(t, registerBrittle())
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	catalog := persistence.NewMemory()
	t.Cleanup(func() { _ = catalog.Close() })
	props, err := NewProps("p", brittleWAL, catalog, WithVChannels(map[string]wal.MessageID{"v": brittleID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	return system, pid
}

// An ID whose comparison panics is bad input like any other: rejected
// with wal.ErrCorruptID, by a request or in a Sender's batch, and the
// pchannel neither panics nor changes.
func TestAnIDWhoseComparisonPanicsIsRejected(t *testing.T) {
	system, pid := spawnBrittle(t)
	cut := func(err error) {
		t.Helper()
		require.Less(t, len(err.Error()), 1200, "the panic's megabyte is cut")
		require.NotContains(t, err.Error(), "\x1b", "and quoted")
		require.Contains(t, err.Error(), `"brittle comparison\x1b[2J\x1b`)
	}
	err := Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: brittleMark})
	require.ErrorIs(t, err, wal.ErrCorruptID)
	require.NotErrorIs(t, err, ErrPChannelPanicked)
	cut(err)
	err = Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: "w", Checkpoint: brittleMark})
	require.ErrorIs(t, err, wal.ErrCorruptID)
	cut(err)

	// A Sender judges it in Update: whether it reads back, which compares
	// it, needs nothing of the actor's.
	s := newTestSender(t, system, pid)
	err = s.Update("v", brittleMark)
	require.ErrorIs(t, err, wal.ErrCorruptID)
	cut(err)
	require.NoError(t, s.Update("v", brittleID(20)))
	require.NoError(t, s.Flush(ctx10s(t)))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": brittleID(20)}, st.Checkpoints)
}

// An ID whose comparison panics in the producer's own Update is rejected
// as corrupt there; the Sender, and the pchannel it answers to, carry on.
func TestSenderRejectsAnIDWhoseComparisonPanics(t *testing.T) {
	system, pid := spawnBrittle(t)

	// A gate holds the first batch, so that later updates of v find one
	// waiting and are compared with it in Update.
	g := &gate{target: pid}
	gpid := system.Root.Spawn(g.props())
	t.Cleanup(func() { _ = system.Root.StopFuture(gpid).Wait() })
	s := newTestSender(t, system, gpid)
	require.NoError(t, s.Update("w", brittleID(2))) // shipped, held by the gate
	require.NoError(t, s.Update("v", brittleID(5))) // waits
	require.ErrorIs(t, s.Update("v", brittleMark), wal.ErrCorruptID)
	require.NoError(t, s.Update("v", brittleID(6)))
	system.Root.Send(gpid, gateRelease{})
	err := s.Flush(ctx10s(t)) // w is unknown to the pchannel
	require.ErrorIs(t, err, messages.ErrVChannelNotFound)
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"v": brittleID(6)}, st.Checkpoints)
}

// touchyID is the ID of a WAL whose LT panics, once touchyArmed is set,
// whenever 20 is its receiver: rebuilding the order after a refused change
// then panics too, and the pchannel's tracker is broken.
type touchyID int64

const touchyWAL wal.Name = "touchy-test"

var touchyArmed atomic.Bool

func (touchyID) WALName() wal.Name { return touchyWAL }
func (a touchyID) LT(o wal.MessageID) bool {
	if touchyArmed.Load() && a == 20 {
		panic("touchy comparison")
	}
	return a < o.(touchyID)
}
func (a touchyID) LTE(o wal.MessageID) bool { return a <= o.(touchyID) }
func (a touchyID) EQ(o wal.MessageID) bool  { return a == o.(touchyID) }
func (a touchyID) Marshal() []byte          { return strconv.AppendInt(nil, int64(a), 10) }
func (a touchyID) String() string           { return fmt.Sprintf("%s:%d", touchyWAL, int64(a)) }

var registerTouchy = sync.OnceValue(func() error { return registerDecimal[touchyID](touchyWAL) })

// A pchannel whose tracker lost the order of its vchannels stops at once,
// saving nothing more, and Stopped says why.
func TestBrokenOrderStopsThePChannel(t *testing.T) {
	require.NoError(t, registerTouchy())
	system := quietSystem(t)
	catalog := persistence.NewMemory()
	props, err := NewProps("p", touchyWAL, catalog, WithVChannels(map[string]wal.MessageID{"v": touchyID(10), "w": touchyID(20)}))
	require.NoError(t, err)
	stopped := make(chan *messages.Stopped, 1)
	persisted := make(chan struct{}, 1)
	sub := system.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.Stopped:
			stopped <- e
		case *messages.CheckpointPersisted:
			persisted <- struct{}{}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	pid := system.Root.Spawn(props)
	select {
	case <-persisted: // the start, touchy:10
	case <-time.After(10 * time.Second):
		t.Fatal("the first save did not come within 10 s")
	}

	touchyArmed.Store(true)
	defer touchyArmed.Store(false)
	err = Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: touchyID(30)})
	require.ErrorIs(t, err, wal.ErrCorruptID)
	select {
	case s := <-stopped:
		require.ErrorIs(t, s.Reason, wal.ErrCorruptID)
		require.False(t, s.Flushed)
	case <-time.After(10 * time.Second):
		t.Fatal("the pchannel did not stop within 10 s")
	}
	require.Equal(t, []wal.MessageID{touchyID(10)}, catalog.History("p"))
}

// A stored checkpoint whose comparison panics (brittleMark, as bytes that
// decoded to a broken ID may be) is a corrupt record, as one that cannot
// be decoded is: recovery fails on it and is retried on the backoff until
// it is repaired, rather than starting from a checkpoint no save could
// ever pass. Neither actor panics, and a graceful stop ends within its
// bound. The persister used to crash over and over, and the stop to hang;
// then every save failed, the pchannel having recovered from it.
func TestStoredCheckpointWhoseComparisonPanics(t *testing.T) {
	require.NoError(t, registerBrittle())
	system := quietSystem(t)
	catalog := persistence.NewMemory()
	brittleCalm.Store(true)
	err := catalog.Save(ctx10s(t), "p", brittleMark)
	brittleCalm.Store(false) // before require: a failure must not leave it set
	require.NoError(t, err)
	evs := make(chan messages.Event, 256)
	sub := system.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.RecoveryFailed, *messages.Recovered, *messages.PersistFailed, *messages.PersisterRestarted, *messages.Stopped:
			select {
			case evs <- e.(messages.Event):
			default:
			}
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	const flush = 300 * time.Millisecond
	props, err := NewProps("p", brittleWAL, catalog, WithStopFlushTimeout(flush),
		WithBackoff(Backoff{Initial: 10 * time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 1.5}),
		WithVChannels(map[string]wal.MessageID{"v": brittleID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: brittleID(20)}))

	for failed := 0; failed < 2; {
		select {
		case ev := <-evs:
			f, ok := ev.(*messages.RecoveryFailed)
			require.True(t, ok, "want RecoveryFailed, got %T", ev)
			require.ErrorIs(t, f.Err, persistence.ErrCorruptRecord)
			require.ErrorIs(t, f.Err, wal.ErrCorruptID)
			require.Equal(t, failed+1, f.Attempt)
			require.NotZero(t, f.NextRetry)
			failed++
		case <-time.After(10 * time.Second):
			t.Fatal("no RecoveryFailed within 10 s")
		}
	}
	began := time.Now()
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.Less(t, time.Since(began), flush+joinGrace+2*time.Second)
	for {
		select {
		case ev := <-evs:
			switch e := ev.(type) {
			case *messages.RecoveryFailed:
			case *messages.Stopped:
				require.False(t, e.Flushed)
				require.ErrorIs(t, e.Reason, messages.ErrNotRecovered)
				require.ErrorIs(t, e.Reason, persistence.ErrCorruptRecord, "the stop says why it did not recover")
				require.ErrorIs(t, e.Reason, wal.ErrCorruptID)
				require.Equal(t, []wal.MessageID{brittleMark}, catalog.History("p"))
				return
			default:
				t.Fatalf("%T: recovery over a record that cannot be compared went on", e)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no Stopped within 10 s")
		}
	}
}

// A preloaded checkpoint is refused at NewProps as a vchannel's is when
// its ID cannot be compared: the spawn is where it comes in.
func TestAPreloadedIDWhoseComparisonPanicsIsRefused(t *testing.T) {
	require.NoError(t, registerBrittle())
	_, err := NewProps("p", brittleWAL, persistence.NewMemory(), WithPreloaded(brittleMark),
		WithVChannels(map[string]wal.MessageID{"v": brittleID(1)}))
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorIs(t, err, wal.ErrCorruptID)
	require.ErrorContains(t, err, "preloaded checkpoint brittle-test:13")
}

// slowReread is a Memory whose every Load after the first waits for its
// context to end or for release: a restart's re-read that takes a while.
type slowReread struct {
	*persistence.Memory
	loads   atomic.Int32
	release chan struct{}
}

func (s *slowReread) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	if s.loads.Add(1) > 1 {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.Memory.Load(ctx, pchannel)
}

// A restarted pchannel reports the checkpoint acknowledged before its
// restart until it has read the stored one again: in GetState, and in
// Stopped for a stop that comes first. It used to report none, and call the
// minimum at that very checkpoint dropped.
func TestRestartKeepsThePersistedCheckpoint(t *testing.T) {
	catalog := &slowReread{Memory: persistence.NewMemory(), release: make(chan struct{})}
	defer close(catalog.release)
	system, pid := spawnPanicky(t, catalog, map[string]wal.MessageID{"a": wal.KafkaID(5), boomVChannel: wal.KafkaID(5)})
	stopped := stoppedOf(t, system)
	require.Eventually(t, func() bool {
		st, err := GetState(ctx10s(t), system.Root, pid)
		return err == nil && st.Persisted == wal.KafkaID(5)
	}, 10*time.Second, time.Millisecond)

	require.ErrorIs(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(6)}), ErrPChannelPanicked)
	st, err := GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err)
	require.False(t, st.Recovered, "re-reading the stored checkpoint")
	require.Equal(t, wal.KafkaID(5), st.Persisted)

	require.NoError(t, system.Root.StopFuture(pid).Wait())
	s := stopped()
	require.Equal(t, wal.KafkaID(5), s.LastPersisted)
	require.True(t, s.Recovered, "the incarnation before the restart read it")
	require.True(t, s.Flushed, "%+v", s)
	require.Nil(t, s.Dropped)
}

// A message that would panic the pchannel, sent after its stop began, is
// refused (a request gets a dead letter) rather than handled: the stop
// completes. Handled, the panic made protoactor restart the actor and
// lose the stop, in most runs: no Stopped, and an actor that lived on.
func TestStopIsNotLostToALaterPanic(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		for range 10 {
			system, pid := spawnPanicky(t, persistence.NewMemory(), map[string]wal.MessageID{"v": wal.KafkaID(1), boomVChannel: wal.KafkaID(1)})
			stopped := stoppedOf(t, system)
			_, err := GetState(ctx10s(t), system.Root, pid) // recovered, or recovering: either will do
			require.NoError(t, err)
			stop := system.Root.StopFuture
			if graceful {
				stop = system.Root.PoisonFuture
			}
			f := stop(pid)
			system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(2)})
			require.NoError(t, f.Wait())
			require.Equal(t, graceful, stopped().Graceful)
		}
	}
}

// commitsLate is a Memory whose Save of lateValue commits only when its
// context ends, as a store may commit while its caller gives up; and whose
// every Load after the first waits for release or its context. The Save
// of lateValue closes entered as it begins.
type commitsLate struct {
	slowReread
	lateValue wal.MessageID
	entered   chan struct{}
}

func (c *commitsLate) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if v == c.lateValue {
		close(c.entered)
		<-ctx.Done()
		return c.Memory.Save(context.Background(), pchannel, v)
	}
	return c.Memory.Save(ctx, pchannel, v)
}

// The checkpoint a restart hands on is read once the old incarnation's
// children have stopped: a save its persister found acknowledged while
// stopping counts. It was read at Restarting, before that, and a stop of
// the new incarnation called that stored checkpoint dropped.
func TestRestartHandsOnTheFinalPersistedCheckpoint(t *testing.T) {
	catalog := &commitsLate{slowReread: slowReread{Memory: persistence.NewMemory(), release: make(chan struct{})}, lateValue: wal.KafkaID(10), entered: make(chan struct{})}
	defer close(catalog.release)
	system, pid := spawnPanicky(t, catalog, map[string]wal.MessageID{"a": wal.KafkaID(5), boomVChannel: wal.KafkaID(50)})
	stopped := stoppedOf(t, system)
	state := func() *messages.State {
		st, err := GetState(ctx10s(t), system.Root, pid)
		require.NoError(t, err)
		return st
	}
	require.Eventually(t, func() bool { return state().Persisted == wal.KafkaID(5) }, 10*time.Second, time.Millisecond)
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(10)}))
	// In flight is not enough: a save the catalog has not yet entered is
	// called off, not cancelled, by the restart.
	select {
	case <-catalog.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the save of 10 never reached the catalog")
	}

	// The restart stops the persister, whose stop cancels the save: it
	// commits, and the persister finds it acknowledged.
	require.ErrorIs(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: boomVChannel, Checkpoint: wal.KafkaID(60)}), ErrPChannelPanicked)
	st := state() // the new incarnation: the mailbox waited for the restart
	require.False(t, st.Recovered)
	require.Equal(t, wal.KafkaID(10), st.Persisted)
	stored, err := catalog.Memory.Load(ctx10s(t), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), stored)

	require.NoError(t, system.Root.StopFuture(pid).Wait())
	s := stopped()
	require.Equal(t, wal.KafkaID(10), s.LastPersisted)
	require.True(t, s.Flushed, "%+v", s)
}

// A save timeout near the largest duration does not wrap the overdue
// report's delay around to a negative one, which fired at once.
func TestOverdueAfterSaturates(t *testing.T) {
	require.Equal(t, 5*time.Second+joinGrace, overdueAfter(5*time.Second))
	require.Equal(t, time.Duration(math.MaxInt64), overdueAfter(math.MaxInt64))
	require.Equal(t, time.Duration(math.MaxInt64), overdueAfter(math.MaxInt64-joinGrace/2))
}

// recoveries returns a wait for the next Recovered of system, with a
// deadline.
func recoveries(t *testing.T, system *actor.ActorSystem) func(what string) {
	t.Helper()
	recovered := make(chan struct{}, 8)
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			recovered <- struct{}{}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	return func(what string) { t.Helper(); within(t, what, recovered) }
}

// An incarnation that fails on its Started, after a restart, is restarted
// with its own reason: protoactor makes it and hands it its Started within
// the restart, and posts the resume of the restart before it.
func TestRestartAfterAPanicInStartedSaysWhy(t *testing.T) {
	system := quietSystem(t)
	recovered := recoveries(t, system)
	core, logs := observer.New(zap.WarnLevel)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	var started atomic.Int32
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Started); ok {
				if n := started.Add(1); n <= 3 {
					panic(fmt.Sprintf("Started #%d", n))
				}
			}
			next(c, env)
		}
	}))
	pid := system.Root.Spawn(props)
	t.Cleanup(func() { _ = system.Root.PoisonFuture(pid).Wait() })
	recovered("the fourth incarnation's recovery")

	restarts := logs.FilterMessageSnippet("pchannel restarting").All()
	require.Len(t, restarts, 3, "%v", logs.All())
	for i, r := range restarts {
		require.Contains(t, r.Message, "after it panicked", "restart %d", i+1)
		require.Equal(t, fmt.Sprintf("Started #%d", i+1), r.ContextMap()["reason"], "restart %d", i+1)
	}
}

// marshalPanics is a panic value whose MarshalJSON panics: a user's type
// with a bug of its own.
type marshalPanics struct{ detail *string }

func (m marshalPanics) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(*m.detail)), nil }

// A panic value that zap cannot encode is logged as text, by lowwater's
// lines and by protoactor's through LoggerFactory: encoded as it is, it
// panicked in the Restarting handler, a second failure that took the
// supervisor's retries, and in protoactor's own line, written from the
// mailbox's recover, it ended the process.
func TestAPanicValueThatCannotBeEncodedIsLoggedAsText(t *testing.T) {
	sink := &syncbuf.Buffer{}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(sink), zap.InfoLevel))
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(logger)), actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(system.Shutdown)
	recovered := recoveries(t, system)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(logger),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if u, ok := env.Message.(*messages.UpdateCheckpoint); ok && u.VChannel == "x" {
				panic(marshalPanics{})
			}
			next(c, env)
		}
	}))
	// One retry only: the panic is one failure, not two.
	pid := spawnUnder(t, system, props, actor.NewOneForOneStrategy(1, time.Minute, actor.DefaultDecider))
	recovered("the first recovery")

	err = Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: wal.KafkaID(1)})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	recovered("the recovery after the restart")
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}),
		"restarted once, and running")

	lines := sink.String()
	require.Regexp(t, `"msg":"pchannel restarting after it panicked[^"]*","pchannel":"p","reason":"\{<nil>\}"`, lines)
	require.Regexp(t, `"msg":"\[ACTOR\] Recovering".*"reason":"\{<nil>\}"`, lines)
}

// logsAsValuer is a slog.LogValuer that resolves to a value zap cannot
// encode.
type logsAsValuer struct{}

func (logsAsValuer) LogValue() slog.Value { return slog.AnyValue(marshalPanics{}) }

// LoggerFactory's handler writes a record zap cannot encode once, the
// attributes that fail as text, whatever holds the value: an attribute, a
// group, a LogValuer, or the logger's own attributes.
func TestLoggerFactoryWritesWhatZapCannotEncodeAsText(t *testing.T) {
	sink := &syncbuf.Buffer{}
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(sink), zap.InfoLevel))
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	l := LoggerFactory(logger)(system)
	l.Info("attr", "v", marshalPanics{}, "n", 1, "ok", map[string]int{"a": 1})
	l.Info("group", slog.Group("g", "v", marshalPanics{}, "ok", []int{1}))
	l.Info("valuer", "v", logsAsValuer{})
	l.With("v", logsAsValuer{}, "ok", struct{ A int }{2}).Info("with")
	l.Info("flaky", "v", &panicsAfterOnce{}, "n", 1)
	lines := strings.Split(strings.TrimSpace(sink.String()), "\n")
	require.Len(t, lines, 5, sink.String())
	require.Contains(t, lines[4], `"v":"again","n":1`, "written again as text, once the core panicked")
	require.Contains(t, lines[0], `"v":"{<nil>}","n":1,"ok":{"a":1}`)
	require.Contains(t, lines[1], `"g":{"v":"{<nil>}","ok":[1]}`)
	require.Contains(t, lines[2], `"v":"{<nil>}"`)
	require.Contains(t, lines[3], `"v":"{<nil>}","ok":{"A":2}`)
}

// countsLogValue counts the calls of its LogValue.
type countsLogValue struct{ calls atomic.Int32 }

func (c *countsLogValue) LogValue() slog.Value {
	c.calls.Add(1)
	return slog.IntValue(7)
}

// A LogValuer is resolved once per record, in a group too, as zapslog
// alone resolves it: the handler's trial takes its value.
func TestLoggerFactoryResolvesALogValuerOnce(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	l := LoggerFactory(zap.New(observed))(system)
	top, inGroup, with := &countsLogValue{}, &countsLogValue{}, &countsLogValue{}
	l.Info("valuers", "v", top, slog.Group("g", "w", inGroup))
	l.With("x", with).Info("with")
	require.Equal(t, []int32{1, 1, 1}, []int32{top.calls.Load(), inGroup.calls.Load(), with.calls.Load()})
	require.Equal(t, int64(7), logs.All()[0].ContextMap()["v"])
	require.Equal(t, map[string]any{"w": int64(7)}, logs.All()[0].ContextMap()["g"])
	require.Equal(t, int64(7), logs.All()[1].ContextMap()["x"])
}

// panicsAfterOnce encodes once, on the handler's trial, and then panics,
// in the core.
type panicsAfterOnce struct{ calls atomic.Int32 }

func (p *panicsAfterOnce) MarshalJSON() ([]byte, error) {
	if p.calls.Add(1) > 1 {
		panic("encoded again")
	}
	return []byte(`"once"`), nil
}

func (p *panicsAfterOnce) String() string { return "again" }

// A record zap cannot encode reaches the core once: a sampler that lets
// one line of a message through writes it, and the cores of a tee each get
// it once. Retried after the core panicked, the sampler dropped it as the
// second, and the core before the failing one in the tee had it twice.
func TestLoggerFactoryChecksARecordOnce(t *testing.T) {
	sink := &syncbuf.Buffer{}
	json := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(sink), zap.InfoLevel)
	observed, logs := observer.New(zap.InfoLevel)
	tee := zapcore.NewTee(observed, zapcore.NewSamplerWithOptions(json, time.Hour, 1, 0))
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	l := LoggerFactory(zap.New(tee))(system)
	l.Info("once", "v", marshalPanics{})
	require.Equal(t, 1, logs.FilterMessage("once").Len())
	require.Equal(t, "{<nil>}", logs.FilterMessage("once").All()[0].ContextMap()["v"])
	lines := strings.Split(strings.TrimSpace(sink.String()), "\n")
	require.Len(t, lines, 1, sink.String())
	require.Contains(t, lines[0], `"msg":"once"`)
}

// An error line's stack starts where the logger was called, as with
// zapslog alone: not inside log/slog.
func TestLoggerFactoryStackStartsAtTheCaller(t *testing.T) {
	observed, logs := observer.New(zap.InfoLevel)
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())))
	t.Cleanup(system.Shutdown)
	LoggerFactory(zap.New(observed))(system).Error("failed")
	require.Equal(t, 1, logs.Len())
	stack := logs.All()[0].Stack
	require.True(t, strings.HasPrefix(stack, "github.com/lowwater/lowwater/actors.TestLoggerFactoryStackStartsAtTheCaller"), stack)
}

// A pchannel that its supervisor stops after a panic says so: Stopped
// carries the panic and the message it came on, and the stop line is a
// warning that gives them. A stop with no panic before it, or one after
// the restart that took the panic, carries none.
func TestAStopAfterAPanicSaysWhy(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	logger := zap.New(core)
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(logger),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if u, ok := env.Message.(*messages.UpdateCheckpoint); ok && u.VChannel == "x" {
				panic(fmt.Errorf("middleware bug on %s", u.Checkpoint))
			}
			next(c, env)
		}
	}))
	strategy := actor.NewOneForOneStrategy(10, time.Minute, restartOnceThenStop())
	quiet := spawnUnder(t, system, props, strategy)
	restarted := spawnUnder(t, system, props, strategy)
	panicky := spawnUnder(t, system, props, strategy)

	system.Root.Stop(quiet)
	require.Nil(t, stopped().Failure, "a hard stop with no panic before it")

	err = Request(ctx10s(t), system.Root, restarted, &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: wal.KafkaID(1)})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	require.NoError(t, Request(ctx10s(t), system.Root, restarted, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}),
		"restarted, and running")
	system.Root.Stop(restarted)
	require.Nil(t, stopped().Failure, "a stop after the restart that took the panic")

	system.Root.Send(panicky, &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: wal.KafkaID(2)})
	s := stopped()
	require.False(t, s.Graceful)
	var pe *PChannelPanicError
	require.ErrorAs(t, s.Failure, &pe)
	require.ErrorIs(t, s.Failure, ErrPChannelPanicked)
	require.Equal(t, "*messages.UpdateCheckpoint", pe.Command)
	require.EqualError(t, pe.Value.(error), "middleware bug on kafka:2")

	warned := logs.FilterMessage("stopped after it panicked, before any restart").All()
	require.Len(t, warned, 1)
	require.Equal(t, zap.WarnLevel, warned[0].Level)
	require.Equal(t, "middleware bug on kafka:2", warned[0].ContextMap()["reason"])
	require.Equal(t, "*messages.UpdateCheckpoint", warned[0].ContextMap()["command"])
	// Hard stops: each may have stopped before its minimum was known saved,
	// a line of its own.
	require.Equal(t, 2, logs.FilterMessage("stopped").Len()+logs.FilterMessage("stopped before its minimum was known saved").Len(),
		"the stop lines of the other two")
}

// A pchannel whose Started panics, and that its supervisor then stops,
// never ran: Stopped says so all the same, with the panic and nothing
// persisted or dropped.
func TestAStopAfterAPanicOnStartedSaysWhy(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Started); ok {
				panic("no start")
			}
			next(c, env)
		}
	}))
	spawnUnder(t, system, props, actor.NewOneForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.StopDirective }))

	s := stopped()
	require.Equal(t, "p", s.PChannel)
	require.False(t, s.Graceful)
	require.False(t, s.Flushed)
	require.Nil(t, s.LastPersisted)
	require.Nil(t, s.Dropped)
	require.ErrorIs(t, s.Reason, messages.ErrHardStop)
	var pe *PChannelPanicError
	require.ErrorAs(t, s.Failure, &pe)
	require.Equal(t, "*actor.Started", pe.Command)
	require.Equal(t, "no start", pe.Value)
	warned := logs.FilterMessage("stopped after it panicked, before any restart; it never started").All()
	require.Len(t, warned, 1)
	require.Equal(t, "no start", warned[0].ContextMap()["reason"])
}

// A pchannel restarted after a panic, whose next Started panics too and
// which its supervisor then stops, ends as the incarnation before would
// have: Stopped gives what it had persisted, and the panic on Started. What
// it handed on is gone with it: the next actor of that name starts from
// the vchannels given at spawn.
func TestAStopAfterAPanicOnARestartsStartedTakesWhatWasHandedOn(t *testing.T) {
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	persisted := make(chan wal.MessageID, 16)
	sub := system.EventStream.Subscribe(func(ev any) {
		if e, ok := ev.(*messages.CheckpointPersisted); ok {
			persisted <- e.Value
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	waitPersisted := func(want wal.MessageID) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case v := <-persisted:
				if v.EQ(want) {
					return
				}
			case <-deadline:
				t.Fatalf("%s not persisted within 10 s", want)
			}
		}
	}
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.NewNop()),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	var failStart atomic.Bool
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch m := env.Message.(type) {
			case *actor.Started:
				if failStart.Load() {
					panic("no start")
				}
			case *messages.UpdateCheckpoint:
				if m.VChannel == "x" {
					failStart.Store(true)
					panic("middleware bug")
				}
			}
			next(c, env)
		}
	}))
	type respawn struct{}
	children := make(chan *actor.PID, 2)
	parent := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started, respawn:
			pid, err := c.SpawnNamed(props, "pc")
			require.NoError(t, err)
			children <- pid
		}
	}, actor.WithSupervisor(actor.NewOneForOneStrategy(10, time.Minute, restartOnceThenStop()))))
	t.Cleanup(func() { _ = system.Root.PoisonFuture(parent).Wait() })
	pid := <-children

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(30)}))
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(25)}))
	waitPersisted(wal.KafkaID(25))
	system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "x", Checkpoint: wal.KafkaID(1)})

	s := stopped()
	require.Equal(t, wal.KafkaID(25), s.LastPersisted, "what the incarnation before had persisted")
	require.True(t, s.Flushed)
	require.Nil(t, s.Dropped)
	require.NoError(t, s.Reason)
	var pe *PChannelPanicError
	require.ErrorAs(t, s.Failure, &pe)
	require.Equal(t, "*actor.Started", pe.Command, "the restart's Started, not the message it came in")
	require.Equal(t, "no start", pe.Value)

	failStart.Store(false)
	system.Root.Send(parent, respawn{})
	st, err := GetState(ctx10s(t), system.Root, <-children, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(10)}, st.Checkpoints, "the vchannels given at spawn, not those handed on")
}

// A pchannel whose Started panicked, and that its supervisor resumed,
// starts on its first message after: it applies commands, answers and
// stops as any other, where it panicked on every command.
func TestAPChannelResumedAfterItsStartedPanickedStartsLate(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	var started atomic.Int32
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Started); ok && started.Add(1) == 1 {
				panic("no start")
			}
			next(c, env)
		}
	}))
	pid := spawnUnder(t, system, props, actor.NewOneForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.ResumeDirective }))

	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))
	st, err := GetState(ctx10s(t), system.Root, pid, IncludeCheckpoints())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(20)}, st.Checkpoints)
	require.Len(t, logs.FilterMessage("pchannel starting on its first message: its supervisor resumed it after its Started failed").All(), 1)

	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	s := stopped()
	require.True(t, s.Graceful)
	require.True(t, s.Flushed)
	require.Equal(t, wal.KafkaID(20), s.LastPersisted)
	require.Nil(t, s.Failure)
}

// spawnUnder spawns props as the only child of a parent whose supervisor
// is strategy, and returns the child. The parent is poisoned at the end.
func spawnUnder(t *testing.T, system *actor.ActorSystem, props *actor.Props, strategy actor.SupervisorStrategy) *actor.PID {
	t.Helper()
	children := make(chan *actor.PID, 1)
	parent := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			children <- c.Spawn(props)
		}
	}, actor.WithSupervisor(strategy)))
	t.Cleanup(func() { _ = system.Root.PoisonFuture(parent).Wait() })
	return <-children
}

// restartOnceThenStop is a decider that restarts on the first failure it
// is told of, whichever child's, and stops on every one after.
func restartOnceThenStop() actor.DeciderFunc {
	var failures atomic.Int32
	return func(any) actor.Directive {
		if failures.Add(1) == 1 {
			return actor.RestartDirective
		}
		return actor.StopDirective
	}
}

// spawnBehind spawns a Kafka pchannel on a Memory, tracking "a" from
// kafka:1, behind middleware, and returns it with a wait for its Stopped.
func spawnBehind(t *testing.T, middleware actor.ReceiverMiddleware) (*actor.ActorSystem, *actor.PID, *persistence.Memory, func() *messages.Stopped) {
	t.Helper()
	system := quietSystem(t)
	stopped := stoppedOf(t, system)
	cat := persistence.NewMemory()
	props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(middleware))
	return system, system.Root.Spawn(props), cat, stopped
}

// A Poison stays graceful through a receiver middleware that panics on
// the first message it does not know, as the Poison comes: lowwater's own
// messages pass through a middleware too. The Poison was announced to the
// actor by such a message; a panic on it restarted the actor, which
// forgot it, and the Poison became a hard stop that saved nothing.
func TestAPoisonSurvivesAMiddlewareThatPanicsOnWhatItDoesNotKnow(t *testing.T) {
	var armed atomic.Bool
	system, pid, cat, stopped := spawnBehind(t, func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			known := strings.HasPrefix(fmt.Sprintf("%T", env.Message), "*messages.") ||
				strings.HasPrefix(fmt.Sprintf("%T", env.Message), "*actor.")
			if !known && armed.CompareAndSwap(true, false) {
				panic(fmt.Sprintf("middleware bug: %T", env.Message))
			}
			next(c, env)
		}
	})
	for i := range 9 {
		require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(int64(i + 2))}))
	}
	armed.Store(true)
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	s := stopped()
	require.True(t, s.Graceful, "%+v", s)
	require.True(t, s.Flushed, "%+v", s)
	require.Equal(t, wal.KafkaID(10), s.LastPersisted)
	got, err := cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(10), got)
}

// A PoisonPill lost to a receiver middleware that panics on it (protoactor
// then never stops the actor, as for any actor) is spent: the pchannel
// restarts and runs on, and the Stop that comes later is a hard one, with
// its own bound, not the Poison's flush.
func TestAPoisonPillLostToAPanicLeavesTheNextStopHard(t *testing.T) {
	var spent atomic.Bool
	system, pid, _, stopped := spawnBehind(t, func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.PoisonPill); ok && spent.CompareAndSwap(false, true) {
				panic("middleware bug on the PoisonPill")
			}
			next(c, env)
		}
	})
	require.NoError(t, Request(ctx10s(t), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(2)}))
	system.Root.Poison(pid)
	// Answered after the pill, by the incarnation the panic made.
	state, err := GetState(ctx10s(t), system.Root, pid)
	require.NoError(t, err)
	require.True(t, spent.Load())
	require.Equal(t, wal.KafkaID(2), state.Minimum)
	require.NoError(t, system.Root.StopFuture(pid).Wait())
	s := stopped()
	require.False(t, s.Graceful, "%+v", s)
}
