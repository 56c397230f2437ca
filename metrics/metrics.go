package metrics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// DefaultLatencyBuckets are the upper bounds, in seconds, of the save
// latency histogram: from 100 µs (an embedded store) to 10 s (past the
// default save timeout).
var DefaultLatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// ErrInvalidOption is returned by New for a configuration that cannot work.
var ErrInvalidOption = errors.New("metrics: invalid option")

// ErrSubscribedTwice is returned by Subscribe for a subscription that would
// hand the collector events another of its subscriptions takes already:
// it would count them twice.
var ErrSubscribedTwice = errors.New("metrics: collector already subscribed to these events")

// Option configures a Collector.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	namespace string
	labelled  bool
	buckets   []float64
	now       func() time.Time
	errs      []error
}

// WithPChannelLabel adds a pchannel label to every series but
// events_dropped_total, which counts the subscription's losses. Use it only
// where the pchannels are few and fixed: each one multiplies the series.
func WithPChannelLabel() Option {
	return optionFunc(func(c *config) { c.labelled = true })
}

// WithNamespace replaces the "lowwater" prefix of every series; "" leaves
// none. It must be a name of the classic exposition format (letters,
// digits and underscores, not beginning with a digit): a series named
// otherwise comes out quoted, which older Prometheus servers and
// text-format parsers refuse.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) {
		if ns != "" && (!model.LegacyValidation.IsValidMetricName(ns) || strings.Contains(ns, ":")) {
			c.errs = append(c.errs, fmt.Errorf("namespace %q: want letters, digits and underscores, not beginning with a digit", ns))
			return
		}
		c.namespace = ns
	})
}

// WithLatencyBuckets sets the upper bounds, in seconds, of the save latency
// histogram; they must be above 0 and strictly increase. The default is
// DefaultLatencyBuckets.
func WithLatencyBuckets(b []float64) Option {
	return optionFunc(func(c *config) {
		switch {
		case len(b) == 0:
			c.errs = append(c.errs, errors.New("latency buckets: none given (without the option, DefaultLatencyBuckets)"))
			return
		case slices.ContainsFunc(b, math.IsNaN) || !slices.IsSorted(b) || len(slices.Compact(slices.Clone(b))) != len(b):
			c.errs = append(c.errs, fmt.Errorf("latency buckets %v: want strictly increasing bounds", b))
			return
		case b[0] <= 0:
			c.errs = append(c.errs, fmt.Errorf("latency buckets %v: a latency is above 0 s: want bounds above it", b))
			return
		}
		c.buckets = slices.Clone(b)
	})
}

// Bounded values of the reason labels.
var (
	rejectReasons = []string{"exists", "not_found", "rollback", "nil_checkpoint", "empty_vchannel", "wal_mismatch", "other"}
	failReasons   = []string{"timeout", "stored_ahead", "fenced", "closed", "canceled", "error"}
)

func rejectReason(err error) int {
	for i, target := range []error{messages.ErrVChannelExists, messages.ErrVChannelNotFound, messages.ErrCheckpointRollback,
		messages.ErrNilCheckpoint, messages.ErrEmptyVChannel, messages.ErrWALMismatch} {
		if errors.Is(err, target) {
			return i
		}
	}
	return len(rejectReasons) - 1
}

// failReason classes a save failure. A save still running past its
// deadline (actors.ErrCatalogOverdue) is a timeout, as one its catalog
// ended at the deadline is. A catalog's panic is an error whatever it
// panicked with, as the actors take it: a bug, not the catalog's answer.
func failReason(err error) int {
	switch {
	case errors.Is(err, actors.ErrCatalogOverdue):
		return 0
	case errors.Is(err, actors.ErrCatalogPanicked):
		return len(failReasons) - 1
	}
	for i, target := range []error{context.DeadlineExceeded, persistence.ErrStoredAhead, persistence.ErrFenced,
		persistence.ErrClosed, context.Canceled} {
		if errors.Is(err, target) {
			return i
		}
	}
	return len(failReasons) - 1
}

