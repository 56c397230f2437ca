package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// joinGrace is how long ending a catalog call waits for its goroutine after
// cancelling it. A catalog that honours its context returns well within it;
// one that does not is abandoned (logged, counted in
// Counters.AbandonedCalls) and its late result ignored, so that no stop
// waits on third-party code longer than this.
const joinGrace = 100 * time.Millisecond

// call is one catalog call (Load or Save) running off the mailbox. Recovery
// and saves run theirs through it alike:
//
//   - the call is bounded by a deadline (the save timeout);
//   - a panic inside the catalog becomes an error, never a crash;
//   - its result comes back to the actor as a callDone tagged with seq, so
//     that a result of a call the actor no longer waits for is told apart
//     and ignored;
//   - end cancels it and joins its goroutine within joinGrace;
//   - wait lets a stop wait for it, up to a deadline, without the mailbox.
//
// A save is the hot path: the call is one allocation, its context included,
// and runs on a pooled worker. What every call of an actor shares is in
// its site, so that a call holds only its own.
type call struct {
	seq  uint64
	ctx  callContext
	site *callSite
	arg  wal.MessageID
	// started is set by whichever comes first, run or end: a call ended
	// before it ran never runs.
	started atomic.Bool
	// answered is set by the first outcome of a save started through a
	// SaveStarter: a catalog that tells twice is believed once.
	answered atomic.Bool
	// stage is where the call is (callQueued…): in which of the
	// catalog's methods, for the account of a call that overran its
	// deadline, was abandoned or ended its goroutine; and whether a
	// StartSave told its outcome before it returned.
	stage atomic.Int32

	mu       sync.Mutex
	finished bool          // guarded by mu
	done     chan struct{} // guarded by mu; made by the first waiter
	// result is written by the call's goroutine before finished is set.
	result callDone
}

// catalogCall is what a call runs, Load or Save; arg is the value to
// save, and a Save returns it. An interface, not a func: the persister is
// one, where a method value would be a closure apart from it, and with
// 10,000 pchannels reaching that closure was one more cache miss per save.
type catalogCall interface {
	callCatalog(ctx context.Context, arg wal.MessageID) (wal.MessageID, error)
}

// catalogFunc is a catalogCall made of a function: recovery's Load.
type catalogFunc func(ctx context.Context, arg wal.MessageID) (wal.MessageID, error)

func (f catalogFunc) callCatalog(ctx context.Context, arg wal.MessageID) (wal.MessageID, error) {
	return f(ctx, arg)
}

// callSite is what the calls of one actor share: whom they answer, what
// they run, and for how long at most.
type callSite struct {
	root    *actor.RootContext
	self    *actor.PID
	op      string // names the call in errors ("Load", "Save")
	fn      catalogCall
	timeout time.Duration
	// inbox, if set, is the mailbox of self: a result is delivered to it
	// directly, and the call's goroutine runs it if it is idle.
	inbox *mailbox
	// starter, if set, starts a save of pchannel without waiting for it
	// (the catalog's StartSave); the call falls back on fn when it
	// declines. Only with inbox. inFlight, if set, counts the saves it
	// started until they are answered.
	starter  persistence.SaveStarter
	pchannel string
	inFlight *atomic.Int64
}

// callDone carries the outcome of a catalog call to the actor that started
// it. value is what Load returned or what Save saved.
type callDone struct {
	seq     uint64
	value   wal.MessageID
	err     error
	latency time.Duration
}

// startCall runs the site's call of arg off the mailbox and sends its
// outcome to the site's actor.
func startCall(site *callSite, seq uint64, arg wal.MessageID) *call {
	k := newCall(site, seq, arg)
	poolOf(site.root.ActorSystem()).Go(k)
	return k
}

// newCall prepares a call for its caller to run: it is bounded by the
// site's timeout from now.
func newCall(site *callSite, seq uint64, arg wal.MessageID) *call {
	k := &call{seq: seq, site: site, arg: arg}
	k.ctx.began = time.Now()
	k.ctx.timeout = site.timeout
	return k
}

// ended is when the call returned, given its result: the time of the
// event that publishes a save's success, which reads the clock no second
// time.
func (k *call) ended(res *callDone) time.Time { return k.ctx.began.Add(res.latency) }

// The stages of a call.
const (
	callQueued     int32 = iota // not run yet
	callStarting                // in StartSave
	callToldWithin              // in StartSave, the save told already
	callStarted                 // StartSave returned: its done is awaited
	callCalling                 // in site.op (Save, or Load)
	callReturned                // out of the catalog: the outcome is known
)

