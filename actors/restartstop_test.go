package actors

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// siblingActor panics on "boom" and says when each incarnation starts.
type siblingActor struct{ started chan struct{} }

func (s siblingActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		s.started <- struct{}{}
	case string:
		if m == "boom" {
			panic("sibling bug")
		}
	}
}

// A restart that comes while the pchannel is stopping (the user's
// AllForOne strategy restarts every child when a sibling fails) does not
// lose the stop: protoactor restarts a stopping actor and forgets the
// stop, and the incarnation after it ends it. The pchannel used to run on
// after its PoisonFuture had timed out, and published no Stopped.
func TestRestartDuringAStopEndsTheStop(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(map[bool]string{true: "poison", false: "stop"}[graceful], func(t *testing.T) {
			system := quietSystem(t)
			stopped := stoppedOf(t, system)
			sibStarted := make(chan struct{}, 2)
			var sib *actor.PID
			props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
			require.NoError(t, err)
			// The sibling fails, and the parent's strategy restarts its
			// children, while the pchannel handles its Stopping.
			props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
				return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
					if _, ok := env.Message.(*actor.Stopping); ok && sib != nil {
						system.Root.Send(sib, "boom")
						within(t, "sibling restart", sibStarted) // the pchannel's Restart was sent first
						sib = nil
					}
					next(c, env)
				}
			}))
			children := make(chan *actor.PID, 2)
			parent := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
				if _, ok := c.Message().(*actor.Started); ok {
					children <- c.Spawn(props) // first: AllForOne restarts it first
					children <- c.Spawn(actor.PropsFromProducer(func() actor.Actor { return siblingActor{started: sibStarted} }))
				}
			}, actor.WithSupervisor(actor.NewAllForOneStrategy(10, time.Minute, func(any) actor.Directive { return actor.RestartDirective }))))
			t.Cleanup(func() { _ = system.Root.PoisonFuture(parent).Wait() })
			pc := <-children
			sib = <-children
			within(t, "sibling start", sibStarted)
			require.NoError(t, Request(ctx10s(t), system.Root, pc, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))

			stopEnds(t, system, pc, graceful, stopped)
		})
	}
}

// A pchannel restarted for a sibling's failure says so, and carries no
// reason of its own: not even that of a panic of its own that its
// supervisor resumed it from before.
func TestRestartForASiblingSaysWhose(t *testing.T) {
	system := quietSystem(t)
	core, logs := observer.New(zap.WarnLevel)
	recovered := make(chan struct{}, 2)
	sub := system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.Recovered); ok {
			recovered <- struct{}{}
		}
	})
	t.Cleanup(func() { system.EventStream.Unsubscribe(sub) })
	props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithLogger(zap.New(core)),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
	require.NoError(t, err)
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if u, ok := env.Message.(*messages.UpdateCheckpoint); ok && u.VChannel == "bug" {
				panic("middleware bug")
			}
			next(c, env)
		}
	}))
	sibStarted := make(chan struct{}, 2)
	children := make(chan *actor.PID, 2)
	// The pchannel's own failure is resumed; the sibling's restarts both.
	decide := func(reason any) actor.Directive {
		if reason == "middleware bug" {
			return actor.ResumeDirective
		}
		return actor.RestartDirective
	}
	parent := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			children <- c.Spawn(props)
			children <- c.Spawn(actor.PropsFromProducer(func() actor.Actor { return siblingActor{started: sibStarted} }))
		}
	}, actor.WithSupervisor(actor.NewAllForOneStrategy(10, time.Minute, decide))))
	t.Cleanup(func() { _ = system.Root.PoisonFuture(parent).Wait() })
	pc, sib := <-children, <-children
	within(t, "sibling start", sibStarted)
	within(t, "the pchannel's recovery", recovered)

	err = Request(ctx10s(t), system.Root, pc, &messages.UpdateCheckpoint{VChannel: "bug", Checkpoint: wal.KafkaID(1)})
	require.ErrorIs(t, err, ErrPChannelPanicked)
	require.NoError(t, Request(ctx10s(t), system.Root, pc, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}),
		"resumed, not restarted")
	require.Zero(t, logs.FilterMessageSnippet("pchannel restarting").Len())

	system.Root.Send(sib, "boom")
	within(t, "the sibling's restart", sibStarted)
	within(t, "the pchannel's recovery after its restart", recovered)
	restarts := logs.FilterMessageSnippet("pchannel restarting").All()
	require.Len(t, restarts, 1, "%v", logs.All())
	require.Contains(t, restarts[0].Message, "another actor's failure")
	require.NotContains(t, restarts[0].ContextMap(), "reason")
	st, err := GetState(ctx10s(t), system.Root, pc)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(20), st.Minimum, "the restart kept the update")
}