// Collector is a prometheus.Collector of lowwater's metrics for the
// pchannels of one node. Its methods are safe for concurrent use.
type Collector struct {
	cfg   config
	descs descs

	mu sync.Mutex
	// series holds the event counts: per pchannel with the label, else
	// one entry under "".
	series    map[string]*series
	pchannels map[string]*pchannelState
	// retiredUpdates, retiredAbandoned and retiredPanics keep the counts
	// of forgotten pchannels in the unlabelled totals, which must never go
	// down.
	retiredUpdates, retiredAbandoned, retiredPanics uint64
	// forgotten holds when each forgotten pchannel was forgotten. The
	// collector is fed asynchronously, so events of a pchannel's last run
	// may arrive after Forget: those stamped before it are ignored. The
	// entry goes when a Recovered stamped after it says the pchannel runs
	// here again, or forgetHorizon after the Forget; forgetOrder lists the
	// entries in the order of their Forget, so that the expired go oldest
	// first, at each Forget and each scrape.
	forgotten   map[string]time.Time
	forgetOrder []forgetting
	// The most each map has held since it was made: a Go map keeps its
	// largest size, which a wave of pchannels moved away would hold for
	// good, so each is made anew once it holds under a quarter of that
	// (shrink).
	forgottenPeak, pchannelsPeak, seriesPeak int
	// subs are the subscriptions of Subscribe not yet seen closed, and
	// closedDropped the drops of those seen closed and let go: a closed
	// one holds its actor system, which a node restarting in the process
	// would otherwise leave behind each time (pruneLocked).
	subs          []*events.Subscription
	closedDropped uint64
}

var _ prometheus.Collector = (*Collector)(nil)

// series is what the events counted for one label set.
type series struct {
	rejected                  [7]uint64 // by rejectReasons
	failures                  [6]uint64 // by failReasons
	added, dropped, advances  uint64
	addedBehind               uint64
	saves, recoveryFailures   uint64
	restarts, ownershipLosses uint64
	stalls                    uint64
	latency                   histogram
}

// pchannelState is what the collector knows of one pchannel right now.
type pchannelState struct {
	counters *actors.Counters
	// seen is set by the pchannel's first event: until then (its Counters
	// asked for, its NewProps perhaps failing after) it has no series.
	seen       bool
	live       bool // running, as its events say: not stopped
	recovering bool
	retrying   bool
	minimum    wal.MessageID
	persisted  wal.MessageID
	// lag tells since when the minimum has been above persisted.
	lag lagClock
	// heldSince is when the minimum last rose, or the pchannel began
	// running if later (messages.State.HeldSince): the age of the minimum
	// is computed from it at scrape time. stalled is true from a
	// MinimumStalled to its MinimumResumed (or Stopped, or a new run).
	heldSince time.Time
	stalled   bool
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	count  uint64
	sum    float64
}

func (h *histogram) observe(bounds []float64, v float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(bounds))
	}
	if i, _ := slices.BinarySearch(bounds, v); i < len(bounds) {
		h.counts[i]++
	}
	h.count++
	h.sum += v
}

func (h *histogram) cumulative(bounds []float64) map[float64]uint64 {
	m := make(map[float64]uint64, len(bounds))
	var acc uint64
	for i, b := range bounds {
		if h.counts != nil {
			acc += h.counts[i]
		}
		m[b] = acc
	}
	return m
}

type descs struct {
	updates, rejected, added, addedBehind, dropped, advances, saves, failures, latency,
	lag, inFlight, pchannels, recovering, retrying, recoveryFailures,
	restarts, ownershipLost, eventsDropped *prometheus.Desc
	abandoned, subscriberPanics, minimumAge, stalled, stalls *prometheus.Desc
}