func (k *call) run() task {
	if !k.started.CompareAndSwap(false, true) {
		return nil // ended before it ran
	}
	// When the catalog ends the goroutine (runtime.Goexit) in one of its
	// methods, only deferred calls run, and the call is answered from
	// here. Not once the catalog returned: a handler the result runs
	// (deliver) may end it too, and the mailbox answers for that.
	defer func() {
		switch k.stage.Load() {
		case callStarting, callToldWithin:
			k.exited("StartSave")
		case callCalling:
			k.exited(k.site.op)
		}
	}()
	return k.runCall()
}

// exited answers a call whose catalog ended the goroutine in its method
// in ("StartSave", or the call's own): the result is posted for the pool
// to run, a failure (ErrGoexit), unless StartSave told one first.
func (k *call) exited(in string) {
	err := &CatalogPanicError{Op: in, Value: ErrGoexit}
	if in == "StartSave" {
		toldWithin := !k.stage.CompareAndSwap(callStarting, callStarted)
		if toldWithin || k.answer(err) {
			k.finish()
			k.site.inbox.push(&k.result)
		}
		return
	}
	k.stage.Store(callReturned)
	k.ctx.cancel(context.Canceled)
	k.result = callDone{seq: k.seq, err: err, latency: time.Since(k.ctx.began)}
	k.finish()
	if k.site.inbox == nil {
		sendLate(k.site.root, k.site.self, &k.result)
		return
	}
	k.site.inbox.push(&k.result)
}

func (k *call) runCall() task {
	if k.site.starter != nil {
		k.stage.Store(callStarting)
		panicked, err := startGuarded(&k.ctx, k.site, k.arg, k.told)
		switch {
		case !k.stage.CompareAndSwap(callStarting, callStarted):
			// Told before StartSave returned: by the catalog's own
			// goroutine meanwhile, or from within StartSave, against its
			// contract. The first outcome, believed, and delivered only
			// now, so that the next save never finds this one still in
			// the catalog.
			k.stage.Store(callReturned)
			k.finish()
			return k.site.inbox.deliver(&k.result)
		case err == nil:
			return nil // told later, on the catalog's goroutine
		case panicked || !errors.Is(err, errors.ErrUnsupported):
			if !k.answer(err) {
				return nil // told meanwhile, on another goroutine, which delivers it
			}
			k.finish()
			return k.site.inbox.deliver(&k.result)
		case !k.answered.CompareAndSwap(false, true):
			// Declined, and told all the same: a catalog that breaks
			// the contract is believed the first time.
			return nil
		}
		// Declined: Save runs it, and a done that comes late is not
		// believed.
	}
	k.stage.Store(callCalling)
	v, err := guard(&k.ctx, k.site.op, k.site.fn, k.arg)
	k.stage.Store(callReturned)
	k.ctx.cancel(context.Canceled)
	k.result = callDone{seq: k.seq, value: v, err: err, latency: time.Since(k.ctx.began)}
	if k.site.inbox == nil {
		sendLate(k.site.root, k.site.self, &k.result)
		k.finish()
		return nil
	}
	// Finished first: the mailbox run that follows may end this very call.
	k.finish()
	return k.site.inbox.deliver(&k.result)
}

// told is the done of a save started through the catalog's StartSave. It
// runs on the catalog's goroutine, which the actor must not hold up (a
// subscriber of the events its result publishes may be slow), so the
// result is posted to the mailbox for the pool to run.
func (k *call) told(err error) {
	if !k.answer(err) {
		return // told before
	}
	if e := k.result.err; e != nil && errors.Is(e, errors.ErrUnsupported) {
		// A decline is StartSave's to return; told, it is a failure,
		// retried, and Save is never called.
		k.result.err = fmt.Errorf("%w (told through StartSave's done, where it fails the save: a catalog declines a save by StartSave's return)", e)
	}
	if k.stage.CompareAndSwap(callStarting, callToldWithin) {
		return // within StartSave, whose return delivers it
	}
	k.finish()
	k.site.inbox.push(&k.result)
}

// answer records the outcome of a started save, if it is the first, and
// reports whether it was. Its caller finishes the call once it is out of
// the catalog.
func (k *call) answer(err error) bool {
	if !k.answered.CompareAndSwap(false, true) {
		return false
	}
	k.ctx.cancel(context.Canceled)
	k.result = callDone{seq: k.seq, value: k.arg, err: checkCatalogError(err), latency: time.Since(k.ctx.began)}
	if k.site.inFlight != nil {
		k.site.inFlight.Add(-1)
	}
	return true
}

