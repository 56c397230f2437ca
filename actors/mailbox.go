package actors

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/lowwater/lowwater/messages"
)

// mailbox is the PChannel actor's mailbox. It keeps the contract of
// protoactor's default unbounded mailbox (system messages first; suspend
// and resume; turns of Throughput messages, others' tasks running between
// them; a panic escalated to the supervisor with the message that caused
// it; MessageBatch unpacked), and adds six things:
//
//  1. User messages go through a lock-free queue (mpsc): a sender never
//     waits for the mailbox goroutine or for another sender, and the two
//     sides share no counter. The default mailbox takes a mutex on both
//     sides of every message, which profiles showed to be most of a send.
//  2. It remembers that it handed a PoisonPill on (tookPoison): protoactor
//     handles the pill itself and the actor only sees Stopping, exactly as
//     for a hard Stop, so this is how the actor tells the two apart. A
//     flag of the mailbox's, not a message to the actor, which a receiver
//     middleware's panic on it would make the restarted actor forget.
//  3. When the queue runs empty, or after Throughput messages in a row, an
//     actor that asks for it (drainWatcher) is handed mailboxDrained, on
//     the mailbox goroutine like any message: it learns that the burst it
//     is in has been applied.
//  4. The hot messages go straight to the actor (directReceiver): a bare
//     UpdateCheckpoint to the pchannel, a save's result to the persister,
//     where protoactor's dispatch would do nothing for them.
//  5. A message that only protoactor or the parent may give the actor is
//     refused when anyone posts it (forged): see PostUserMessage. And no
//     user message reaches an actor before its Started (awaitsStart).
//  6. A Drop posted marks the update of its vchannel that each Sender of
//     the pchannel still holds (drops.go): the post is where the Drop
//     takes its place in its sender's order, and the Sender's buffer
//     would otherwise let the Drop overtake an update made before it.
type mailbox struct {
	user mpsc[any]

	sysMu sync.Mutex
	sys   []any // guarded by sysMu
	sysN  atomic.Int32

	running   atomic.Bool
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	// context is the invoker when it is an actor context (always, in
	// protoactor): its Actor is the current incarnation, asked whether it
	// wants mailboxDrained.
	context interface{ Actor() actor.Actor }
	// process is m.processMessages, bound once: a method value passed to
	// Schedule would allocate on every wake-up.
	process func()
	// after is a task the actor asked to run once it lets go of the
	// mailbox (runAfter); only the goroutine running the mailbox touches it.
	after task
	// pool runs the mailbox, when it belongs to an actor: its system's
	// (poolOf). Without one, the dispatcher does.
	pool *pool
	// root answers a request whose handler panicked (answerPanicked).
	root *actor.RootContext
	// inc is what the current incarnation takes part in, looked up once
	// per incarnation (learn: at registration, protoactor having made the
	// first one, and after each system message) rather than on every run:
	// the look-up reads the actor context, which with thousands of actors
	// is a cache miss per run, and the direct path otherwise never touches
	// it. Only the goroutine running the mailbox uses it, once registered.
	inc incarnation
	// direct allows directReceiver: the system records no per-message
	// metrics, and the actor has no middleware, that it would skip.
	direct bool
	// cut, while set, is a graceful stop waiting in a handler (armStopCut).
	cut atomic.Pointer[stopCut]
	// awaitsStart is set at registration for an actor's mailbox: no user
	// message is handed on until the Started that protoactor posts right
	// after (begun), since the actor is not made until then. A message
	// posted meanwhile, by a sender that knows the name, reached a
	// pchannel with no tracker. begun is the mailbox goroutine's alone.
	awaitsStart bool
	begun       bool
	// startPosted is set once Started is posted: until then, the system
	// messages queued wait too (popSystem), and give the mailbox no run.
	startPosted atomic.Bool
	// persister is set on a persister's mailbox: its parent hands it the
	// minimum straight (push), so a MinimumAdvanced posted is forged.
	persister bool
	// lateWatchers watched the actor while it stopped: protoactor would
	// tell them Terminated at once, before the stop ends (holdWatch).
	// Only the goroutine running the mailbox touches it.
	lateWatchers []*actor.PID
	// failure is why the actor last failed: a panic the mailbox
	// escalated, until the actor takes it as it restarts or stops
	// (takeFailure) or its supervisor resumes it. protoactor tells the
	// supervisor why, and the restarted or stopped actor nothing.
	// failureHeld is set once the mailbox is suspended for it: a resume
	// before then is not the supervisor's answer to it but the one that a
	// restart posts before the new incarnation's Started, on which it may
	// have failed. Only the goroutine running the mailbox touches them.
	failure     *PChannelPanicError
	failureHeld bool
	// poisoned is set once the PoisonPill is handed to protoactor, which
	// stops the actor for it: a Stop handled before, though posted after
	// the pill, is a hard one (tookPoison). Only the goroutine running
	// the mailbox touches it.
	poisoned bool
	// drops marks the updates of the pchannel's Senders that a Drop
	// overtakes (drops.go).
	drops senderDrops
}