// New returns a Collector; register it with a prometheus.Registerer.
func New(opts ...Option) (*Collector, error) {
	cfg := config{namespace: "lowwater", buckets: DefaultLatencyBuckets, now: time.Now}
	for _, o := range opts {
		if o == nil {
			cfg.errs = append(cfg.errs, errors.New("nil option"))
			continue
		}
		o.apply(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, errors.Join(cfg.errs...))
	}
	var base []string
	if cfg.labelled {
		base = []string{"pchannel"}
	}
	withReason := append(slices.Clone(base), "reason")
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(cfg.namespace, "", name), help, labels, nil)
	}
	c := &Collector{
		cfg:       cfg,
		series:    make(map[string]*series),
		pchannels: make(map[string]*pchannelState),
		forgotten: make(map[string]time.Time),
		descs: descs{
			updates:          d("updates_total", "Vchannel checkpoint updates accepted, an equal one included.", base),
			rejected:         d("commands_rejected_total", "Commands rejected, by reason; a rejected command changes nothing.", withReason),
			added:            d("vchannels_added_total", "Vchannels added.", base),
			addedBehind:      d("vchannels_added_behind_total", "Vchannels added below the persisted checkpoint, where a restart starts, past their records (AddedBehind events).", base),
			dropped:          d("vchannels_dropped_total", "Vchannels dropped.", base),
			advances:         d("minimum_advances_total", "Times the low-water mark strictly rose, a run of updates applied together counting once (MinimumAdvanced).", base),
			saves:            d("saves_total", "Checkpoints the catalog acknowledged: durable.", base),
			failures:         d("save_failures_total", "Failed save attempts, by reason; timeout includes an attempt still running past its deadline, counted then and not again when it returns.", withReason),
			latency:          d("save_latency_seconds", "Latency of successful catalog saves.", base),
			lag:              d("persist_lag_seconds", "How long ago the minimum rose past the persisted checkpoint: the age of the oldest rise the catalog does not hold; 0 when nothing waits (without the pchannel label: the largest).", base),
			inFlight:         d("saves_in_flight", "Catalog saves running now: one per pchannel at most, but for abandoned calls still running.", base),
			pchannels:        d("pchannels", "Pchannels running on this node.", base),
			recovering:       d("pchannels_recovering", "Pchannels still reading their stored checkpoint after a failed read.", base),
			retrying:         d("pchannels_retrying", "Pchannels whose last save failed and waits for its retry on the backoff.", base),
			recoveryFailures: d("recovery_failures_total", "Failed reads of a stored checkpoint, one per attempt (a read still running past its deadline too); each is retried with backoff.", base),
			restarts:         d("persister_restarts_total", "Persisters restarted after a panic.", base),
			ownershipLost:    d("ownership_lost_total", "Pchannels that lost their ownership and stopped.", base),
			eventsDropped:    d("events_dropped_total", "Events the collector's subscriptions dropped because it lagged: the event-fed metrics missed them.", nil),
			abandoned:        d("abandoned_calls_total", "Catalog calls a stop or restart abandoned because they ignored their cancellation (actors.Counters.AbandonedCalls).", base),
			subscriberPanics: d("subscriber_panics_total", "Events an event-stream subscriber panicked on: the subscribers after it missed them (actors.Counters.SubscriberPanics).", base),
			minimumAge:       d("minimum_age_seconds", "Seconds since the low-water mark last rose, or the pchannel began running if later; 0 when not running (without the pchannel label: the largest).", base),
			stalled:          d("pchannels_stalled", "Pchannels whose minimum has not risen for their stall-after duration (actors.WithStallAfter): a MinimumStalled not yet ended.", base),
			stalls:           d("minimum_stalls_total", "Stalls of the low-water mark (MinimumStalled events).", base),
		},
	}
	return c, nil
}

