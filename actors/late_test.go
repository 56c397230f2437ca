package actors

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
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
				system := actor.NewActorSystem(actor.WithLoggerFactory(LoggerFactory(zap.NewNop())),
					actor.WithDeadLetterThrottleInterval(time.Millisecond))
				late := internalDeadLetters(system)
				cat := newStubborn(true, false)
				pid := spawnStuck(t, system, cat, WithSaveTimeout(100*time.Millisecond), WithStopFlushTimeout(200*time.Millisecond))
				require.NoError(t, tc.stop(system, pid))
				cat.unblock()
				synctest.Wait()
				require.Empty(t, late(), "lowwater's own messages published as dead letters")
				system.Shutdown()
				time.Sleep(3 * poolIdleFor) // the bubble's clock: the pool sheds its idle workers
			})
		})
	}
}

// internalDeadLetters records the dead letters system publishes whose
// message is of a type of this package's.
func internalDeadLetters(system *actor.ActorSystem) func() []string {
	pkg := reflect.TypeFor[pchannel]().PkgPath()
	var mu sync.Mutex
	var got []string
	system.EventStream.Subscribe(func(ev any) {
		d, ok := ev.(*actor.DeadLetterEvent)
		if !ok || d.Message == nil {
			return
		}
		ty := reflect.TypeOf(d.Message)
		if ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		if ty.PkgPath() == pkg {
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
