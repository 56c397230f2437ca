package actors

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// A stop leaves behind what its actor started, which may send it a message
// later: a catalog call that ignores its context and returns when it
// likes, the save watchdog, a retry's timer, the watch on the ownership.
// Such a message goes nowhere once the actor is gone: it is no
// DeadLetterEvent on the event stream, where a user watching for lost
// messages found lowwater's own plumbing after ordinary stops (a read's
// result, here). Each case runs in a synctest bubble, so that
// synctest.Wait tells when the late result has been sent.
func TestLateMessagesOfAStoppedActorAreNoDeadLetters(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*actor.ActorSystem, *actor.PID) error
	}{
		{"hard", func(system *actor.ActorSystem, pid *actor.PID) error { return system.Root.StopFuture(pid).Wait() }},
		{"graceful", func(system *actor.ActorSystem, pid *actor.PID) error { return system.Root.PoisonFuture(pid).Wait() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				system := bubbleSystem(t)
				late := internalDeadLetters(system)
				cat := newStubborn(true, false)
				pid := spawnStuck(t, system, cat, WithSaveTimeout(100*time.Millisecond), WithStopFlushTimeout(200*time.Millisecond))
				require.NoError(t, tc.stop(system, pid))
				cat.unblock()
				synctest.Wait()
				require.Empty(t, late(), "lowwater's own messages published as dead letters")
			})
		})
	}
}

// internalDeadLetters records the dead letters system publishes whose
// message is of a type of this package's.
func internalDeadLetters(system *actor.ActorSystem) func() []string {
	pkg := reflect.TypeFor[pchannel]().PkgPath()
	return deadLettersOf(system, func(msg any) bool {
		ty := reflect.TypeOf(msg)
		if ty != nil && ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		return ty != nil && ty.PkgPath() == pkg
	})
}

// deadLettersOf records the dead letters system publishes whose message
// keep takes (every one, for a nil keep), as "type to PID".
func deadLettersOf(system *actor.ActorSystem, keep func(msg any) bool) func() []string {
	var mu sync.Mutex
	var got []string
	system.EventStream.Subscribe(func(ev any) {
		if d, ok := ev.(*actor.DeadLetterEvent); ok && (keep == nil || keep(d.Message)) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%T to %s", d.Message, d.PID.GetId()))
			mu.Unlock()
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// A Sender made while its pchannel's graceful stop waits for a save has its
// first batch refused (the pchannel is gone to it) and its watch still
// owed a Terminated: its reply process stays until that comes. Removed at
// Close, it made the Terminated a dead letter, which protoactor logs.
func TestASenderMadeDuringAStopLeavesNoDeadLetter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		system := bubbleSystem(t)
		dead := deadLettersOf(system, nil)
		cat := faultinject.Wrap(persistence.NewMemory())
		props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
			WithStopFlushTimeout(time.Second))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		synctest.Wait() // recovered, and the first minimum saved
		cat.Script(faultinject.OpSave, faultinject.Hang())
		system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(6)})
		synctest.Wait() // the save hangs
		stopped := system.Root.PoisonFuture(pid)
		synctest.Wait() // the stop waits for it

		s, err := NewSender(system, pid)
		require.NoError(t, err)
		require.NoError(t, s.Update("a", wal.KafkaID(7)))
		require.ErrorIs(t, s.Close(context.Background()), actor.ErrDeadLetter)
		require.NoError(t, stopped.Wait())
		synctest.Wait()
		require.Empty(t, dead())
		require.False(t, registered(system, senderIDPrefix), "the Sender's reply process left")
	})
}

// A Sender that ships a batch once its pchannel has left the registry,
// and before the pchannel's Terminated has come, has it refused as gone,
// as protoactor's dead-letter process would refuse it, with no dead
// letter: a stop racing producers made one for each batch shipped into
// that gap. The pchannel's Stopped event, published between the two,
// ships one here.
func TestASenderShippingIntoAStopLeavesNoDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		name string
		// pidFor is the PID the Sender is given: Spawn's, which the
		// directory knows, or one made anew, which it does not.
		pidFor func(system *actor.ActorSystem, spawned *actor.PID) *actor.PID
	}{
		{"Spawn's PID", func(_ *actor.ActorSystem, spawned *actor.PID) *actor.PID { return spawned }},
		{"a PID made anew", func(system *actor.ActorSystem, spawned *actor.PID) *actor.PID { return system.NewLocalPID(spawned.Id) }},
	} {
		t.Run(tc.name, func(t *testing.T) { senderShippingIntoAStop(t, tc.pidFor) })
	}
}

