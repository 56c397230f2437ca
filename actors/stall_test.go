package actors

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// stallAfter is the stall threshold of most tests. They run in synctest
// bubbles, whose clock moves only when every goroutine in them waits: the
// windows in which nothing may happen (quietFor) and the spacing of a rise
// cost no real time, and a loaded machine cannot stretch them.
const stallAfter = 40 * time.Millisecond

// stallRig runs one pchannel and records, in order, the events the stall
// tests follow, and any stall timer that fired into a dead actor.
type stallRig struct {
	t      *testing.T
	system *actor.ActorSystem
	pid    *actor.PID
	events chan messages.Event
	dead   chan *timerFired
}

func newStallRig(t *testing.T, catalog persistence.Catalog, opts ...Option) *stallRig {
	t.Helper()
	// A timer firing after the stop is a dead letter; protoactor's throttle
	// then waits one interval on a goroutine of its own.
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	r := &stallRig{t: t, system: system, events: make(chan messages.Event, 1024), dead: make(chan *timerFired, 16)}
	sub := system.EventStream.Subscribe(func(ev any) {
		switch e := ev.(type) {
		case *messages.Recovered, *messages.MinimumAdvanced, *messages.MinimumStalled, *messages.MinimumResumed,
			*messages.VChannelDropped, *messages.Stopped:
			r.events <- e.(messages.Event)
		case *actor.DeadLetterEvent:
			if tf, ok := e.Message.(*timerFired); ok {
				r.dead <- tf
			}
		}
	})
	t.Cleanup(func() {
		system.EventStream.Unsubscribe(sub)
		system.Shutdown()
		// The tests run in a synctest bubble, on its clock: the pool sheds
		// its idle workers, which must end before the bubble does.
		time.Sleep(3 * poolIdleFor)
	})
	props, err := NewProps("p", wal.Kafka, catalog, opts...)
	require.NoError(t, err)
	r.pid = system.Root.Spawn(props)
	return r
}

// next returns the next recorded event, which must be a T.
func next[T messages.Event](r *stallRig) T {
	r.t.Helper()
	select {
	case ev := <-r.events:
		got, ok := ev.(T)
		require.Truef(r.t, ok, "got %T %+v, want %T", ev, ev, *new(T))
		return got
	case <-time.After(10 * time.Second):
		var zero T
		r.t.Fatalf("no %T within 10s", zero)
		return zero
	}
}

// quietFor fails if any event is recorded, or a stall timer fires into a
// dead actor, within d.
func (r *stallRig) quietFor(d time.Duration) {
	r.t.Helper()
	select {
	case ev := <-r.events:
		r.t.Fatalf("unexpected %T %+v", ev, ev)
	case tf := <-r.dead:
		r.t.Fatalf("a timer fired after the stop: %+v", tf)
	case <-time.After(d):
	}
}

func (r *stallRig) send(cmd messages.Command) {
	r.t.Helper()
	require.NoError(r.t, Request(ctxtest.Within(5*time.Second), r.system.Root, r.pid, cmd))
}

func (r *stallRig) state() *messages.State {
	r.t.Helper()
	st, err := GetState(ctxtest.Within(5*time.Second), r.system.Root, r.pid)
	require.NoError(r.t, err)
	return st
}

func (r *stallRig) stop() {
	r.t.Helper()
	require.NoError(r.t, r.system.Root.StopFuture(r.pid).Wait())
	next[*messages.Stopped](r)
}

func vchannels(kv ...any) Option {
	m := make(map[string]wal.MessageID)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = wal.KafkaID(kv[i+1].(int))
	}
	return WithVChannels(m)
}

// A stall names the holder, its checkpoint and how long, measured from the
// start of running; a rise ends it, naming the same holder, and the next
// stall names the new holder, measured from that rise.
func TestStallNamesHolderAndResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStallRig(t, persistence.NewMemory(), WithStallAfter(stallAfter), vchannels("a", 10, "b", 20))
		rec := next[*messages.Recovered](r)

		s := next[*messages.MinimumStalled](r)
		require.Equal(t, "p", s.PChannel)
		require.Equal(t, "a", s.Holder)
		require.Equal(t, wal.KafkaID(10), s.Checkpoint)
		require.Equal(t, rec.At, s.Since, "the clock starts when running begins")
		require.Equal(t, s.At.Sub(s.Since), s.For)
		require.GreaterOrEqual(t, s.For, stallAfter)

		st := r.state()
		require.Equal(t, "a", st.Holder)
		require.True(t, st.Stalled)
		require.Equal(t, s.Since, st.HeldSince)

		r.quietFor(3 * stallAfter) // once per stall, and no timer meanwhile

		r.send(&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(30)})
		adv := next[*messages.MinimumAdvanced](r)
		require.Equal(t, wal.KafkaID(20), adv.To)
		require.Equal(t, "b", adv.Holder)
		res := next[*messages.MinimumResumed](r)
		require.Equal(t, "a", res.Holder, "the resumed event names the stall's holder")
		require.Equal(t, adv.At, res.At)
		require.Equal(t, res.At.Sub(s.Since), res.StalledFor)
		st = r.state()
		require.Equal(t, "b", st.Holder)
		require.False(t, st.Stalled)
		require.Equal(t, adv.At, st.HeldSince)

		s2 := next[*messages.MinimumStalled](r)
		require.Equal(t, "b", s2.Holder)
		require.Equal(t, wal.KafkaID(20), s2.Checkpoint)
		require.Equal(t, adv.At, s2.Since, "the clock restarts at the rise")
		require.GreaterOrEqual(t, s2.For, stallAfter)
		r.stop()
	})
}

