package invariants

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// faultKind mirrors the faultinject faults the tests script.
type faultKind int

const (
	fPass faultKind = iota
	fError
	fLostReply
	fLatency
	fHang
	fPanic
	fStoredAhead
	fDown // not scriptable: an outage (SetDown) failed the call
	// fStubborn ignores its context: it returns errStubborn after delay
	// whatever the deadline or a cancel, without touching the store, as a
	// third-party catalog might. The probe applies it itself.
	fStubborn
)

// errStubborn is what a stubborn call returns, late.
var errStubborn = fmt.Errorf("stubborn catalog ignored its context: %w", faultinject.ErrInjected)

func (k faultKind) String() string {
	return [...]string{"pass", "error", "lost reply", "latency", "hang", "panic", "stored ahead", "down", "stubborn"}[k]
}

// fault is one scripted fault; delay is for fLatency, stored for
// fStoredAhead.
type fault struct {
	kind   faultKind
	delay  time.Duration
	stored wal.MessageID
}

func (f fault) String() string {
	if f.kind == fLatency || f.kind == fStubborn {
		return fmt.Sprintf("%s(%v)", f.kind, f.delay)
	}
	return f.kind.String()
}

func (f fault) inject() faultinject.Fault {
	switch f.kind {
	case fError:
		return faultinject.Error()
	case fLostReply:
		return faultinject.LostReply()
	case fLatency:
		return faultinject.Latency(f.delay)
	case fHang:
		return faultinject.Hang()
	case fPanic:
		return faultinject.Panic()
	case fStoredAhead:
		return faultinject.StoredAhead(f.stored)
	default:
		return faultinject.Pass()
	}
}

// call is one catalog call the actor made, as the probe saw it.
type call struct {
	op          faultinject.Op
	incarnation int
	value       wal.MessageID // Save's argument
	fault       fault         // what the faultinject layer did to it
	start, end  time.Time
	returned    bool
	loaded      wal.MessageID // Load's result
	err         error
	panicked    any
}

func (c *call) String() string {
	return fmt.Sprintf("%s(%s) [%s] @%v..%v err=%v panic=%v", c.op, wal.String(c.value), c.fault, c.start.UnixMilli(), c.end.UnixMilli(), c.err, c.panicked)
}

// probe is the outermost catalog the actor talks to. It records every call
// with the fault the faultinject layer under it applied, keeping a mirror
// of faultinject's per-op scripts (pop order and the outage rule are the
// same), and counts saves in flight (I4).
type probe struct {
	fi *faultinject.Catalog

	mu    sync.Mutex
	calls []*call
	// inFlight counts the saves in flight of the current incarnation:
	// a stubborn save abandoned by a stopped one is no longer its own.
	inFlight    map[int]int
	maxInFlight int
	// stubbornUntil is when the last stubborn call returns.
	stubbornUntil time.Time
	incarnation   int
	down          bool
	queue         [2][]fault // OpLoad, OpSave
	// after, when set, runs after every call returns, on the caller's
	// goroutine and before the actor hears of the result.
	after func(c call)
}

var _ persistence.Catalog = (*probe)(nil)

func newProbe(fi *faultinject.Catalog) *probe { return &probe{fi: fi, inFlight: map[int]int{}} }

// script queues faults for op in the faultinject layer and in the mirror.
func (p *probe) script(op faultinject.Op, faults ...fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range faults {
		if f.kind != fStubborn {
			p.fi.Script(op, f.inject())
		}
	}
	p.queue[op] = append(p.queue[op], faults...)
}

func (p *probe) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fi.SetDown(down)
	p.down = down
}

func (p *probe) isDown() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down
}

func (p *probe) queued(op faultinject.Op) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue[op])
}

func (p *probe) setIncarnation(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.incarnation = n
}

// snapshot returns the calls from index from on (copies, so that a call
// still in flight is seen as it was).
func (p *probe) snapshot(from int) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]call, 0, len(p.calls)-from)
	for _, c := range p.calls[from:] {
		out = append(out, *c)
	}
	return out
}

func (p *probe) savesInFlight() (now, peak int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight[p.incarnation], p.maxInFlight
}

// stubbornEnd is when the last stubborn call returns.
func (p *probe) stubbornEnd() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stubbornUntil
}

func (p *probe) begin(op faultinject.Op, v wal.MessageID) *call {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &call{op: op, incarnation: p.incarnation, value: v, start: time.Now()}
	switch {
	case p.down:
		c.fault = fault{kind: fDown}
	case len(p.queue[op]) > 0:
		c.fault = p.queue[op][0]
		p.queue[op] = p.queue[op][1:]
	}
	if op == faultinject.OpSave {
		p.inFlight[c.incarnation]++
		p.maxInFlight = max(p.maxInFlight, p.inFlight[c.incarnation])
	}
	if end := c.start.Add(c.fault.delay); c.fault.kind == fStubborn && end.After(p.stubbornUntil) {
		p.stubbornUntil = end
	}
	p.calls = append(p.calls, c)
	return c
}

func (p *probe) finish(c *call, loaded wal.MessageID, err error, panicked any) {
	p.mu.Lock()
	c.end, c.returned, c.loaded, c.err, c.panicked = time.Now(), true, loaded, err, panicked
	if c.op == faultinject.OpSave {
		p.inFlight[c.incarnation]--
	}
	after, snapshot := p.after, *c
	p.mu.Unlock()
	if after != nil {
		after(snapshot)
	}
}

// setAfter installs the after hook.
func (p *probe) setAfter(f func(c call)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.after = f
}

func (p *probe) Load(ctx context.Context, pchannel string) (id wal.MessageID, err error) {
	c := p.begin(faultinject.OpLoad, nil)
	defer func() {
		if r := recover(); r != nil {
			p.finish(c, nil, nil, r)
			panic(r)
		}
	}()
	if c.fault.kind == fStubborn {
		time.Sleep(c.fault.delay)
		id, err = nil, errStubborn
	} else {
		id, err = p.fi.Load(ctx, pchannel)
	}
	p.finish(c, id, err, nil)
	return id, err
}

func (p *probe) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) (err error) {
	c := p.begin(faultinject.OpSave, checkpoint)
	defer func() {
		if r := recover(); r != nil {
			p.finish(c, nil, nil, r)
			panic(r)
		}
	}()
	if c.fault.kind == fStubborn {
		time.Sleep(c.fault.delay)
		err = errStubborn
	} else {
		err = p.fi.Save(ctx, pchannel, checkpoint)
	}
	p.finish(c, nil, err, nil)
	return err
}

func (p *probe) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	return p.fi.LoadAll(ctx)
}

func (p *probe) Delete(ctx context.Context, pchannel string) error { return p.fi.Delete(ctx, pchannel) }

func (p *probe) Close() error { return p.fi.Close() }

// outcome classifies a returned call.
type outcome int

const (
	oOK outcome = iota
	oStoredAhead
	oInjected
	oDeadline
	oCanceled
	oPanic
	oOther
)

func (o outcome) String() string {
	return [...]string{"ok", "stored ahead", "injected", "deadline", "canceled", "panic", "other"}[o]
}

func classify(c *call) outcome {
	switch {
	case c.panicked != nil:
		return oPanic
	case c.err == nil:
		return oOK
	case errors.Is(c.err, persistence.ErrStoredAhead):
		return oStoredAhead
	case errors.Is(c.err, faultinject.ErrInjected):
		return oInjected
	case errors.Is(c.err, context.DeadlineExceeded):
		return oDeadline
	case errors.Is(c.err, context.Canceled):
		return oCanceled
	default:
		return oOther
	}
}