func senderShippingIntoAStop(t *testing.T, pidFor func(*actor.ActorSystem, *actor.PID) *actor.PID) {
	synctest.Test(t, func(t *testing.T) {
		system := bubbleSystem(t)
		dead := deadLettersOf(system, nil)
		props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		s, err := NewSender(system, pidFor(system, pid))
		require.NoError(t, err)
		require.NoError(t, s.Update("a", wal.KafkaID(2)))
		require.NoError(t, s.Flush(context.Background())) // no batch in flight: the next Update ships
		var shipped error
		sub := system.EventStream.Subscribe(func(ev any) {
			if _, ok := ev.(*messages.Stopped); ok {
				_, inRegistry := system.ProcessRegistry.Get(pid)
				require.False(t, inRegistry, "the Stopped event came before the pchannel left the registry")
				shipped = s.Update("a", wal.KafkaID(3))
			}
		})
		defer system.EventStream.Unsubscribe(sub)
		require.NoError(t, system.Root.PoisonFuture(pid).Wait())
		synctest.Wait()
		require.NoError(t, shipped, "the Update that shipped the batch")
		err = s.Flush(context.Background())
		require.ErrorIs(t, err, ErrPChannelGone)
		require.ErrorContains(t, err, "1 update(s) sent and refused")
		// Close, after the error that counted it, still tells the loss.
		err = s.Close(context.Background())
		require.ErrorIs(t, err, ErrPChannelGone)
		require.ErrorContains(t, err, "1 update(s) it left unapplied, or not known to be applied, counted in an earlier error")
		require.Empty(t, dead())
		require.False(t, registered(system, senderIDPrefix), "the Sender's reply process left")
	})
}

// A pchannel that stopped with nothing of a Sender's unanswered leaves
// every later error saying so: Close tells it from a loss (above) though
// another call had the first error.
func TestASenderWhosePChannelStoppedIdleSaysNothingWasLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		system := bubbleSystem(t)
		props, err := NewProps("p", wal.Kafka, persistence.NewMemory(), WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		s, err := NewSender(system, pid)
		require.NoError(t, err)
		require.NoError(t, s.Update("a", wal.KafkaID(2)))
		require.NoError(t, s.Flush(context.Background()))
		require.NoError(t, system.Root.StopFuture(pid).Wait())
		synctest.Wait() // the Sender has the pchannel's Terminated
		const none = "lowwater: pchannel actor stopped: it left no update of this Sender's unanswered"
		err = s.Update("a", wal.KafkaID(3))
		require.ErrorIs(t, err, ErrPChannelGone)
		require.EqualError(t, err, none)
		err = s.Close(context.Background())
		require.ErrorIs(t, err, ErrPChannelGone)
		require.EqualError(t, err, none)
	})
}

// registered reports whether system's registry holds a process whose id
// begins with prefix.
func registered(system *actor.ActorSystem, prefix string) bool {
	for _, shard := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for id := range shard.Items() {
			if strings.HasPrefix(id, prefix) {
				return true
			}
		}
	}
	return false
}

