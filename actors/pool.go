package actors

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/extensions"
)

const (
	// poolIdleFor outlasts the pause between two rounds of saves, and twice
	// it is well inside the time goleak gives goroutines to end.
	poolIdleFor = 20 * time.Millisecond
	// poolMaxIdle is enough for a thousand pchannels saving together to
	// find their call goroutines again in the next round.
	poolMaxIdle = 1024
)

// pool runs the pchannel and persister mailboxes and the catalog calls of
// one actor system (poolOf).
//
// A fresh goroutine starts on a 2 KiB stack, and a mailbox run (protoactor's
// invoke chain, the tracker, the event stream) or a catalog call needs more:
// each one paid for growing and copying its stack, over a quarter of the
// CPU of a save in profiles. A worker keeps its grown stack from one task
// to the next.
//
// It wakes one worker at a time, as Go's scheduler wakes one spinning
// thread at a time: a task that comes while a worker is on its way (woken
// or spawned, and not yet running) is queued, and that worker, once it
// runs, sends for the next one if tasks are still queued. A worker that
// finishes a task takes the next queued one before it parks. So a burst
// (a thousand saves told by one commit) is run back to back by the
// workers running, while the next one is on its way, rather than a
// goroutine being woken, scheduled and parked per task: the wake-ups were
// a third of the CPU of a group-committed save.
//
// A task queued while a worker is on its way takes no lock: it goes into
// a lock-free queue (mpsc), which the workers take from under the lock.
// With the senders of 10,000 busy pchannels queueing a run each under
// the lock, the lock was often in Go's starvation mode, where every
// unlock hands the lock and the core to the next waiter: each queued run
// then cost a switch of goroutines, and the updates per second fell to
// about half, in some rounds and not others.
//
// The pool is never capped: a task may block (a catalog call; a graceful
// stop waits inside a handler for its persister, whose mailbox needs a
// worker of its own). A queued task never waits on busy workers alone,
// which may all be blocked: while any task is queued, a worker is on its
// way.
//
// A worker on its way needs a core to run on: when every core runs long
// tasks (a subscriber that computes for a while on each event), it
// arrives only when the scheduler preempts one of them, and the queue
// moves at that pace. A task that someone waits for (a request, a stop)
// never queues behind them (GoNow), and whoever it answers runs before
// its worker takes a queued one (awaited); a Sender's batches do, as the updates
// they carry would. Handing every queued task a worker of its own as soon
// as the workers lag would cut that wait for all tasks, but it halved the
// updates per second of 10,000 busy pchannels.
//
// It sheds idle workers instead: one idle longer than idleFor exits, and
// no more than maxIdle wait at a time, so that thousands of idle pchannels
// hold no goroutine, and none is left shortly after a system stops.
//
// One pool per actor system, not one per process: a system started in a
// testing/synctest bubble then has its workers, and their idle timer, in
// the bubble too, where a worker from outside could not run its tasks.
type pool struct {
	idleFor time.Duration
	maxIdle int

	mu sync.Mutex
	// idle is a stack: the most recently idle worker is taken first, so
	// that the least recently used ones age out.
	idle []*worker // guarded by mu
	// sweeping is set while the sweep timer is armed: every idleFor while
	// any worker is idle. epoch counts its rounds, a clock coarse enough
	// for idleness and cheaper than reading the time on every park.
	sweeping bool   // guarded by mu
	epoch    uint64 // guarded by mu
	sweep    *time.Timer
	// queue holds the tasks that came while a worker was on its way, in
	// the order they came (a task sent to a worker at once may pass one
	// whose Go is still under way); a worker takes the next one when it
	// finishes a task, before it parks. Anyone pushes; only the holder of
	// mu pops. coming counts the workers on their way: it grows under mu,
	// and shrinks without it, as each arrives (arrived). It sits before
	// queue, beside what the senders read, and away from the line every
	// pop writes.
	// Invariant, once every Go under way has returned, and the last
	// worker to arrive has looked at the queue: queue is empty or coming
	// > 0, so that a queued task never waits on busy workers alone: they
	// may all be blocked.
	coming atomic.Int64
	queue  mpsc[task]
	// live counts the workers, busy or idle.
	live atomic.Int64
}

type worker struct {
	// next carries the worker's next task, or nil: exit. Only one value is
	// ever sent while it waits, so a send never blocks.
	next chan task
	// now carries a task someone waits for (GoNow): unbuffered, a send
	// that does not wait succeeds only while the worker waits on it, so
	// that the task is surely taken at once.
	now chan task
	// epoch is the pool's epoch when the worker became idle, guarded by
	// the pool's mu.
	epoch uint64
}

