package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// window is one outage of the catalog: down from start, for length, both
// counted from the start of the demo.
type window struct{ start, length time.Duration }

func (w window) end() time.Duration { return w.start + w.length }

func (w window) String() string { return fmt.Sprintf("%v+%v", w.start, w.length) }

// parseWindow reads START+LENGTH, e.g. 3s+2s.
func parseWindow(s string) (window, error) {
	a, b, ok := strings.Cut(s, "+")
	if !ok {
		return window{}, fmt.Errorf("outage %q: want START+LENGTH, e.g. 3s+2s", s)
	}
	start, err := time.ParseDuration(a)
	if err != nil {
		return window{}, fmt.Errorf("outage %q: start: %w", s, err)
	}
	length, err := time.ParseDuration(b)
	if err != nil {
		return window{}, fmt.Errorf("outage %q: length: %w", s, err)
	}
	if start < 0 || length <= 0 {
		return window{}, fmt.Errorf("outage %q: want START >= 0 and LENGTH > 0", s)
	}
	return window{start: start, length: length}, nil
}

// outageFlag is the repeatable --outage flag. Unset, the demo picks one
// window in the middle of the run; "none" asks for no outage.
type outageFlag struct {
	windows []window
	set     bool
}

func (o *outageFlag) String() string {
	if o == nil || !o.set {
		return ""
	}
	if len(o.windows) == 0 {
		return "none"
	}
	parts := make([]string, len(o.windows))
	for i, w := range o.windows {
		parts[i] = w.String()
	}
	return strings.Join(parts, ",")
}

func (o *outageFlag) Set(s string) error {
	o.set = true
	if s == "none" {
		o.windows = nil
		return nil
	}
	w, err := parseWindow(s)
	if err != nil {
		return err
	}
	o.windows = append(o.windows, w)
	return nil
}

// defaultOutage is the window the demo shows when --outage is not given:
// from 40 % to 60 % of the run, so that the chart has an outage to wait out.
func defaultOutage(d time.Duration) []window {
	return []window{{start: d * 4 / 10, length: d / 5}}
}

// checkWindows sorts the windows and rejects overlapping ones, and ones
// that start after the run: the catalog heals when the run ends.
func checkWindows(ws []window, duration time.Duration) error {
	slices.SortFunc(ws, func(a, b window) int { return int(a.start - b.start) })
	var errs []error
	for i, w := range ws {
		if w.start >= duration {
			errs = append(errs, fmt.Errorf("--outage %v starts after the run (--duration %v)", w, duration))
		}
		if i > 0 && w.start < ws[i-1].end() {
			errs = append(errs, fmt.Errorf("--outage %v overlaps %v", w, ws[i-1]))
		}
	}
	return errors.Join(errs...)
}

// faultyCatalog is the catalog the actors save to: the store behind the
// fault injector while the run lasts, the store alone once healed. It
// counts saves either way.
type faultyCatalog struct {
	store    persistence.Catalog
	injector *faultinject.Catalog
	healed   atomic.Bool

	saves, saveFailures atomic.Int64
}

var _ persistence.Catalog = (*faultyCatalog)(nil)

func newFaultyCatalog(s persistence.Catalog, cfg config) *faultyCatalog {
	return &faultyCatalog{store: s, injector: faultinject.Wrap(s,
		faultinject.WithSaveFailureRate(cfg.failRate),
		faultinject.WithLatency(cfg.latency),
		faultinject.WithSeed(cfg.seed),
	)}
}

func (c *faultyCatalog) current() persistence.Catalog {
	if c.healed.Load() {
		return c.store
	}
	return c.injector
}

// heal ends every fault for good: no outage, no failure, no latency.
func (c *faultyCatalog) heal() {
	c.healed.Store(true)
	c.injector.SetDown(false)
}

func (c *faultyCatalog) setDown(down bool) { c.injector.SetDown(down) }

func (c *faultyCatalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	return c.current().Load(ctx, pchannel)
}

func (c *faultyCatalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	err := c.current().Save(ctx, pchannel, checkpoint)
	c.saves.Add(1)
	if err != nil {
		c.saveFailures.Add(1)
	}
	return err
}

func (c *faultyCatalog) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	return c.current().LoadAll(ctx)
}

func (c *faultyCatalog) Delete(ctx context.Context, pchannel string) error {
	return c.current().Delete(ctx, pchannel)
}

// Close ends any fault in progress and closes the store.
func (c *faultyCatalog) Close() error { return c.injector.Close() }

// catalogOutage is the demo's own event, fed to the sinks with lowwater's:
// the catalog went down or came back. Its PChannel is empty: it is about
// every pchannel.
type catalogOutage struct {
	messages.Header
	index  int // 1-based
	down   bool
	length time.Duration
}

// span is an outage as it happened, in time since the demo began.
type span struct{ from, to time.Duration }

// outages takes the catalog down and up on the windows' schedule, with
// timers (no goroutine of its own), and records when it really did.
type outages struct {
	mu      sync.Mutex
	catalog *faultyCatalog
	began   time.Time
	windows []window
	timers  []*time.Timer
	spans   []span
	down    int // 1-based index of the window in progress, 0 when up
	ended   bool
	notify  func(*catalogOutage)
}

func startOutages(catalog *faultyCatalog, began time.Time, windows []window, notify func(*catalogOutage)) *outages {
	o := &outages{catalog: catalog, began: began, windows: windows, notify: notify}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, w := range windows {
		o.timers = append(o.timers,
			time.AfterFunc(time.Until(began.Add(w.start)), func() { o.set(i+1, true) }),
			time.AfterFunc(time.Until(began.Add(w.end())), func() { o.set(i+1, false) }))
	}
	return o
}

func (o *outages) set(index int, down bool) {
	o.mu.Lock()
	if o.ended || (!down && o.down != index) {
		o.mu.Unlock()
		return
	}
	now := time.Now()
	o.catalog.setDown(down)
	if down {
		o.down = index
		o.spans = append(o.spans, span{from: now.Sub(o.began), to: -1})
	} else {
		o.down = 0
		o.spans[len(o.spans)-1].to = now.Sub(o.began)
	}
	o.mu.Unlock()
	o.notify(&catalogOutage{Header: messages.Header{At: now}, index: index, down: down, length: o.windows[index-1].length})
}

// end cancels what has not happened yet, brings the catalog back up if it
// is down, and returns the outages as they happened.
func (o *outages) end() []span {
	o.mu.Lock()
	o.ended = true
	for _, t := range o.timers {
		t.Stop()
	}
	index := o.down
	now := time.Now()
	if index > 0 {
		o.catalog.setDown(false)
		o.spans[len(o.spans)-1].to = now.Sub(o.began)
		o.down = 0
	}
	spans := slices.Clone(o.spans)
	o.mu.Unlock()
	if index > 0 {
		o.notify(&catalogOutage{Header: messages.Header{At: now}, index: index, down: false, length: o.windows[index-1].length})
	}
	return spans
}