// The same when the restart is of the pchannel's own making: a receiver
// middleware of the user's panics on the way out of its Stopping handler,
// and the default supervisor restarts it. The stop had begun, so the next
// incarnation ends it. A middleware that panics before the handler runs
// loses the stop in protoactor for any actor: the pchannel never heard of
// it (README, Limitations).
func TestOwnPanicDuringAStopEndsTheStop(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		t.Run(map[bool]string{true: "poison", false: "stop"}[graceful], func(t *testing.T) {
			system := quietSystem(t)
			stopped := stoppedOf(t, system)
			props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
			require.NoError(t, err)
			var panicked atomic.Int32
			props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
				return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
					next(c, env)
					if _, ok := env.Message.(*actor.Stopping); ok && panicked.Add(1) == 1 {
						panic("middleware bug on the way out")
					}
				}
			}))
			pc := system.Root.Spawn(props)
			require.NoError(t, Request(ctx10s(t), system.Root, pc, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)}))

			stopEnds(t, system, pc, graceful, stopped)
			require.Equal(t, int32(2), panicked.Load(), "a Stopping for each incarnation, the first panicking")
		})
	}
}

// stopEnds stops pc, which has kafka:20 to flush, gracefully or not, and
// checks that the stop ended: its future returned, Stopped says how, and
// the pchannel is gone.
func stopEnds(t *testing.T, system *actor.ActorSystem, pc *actor.PID, graceful bool, stopped func() *messages.Stopped) {
	t.Helper()
	stop := system.Root.StopFuture
	if graceful {
		stop = system.Root.PoisonFuture
	}
	require.NoError(t, stop(pc).Wait())
	s := stopped()
	require.Equal(t, graceful, s.Graceful, "%+v", s)
	if graceful {
		require.True(t, s.Flushed, "%+v", s)
		require.Equal(t, wal.KafkaID(20), s.LastPersisted)
		require.True(t, s.Recovered, "an incarnation before the restart read the stored checkpoint")
	}
	_, err := GetState(ctx10s(t), system.Root, pc)
	require.ErrorIs(t, err, actor.ErrDeadLetter, "the pchannel is gone")
}

