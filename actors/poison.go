package actors

import (
	"context"
	"errors"
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
// The event is the one the actor sends Poison itself as it stops, not one
// read off the event stream by name: another actor of the same pchannel
// name stopping meanwhile, or a raw subscriber that panics on the event,
// does not change it. Only a stop that overtakes Poison's (a Stop sent
// meanwhile) is seen on the event stream alone, and if it is not seen
// there either, the error wraps ErrStoppedUnseen.
//
// The pill is sent at once, behind whatever the mailbox holds (a backlog
// of raw Sends, a subscriber that holds the actor): a context that ends
// first ends the wait, never the stop, and so does one done already, so
// that a shutdown whose deadline is spent still stops what it poisons
// (Poison then returns at once). That is for the PID Spawn returned
// (or ctx.Self()) of a pchannel spawned in system from NewProps's Props.
// Any other in system's registry is asked for its state first, and sent
// nothing if it does not answer in time: an actor that is no pchannel's,
// one on a mailbox of the caller's own (actor.WithMailbox), a PID made
// anew (actor.NewPID). A pchannel that is stopping already, or a PID not
// in the registry (gone), gives an error that wraps actor.ErrDeadLetter,
// and nothing is sent; a nil ctx is an ErrNilContext, a nil system or PID
// an ErrNoPChannel. From inside an actor's Receive, see "Waiting from
// inside an actor" in the package doc.
//
// Give it the system that spawned the pchannel. protoactor tells PIDs
// apart by address and id alone, and every system that is not remote has
// the same address: another system's PID whose id is taken in system
// ($1, a name) names system's actor there, which Poison stops.
func Poison(ctx context.Context, system *actor.ActorSystem, pchannel *actor.PID) (*messages.Stopped, error) {
	ctx, cancel, err := waitWithin(ctx, system, pchannel)
	if err != nil {
		return nil, err
	}
	defer cancel()
	var pchannelName string
	if l := directoryOf(system).lookup(system, pchannel); l != nil {
		if l.stopping.Load() {
			return nil, fmt.Errorf("lowwater: pchannel %s is stopping already: %w", shorten.Quoted(l.name), actor.ErrDeadLetter)
		}
		pchannelName = l.name
	} else {
		// Not one the directory knows: gone, on a mailbox of the
		// caller's own, or no pchannel's. Its answer says which; one
		// gone from the registry is not asked, which protoactor would
		// log as a dead letter.
		if _, ok := system.ProcessRegistry.Get(pchannel); !ok {
			return nil, fmt.Errorf("lowwater: no actor %s in this system: gone, or another system's: %w", shorten.Quoted(pchannel.Id), actor.ErrDeadLetter)
		}
		s, err := GetState(ctx, system.Root, pchannel)
		if err != nil {
			return nil, fmt.Errorf("%w; Poison sent it nothing", err)
		}
		pchannelName = s.PChannel
	}
	registry := system.ProcessRegistry
	target, ok := registry.Get(pchannel)
	if !ok { // a watch would be a dead letter, which protoactor logs
		return nil, fmt.Errorf("lowwater: pchannel actor %s was gone before the poison came: %w", shorten.Quoted(pchannel.Id), actor.ErrDeadLetter)
	}
	w := &stopWatch{pchannel: pchannelName, terminated: make(chan *actor.Terminated, 1), registry: registry}
	sub := system.EventStream.Subscribe(w.see)
	defer system.EventStream.Unsubscribe(sub)
	// Watched as PoisonFuture watches, by a process of Poison's own: the
	// Terminated comes once the actor has published its Stopped.
	self, _ := registry.Add(w, "poison"+registry.NextId())
	w.self = self
	defer w.leave()
	target.SendSystemMessage(pchannel, &actor.Watch{Watcher: self})
	// Queued before the poison, from the same sender: the actor takes it
	// first, unless another stop overtakes it.
	// Sent as late messages are: a stop that overtook Poison's may have
	// ended the actor since, and the Terminated then says so.
	sendLate(system.Root, pchannel, &tellStoppedTo{watcher: self})
	sendLate(system.Root, pchannel, &actor.PoisonPill{})

	name := shorten.Quoted(pchannelName)
	select {
	case t := <-w.terminated:
		if ev := w.last(); ev != nil {
			return ev, nil
		}
		if t.Why == actor.TerminatedReason_NotFound {
			return nil, fmt.Errorf("lowwater: pchannel actor %s was gone before the poison came: %w", shorten.Quoted(pchannel.Id), actor.ErrDeadLetter)
		}
		return nil, fmt.Errorf("lowwater: pchannel %s stopped before it took Poison's word (another stop overtook it?), "+
			"and its Stopped event did not reach Poison: an EventStream subscriber before Poison's may have panicked on it: %w", name, ErrStoppedUnseen)
	case <-ctx.Done():
		return nil, fmt.Errorf("lowwater: pchannel %s has not stopped yet, and its stop goes on: %w", name, ctx.Err())
	}
}

// ErrStoppedUnseen is returned by Poison when the pchannel stopped by
// another stop that overtook Poison's, and its Stopped event did not
// reach Poison's subscriber: what the stop saved is in the catalog.
var ErrStoppedUnseen = errors.New("lowwater: the pchannel stopped, and its Stopped event was not seen")

// stopWatch is Poison's watcher of the actor: the Stopped event it sends
// straight (tellStoppedTo), the actor's Terminated, and, for a stop that
// overtook Poison's, the last Stopped of the pchannel's name on the event
// stream.
type stopWatch struct {
	pchannel   string
	terminated chan *actor.Terminated
	registry   *actor.ProcessRegistryValue
	self       *actor.PID

	mu    sync.Mutex
	told  *messages.Stopped // by the actor itself
	named *messages.Stopped // on the event stream, by name
	// left is set once Poison returned, gone once the Terminated came:
	// the process leaves the registry when both are, so that a Poison
	// whose context ended first leaves no watcher of a dead PID for the
	// Terminated, which protoactor would log as a dead letter.
	left, gone bool
}

// leave marks Poison's return: the process leaves the registry now if
// the Terminated came, else with it.
func (w *stopWatch) leave() { w.end(true) }

// end marks one of the two ends, Poison's return (left) or the
// Terminated, and removes the process from the registry once both came,
// once. It reports whether both have.
func (w *stopWatch) end(left bool) (both bool) {
	w.mu.Lock()
	if left {
		w.left = true
	} else {
		w.gone = true
	}
	both = w.left && w.gone
	w.mu.Unlock()
	if both {
		w.registry.Remove(w.self)
	}
	return both
}

func (w *stopWatch) see(ev any) {
	if s, ok := ev.(*messages.Stopped); ok && s.PChannel == w.pchannel {
		w.mu.Lock()
		w.named = s
		w.mu.Unlock()
	}
}

// last is the actor's Stopped: the one it told, else the last of its name.
func (w *stopWatch) last() *messages.Stopped {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told != nil {
		return w.told
	}
	return w.named
}

// SendUserMessage takes the Stopped the actor sends, which comes before
// its Terminated: both are sent from the actor's goroutine, in order.
func (w *stopWatch) SendUserMessage(_ *actor.PID, message any) {
	if t, ok := actor.UnwrapEnvelopeMessage(message).(stoppedTold); ok {
		w.mu.Lock()
		w.told = t.ev
		w.mu.Unlock()
	}
}

func (w *stopWatch) SendSystemMessage(_ *actor.PID, message any) {
	if t, ok := message.(*actor.Terminated); ok {
		if w.end(false) {
			return // Poison has returned: no one reads it
		}
		select {
		case w.terminated <- t:
		default:
		}
	}
}

func (*stopWatch) Stop(*actor.PID) {}