// Counters returns the counters to give the actor of pchannel with
// actors.WithCounters: the same ones for the same name, so that a
// respawned pchannel counts on. Asking for them counts no pchannel as
// running: its events do (Recovered, or RecoveryFailed while its catalog
// cannot be read), so that a NewProps that fails leaves no phantom behind.
//
// A name no pchannel can have (persistence.ValidatePChannel), which
// NewProps refuses, gets counters kept nowhere: no series of it could be
// exported.
func (c *Collector) Counters(pchannel string) *actors.Counters {
	if persistence.ValidatePChannel(pchannel) != nil {
		return new(actors.Counters)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pchannel(pchannel)
	if p.counters == nil {
		p.counters = new(actors.Counters)
	}
	return p.counters
}

// Subscribe feeds the collector with the lowwater events published on es,
// through a subscription of package events: off the actors' goroutines,
// never blocking them, dropping the oldest events if the collector lags (it
// does not: Observe is quick). opts may narrow it, e.g. to some pchannels.
// Close the subscription when done; its drops stay counted in
// events_dropped_total, and the collector lets it go, with the actor
// system it holds, at the next Subscribe or scrape.
//
// Subscribe each event stream once: a second subscription to a stream
// the collector is subscribed to already is refused (ErrSubscribedTwice),
// since it would count each event twice, unless their ForPChannels split
// the pchannels between them. With a WithFilter it cannot tell: filters
// that overlap count the events they share twice.
//
// A Collector counts pchannels by name: subscribed to two actor systems
// that run at once, it counts their pchannels of the same name as one.
// One system after another (a node's restart in the same process, closing
// the first subscription) is what it is for; for two at once, make a
// Collector each, and register both under a label of their own
// (prometheus.WrapRegistererWith), or each with a namespace of its own
// (WithNamespace): a registry refuses the same series twice, and the same
// name with a label and without.
func (c *Collector) Subscribe(es *eventstream.EventStream, opts ...events.Option) (*events.Subscription, error) {
	// Checked and kept before the subscription takes its first event, and
	// after any check of the caller's, which may still refuse it: a
	// Subscribe racing another, or the Close of an overlapping one (which
	// takes no event once begun), never counts an event twice.
	refuseOverlap := events.Admit(func(s *events.Subscription) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.pruneLocked()
		if slices.ContainsFunc(c.subs, s.Overlaps) {
			return fmt.Errorf("%w: close that subscription first, or split the pchannels between them (events.ForPChannels)", ErrSubscribedTwice)
		}
		c.subs = append(c.subs, s)
		return nil
	})
	return events.SubscribeFunc(es, c.Observe, append(slices.Clip(opts), refuseOverlap)...)
}

// pruneLocked lets go of the subscriptions closed since the last call,
// keeping their drops. It runs at each Subscribe and each scrape, so that
// at most the subscriptions closed since then are held.
func (c *Collector) pruneLocked() {
	live := c.subs[:0]
	for _, s := range c.subs {
		select {
		case <-s.Done():
			c.closedDropped += s.Dropped()
		default:
			live = append(live, s)
		}
	}
	clear(c.subs[len(live):])
	c.subs = live
}

// forgetHorizon is how long the collector remembers a pchannel it was
// told to Forget, unless the pchannel runs here again first: far longer
// than an event of its last run can take to reach the collector (Observe
// is quick, and a subscription holds DefaultBuffer events), and short
// enough that a node that moves pchannels of ever new names away holds
// only those of the last minute.
const forgetHorizon = time.Minute

// forgetting is one Forget, in the order of forgetOrder.
type forgetting struct {
	pchannel string
	at       time.Time
}

// Forget removes a pchannel that no longer runs on this node (it moved to
// another): its series disappear with the pchannel label, and its counts
// stay in the totals without it. Call it once the pchannel has stopped.
// Events stamped before the call that reach the collector after it (it is
// fed asynchronously) are ignored, so they cannot bring the pchannel back;
// it comes back with events stamped after the call, from a new run. The
// name is remembered for that until the pchannel runs here again, or for
// a minute: an event delayed longer would count again.
func (c *Collector) Forget(pchannel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.now()
	c.forgotten[pchannel] = now
	c.forgottenPeak = max(c.forgottenPeak, len(c.forgotten))
	c.forgetOrder = append(c.forgetOrder, forgetting{pchannel, now})
	c.expireForgottenLocked(now)
	p, ok := c.pchannels[pchannel]
	if !ok {
		return
	}
	if c.cfg.labelled {
		delete(c.series, pchannel)
		c.series = shrink(c.series, &c.seriesPeak)
	} else if p.counters != nil {
		c.retiredUpdates += p.counters.Updates()
		c.retiredAbandoned += p.counters.AbandonedCalls()
		c.retiredPanics += p.counters.SubscriberPanics()
	}
	delete(c.pchannels, pchannel)
	c.pchannels = shrink(c.pchannels, &c.pchannelsPeak)
}