// A rise while the timer is armed only moves the clock: when the timer
// fires it re-arms for the remainder, so the stall comes stallAfter after
// the rise, not after the first arming.
func TestStallTimerRearmsForTheRemainder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after = 5 * stallAfter
		r := newStallRig(t, persistence.NewMemory(), WithStallAfter(after), vchannels("a", 10, "b", 20))
		rec := next[*messages.Recovered](r)
		// The rise comes half way to the first timer (on the bubble's
		// clock, exactly), so that a stall measured from the arming would
		// show.
		time.Sleep(time.Until(rec.At.Add(after / 2)))
		r.send(&messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(15)})
		adv := next[*messages.MinimumAdvanced](r)
		s := next[*messages.MinimumStalled](r)
		require.Equal(t, "a", s.Holder)
		require.Equal(t, wal.KafkaID(15), s.Checkpoint)
		require.Equal(t, adv.At, s.Since)
		require.GreaterOrEqual(t, s.For, after)
		require.GreaterOrEqual(t, s.At.Sub(adv.At), after)
		r.stop()
	})
}

// Off by default: no timer, no event, and State says not stalled.
func TestStallOffByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStallRig(t, persistence.NewMemory(), vchannels("a", 10))
		next[*messages.Recovered](r)
		r.quietFor(5 * stallAfter)
		st := r.state()
		require.False(t, st.Stalled)
		require.Equal(t, "a", st.Holder)
		require.False(t, st.HeldSince.IsZero())
		r.stop()
	})
}

// Zero vchannels is not a stall: nothing holds the minimum back. The first
// Add is a rise, which arms the timer; dropping the last vchannel ends the
// stall.
func TestNoStallWithoutVChannels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newStallRig(t, persistence.NewMemory(), WithStallAfter(stallAfter))
		next[*messages.Recovered](r)
		r.quietFor(4 * stallAfter)
		st := r.state()
		require.Equal(t, "", st.Holder)
		require.True(t, st.HeldSince.IsZero())

		r.send(&messages.AddVChannel{VChannel: "late", Checkpoint: wal.KafkaID(5)})
		adv := next[*messages.MinimumAdvanced](r)
		require.Equal(t, "late", adv.Holder)
		s := next[*messages.MinimumStalled](r)
		require.Equal(t, "late", s.Holder)
		require.Equal(t, adv.At, s.Since)

		r.send(&messages.DropVChannel{VChannel: "late"})
		drop := next[*messages.VChannelDropped](r)
		res := next[*messages.MinimumResumed](r)
		require.Equal(t, "late", res.Holder)
		require.Equal(t, drop.At.Sub(s.Since), res.StalledFor)
		r.quietFor(4 * stallAfter) // no vchannel, no timer
		r.stop()
	})
}

// gatedLoad is a catalog whose Load waits until opened (or its context
// ends): the pchannel stays recovering until then.
type gatedLoad struct {
	*persistence.Memory
	open chan struct{}
}

func (g *gatedLoad) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	select {
	case <-g.open:
		return g.Memory.Load(ctx, pchannel)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// No stall is detected while recovering, and the time it took does not
// count: the clock starts at Recovered.
func TestNoStallWhileRecovering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cat := &gatedLoad{Memory: persistence.NewMemory(), open: make(chan struct{})}
		r := newStallRig(t, cat, WithStallAfter(stallAfter), vchannels("a", 10))
		r.quietFor(4 * stallAfter)
		require.False(t, r.state().Recovered)
		close(cat.open)
		rec := next[*messages.Recovered](r)
		s := next[*messages.MinimumStalled](r)
		require.Equal(t, rec.At, s.Since)
		require.Less(t, s.For, 3*stallAfter+time.Second, "the recovery's wait is not counted")
		r.stop()
	})
}

// Every stop path stops the timer: no stall after it, and no timer message
// to the dead actor (it would be a dead letter). The stop comes right
// after Recovered, with the timer armed.
func TestStallTimerStoppedOnStop(t *testing.T) {
	for _, how := range []string{"stop", "poison", "ownership lost"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				owner, lose := context.WithCancel(context.Background())
				defer lose()
				r := newStallRig(t, persistence.NewMemory(), WithStallAfter(2*stallAfter), vchannels("a", 10), WithOwnership(owner))
				next[*messages.Recovered](r)
				switch how {
				case "stop":
					require.NoError(t, r.system.Root.StopFuture(r.pid).Wait())
				case "poison":
					require.NoError(t, r.system.Root.PoisonFuture(r.pid).Wait())
				default:
					lose()
				}
				// A poison flushes: the save of kafka:10 may come first.
				deadline := time.After(10 * time.Second)
				for stopped := false; !stopped; {
					select {
					case ev := <-r.events:
						_, stopped = ev.(*messages.Stopped)
					case <-deadline:
						t.Fatal("no Stopped within 10s")
					}
				}
				r.quietFor(5 * stallAfter)
			})
		})
	}
}

func TestWithStallAfterValidated(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Microsecond, MinStallAfter - 1} {
		_, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithStallAfter(d))
		require.ErrorIs(t, err, ErrInvalidOption, "%v", d)
	}
	for _, d := range []time.Duration{0, MinStallAfter, time.Hour} {
		_, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithStallAfter(d))
		require.NoError(t, err, "%v", d)
	}
}