// A hard stop while a graceful one waits in its Stopping handler, for a
// flush or for the recovery read, behind a catalog that ignores its
// context, ends that wait at once: StopFuture returns within its own
// bound, not after the stop flush timeout, and Stopped says the stop
// ended hard. Before, the Stop waited behind the handler. The Stop may
// come while the handler waits, or be queued before it begins to wait
// (the cut then reached the persister before the flush did, and was
// lost); and a Stop posted after the Poison, while a message before the
// pill is handled, is a hard stop, not the Poison's.
func TestHardStopCutsAGracefulStopShort(t *testing.T) {
	for _, tc := range []struct {
		name       string
		load, save bool
		// when the Stop comes: while the handler waits, queued before it
		// waits, or before the pill is handed on.
		when string
	}{
		{"flushing", false, true, "waiting"},
		{"recovering", true, false, "waiting"},
		{"flushing, the stop queued first", false, true, "queued"},
		{"recovering, the stop queued first", true, false, "queued"},
		{"flushing, the stop before the pill", false, true, "before the pill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
				actor.WithDeadLetterThrottleInterval(time.Millisecond))
			defer system.Shutdown()
			cat := newStubborn(tc.load, tc.save)
			defer cat.unblock()
			stopped := make(chan *messages.Stopped, 1)
			sub := system.EventStream.Subscribe(func(ev any) {
				if s, ok := ev.(*messages.Stopped); ok {
					stopped <- s
				}
			})
			defer system.EventStream.Unsubscribe(sub)
			const flush = 20 * time.Second
			props, err := NewProps("p", wal.Kafka, cat, WithStopFlushTimeout(flush), WithSaveTimeout(time.Hour),
				WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
			require.NoError(t, err)
			// The middleware holds the message the Stop must come during
			// (Stopping, or a request queued before the pill) until
			// release, except when the Stop is to come while the handler
			// waits.
			held, release := make(chan struct{}), make(chan struct{})
			var hold any = &actor.Stopping{}
			if tc.when == "before the pill" {
				hold = &messages.GetState{}
			}
			props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
				return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
					if fmt.Sprintf("%T", env.Message) == fmt.Sprintf("%T", hold) {
						close(held)
						if tc.when != "waiting" {
							<-release
						}
					}
					next(c, env)
				}
			}))
			pid := system.Root.Spawn(props)
			within(t, "catalog call", cat.entered) // the recovery read, or the save of kafka:7
			if tc.when == "before the pill" {
				system.Root.Request(pid, &messages.GetState{})
			}
			poisoned := system.Root.PoisonFuture(pid)
			within(t, "graceful stop", held)
			began := time.Now()
			stop := system.Root.StopFuture(pid) // posted now, whatever the handler does
			close(release)
			require.NoError(t, stop.Wait())
			took := time.Since(began)
			require.Less(t, took, flush/4, "the hard stop waited for the graceful one")
			// The Stop's watch came while the actor stopped, which
			// protoactor answers at once; it is answered once the actor
			// is gone: Stopped is published, and the name is free.
			var s *messages.Stopped
			select {
			case s = <-stopped:
			default:
				t.Fatalf("StopFuture returned after %v, before the pchannel stopped", took)
			}
			_, err = system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), pid.Id)
			require.NoError(t, err, "the name is still taken")
			require.NoError(t, poisoned.Wait())
			require.False(t, s.Graceful, "%+v", s)
			require.False(t, s.Flushed, "%+v", s)
			require.ErrorIs(t, s.Reason, messages.ErrHardStop)
			require.Equal(t, wal.KafkaID(7), s.Dropped)
		})
	}
}

// watcherActor watches or stops watching a pid on request, and answers
// whether it was told Terminated.
type watcherActor struct{ terminated chan struct{} }

type (
	watchIt   struct{ pid *actor.PID }
	unwatchIt struct{ pid *actor.PID }
	toldYet   struct{}
)

func (w *watcherActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case watchIt:
		c.Watch(m.pid)
		c.Respond(true)
	case unwatchIt:
		c.Unwatch(m.pid)
		c.Respond(true)
	case *actor.Terminated:
		close(w.terminated)
	case toldYet:
		select {
		case <-w.terminated:
			c.Respond(true)
		default:
			c.Respond(false)
		}
	}
}

// A watch that comes while the pchannel stops is answered once it is
// gone, as one from before the stop is: protoactor answered it at once,
// and the persister was still joining a save that ignores its context.
// A watcher that stops watching meanwhile is told nothing.
func TestWatchDuringAStopIsAnsweredOnceGone(t *testing.T) {
	system := quietSystem(t)
	stopped := make(chan *messages.Stopped, 1)
	sub := system.EventStream.Subscribe(func(ev any) {
		if s, ok := ev.(*messages.Stopped); ok {
			stopped <- s
		}
	})
	defer system.EventStream.Unsubscribe(sub)
	cat := newStubborn(false, true)
	defer cat.unblock()
	props, err := NewProps("p", wal.Kafka, cat, WithStopFlushTimeout(20*time.Second), WithSaveTimeout(time.Hour),
		WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(7)}))
	require.NoError(t, err)
	// The Stopping handler is held until the watches are queued behind it.
	held, release := make(chan struct{}), make(chan struct{})
	props.Configure(actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*actor.Stopping); ok {
				close(held)
				<-release
			}
			next(c, env)
		}
	}))
	pid := system.Root.Spawn(props)
	within(t, "save", cat.entered) // of kafka:7, which never returns
	poisoned := system.Root.PoisonFuture(pid)
	within(t, "graceful stop", held)
	ask := func(w *actor.PID, msg any) any {
		t.Helper()
		res, err := system.Root.RequestFuture(w, msg, 10*time.Second).Result()
		require.NoError(t, err)
		return res
	}
	stays := &watcherActor{terminated: make(chan struct{})}
	leaves := &watcherActor{terminated: make(chan struct{})}
	stayer := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stays }))
	leaver := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return leaves }))
	ask(leaver, watchIt{pid})
	ask(stayer, watchIt{pid})
	ask(leaver, unwatchIt{pid})
	stop := system.Root.StopFuture(pid) // cuts the flush short
	close(release)

	within(t, "Terminated", stays.terminated)
	select {
	case s := <-stopped:
		require.ErrorIs(t, s.Reason, messages.ErrHardStop)
	default:
		t.Fatal("the watcher was told before the pchannel stopped")
	}
	// Told in the order they watched: the leaver would have been told by
	// now, and its system messages come before this request.
	require.Equal(t, false, ask(leaver, toldYet{}), "told though it stopped watching")
	require.NoError(t, stop.Wait())
	require.NoError(t, poisoned.Wait())
}