// Observe counts one event. Subscribe calls it; call it yourself to feed
// the collector from elsewhere. An event of a name no pchannel can have
// (persistence.ValidatePChannel) is ignored: as a label it would fail
// every scrape.
func (c *Collector) Observe(ev messages.Event) {
	h := ev.EventHeader()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.late(h, ev) {
		return
	}
	p := c.pchannels[h.PChannel]
	if p == nil || !p.seen {
		if persistence.ValidatePChannel(h.PChannel) != nil {
			return
		}
		p = c.pchannel(h.PChannel)
		p.seen = true
		// A collector subscribed once the pchannel had recovered sees no
		// Recovered: any event but Stopped, the last, says it runs. Its
		// minimum is known from the next rise, and held since now.
		if _, stopped := ev.(*messages.Stopped); !stopped {
			p.live, p.heldSince = true, h.At
		}
	}
	s := c.seriesOf(h.PChannel)
	switch e := ev.(type) {
	case *messages.Recovered:
		p.live, p.recovering = true, false
		p.heldSince, p.stalled = h.At, false
		// The minimum as recovery ends: commands applied during it may
		// have raised it past the start, a save of it then due.
		p.persisted, p.minimum = nil, e.Minimum
		if p.minimum == nil {
			p.minimum = e.StartMessageID
		}
		if e.FromCatalog {
			p.persisted = e.StartMessageID
		}
		p.lag.reset()
		p.settle(h.At)
	case *messages.RecoveryFailed:
		p.live, p.recovering = true, true
		if !e.Late { // its attempt was counted when it overran
			s.recoveryFailures++
		}
	case *messages.VChannelAdded:
		s.added++
		switch {
		case p.minimum == nil:
			p.minimum = e.Checkpoint
			p.settle(h.At)
		case less(e.Checkpoint, p.minimum):
			p.minimum = e.Checkpoint
			p.lag.fell(e.Checkpoint)
			p.settle(h.At)
		}
	case *messages.AddedBehind:
		s.addedBehind += uint64(len(e.VChannels))
	case *messages.VChannelDropped:
		s.dropped++
	case *messages.CommandRejected:
		s.rejected[rejectReason(e.Err)]++
	case *messages.MinimumAdvanced:
		s.advances++
		p.minimum = e.To
		if less(p.persisted, e.To) {
			p.lag.rose(e.To, h.At)
		}
		p.settle(h.At)
		if h.At.After(p.heldSince) {
			p.heldSince = h.At
		}
	case *messages.MinimumStalled:
		s.stalls++
		p.stalled, p.heldSince = true, e.Since
	case *messages.MinimumResumed:
		p.stalled = false
	case *messages.CheckpointPersisted:
		s.saves++
		s.latency.observe(c.cfg.buckets, e.Latency.Seconds())
		p.retrying = false
		if less(p.persisted, e.Value) {
			p.persisted = e.Value
		}
		p.settle(h.At)
	case *messages.PersistFailed:
		if !e.Late { // its attempt was counted when it overran
			s.failures[failReason(e.Err)]++
		}
		// Only a failure with a backoff is retried: not one the store
		// refused because it holds more, when the persister adopted that
		// value (durable: the lag clock follows it), nor a fenced one, nor
		// one still running.
		p.retrying = e.NextRetry > 0
		// Another writer's value, when the persister took it as its own:
		// not any StoredAheadError, which may name another pchannel, another
		// WAL or a value below the one attempted.
		if less(p.persisted, e.Adopted) {
			p.persisted = e.Adopted
			p.settle(h.At)
		}
	case *messages.PersisterRestarted:
		s.restarts++
	case *messages.OwnershipLost:
		s.ownershipLosses++
	case *messages.Stopped:
		p.live, p.recovering, p.retrying = false, false, false
		p.lag.reset()
		p.stalled = false
	}
}