// takeFailure returns why the actor failed, if it did since it was last
// resumed, and forgets it. Only the actor may call it, from a handler.
func (m *mailbox) takeFailure() *PChannelPanicError {
	r := m.failure
	m.failure, m.failureHeld = nil, false
	return r
}

// tookPoison reports whether the PoisonPill has been handed on: the Stop
// being handled is then the Poison's. Only the actor may call it, from a
// handler.
func (m *mailbox) tookPoison() bool { return m.poisoned }

// isPoison reports whether msg is a PoisonPill, bare or with a sender.
func isPoison(msg any) bool {
	switch x := msg.(type) {
	case *actor.PoisonPill:
		return true
	case *actor.MessageEnvelope:
		_, ok := x.Message.(*actor.PoisonPill)
		return ok
	}
	return false
}

// stopCut ends a graceful stop's bounded wait in a handler (a flush, a
// recovery read) when a hard stop comes: the Stop system message cannot
// be handled while the handler waits, so PostSystemMessage, on the
// stopper's goroutine, closes ch, once.
type stopCut struct {
	ch   chan struct{}
	once sync.Once
}

// cut closes ch, the first time only: a Stop may be posted twice (a
// parent's and the caller's).
func (c *stopCut) cut() { c.once.Do(func() { close(c.ch) }) }

// armStopCut returns a channel that a Stop posted from now on closes,
// until disarmStopCut. Only the actor may call it, from a handler.
func (m *mailbox) armStopCut() <-chan struct{} {
	c := &stopCut{ch: make(chan struct{})}
	m.cut.Store(c)
	// A Stop posted before, still queued behind the handler, cuts too.
	m.sysMu.Lock()
	queued := slices.ContainsFunc(m.sys, func(msg any) bool { _, ok := msg.(*actor.Stop); return ok })
	m.sysMu.Unlock()
	if queued {
		c.cut()
	}
	return c.ch
}

// disarmStopCut ends what armStopCut began: the wait is over.
func (m *mailbox) disarmStopCut() { m.cut.Store(nil) }

// drainWatcher is an actor that wants mailboxDrained now.
type drainWatcher interface{ wantsDrained() bool }

// mailboxDrained is handed to a drainWatcher by its mailbox, not queued.
type mailboxDrained struct{}

// NotInfluenceReceiveTimeout keeps mailboxDrained from resetting a receive
// timeout: it is not traffic.
func (mailboxDrained) NotInfluenceReceiveTimeout() {}

var _ actor.Mailbox = (*mailbox)(nil)

func newDrainingMailbox() actor.Mailbox { return newMailbox() }

func newMailbox() *mailbox {
	m := &mailbox{}
	m.user.init()
	m.process = m.processMessages
	// Held until RegisterHandlers: protoactor makes the actor's PID known
	// before it registers the handlers, and a message posted meanwhile
	// (by a sender that knows the name) would start a mailbox with no
	// dispatcher, panicking in the sender. It waits in the queue instead,
	// and then for the actor's Started (awaitsStart).
	m.running.Store(true)
	return m
}