func newPool(idleFor time.Duration, maxIdle int) *pool {
	p := &pool{idleFor: idleFor, maxIdle: maxIdle}
	p.queue.init()
	p.sweep = time.AfterFunc(time.Hour, p.evict)
	p.sweep.Stop()
	return p
}

// task is what a worker runs. A call is one as it is, with no closure to
// allocate. run returns what the same goroutine should run next, if
// anything: a chain of saves, each started by the result of the one
// before, then runs in a loop rather than ever deeper in the stack.
type task interface{ run() task }

// funcTask runs a func.
type funcTask func()

func (f funcTask) run() task { f(); return nil }

// runAll runs t and what it leads to.
func runAll(t task) {
	for t != nil {
		t = t.run()
	}
}

// Go runs f on a worker: one is woken for it, or started, unless one is
// on its way already; then f is queued, with no lock taken.
//
// A task queued just as the last worker on its way arrives is still
// seen: Go publishes it, then reads coming, and that worker lowers
// coming, then looks at the queue (arrived). Atomics are sequentially
// consistent, so either the worker sees the task, or Go sees no worker
// coming and sends one itself (enqueue).
func (p *pool) Go(f task) {
	if p.coming.Load() == 0 {
		p.mu.Lock()
		if p.coming.Load() == 0 {
			h := p.sendLocked(f, false)
			p.mu.Unlock()
			h.do(p)
			return
		}
		p.mu.Unlock()
	}
	p.enqueue(f)
}

// enqueue queues f for a worker on its way, which may have arrived since
// Go looked: with none coming, it sends a worker for the head of the
// queue itself, unless one is sent meanwhile, which, once it runs, does
// so (arrived).
func (p *pool) enqueue(f task) {
	p.queue.push(f)
	if p.coming.Load() > 0 {
		return
	}
	p.mu.Lock()
	if p.coming.Load() > 0 {
		p.mu.Unlock()
		return
	}
	p.sendNextLocked()
}

// sendNextLocked sends a worker for the head of the queue, if any, and
// unlocks mu.
func (p *pool) sendNextLocked() {
	f := p.dequeueLocked()
	if f == nil {
		p.mu.Unlock()
		return
	}
	h := p.sendLocked(f, false)
	p.mu.Unlock()
	h.do(p)
}

// GoNow runs f on a worker of its own, woken or started for it, whatever
// is on its way or queued: for a task that someone waits for.
func (p *pool) GoNow(f task) {
	p.mu.Lock()
	h := p.sendLocked(awaited{f}, true)
	p.mu.Unlock()
	h.do(p)
}

// awaited is a task someone waits for (GoNow): its run readies whoever
// waits (a request's caller, a stop's) to run next on its worker's core.
// Should the worker then find a task queued, it yields its core first
// (park): a queued run, maybe long, kept that one waiting for the
// scheduler to preempt it, 10 ms at the least. With none queued, the
// worker parks, which yields as well, and it is then waiting for the
// caller's next request.
type awaited struct{ task }

// handoff is a worker put on its way with a task, under mu: an idle one
// (w), or one to start (w nil). It is done once mu is unlocked, which is
// then held for no more than a few loads and stores.
type handoff struct {
	w *worker
	f task
}

// do hands the task over. A worker's channel holds one task, and an idle
// worker has none: the send does not block.
func (h handoff) do(p *pool) {
	if h.f == nil {
		return // taken already
	}
	if h.w != nil {
		h.w.next <- h.f
		return
	}
	p.live.Add(1)
	go p.work(&worker{next: make(chan task, 1), now: make(chan task)}, h.f)
}

// sendLocked puts a worker on its way with f: the idle worker that came
// last, which likely runs on a warm cache, or, for a task that someone
// waits for (soon), one that is surely waiting. A worker that has just
// made itself idle may not have blocked yet: preempted right before
// (likely on a busy core, after a long task), it would take a task only
// when its turn came again, behind every goroutine that is ready to run.
// So the task is offered on the worker's unbuffered channel (now), which
// takes it only if the worker waits on it, and readies it at once: first
// to the two that came last, then to the two idle longest; failing
// those, a new worker is started. (A task that waits for none was given
// to an idle worker since its last sweep only, else to a new one: a loop
// of requests started a goroutine per request, 1,024 at a time.)
func (p *pool) sendLocked(f task, soon bool) handoff {
	p.coming.Add(1)
	n := len(p.idle)
	switch {
	case n == 0:
	case !soon:
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		return handoff{w: w, f: f}
	default:
		for k, i := range [...]int{n - 1, n - 2, 0, 1} {
			if i < 0 || k >= 2 && i >= n-2 {
				continue // none there, or one of the two tried first
			}
			w := p.idle[i]
			select {
			case w.now <- f:
				copy(p.idle[i:], p.idle[i+1:])
				p.idle[n-1] = nil
				p.idle = p.idle[:n-1]
				return handoff{} // taken
			default:
			}
		}
	}
	return handoff{f: f}
}