// startGuarded starts a save through the catalog's StartSave, turning a
// panic into an error, and reports which it was: a panic is a failed save
// even when its value wraps errors.ErrUnsupported. A catalog that panicked
// after it took done and tells later is not believed twice (answer).
func startGuarded(ctx context.Context, site *callSite, arg wal.MessageID, done func(error)) (panicked bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			panicked, err = true, &CatalogPanicError{Op: "StartSave", Value: checkPanicValue(r), Stack: debug.Stack()}
		}
	}()
	return false, checkCatalogError(site.starter.StartSave(ctx, site.pchannel, arg, done))
}

func (k *call) finish() {
	k.mu.Lock()
	k.finished = true
	if k.done != nil {
		close(k.done)
	}
	k.mu.Unlock()
}

// finishedChan is closed once the call returned.
func (k *call) finishedChan() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.done == nil {
		k.done = make(chan struct{})
		if k.finished {
			close(k.done)
		}
	}
	return k.done
}

// guard runs fn, turning a panic into an error.
func guard(ctx context.Context, op string, fn catalogCall, arg wal.MessageID) (v wal.MessageID, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, &CatalogPanicError{Op: op, Value: checkPanicValue(r), Stack: debug.Stack()}
		}
	}()
	v, err = fn.callCatalog(ctx, arg)
	return v, checkCatalogError(err)
}

// CatalogPanicError is the error of a catalog call that panicked: a failed
// save (PersistFailed) or a failed recovery read (RecoveryFailed), retried
// on the backoff like any other failure, whatever the panic's value.
// errors.Is(err, ErrCatalogPanicked) matches it, and a panic with an error
// value unwraps to that error too, but lowwater never takes that error
// for the catalog's answer: a panic with persistence.ErrClosed, ErrFenced
// or a *persistence.StoredAheadError is retried, where the error returned
// would stop the saves, stop the actor, or adopt the value named.
type CatalogPanicError struct {
	// Op is the catalog's method that panicked: "Load", "Save" or
	// "StartSave".
	Op string
	// Value is what the catalog panicked with; an error that cannot be
	// inspected safely is replaced (see ErrMalformedCatalogError).
	Value any
	// Stack is the stack of the goroutine that panicked, from where the
	// catalog panicked: for its author, in the log line of the failed
	// call. Nil for a Goexit, which leaves no such stack.
	Stack []byte
}

// overdueAfter is how long after its start a call that ignores its context
// is reported overdue: its timeout and the join grace, saturated, so that
// a timeout near the largest duration does not wrap to a negative one.
func overdueAfter(timeout time.Duration) time.Duration {
	if d := timeout + joinGrace; d > timeout {
		return d
	}
	return math.MaxInt64
}

// overdue tells whether the call is running joinGrace past its deadline:
// the catalog ignores its context. Before that, wait is how long is left;
// then err, wrapping ErrCatalogOverdue, if the call is still running (nil
// if it has returned: its result is on its way). The actor asks again
// after wait.
//
// The grace counts from when the call's context ended, not from its
// deadline: a process held past the deadline (stopped by SIGSTOP, a VM
// paused) ends the context only as it goes on, when the deadline's timer
// and the watchdog's fire together, and a paused node logged a catalog
// that honours its context as one that ignores it. A context not ended
// yet, its deadline past, is ended by the look, and the grace counts from
// there: a catalog that never asked for its Done (one that ignores it)
// is reported a grace later.
func (k *call) overdue() (wait time.Duration, err error) {
	timeout := k.ctx.timeout
	due := overdueAfter(timeout)
	if ended, ok := k.ctx.endedAfter(); ok {
		due = max(due, ended+joinGrace) // both under the call's age
	}
	if wait = due - time.Since(k.ctx.began); wait > 0 {
		return wait, nil
	}
	if _, done := k.joined(); done {
		return 0, nil
	}
	// From the context's end, not the deadline: for a catalog that never
	// asks for Done, the context ends at the watchdog's first look. What
	// becomes of the call (waited for; abandoned by a stop) is its
	// reporter's to say.
	return 0, fmt.Errorf("%w: %s %v after its context ended (its deadline: %v)", ErrCatalogOverdue, k.awaited(), joinGrace, timeout)
}

// method names the catalog's method the call runs in or waits on:
// StartSave until it declines the save, else site.op.
func (k *call) method() string {
	switch k.stage.Load() {
	case callQueued:
		if k.site.starter != nil {
			return "StartSave"
		}
	case callStarting, callToldWithin, callStarted:
		return "StartSave"
	}
	return k.site.op
}

// awaited says what the call waits for, in the catalog's method's name:
// a method to run or to return, or StartSave's done.
func (k *call) awaited() string {
	switch k.stage.Load() {
	case callQueued:
		return k.method() + " not yet run"
	case callStarted:
		return "StartSave's done not yet called"
	}
	return k.method() + " still running"
}