// PostUserMessage queues msg, which anyone may have sent: a message only
// protoactor or the parent may give the actor is refused (forged), so that
// a hostile neighbour, or a parent actor that forwards whatever it gets to
// its children, cannot make it act on a stop or a start that never was.
func (m *mailbox) PostUserMessage(msg any) {
	urgent := false
	switch x := msg.(type) {
	case *messages.UpdateCheckpoint, *messages.UpdateBatch:
		// The hot path: nothing to unpack or announce.
	case *actor.PoisonPill:
		urgent = true
	case *actor.MessageEnvelope:
		urgent = true // a request, or a stop that someone waits for
		if m.forged(x.Message) {
			if x.Sender != nil {
				// Answered on the mailbox goroutine (run), which alone
				// may use what registration set.
				m.user.push(forgedRequest{x})
				m.scheduleAs(true)
			}
			return
		}
		if x.Sender != nil && !isPoison(x) && m.cut.Load() != nil {
			// The stop has begun and waits in the actor's Stopping
			// handler (a flush, a recovery read) for up to the stop
			// flush timeout: the actor takes no user message again, and
			// a request queued now would wait that long to be refused.
			// Once the cut is seen armed, what registration set is too.
			m.refuse(x)
			return
		}
		switch y := x.Message.(type) {
		case *messages.DropVChannel:
			m.drops.posting(y)
		case *messages.UpdateBatch:
			// A Sender's batch is the data plane, as a bare update is:
			// a worker of its own per batch, with a thousand pchannels
			// busy, started a goroutine per batch and cut the updates
			// per second through Senders by more than half. Anyone
			// else's is a request that someone waits for.
			urgent = !fromSender(x)
		case actor.MessageBatch:
			for _, z := range y.GetMessages() {
				m.PostUserMessage(z)
			}
		}
	case actor.MessageBatch:
		for _, z := range x.GetMessages() {
			m.PostUserMessage(z)
		}
	case *messages.DropVChannel:
		m.drops.posting(x)
	default:
		if m.forged(x) {
			return
		}
	}
	m.user.push(msg)
	m.scheduleAs(urgent)
}

// forged reports whether msg, posted as a user message, is one that never
// comes that way: protoactor hands an actor its lifecycle messages itself,
// and a pchannel hands its persister the minimum straight. Taken as real,
// a Started rebuilt the vchannels from those given at spawn, forgetting
// those added since; a Stopped or a Stopping left a pchannel that applied
// updates and never saved them, or answered nothing; a MinimumAdvanced
// made the persister save a checkpoint above the minimum.
func (m *mailbox) forged(msg any) bool {
	switch msg.(type) {
	case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		return true
	case *messages.MinimumAdvanced:
		return m.persister
	}
	return false
}

// forgedRequest is a forged message that someone asked for: the mailbox
// answers it ErrUnknownMessage, and the actor never sees it.
type forgedRequest struct{ env *actor.MessageEnvelope }

// fromSender reports whether env's reply goes to a Sender. An id is only
// a name, which anyone may take, but what rides on it is only whether the
// batch gets a worker of its own.
func fromSender(env *actor.MessageEnvelope) bool {
	return env.Sender != nil && strings.HasPrefix(env.Sender.Id, senderIDPrefix)
}

func (m *mailbox) push(msg any) {
	m.user.push(msg)
	m.scheduleAs(false)
}

func (m *mailbox) PostSystemMessage(msg any) {
	m.sysMu.Lock()
	m.sys = append(m.sys, msg)
	m.sysMu.Unlock()
	if _, ok := msg.(*actor.Started); ok {
		m.startPosted.Store(true)
	}
	// After the append: a cut armed meanwhile finds the Stop queued.
	if _, ok := msg.(*actor.Stop); ok {
		if c := m.cut.Load(); c != nil {
			c.cut()
		}
	}
	m.sysN.Add(1)
	m.scheduleAs(true)
}

// popSystem takes the next system message, or nil. Until the actor has
// handled its Started (awaitsStart), that one comes first, and nothing
// before it is posted: a Stop posted by name during the spawn would reach
// an actor not yet made. Only the mailbox goroutine may call it.
func (m *mailbox) popSystem() any {
	m.sysMu.Lock()
	defer m.sysMu.Unlock()
	if len(m.sys) == 0 {
		return nil
	}
	if !m.started() {
		i := slices.IndexFunc(m.sys, func(msg any) bool { _, ok := msg.(*actor.Started); return ok })
		if i < 0 {
			return nil
		}
		msg := m.sys[i]
		m.sys = slices.Delete(m.sys, i, i+1)
		return msg
	}
	msg := m.sys[0]
	m.sys[0] = nil
	m.sys = m.sys[1:]
	if len(m.sys) == 0 {
		m.sys = nil
	}
	return msg
}