// arrived is a worker's first step once it runs. If another worker is
// still on its way, that one sees to the queue, and this one takes no
// lock: when every core is busy, workers woken together would each wait
// for the lock's holder to get a core again before running their task.
// The last to arrive sends for the next worker if tasks are queued: it
// sees every task whose Go read coming before its decrement (see Go),
// unless one not yet published is ahead of it, whose Go then sends for
// it (dequeueLocked).
func (p *pool) arrived() {
	if p.coming.Add(-1) > 0 {
		return
	}
	p.mu.Lock()
	p.sendNextLocked()
}

func (p *pool) work(w *worker, f task) {
	defer p.live.Add(-1)
	p.arrived()
	for f != nil {
		_, yield := f.(awaited)
		runAll(f)
		f = p.park(w, yield)
	}
}

// dequeueLocked takes the next queued task, or nil. A task whose Go has
// claimed its place and not yet published it holds back those behind it:
// that Go, once it has, reads coming and sends a worker if none comes.
func (p *pool) dequeueLocked() task {
	f, ok := p.queue.pop()
	if !ok {
		p.queue.settle() // let go of the tasks taken
		return nil
	}
	return f
}

// requeue puts t, a task whose turn is over, at the back of the queue and
// returns the head, for the caller to run instead: t itself when nothing
// waits. If anything is queued, a worker is then on its way already, or
// the Go that queued the head is about to send one (see Go).
func (p *pool) requeue(t task) task {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.queue.ready() {
		return t
	}
	p.queue.push(t)
	return p.dequeueLocked()
}

// park returns the next queued task, if any, once it has yielded its core
// if told to (see awaited); otherwise it makes w idle and returns its next
// task, or nil when it should exit.
func (p *pool) park(w *worker, yield bool) task {
	p.mu.Lock()
	if f := p.dequeueLocked(); f != nil {
		p.mu.Unlock()
		if yield {
			runtime.Gosched()
		}
		return f
	}
	if len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		return nil
	}
	w.epoch = p.epoch
	p.idle = append(p.idle, w)
	if !p.sweeping {
		p.sweeping = true
		p.sweep.Reset(p.idleFor)
	}
	p.mu.Unlock()
	var f task
	select {
	case f = <-w.next:
	case f = <-w.now:
	}
	if f != nil {
		p.arrived()
	}
	return f
}

// evict ends the workers that were idle already at the previous sweep,
// so idle for idleFor at least and twice that at most, and sweeps again
// while any is left.
func (p *pool) evict() {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for n < len(p.idle) && p.idle[n].epoch != p.epoch {
		p.idle[n].next <- nil
		n++
	}
	p.epoch++
	k := copy(p.idle, p.idle[n:])
	clear(p.idle[k:])
	p.idle = p.idle[:k]
	if k == 0 {
		p.sweeping = false
		if cap(p.idle) > p.maxIdle/4 {
			p.idle = nil // let a burst's backing array go
		}
		return
	}
	p.sweep.Reset(p.idleFor)
}

// poolExtension keeps a system's pool among its protoactor extensions.
var poolExtension = extensions.NextExtensionID()

func (p *pool) ExtensionID() extensions.ExtensionID { return poolExtension }

// poolsMu guards the pool extension of every actor system: protoactor's
// extension registry is not safe for concurrent use.
var poolsMu sync.Mutex

// poolOf returns the pool of sys, made on first use. Callers keep it: the
// look-up takes a global lock.
func poolOf(sys *actor.ActorSystem) *pool {
	poolsMu.Lock()
	defer poolsMu.Unlock()
	if p, ok := sys.Extensions.Get(poolExtension).(*pool); ok {
		return p
	}
	p := newPool(poolIdleFor, poolMaxIdle)
	sys.Extensions.Register(p)
	return p
}
