package actors

import (
	"context"
	"fmt"
	"sync"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/messages"
)

// Poison stops a pchannel gracefully, as PoisonFuture does, and returns
// its Stopped event: whether the pending minimum was saved first
// (Flushed), and if not, what was left (Dropped) and why (Reason). A
// graceful stop ends within WithStopFlushTimeout plus 100 ms, whatever
// the catalog does; Poison waits until ctx is done, or
// DefaultRequestTimeout when ctx has no deadline, and then returns ctx's
// error (the stop goes on).
//
// A pchannel that is stopping already, or gone, gives GetState's error
// (actor.ErrDeadLetter), and nothing is sent; a nil ctx is an
// ErrNilContext, a nil system or PID an ErrNoPChannel. It must not be
// called from inside an actor's Receive.
func Poison(ctx context.Context, system *actor.ActorSystem, pchannel *actor.PID) (*messages.Stopped, error) {
	if ctx == nil {
		return nil, ErrNilContext
	}
	if system == nil || pchannel == nil {
		return nil, ErrNoPChannel
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRequestTimeout)
		defer cancel()
	}
	s, err := GetState(ctx, system.Root, pchannel)
	if err != nil {
		return nil, err
	}
	w := &stopWatch{pchannel: s.PChannel, terminated: make(chan *actor.Terminated, 1)}
	sub := system.EventStream.Subscribe(w.see)
	defer system.EventStream.Unsubscribe(sub)
	// Watched as PoisonFuture watches, by a process of Poison's own: the
	// Terminated comes once the actor has published its Stopped.
	registry := system.ProcessRegistry
	self, _ := registry.Add(w, "poison"+registry.NextId())
	defer registry.Remove(self)
	target, _ := registry.Get(pchannel)
	target.SendSystemMessage(pchannel, &actor.Watch{Watcher: self})
	system.Root.Poison(pchannel)

	name := shorten.Quoted(s.PChannel)
	select {
	case t := <-w.terminated:
		if ev := w.last(); ev != nil {
			return ev, nil
		}
		if t.Why == actor.TerminatedReason_NotFound {
			return nil, fmt.Errorf("lowwater: pchannel actor %s was gone before the poison came: %w", shorten.Quoted(pchannel.Id), actor.ErrDeadLetter)
		}
		return nil, fmt.Errorf("lowwater: pchannel %s stopped, and its Stopped event did not come: an EventStream subscriber before Poison's may have panicked on it", name)
	case <-ctx.Done():
		return nil, fmt.Errorf("lowwater: pchannel %s has not stopped yet: %w", name, ctx.Err())
	}
}

// stopWatch is Poison's subscriber and watcher: the latest Stopped of its
// pchannel, and the actor's Terminated.
type stopWatch struct {
	pchannel   string
	terminated chan *actor.Terminated

	mu      sync.Mutex
	stopped *messages.Stopped
}

func (w *stopWatch) see(ev any) {
	if s, ok := ev.(*messages.Stopped); ok && s.PChannel == w.pchannel {
		w.mu.Lock()
		w.stopped = s
		w.mu.Unlock()
	}
}

func (w *stopWatch) last() *messages.Stopped {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

func (w *stopWatch) SendSystemMessage(_ *actor.PID, message any) {
	if t, ok := message.(*actor.Terminated); ok {
		select {
		case w.terminated <- t:
		default:
		}
	}
}

func (*stopWatch) SendUserMessage(*actor.PID, any) {}
func (*stopWatch) Stop(*actor.PID)                 {}