func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.context, _ = invoker.(interface{ Actor() actor.Actor })
	if c, ok := invoker.(interface{ ActorSystem() *actor.ActorSystem }); ok {
		m.root = c.ActorSystem().Root
		m.pool = poolOf(c.ActorSystem())
		m.direct = !metered(c.ActorSystem()) && plainDispatch(invoker)
	}
	m.learn()
	// An actor's: its user messages wait for Started, which protoactor
	// posts next and which starts the mailbox. Otherwise (a test's
	// invoker), what was posted while held runs now.
	m.awaitsStart = m.root != nil
	m.running.Store(false)
	if m.sysN.Load() != 0 || !m.awaitsStart && m.user.ready() {
		m.scheduleAs(true)
	}
}

// started reports whether user messages may be handed on: the actor has
// handled its Started, or the mailbox waits for none. Only the mailbox
// goroutine may call it.
func (m *mailbox) started() bool { return m.begun || !m.awaitsStart }

func (m *mailbox) Start() {}

// UserMessageCount is an estimate, for protoactor's mailbox-length metric.
func (m *mailbox) UserMessageCount() int { return m.user.len() }

// scheduleAs starts the mailbox goroutine unless it runs. The load first
// spares a busy mailbox a compare-and-swap per message.
func (m *mailbox) scheduleAs(urgent bool) {
	if !m.running.Load() && m.running.CompareAndSwap(false, true) {
		m.start(urgent)
	}
}

// start runs the mailbox on another goroutine; the caller holds running.
// An urgent start (a system message, a request, a stop) gets a worker of
// its own rather than a place in the pool's queue: a GetState or a stop
// must not wait behind a burst of updates whose runs are long (see pool).
func (m *mailbox) start(urgent bool) {
	switch {
	case m.pool == nil:
		m.dispatcher.Schedule(m.process)
	case urgent:
		m.pool.GoNow(drainTask{m})
	default:
		m.pool.Go(drainTask{m})
	}
}

// drainTask runs a mailbox on the pool.
type drainTask struct{ m *mailbox }

func (d drainTask) run() task { return d.m.drain() }

// goTask runs t on another goroutine.
func (m *mailbox) goTask(t task) {
	if m.pool != nil {
		m.pool.Go(t)
		return
	}
	go runAll(t)
}

// processMessages runs the mailbox, and then what it asked to run after
// (runAfter), on a dispatcher's goroutine.
func (m *mailbox) processMessages() { runAll(m.drain()) }

// drain runs until nothing is left that it may take.
//
// Going idle races with senders: a sender publishes its message, then
// checks running; this goroutine clears running, then checks the one place
// the next message will appear (user.next, found while it still owned the
// queue). Atomics are sequentially consistent, so one of the two sees the
// other. A message behind that place needs no check: whoever publishes the
// place itself sees running cleared and starts the mailbox.
//
// A task the actor asked to run after (runAfter) is returned, for the
// caller to run once the mailbox is let go; if messages are waiting by
// then, another goroutine takes the mailbox first, so that a slow task (a
// catalog call) holds up no message.
func (m *mailbox) drain() task {
	for {
		turnOver, handedOff := m.run()
		if handedOff {
			return nil // another goroutine has the mailbox now
		}
		if turnOver {
			// Its turn is over, and it keeps running: it goes to the
			// back of the pool's queue, and this goroutine takes the
			// head, which is the mailbox again if none waits.
			if t := m.pool.requeue(drainTask{m}); t != (drainTask{m}) {
				return t
			}
			continue
		}
		next := m.user.next()
		after := m.after
		m.after = nil
		m.running.Store(false)
		more := m.sysN.Load() != 0 && (m.started() || m.startPosted.Load()) || (!m.suspended.Load() && m.started() && next.ready())
		if after != nil {
			if more && m.running.CompareAndSwap(false, true) {
				m.start(m.sysN.Load() != 0)
			}
			return after
		}
		if !more || !m.running.CompareAndSwap(false, true) {
			return nil
		}
	}
}