// within waits for c, and fails the test if it takes over 10 s: what is
// waited for, named in the failure, never came.
func within(t *testing.T, what string, c <-chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
	}
}

// A parent stopped or restarted by its own supervisor stops its children
// hard, after its Stopping or Restarting handler: Poison called there
// saves the pchannel's pending minimum first, as the README advises.
// Without it the child's stop is hard, and the save in flight is dropped.
func TestAParentPoisonsItsPChannelInItsStopHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		poison bool
		end    func(system *actor.ActorSystem, parent *actor.PID)
	}{
		{"poisoned, poisoning", true, func(system *actor.ActorSystem, parent *actor.PID) { system.Root.Poison(parent) }},
		{"restarted, poisoning", true, func(system *actor.ActorSystem, parent *actor.PID) { system.Root.Send(parent, "boom") }},
		{"poisoned, not poisoning", false, func(system *actor.ActorSystem, parent *actor.PID) { system.Root.Poison(parent) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				system := bubbleSystem(t)
				stopped := make(chan *messages.Stopped, 2)
				system.EventStream.Subscribe(func(ev any) {
					if s, ok := ev.(*messages.Stopped); ok {
						stopped <- s
					}
				})
				cat := faultinject.Wrap(persistence.NewMemory())
				props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
				require.NoError(t, err)
				children := make(chan *actor.PID, 2)
				poisoned := make(chan error, 2)
				parent := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
					switch c.Message() {
					case "boom":
						panic("parent bug")
					}
					switch c.Message().(type) {
					case *actor.Started:
						if len(c.Children()) == 0 {
							children <- c.Spawn(props)
						}
					case *actor.Stopping, *actor.Restarting:
						if !tc.poison {
							return
						}
						// All at once, as the package doc advises.
						var wg sync.WaitGroup
						for _, child := range c.Children() {
							wg.Go(func() {
								_, err := Poison(context.Background(), c.ActorSystem(), child)
								poisoned <- err
							})
						}
						wg.Wait()
					}
				})) // the root's default strategy restarts it
				pc := <-children
				synctest.Wait() // recovered, and 10 saved
				cat.Script(faultinject.OpSave, faultinject.Latency(time.Second))
				system.Root.Send(pc, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(20)})
				synctest.Wait() // the save of 20 is in flight

				tc.end(system, parent)
				s := <-stopped
				if tc.poison {
					require.NoError(t, <-poisoned)
					require.True(t, s.Flushed)
					require.Equal(t, wal.KafkaID(20), s.LastPersisted)
				} else {
					require.False(t, s.Flushed)
					require.ErrorIs(t, s.Reason, messages.ErrHardStop)
					require.Equal(t, wal.KafkaID(10), s.LastPersisted)
				}
				stored, err := cat.Load(context.Background(), "p")
				require.NoError(t, err)
				require.Equal(t, s.LastPersisted, stored)
				require.NoError(t, system.Root.StopFuture(parent).Wait())
			})
		})
	}
}
