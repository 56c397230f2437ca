// Package faultinject wraps a persistence.Catalog with the failures a real
// store shows in the field (errors, latency, hangs, panics, a writer that got
// ahead, outages), so that tests and the demo can prove lowwater survives
// them. Faults are chosen per call: an outage first, then a script, then
// random rates, so a test can be exact where it needs to be and random where
// it wants coverage.
package faultinject

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// ErrInjected is the error every injected failure wraps.
var ErrInjected = errors.New("faultinject: injected failure")

// InjectedError is the error an injected failure returns. It names the call
// so that a test reading a log can tell injected failures from real ones.
type InjectedError struct {
	Op       Op
	PChannel string
	// Reason says what injected it: "scripted", "lost reply", "down" or
	// "rate".
	Reason string
}

func (e *InjectedError) Error() string {
	return fmt.Sprintf("faultinject: injected failure (%s) of %s %q", e.Reason, e.Op, e.PChannel)
}

// Is makes errors.Is(err, ErrInjected) hold.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// InjectedPanic is the value a Panic fault panics with, so that a recover
// can tell an injected panic from a real bug.
type InjectedPanic struct {
	Op       Op
	PChannel string
}

func (p InjectedPanic) String() string {
	return fmt.Sprintf("faultinject: injected panic in %s %q", p.Op, p.PChannel)
}

// Op names a Catalog method that faults can be aimed at.
type Op int

// The operations faults can be aimed at; Close takes no faults.
const (
	OpLoad Op = iota
	OpSave
	OpLoadAll
	OpDelete
	numOps
)

func (o Op) String() string {
	switch o {
	case OpLoad:
		return "Load"
	case OpSave:
		return "Save"
	case OpLoadAll:
		return "LoadAll"
	case OpDelete:
		return "Delete"
	default:
		return fmt.Sprintf("Op(%d)", int(o))
	}
}

type faultKind int

const (
	kindPass faultKind = iota
	kindError
	kindLostReply
	kindLatency
	kindHang
	kindPanic
	kindStoredAhead
)

// Fault is what one call suffers. Build it with the functions below.
type Fault struct {
	kind   faultKind
	delay  time.Duration
	stored wal.MessageID
}

// Pass lets the call through untouched; it spaces out faults in a script.
func Pass() Fault { return Fault{kind: kindPass} }

// Error fails the call with an *InjectedError before it reaches the store.
func Error() Fault { return Fault{kind: kindError} }

// LostReply lets the call reach the store, then fails it with an
// *InjectedError as if the reply had been lost: a save commits but its
// writer does not know, the case that makes saves of an equal value succeed.
func LostReply() Fault { return Fault{kind: kindLostReply} }

// Latency delays the call by d, then lets it through. A context done during
// the delay fails the call with the context's error before it reaches the
// store.
func Latency(d time.Duration) Fault { return Fault{kind: kindLatency, delay: d} }

// Hang blocks the call until its context is done and returns the context's
// error, as a store behind a partition does. Close also ends it, with
// persistence.ErrClosed, so that no test leaks a goroutine.
func Hang() Fault { return Fault{kind: kindHang} }

// Panic panics with an InjectedPanic instead of calling the store.
func Panic() Fault { return Fault{kind: kindPanic} }

// StoredAhead fails the call with a *persistence.StoredAheadError carrying
// stored, as if another writer had saved it. It is meant for OpSave.
func StoredAhead(stored wal.MessageID) Fault { return Fault{kind: kindStoredAhead, stored: stored} }

// Option configures Wrap.
type Option interface{ apply(*options) }

type options struct {
	saveRate, loadRate float64
	latency            time.Duration
	seed               *int64
	onSave             func(pchannel string, v wal.MessageID, err error)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithSaveFailureRate fails each Save and Delete that no outage or script decided with
// an *InjectedError, with probability p (clamped to [0, 1]).
func WithSaveFailureRate(p float64) Option {
	return optionFunc(func(o *options) { o.saveRate = clamp(p) })
}

// WithLoadFailureRate does for Load and LoadAll what WithSaveFailureRate
// does for Save.
func WithLoadFailureRate(p float64) Option {
	return optionFunc(func(o *options) { o.loadRate = clamp(p) })
}

// WithLatency delays every call by d before its fault applies, honouring the
// call's context as Latency does.
func WithLatency(d time.Duration) Option {
	return optionFunc(func(o *options) { o.latency = d })
}

// WithSeed makes the random failures repeatable: the same seed and the same
// order of calls give the same failures. Without it the seed is random.
func WithSeed(seed int64) Option {
	return optionFunc(func(o *options) { o.seed = &seed })
}

// WithOnSave calls f after every Save that returns, with its arguments and
// result, injected or not. f runs on the caller's goroutine and must be safe
// for concurrent use.
func WithOnSave(f func(pchannel string, v wal.MessageID, err error)) Option {
	return optionFunc(func(o *options) { o.onSave = f })
}

func clamp(p float64) float64 {
	switch {
	case p > 1:
		return 1
	case p > 0:
		return p
	default: // also NaN
		return 0
	}
}

// Catalog is a persistence.Catalog that injects faults into the calls it
// passes to another. It is safe for concurrent use.
type Catalog struct {
	inner persistence.Catalog
	opts  options

	closeOnce sync.Once
	closed    chan struct{} // closed by Close, ends hangs and delays

	mu       sync.Mutex
	rng      *rand.Rand
	down     bool
	scripts  [numOps][]Fault
	calls    [numOps]int
	failures [numOps]int
}

var _ persistence.Catalog = (*Catalog)(nil)

// Wrap returns a Catalog that passes calls to inner, injecting the faults
// opts and later Script and SetDown ask for. Close closes inner.
func Wrap(inner persistence.Catalog, opts ...Option) *Catalog {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	if o.seed != nil {
		seed1, seed2 = uint64(*o.seed), 0
	}
	return &Catalog{
		inner:  inner,
		opts:   o,
		closed: make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed1, seed2)),
	}
}