// run handles messages until none is left or the mailbox is suspended,
// or, on a pool, until its turn is over (Throughput messages in a row):
// it then reports true, to go to the back of the pool's queue (drain).
//
// On a pool it does not yield its goroutine as protoactor's mailbox does:
// that put it behind every goroutine ready to run, and with many
// producers sending to one pchannel it came back only once they had
// filled its queue, so that it drained them at the end on one core alone.
// Go preempts a run that goes on too long all the same.
//
// A handler that fails hands the mailbox, still held, on to another
// goroutine (handedOff), where the supervisor's answer is handled: it may
// have ended this one (runtime.Goexit, taken as a panic with ErrGoexit),
// or panicked while ending it, which no recover stops, and then only
// deferred calls still run here.
func (m *mailbox) run() (turnOver, handedOff bool) {
	var msg any
	returned := false
	defer func() {
		m.user.settle()
		if returned {
			return
		}
		r := recover()
		if r == nil {
			r = ErrGoexit
		}
		defer m.start(true)
		handedOff = true
		on := msg
		if m.inc.owner != nil && any(m.context.Actor()) != any(m.inc.owner) {
			// A restart (on a Restart, or on the Terminated of the
			// last child it waited for) made a new incarnation and
			// handed it its Started, on which it failed.
			on = &actor.Started{}
		}
		if isPoison(on) {
			// Spent on a panic (a receiver middleware's): protoactor
			// never stops the actor for it, and a Stop that comes
			// later is a hard one.
			m.poisoned = false
		}
		m.failure, m.failureHeld = panicOn(on, r), false
		m.answerPanicked(msg, m.failure)
		m.invoker.EscalateFailure(r, msg)
		// A restart makes the new incarnation and hands it its
		// Started within one system message: if that panicked, the
		// look-up after it (run) never came.
		m.learn()
	}()
	turnOver = m.loop(&msg)
	returned = true
	return turnOver, false
}

// loop is run's body: msg is the message being handled, for run's
// account of a failure.
func (m *mailbox) loop(msgp *any) (turnOver bool) {
	var msg any
	defer func() { *msgp = msg }()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if m.after != nil {
			return // let the mailbox go first (drain)
		}
		if i > t {
			i = 0
			m.user.settle()
			if m.pool != nil {
				return true
			}
			runtime.Gosched()
		}
		i++
		if m.sysN.Load() > 0 {
			if msg = m.popSystem(); msg != nil {
				m.sysN.Add(-1)
				switch msg.(type) {
				case *actor.SuspendMailbox:
					m.suspended.Store(true)
					m.failureHeld = m.failure != nil
				case *actor.ResumeMailbox:
					m.suspended.Store(false)
					if m.failureHeld {
						m.failure, m.failureHeld = nil, false
					}
				default:
					if m.holdWatch(msg) {
						continue
					}
					if _, ok := msg.(*actor.Started); ok {
						// Before it is handed on: should the actor panic
						// on it, protoactor restarts it and hands the new
						// incarnation its Started itself.
						m.begun = true
					}
					m.invoker.InvokeSystemMessage(msg)
					// A restart makes a new incarnation.
					m.learn()
					m.answerLateWatchers()
				}
				continue
			}
		}
		// A failed actor's mailbox is suspended until its supervisor
		// restarts it; one that stopped meanwhile takes no more, and
		// what waits in it is refused, not left unanswered.
		if m.suspended.Load() && !m.closed() || !m.started() {
			return
		}
		var ok bool
		if msg, ok = m.user.pop(); !ok {
			return
		}
		if f, ok := msg.(forgedRequest); ok && m.root != nil {
			sendLate(m.root, f.env.Sender, fmt.Errorf("%w: %T, which only protoactor or lowwater itself sends", messages.ErrUnknownMessage, f.env.Message))
			continue
		}
		if m.inc.direct == nil || !m.inc.direct.receiveDirect(msg) {
			if m.closed() {
				m.refuse(msg)
			} else {
				m.poisoned = m.poisoned || isPoison(msg)
				m.invoker.InvokeUserMessage(msg)
			}
		}
		if (i >= t || !m.user.ready()) && m.wantsDrained() {
			msg = mailboxDrained{}
			if m.inc.direct == nil || !m.inc.direct.receiveDirect(msg) {
				m.invoker.InvokeUserMessage(msg)
			}
		}
	}
}

// closer is an actor that says how far its stop has gone: past its
// Stopping handler (closing), it takes no more user messages (see refuse);
// past its Stopped (gone), protoactor has let go of it and of its name.
type closer interface {
	closing() bool
	gone() bool
}

// closed reports whether the current incarnation is past its Stopping
// handler.
func (m *mailbox) closed() bool { return m.inc.closer != nil && m.inc.closer.closing() }