// ErrCatalogOverdue is the error of a PersistFailed published for a save
// still running past its deadline (WithSaveTimeout) and the grace after
// it: the catalog ignores its context. The save is still waited for, and
// the next attempt starts once it returns; its outcome is published then.
var ErrCatalogOverdue = errors.New("lowwater: catalog call overran its deadline")

// ErrGoexit is what a catalog call or a handler that ended its goroutine
// with runtime.Goexit (as t.FailNow does, in a test's fake catalog or
// subscriber) is taken to have panicked with: the CatalogPanicError's or
// the PChannelPanicError's Value. The call fails, and is retried; the
// actor fails, and its supervisor decides. Without it, the call's result,
// or the mailbox's next run, would never come.
var ErrGoexit = errors.New("lowwater: the goroutine was ended (runtime.Goexit)")

// ErrCatalogPanicked matches every CatalogPanicError.
var ErrCatalogPanicked = errors.New("lowwater: catalog panicked")

func (e *CatalogPanicError) Error() string {
	return fmt.Sprintf("lowwater: catalog panicked in %s: %s", e.Op, describe(e.Value))
}

// Unwrap gives ErrCatalogPanicked, and the panic's own error if it was one.
func (e *CatalogPanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrCatalogPanicked, err}
	}
	return []error{ErrCatalogPanicked}
}

// wait waits until the call returned or deadline passed, or cut or lost
// is closed, whichever comes first, and reports its result if it
// returned. The result is also on its way to the mailbox; the caller must
// then treat that message as stale.
func (k *call) wait(deadline time.Time, cut, lost <-chan struct{}) (callDone, bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-k.finishedChan():
		return k.result, true
	case <-t.C:
	case <-cut:
	case <-lost:
	}
	return callDone{}, false
}

// joined reports the call's result if it has returned (or was ended before
// it ran), without waiting.
func (k *call) joined() (callDone, bool) {
	if k == nil {
		return callDone{}, false
	}
	select {
	case <-k.finishedChan():
		return k.result, true
	default:
		return callDone{}, false
	}
}

// end cancels the call and joins its goroutine within joinGrace; a call
// still running then is abandoned: logged, counted, its result ignored.
// It reports whether the call never ran (it was ended first).
func (k *call) end(cfg *config) (never bool) {
	if k == nil {
		return false
	}
	k.ctx.cancel(context.Canceled)
	if k.started.CompareAndSwap(false, true) {
		k.result = callDone{seq: k.seq, err: context.Canceled}
		k.finish()
		return true
	}
	t := time.NewTimer(joinGrace)
	defer t.Stop()
	select {
	case <-k.finishedChan():
	case <-t.C:
		if cfg.counters != nil {
			cfg.counters.abandonedCalls.Add(1)
		}
		cfg.logger.Error("catalog ignored cancellation; abandoning the call", zap.String("op", k.method()),
			zap.String("state", k.awaited()), zap.Duration("waited", joinGrace))
	}
	return false
}

// callContext is a call's context: a deadline and a cancel, as
// context.WithTimeout gives, for less. Its Done channel and the timer that
// closes it at the deadline are made only if the catalog asks for Done;
// a catalog that only checks Err (bbolt) costs neither.
type callContext struct {
	began   time.Time
	timeout time.Duration

	mu    sync.Mutex
	err   error         // guarded by mu
	done  chan struct{} // guarded by mu
	timer *time.Timer   // guarded by mu
	// ended is how long after began err was set (overdue).
	ended time.Duration // guarded by mu
}

// endedAfter ends the context if its deadline has passed, and reports
// how long after the call began it ended, if it has.
func (c *callContext) endedAfter() (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.expiredLocked() {
		return 0, false
	}
	return c.ended, true
}

var _ context.Context = (*callContext)(nil)

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline(), true }

func (c *callContext) deadline() time.Time { return c.began.Add(c.timeout) }

func (c *callContext) Value(any) any { return nil }

func (c *callContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
			return c.done
		}
		if c.expiredLocked() {
			return c.done // closed by endLocked
		}
		c.timer = time.AfterFunc(time.Until(c.deadline()), func() { c.cancel(context.DeadlineExceeded) })
	}
	return c.done
}

func (c *callContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expiredLocked()
	return c.err
}

// expiredLocked ends the context if its deadline passed, and reports
// whether it has ended. It reads the monotonic clock alone (time.Since),
// not the wall clock as well: a catalog may ask on every call.
func (c *callContext) expiredLocked() bool {
	if c.err == nil && time.Since(c.began) >= c.timeout {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err != nil
}

func (c *callContext) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.endLocked(err)
	}
}

func (c *callContext) endLocked(err error) {
	c.err = err
	c.ended = time.Since(c.began)
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}