// expireForgottenLocked lets go of the pchannels forgotten forgetHorizon
// ago or more. An entry a later Forget of the same name renewed stays.
func (c *Collector) expireForgottenLocked(now time.Time) {
	n := 0
	for _, f := range c.forgetOrder {
		if now.Sub(f.at) < forgetHorizon {
			break
		}
		if at, ok := c.forgotten[f.pchannel]; ok && at.Equal(f.at) {
			delete(c.forgotten, f.pchannel)
		}
		n++
	}
	clear(c.forgetOrder[:n]) // the names, for the collector
	c.forgetOrder = c.forgetOrder[n:]
	if n > 0 && len(c.forgotten) < c.forgottenPeak/4 {
		// Most of a wave has expired: what the map and the order's array
		// grew to for it goes.
		c.forgotten = shrink(c.forgotten, &c.forgottenPeak)
		c.forgetOrder = append([]forgetting(nil), c.forgetOrder...)
	}
}

// shrink returns m, or, once it holds under a quarter of *peak, a copy
// of it made anew, whose size *peak then is.
func shrink[K comparable, V any](m map[K]V, peak *int) map[K]V {
	if len(m) >= *peak/4 {
		return m
	}
	kept := make(map[K]V, len(m))
	maps.Copy(kept, m)
	*peak = len(kept)
	return kept
}

// late reports whether ev is from a run of a pchannel that ended before
// Forget was called for it.
func (c *Collector) late(h messages.Header, ev messages.Event) bool {
	forgottenAt, ok := c.forgotten[h.PChannel]
	if !ok {
		return false
	}
	if !h.At.After(forgottenAt) {
		return true
	}
	if _, ok := ev.(*messages.Recovered); ok {
		delete(c.forgotten, h.PChannel) // a new run: nothing older can follow
	}
	return false
}

// settle keeps the lag clock to the persisted checkpoint: stopped when
// the minimum is not above it, else timing the first rise past it. A rise
// it never saw (the collector subscribed late) is timed from at.
func (p *pchannelState) settle(at time.Time) {
	if !less(p.persisted, p.minimum) {
		p.lag.reset()
		return
	}
	p.lag.persisted(p.persisted)
	if p.lag.since().IsZero() {
		p.lag.rose(p.minimum, at)
	}
}

// counted reports whether the pchannel's counters have counted anything:
// its actor runs, though no event of it has come yet.
func (p *pchannelState) counted() bool {
	c := p.counters
	return c != nil && (c.Updates() != 0 || c.SavesInFlight() != 0 || c.AbandonedCalls() != 0 || c.SubscriberPanics() != 0)
}

func (c *Collector) pchannel(name string) *pchannelState {
	p, ok := c.pchannels[name]
	if !ok {
		p = &pchannelState{}
		c.pchannels[name] = p
		c.pchannelsPeak = max(c.pchannelsPeak, len(c.pchannels))
	}
	return p
}