// holdWatch keeps the watcher of a Watch that comes while the actor stops,
// and reports whether it did. protoactor tells such a watcher Terminated
// at once, while the stop may still wait for a child (a persister joining
// a save that ignores its context) for up to joinGrace: a StopFuture or
// PoisonFuture sent during a graceful stop returned before the actor was
// gone, its Stopped unpublished and its name still taken. The watcher is
// told once the actor is gone instead (answerLateWatchers). An Unwatch
// drops it, and goes on to protoactor all the same.
func (m *mailbox) holdWatch(msg any) bool {
	switch x := msg.(type) {
	case *actor.Watch:
		if m.closed() && !m.inc.closer.gone() {
			m.lateWatchers = append(m.lateWatchers, x.Watcher)
			return true
		}
	case *actor.Unwatch:
		m.lateWatchers = slices.DeleteFunc(m.lateWatchers, x.Watcher.Equal)
	}
	return false
}

// answerLateWatchers tells the watchers held by holdWatch that the actor
// is gone, once it is: after its Stopped, as protoactor tells its own.
func (m *mailbox) answerLateWatchers() {
	if len(m.lateWatchers) == 0 || m.inc.closer == nil || !m.inc.closer.gone() {
		return
	}
	self, registry := m.self(), m.root.ActorSystem().ProcessRegistry
	for _, w := range m.lateWatchers {
		if p, ok := registry.Get(w); ok { // a watcher gone is told nothing
			p.SendSystemMessage(w, &actor.Terminated{Who: self})
		}
	}
	m.lateWatchers = nil
}

// refuse answers a user message that came after the actor's stop began as
// protoactor answers one to a stopped actor: a request gets a
// DeadLetterResponse (unless its requester is gone: a future that timed
// out, a Sender closed), and the rest is dropped. protoactor would still
// hand it to the actor until the stop completes, and a panic there (in a
// receiver middleware, say) made protoactor restart the actor, losing
// the stop: no Stopped, and an actor that lived on. Late results and
// timers of the actor's own are dropped alike: nothing waits for them.
func (m *mailbox) refuse(msg any) {
	env, ok := msg.(*actor.MessageEnvelope)
	if !ok || env.Sender == nil || m.root == nil {
		return
	}
	sendLate(m.root, env.Sender, &actor.DeadLetterResponse{Target: m.self()})
}

// self is the actor's PID, nil for an invoker that is no actor context.
func (m *mailbox) self() *actor.PID {
	if c, ok := m.invoker.(interface{ Self() *actor.PID }); ok {
		return c.Self()
	}
	return nil
}

// directReceiver is an actor that takes the messages of its hot path
// itself, without protoactor's dispatch around them: the pchannel a bare
// UpdateCheckpoint, the persister a save's result or a new minimum. That
// dispatch (state and receive-timeout checks, a metrics look-up, the
// envelope, the type switch, the interface checks) was a fifth of an
// update; skipping it for a save's messages too, with the look-up of the
// incarnation once per incarnation (learn), cut a sixth of the CPU of a
// save on a catalog that costs nothing. It is bypassed only where it does
// nothing for such a message: the actor has no middleware or context
// decorator (which alone could set it a receive timeout: neither actor
// ever does), and the system has no metrics provider. An envelope (a
// message with a sender) is never taken: only protoactor can answer its
// sender.
type directReceiver interface {
	// receiveDirect handles msg as Receive would and reports true, or
	// declines: then protoactor dispatches it. An actor declines whatever
	// it does not know, and everything once it stops, where protoactor's
	// own handling of a stopped actor decides.
	receiveDirect(msg any) bool
}

// incarnation is the current incarnation as the mailbox serves it: each
// field is nil if the actor is not one, or (direct) may not be.
type incarnation struct {
	direct  directReceiver
	closer  closer
	watcher drainWatcher
	// owner is the incarnation itself, if it is one of lowwater's actors:
	// a panic after which the actor is another failed in the Started
	// that a restart handed the new one (see run).
	owner mailboxOwner
}

// learn looks the current incarnation up.
func (m *mailbox) learn() {
	m.inc = incarnation{}
	if m.context == nil {
		return
	}
	a := m.context.Actor()
	m.inc.closer, _ = a.(closer)
	m.inc.watcher, _ = a.(drainWatcher)
	if o, ok := a.(mailboxOwner); ok {
		m.inc.owner = o
		o.ownMailbox(m) // before any handler of this incarnation runs
	}
	if m.direct {
		m.inc.direct, _ = a.(directReceiver)
	}
}