// What lowwater sends on its own toward a requester or a pchannel that is
// gone is no dead letter either: the watch of a Sender made for a
// pchannel stopped already (the Sender learns it is gone at once), the
// answer to a request (a command, a GetState) whose caller gave up
// waiting, and the refusal of a request that waited behind a stop longer
// than its future did.
func TestNoDeadLetterTowardWhatIsGone(t *testing.T) {
	run := func(t *testing.T, body func(t *testing.T, system *actor.ActorSystem, cat *faultinject.Catalog)) {
		synctest.Test(t, func(t *testing.T) {
			system := bubbleSystem(t)
			dead := deadLettersOf(system, nil)
			body(t, system, faultinject.Wrap(persistence.NewMemory()))
			synctest.Wait()
			require.Empty(t, dead())
			require.False(t, registered(system, senderIDPrefix), "a Sender's reply process left")
		})
	}
	spawn := func(t *testing.T, system *actor.ActorSystem, cat *faultinject.Catalog) *actor.PID {
		props, err := NewProps("p", wal.Kafka, cat, WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1)}),
			WithStopFlushTimeout(time.Second))
		require.NoError(t, err)
		pid := system.Root.Spawn(props)
		synctest.Wait() // recovered, and the first minimum saved
		return pid
	}

	t.Run("a Sender made for a pchannel stopped", func(t *testing.T) {
		run(t, func(t *testing.T, system *actor.ActorSystem, cat *faultinject.Catalog) {
			pid := spawn(t, system, cat)
			require.NoError(t, system.Root.StopFuture(pid).Wait())
			s, err := NewSender(system, pid)
			require.NoError(t, err)
			require.ErrorIs(t, s.Update("a", wal.KafkaID(7)), ErrPChannelGone)
			require.ErrorIs(t, s.Close(context.Background()), ErrPChannelGone)
		})
	})
	t.Run("a reply to a request that gave up", func(t *testing.T) {
		run(t, func(t *testing.T, system *actor.ActorSystem, cat *faultinject.Catalog) {
			pid := spawn(t, system, cat)
			// A subscriber holds the pchannel past the request's deadline.
			system.EventStream.Subscribe(func(ev any) {
				if _, ok := ev.(*messages.VChannelAdded); ok {
					time.Sleep(time.Second)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			err := Request(ctx, system.Root, pid, &messages.AddVChannel{VChannel: "b", Checkpoint: wal.KafkaID(5)})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err = GetState(ctx, system.Root, pid)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			// Queued behind both: the stop comes once they were answered.
			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
		})
	})
	t.Run("a request whose future gave up behind a stop", func(t *testing.T) {
		run(t, func(t *testing.T, system *actor.ActorSystem, cat *faultinject.Catalog) {
			pid := spawn(t, system, cat)
			cat.Script(faultinject.OpSave, faultinject.Hang())
			system.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(6)})
			synctest.Wait() // the save hangs
			// Queued behind the pill, before the stop begins: refused
			// once the stop, which waits for the save, has ended.
			stopped := system.Root.PoisonFuture(pid)
			asked := system.Root.RequestFuture(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(7)}, 100*time.Millisecond)
			require.ErrorIs(t, asked.Wait(), actor.ErrTimeout)
			require.NoError(t, stopped.Wait())
		})
	})
}

// A Sender aimed at an actor in between (a relay) whose pchannel behind
// stopped has its batch refused, and no Terminated is coming: the relay
// lives on. Close takes its watch off the relay and leaves the registry,
// rather than wait for the relay's end.
func TestASenderThroughARelayToAPChannelStoppedLeavesAtClose(t *testing.T) {
	r := newSenderRig(t, kafkaAt(1, 0))
	g := &gate{target: r.pchannel}
	relay := r.system.Root.Spawn(g.props())
	r.system.Root.Send(relay, gateRelease{})
	require.NoError(t, r.system.Root.StopFuture(r.pchannel).Wait())
	r.stopped = true

	s, err := NewSender(r.system, relay)
	require.NoError(t, err)
	require.NoError(t, s.Update("v0", wal.KafkaID(1)))
	require.ErrorIs(t, s.Close(ctx10s(t)), ErrPChannelGone)
	require.False(t, registered(r.system, senderIDPrefix), "the Sender's reply process left at Close")
	require.NoError(t, r.system.Root.StopFuture(relay).Wait())
}

// bubbleSystem is an actor system for a test in a synctest bubble: quiet,
// with a dead-letter throttle that does not outlive the test, and shut
// down inside the bubble as the test ends, failed or not (a failure
// before the shutdown buried itself under the bubble's deadlock).
func bubbleSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	t.Cleanup(func() {
		system.Shutdown()
		time.Sleep(3 * poolIdleFor) // the bubble's clock: the pool sheds its idle workers
	})
	return system
}