// Script queues faults for the next calls of op, one per call, ahead of the
// random rates. op must be one of the Op constants.
func (c *Catalog) Script(op Op, faults ...Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scripts[op] = append(c.scripts[op], faults...)
}

// SetDown starts (true) or ends (false) an outage: while it lasts every call
// fails with an *InjectedError, and scripts wait for it to end.
func (c *Catalog) SetDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

// Calls returns how many calls of op were made.
func (c *Catalog) Calls(op Op) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

// Failures returns how many calls of op returned an error or panicked,
// whether the fault was injected or came from the wrapped store.
func (c *Catalog) Failures(op Op) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures[op]
}

// Load implements persistence.Catalog.
func (c *Catalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	var id wal.MessageID
	err := c.call(ctx, OpLoad, pchannel, nil, func() (err error) {
		id, err = c.inner.Load(ctx, pchannel)
		return err
	})
	if err != nil {
		return nil, err
	}
	return id, nil
}

// Save implements persistence.Catalog.
func (c *Catalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	err := c.call(ctx, OpSave, pchannel, checkpoint, func() error {
		return c.inner.Save(ctx, pchannel, checkpoint)
	})
	if c.opts.onSave != nil {
		c.opts.onSave(pchannel, checkpoint, err)
	}
	return err
}

// LoadAll implements persistence.Catalog.
func (c *Catalog) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	var all map[string]wal.MessageID
	err := c.call(ctx, OpLoadAll, "", nil, func() (err error) {
		all, err = c.inner.LoadAll(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return all, nil
}

// Delete implements persistence.Catalog.
func (c *Catalog) Delete(ctx context.Context, pchannel string) error {
	return c.call(ctx, OpDelete, pchannel, nil, func() error {
		return c.inner.Delete(ctx, pchannel)
	})
}

// Close ends every hang and delay in progress and closes the wrapped
// catalog. No fault applies to it.
func (c *Catalog) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.inner.Close()
}

// call counts the call, picks its fault, applies it and, unless the fault
// ends the call, runs inner.
func (c *Catalog) call(ctx context.Context, op Op, pchannel string, checkpoint wal.MessageID, inner func() error) (err error) {
	f, reason := c.pick(op)
	returned := false
	defer func() {
		if !returned || err != nil {
			c.mu.Lock()
			c.failures[op]++
			c.mu.Unlock()
		}
	}()
	err = c.apply(ctx, op, pchannel, checkpoint, f, reason, inner)
	returned = true
	return err
}

func (c *Catalog) pick(op Op) (Fault, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	if c.down {
		return Error(), "down"
	}
	if q := c.scripts[op]; len(q) > 0 {
		c.scripts[op] = q[1:]
		return q[0], "scripted"
	}
	rate := c.opts.loadRate
	if op == OpSave || op == OpDelete {
		rate = c.opts.saveRate // both write
	}
	if rate > 0 && c.rng.Float64() < rate {
		return Error(), "rate"
	}
	return Pass(), ""
}

func (c *Catalog) apply(ctx context.Context, op Op, pchannel string, checkpoint wal.MessageID, f Fault, reason string, inner func() error) error {
	if err := c.wait(ctx, c.opts.latency); err != nil {
		return err
	}
	switch f.kind {
	case kindError:
		return &InjectedError{Op: op, PChannel: pchannel, Reason: reason}
	case kindLostReply:
		_ = inner()
		return &InjectedError{Op: op, PChannel: pchannel, Reason: "lost reply"}
	case kindLatency:
		if err := c.wait(ctx, f.delay); err != nil {
			return err
		}
	case kindHang:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.closed:
			return persistence.ErrClosed
		}
	case kindPanic:
		panic(InjectedPanic{Op: op, PChannel: pchannel})
	case kindStoredAhead:
		return &persistence.StoredAheadError{PChannel: pchannel, Stored: f.stored, Attempted: checkpoint}
	}
	return inner()
}

// wait sleeps for d unless ctx is done or the catalog closes first: a
// delayed call must still honour its deadline, as a slow store's would.
func (c *Catalog) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.closed:
		return persistence.ErrClosed
	}
}