// metered reports whether protoactor records per-message metrics in sys:
// its Metrics extension is enabled (a metrics provider was configured).
func metered(sys *actor.ActorSystem) bool {
	poolsMu.Lock() // the extension registry is not safe for concurrent use
	defer poolsMu.Unlock()
	m, ok := sys.Extensions.Get((*actor.Metrics)(nil).ExtensionID()).(*actor.Metrics)
	return ok && m.Enabled()
}

// plainDispatch reports whether protoactor hands a user message to the
// actor of the context ctx (its MessageInvoker, or the Context its actor
// is given) with nothing around it: no receiver middleware and no context
// decorator in its props (a caller may add them to the Props that NewProps
// returns). protoactor has no accessor for either, so it reads the
// unexported fields by name; should they be renamed, or ctx be a
// decorated context, it reports false: slower, never wrong.
func plainDispatch(ctx any) bool {
	v := reflect.ValueOf(ctx)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	props := v.Elem().FieldByName("props")
	if !props.IsValid() || props.Kind() != reflect.Pointer || props.IsNil() {
		return false
	}
	for _, name := range []string{"receiverMiddlewareChain", "contextDecoratorChain"} {
		f := props.Elem().FieldByName(name)
		if !f.IsValid() || f.Kind() != reflect.Func || !f.IsNil() {
			return false
		}
	}
	return true
}

// answerPanicked answers a request whose handler panicked with a
// PChannelPanicError. The actor restarts or stops, as its supervisor
// decides, and its answer would never come: a caller of Request would
// learn at its deadline, and a Sender, which has no deadline, would wait
// for good with its batch in flight.
//
// An actor that others wait for otherwise (the persister, which a flush
// waits for) is told too (crashReporter).
func (m *mailbox) answerPanicked(msg any, failure *PChannelPanicError) {
	if env, ok := msg.(*actor.MessageEnvelope); ok && env.Sender != nil && m.root != nil {
		sendLate(m.root, env.Sender, failure)
	}
	if m.context == nil {
		return
	}
	if w, ok := m.context.Actor().(crashReporter); ok {
		w.crashed(failure.Value)
	}
}

// crashReporter is an actor that someone may wait for, beside its
// supervisor: when it fails, it is told so on the failing goroutine, to
// tell them at once, since what they wait for will not come and the
// supervisor may be the one waiting.
type crashReporter interface{ crashed(reason any) }

// panicOn is the error of a panic with reason while handling msg, a
// request's own message if it is one.
func panicOn(msg, reason any) *PChannelPanicError {
	if env, ok := msg.(*actor.MessageEnvelope); ok {
		msg = env.Message
	}
	return &PChannelPanicError{Command: fmt.Sprintf("%T", msg), Value: reason, message: msg}
}

// runAfter runs t on the mailbox's goroutine once the mailbox has let go
// of it, right after the message being handled: a task the actor starts
// (a catalog call) then costs no hand-off to another goroutine, and the
// mailbox goes on without it, on another goroutine if messages come. Only
// the actor may call it, from a handler.
func (m *mailbox) runAfter(t task) {
	if m.after != nil {
		m.goTask(m.after)
	}
	m.after = t
}

// deliver posts msg and, if the mailbox is idle, runs it on the caller's
// goroutine rather than waking another: for a pooled goroutine that has
// nothing left to do (a catalog call that returned). It bypasses
// PostUserMessage, so msg must be one of the package's own messages.
func (m *mailbox) deliver(msg any) task {
	m.user.push(msg)
	return wake{m}.run()
}

// wake runs a mailbox on the caller's goroutine if it is idle: messages
// pushed to it without a schedule are then handled at once.
type wake struct{ m *mailbox }

func (w wake) run() task {
	if !w.m.running.Load() && w.m.running.CompareAndSwap(false, true) {
		return w.m.drain()
	}
	return nil
}

// mailboxOwner is an actor that wants to know its mailbox, to hand work
// to its goroutine (runAfter) and to have a graceful stop's wait cut short
// (armStopCut); each incarnation is told once, before its first handler.
type mailboxOwner interface{ ownMailbox(*mailbox) }

func (m *mailbox) wantsDrained() bool {
	w := m.inc.watcher
	return w != nil && !m.suspended.Load() && w.wantsDrained()
}