func (c *Collector) seriesOf(pchannel string) *series {
	key := ""
	if c.cfg.labelled {
		key = pchannel
	}
	s, ok := c.series[key]
	if !ok {
		s = &series{}
		c.series[key] = s
		c.seriesPeak = max(c.seriesPeak, len(c.series))
	}
	return s
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	d := c.descs
	for _, desc := range []*prometheus.Desc{d.updates, d.rejected, d.added, d.addedBehind, d.dropped, d.advances, d.saves, d.failures,
		d.latency, d.lag, d.inFlight, d.pchannels, d.recovering, d.retrying, d.recoveryFailures, d.restarts,
		d.ownershipLost, d.eventsDropped, d.abandoned, d.subscriberPanics, d.minimumAge, d.stalled, d.stalls} {
		ch <- desc
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.now()
	c.expireForgottenLocked(now)
	d := c.descs
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}

	// Event-fed counters, per label set. Unlabelled, the one set always
	// exists, so that every series is there from the first scrape.
	if !c.cfg.labelled {
		c.seriesOf("")
	}
	for _, key := range sortedKeys(c.series) {
		s, labels := c.series[key], labelsOf(c.cfg.labelled, key)
		for i, r := range rejectReasons {
			counter(d.rejected, s.rejected[i], slices.Concat(labels, []string{r})...)
		}
		for i, r := range failReasons {
			counter(d.failures, s.failures[i], slices.Concat(labels, []string{r})...)
		}
		counter(d.added, s.added, labels...)
		counter(d.addedBehind, s.addedBehind, labels...)
		counter(d.dropped, s.dropped, labels...)
		counter(d.advances, s.advances, labels...)
		counter(d.saves, s.saves, labels...)
		counter(d.recoveryFailures, s.recoveryFailures, labels...)
		counter(d.restarts, s.restarts, labels...)
		counter(d.ownershipLost, s.ownershipLosses, labels...)
		counter(d.stalls, s.stalls, labels...)
		ch <- prometheus.MustNewConstHistogram(d.latency, s.latency.count, s.latency.sum, s.latency.cumulative(c.cfg.buckets), labels...)
	}

	// State, per pchannel or summed (the lag: the largest).
	updates, abandoned, panics := c.retiredUpdates, c.retiredAbandoned, c.retiredPanics
	var inFlight, live, recovering, retrying, lag, age, stalled float64
	for _, name := range sortedKeys(c.pchannels) {
		p := c.pchannels[name]
		if !p.seen && !p.counted() {
			continue // no event yet, and nothing counted: perhaps never spawned
		}
		var up, ab, pa uint64
		var fl, l, rec, ret, pl, ag, st float64
		if p.counters != nil {
			up, fl = p.counters.Updates(), float64(p.counters.SavesInFlight())
			ab, pa = p.counters.AbandonedCalls(), p.counters.SubscriberPanics()
		}
		if p.live {
			l = 1
			rec, ret = b2f(p.recovering), b2f(p.retrying)
			if since := p.lag.since(); !since.IsZero() {
				pl = max(0, now.Sub(since).Seconds())
			}
			if !p.recovering && !p.heldSince.IsZero() {
				ag = max(0, now.Sub(p.heldSince).Seconds())
			}
			st = b2f(p.stalled)
		}
		if c.cfg.labelled {
			counter(d.updates, up, name)
			counter(d.abandoned, ab, name)
			counter(d.subscriberPanics, pa, name)
			gauge(d.inFlight, fl, name)
			gauge(d.pchannels, l, name)
			gauge(d.recovering, rec, name)
			gauge(d.retrying, ret, name)
			gauge(d.lag, pl, name)
			gauge(d.minimumAge, ag, name)
			gauge(d.stalled, st, name)
			continue
		}
		updates, abandoned, panics = updates+up, abandoned+ab, panics+pa
		inFlight, live, recovering, retrying, lag = inFlight+fl, live+l, recovering+rec, retrying+ret, max(lag, pl)
		age, stalled = max(age, ag), stalled+st
	}
	if !c.cfg.labelled {
		counter(d.updates, updates)
		counter(d.abandoned, abandoned)
		counter(d.subscriberPanics, panics)
		gauge(d.inFlight, inFlight)
		gauge(d.pchannels, live)
		gauge(d.recovering, recovering)
		gauge(d.retrying, retrying)
		gauge(d.lag, lag)
		gauge(d.minimumAge, age)
		gauge(d.stalled, stalled)
	}

	c.pruneLocked()
	dropped := c.closedDropped
	for _, s := range c.subs {
		dropped += s.Dropped()
	}
	counter(d.eventsDropped, dropped)
}

func labelsOf(labelled bool, key string) []string {
	if labelled {
		return []string{key}
	}
	return nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// less is wal.Less that never panics: IDs a registered type cannot order
// (its comparison panics; wal.Compare) count as not less, so that a
// series keeps its last good value rather than the collector panicking.
func less(a, b wal.MessageID) bool {
	switch {
	case b == nil:
		return false
	case a == nil:
		return true
	}
	c, err := wal.Compare(a, b)
	return err == nil && c < 0
}
