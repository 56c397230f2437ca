package actors

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/internal/promoted"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Option configures a PChannel actor.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Backoff paces retries of failed saves and failed recoveries. It never
// gives up: a checkpoint that cannot be saved now is saved later, but for
// a catalog that is closed (persistence.ErrClosed), which never takes a
// save again.
//
// Every field is checked, zero ones included (ErrInvalidBackoff): start
// from DefaultBackoff() and change the fields you need.
type Backoff struct {
	// Initial is the first wait; no retry comes sooner. At least
	// MinBackoffInitial (1 ms): shorter, a catalog failing at once would
	// be called in a hot loop.
	Initial time.Duration
	// Max caps every wait, jitter included.
	Max time.Duration
	// Multiplier grows the wait after each failure; at least 1.
	Multiplier float64
	// Jitter spreads waits by up to this fraction either way, in [0, 1),
	// so that pchannels failing together do not retry together. The
	// centre is raised by 1/(1-Jitter), so that no wait falls below
	// Initial: with Jitter 0.2, the first wait is Initial to 1.5×Initial.
	Jitter float64
}

// DefaultBackoff returns the schedule NewProps uses without WithBackoff:
// 100 ms, then ×1.5 per failure up to 10 s, with 20 % jitter (see Jitter)
// that never goes below the first interval nor above the cap: the first
// wait is 100–150 ms, the second 150–225 ms, and once the cap is reached
// 6.7–10 s (its centre is lowered to Max/1.2, so that none goes above).
func DefaultBackoff() Backoff { return Backoff(saveplan.DefaultBackoff) }

// MinBackoffInitial is the shortest Backoff.Initial NewProps takes:
// below it, a failing catalog would be retried in a hot loop.
const MinBackoffInitial = time.Millisecond

// ErrInvalidBackoff is wrapped, beside ErrInvalidOption, by the error of
// NewProps given a Backoff that would retry in a hot loop or never wait.
var ErrInvalidBackoff = errors.New("lowwater: invalid backoff")

// Defaults of the options below.
const (
	DefaultSaveTimeout      = 5 * time.Second
	DefaultStopFlushTimeout = 3 * time.Second
)

// ErrInvalidOption is returned by NewProps for a configuration that cannot
// work, in its arguments (a nil catalog, an unknown WAL) or its options,
// and nothing is spawned; by NewSender for its own (a nil system or PID,
// an option out of range), and nothing is registered; and by GetState for
// a nil option, and nothing is asked.
var ErrInvalidOption = errors.New("lowwater: invalid configuration")

type config struct {
	pchannel string
	walName  wal.Name
	catalog  persistence.Catalog
	// starter starts the saves: the catalog, if it is a SaveStarter,
	// unless its StartSave would skip a Save it changed (see newConfig).
	// Nil: every save goes through Save.
	starter persistence.SaveStarter
	// vchannels is WithVChannels' map; newConfig turns it into from,
	// which NewProps hands to the actor's producer.
	vchannels   map[string]wal.MessageID
	from        *spawn
	logger      *zap.Logger
	backoff     saveplan.Backoff
	saveTimeout time.Duration
	flushTime   time.Duration
	minInterval time.Duration
	stallAfter  time.Duration
	ownership   context.Context
	preloaded   *wal.MessageID
	counters    *Counters
	errs        []error
}

// WithVChannels sets the vchannels tracked from the start, as recovered
// from the WAL's own metadata. Their minimum is the start message ID when
// the catalog holds no checkpoint. One below the stored checkpoint is
// taken as covered by it, as metadata read at a restart lags what was
// saved: it is not told (no AddedBehind, no warning), and the start is
// the stored checkpoint. A vchannel created while no node ran is added
// with AddVChannel after the spawn, which tells one added below it. Each
// entry is checked as an AddVChannel of it is: an empty or unstorable
// name, a nil checkpoint, one of another WAL, a sentinel or one that does
// not read back makes NewProps fail with an ErrInvalidOption that wraps
// the error the command would get (messages.ErrEmptyVChannel,
// wal.ErrSentinel, …), and nothing is spawned.
func WithVChannels(checkpoints map[string]wal.MessageID) Option {
	return optionFunc(func(c *config) { c.vchannels = checkpoints })
}

// WithLogger sets the logger; the default is zap.NewNop. lowwater never
// logs through a global logger. A rejected command logs one Warn line,
// whoever sent it: give a logger that samples (zap.NewProduction's does)
// where a producer gone wrong could send them in a loop. Each failed save
// logs a Warn line, and the first save that succeeds after them an Info
// line; each vchannel added or dropped a Debug line (its event carries it
// too: a service that adds vchannels on every rebalance logged little
// else at Info). Lines carry no stack of the logger's own, whatever its
// options: it would be the mailbox loop's, the same on every line.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.errs = append(c.errs, errors.New("nil logger"))
			return
		}
		c.logger = l
	})
}

// WithBackoff sets the retry schedule of saves and recovery; the default
// is DefaultBackoff().
func WithBackoff(b Backoff) Option {
	return optionFunc(func(c *config) { c.backoff = saveplan.Backoff(b) })
}

// WithSaveTimeout bounds each catalog call (save or recovery read), so that
// a store that hangs but honours its context, or an etcd leader change,
// costs one attempt, not the actor. It is the call's context deadline: a
// catalog that ignores its context is not stopped by it, and neither is a
// StartSave whose done never comes. Such a call is reported 100 ms past
// the deadline, 200 ms for a catalog that neither asks for its context's
// Done nor checks its Err after the deadline (ErrCatalogOverdue; see the
// package doc), and waited for: the pchannel saves nothing more until it
// returns (the persist lag of package metrics grows). A stop never waits
// for it longer than 100 ms after cancelling it (see the package doc).
// The default is DefaultSaveTimeout (5 s).
func WithSaveTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.saveTimeout = d })
}

// WithStopFlushTimeout bounds how long a graceful stop (Poison) waits for
// the pending checkpoint to be saved, or, during recovery, for the stored
// checkpoint to be read first (with no vchannel, there is nothing to save
// and no wait). PoisonFuture returns within d + 100 ms
// of the pill's turn (the messages sent before it are applied first),
// plus scheduling, whatever the catalog does, even if it ignores its
// context; StopFuture within 100 ms, plus scheduling. The default is
// DefaultStopFlushTimeout (3 s).
func WithStopFlushTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.flushTime = d })
}

// WithMinSaveInterval spaces successful saves by at least d, trading
// freshness of the stored checkpoint for catalog load. 0 (the default)
// saves as soon as the previous save returns.
func WithMinSaveInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.minInterval = d })
}

// MinStallAfter is the shortest stall-after duration WithStallAfter
// takes: a check more often than this would cost more than it tells.
const MinStallAfter = time.Millisecond

// WithStallAfter has the actor publish messages.MinimumStalled, naming the
// vchannel that holds the minimum back, when the minimum has not risen for
// d while the pchannel runs with at least one vchannel, and
// messages.MinimumResumed when it moves again. 0 (the default) turns it
// off; a d below MinStallAfter, or negative, is an ErrInvalidOption.
//
// It costs one timer per pchannel at most, armed lazily: an update stores
// the time of a rise (which MinimumAdvanced stamps anyway) and nothing
// more; when the timer fires it re-arms for the remainder if the minimum
// rose meanwhile. Nothing is polled per vchannel.
func WithStallAfter(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d != 0 && d < MinStallAfter {
			c.errs = append(c.errs, fmt.Errorf("stall after %v: want 0 (off) or at least %v", d, MinStallAfter))
			return
		}
		c.stallAfter = d
	})
}

// WithOwnership ties the actor to an ownership of its pchannel, such as an
// etcd session's context: when ctx ends, the actor publishes OwnershipLost,
// stops saving and stops, leaving the pchannel to its next owner; during a
// graceful stop's flush too, which ends then (Stopped's Reason is ctx's
// cause), rather than wait out its timeout on saves the catalog refuses. A
// save refused with persistence.ErrFenced ends it the same way. The watch costs
// no goroutine (context.AfterFunc) when ctx comes from context.WithCancel.
func WithOwnership(ctx context.Context) Option {
	return optionFunc(func(c *config) {
		if ctx == nil {
			c.errs = append(c.errs, errors.New("nil ownership context"))
			return
		}
		c.ownership = ctx
	})
}

// WithPreloaded tells the actor what the catalog holds for its pchannel
// (nil: nothing), read beforehand with one LoadAll for many pchannels, so
// that recovery needs no read of its own. One of another WAL is an
// ErrInvalidOption (wrapping wal.ErrWALMismatch): taken to recovery, it
// was reported as a corrupt record, which the catalog's may not be. So is
// one that does not read back or cannot be compared (wrapping
// wal.ErrCorruptID), as a vchannel's checkpoint is, and a sentinel
// (wrapping wal.ErrSentinel: a negative Kafka offset), which recovery
// reading it itself would take for a corrupt record and not start from.
//
// LoadAll fails over any record it cannot read or that is stored under
// another name than its own (a damaged file): spawn without this option
// then, and each pchannel reads its own record, so that only those the
// damage may concern wait (RecoveryFailed), not every one.
func WithPreloaded(checkpoint wal.MessageID) Option {
	return optionFunc(func(c *config) { c.preloaded = &checkpoint })
}

// Counters are counts that no event carries, for monitoring (package
// metrics exports them). Only the actor writes them, atomically and
// without allocating; read them from any goroutine. They belong to the caller, so
// they outlive restarts of the actor: give each pchannel its own, and the
// same one again when it is respawned.
type Counters struct {
	updates        atomic.Uint64
	savesInFlight  atomic.Int64
	abandonedCalls atomic.Uint64
	// subscriberPanics counts the events a panicking subscriber kept
	// from the subscribers after it.
	subscriberPanics atomic.Uint64
}

// Updates counts the vchannel checkpoint updates accepted: one per accepted
// UpdateCheckpoint and one per accepted entry of an UpdateBatch, one equal
// to the checkpoint held (which changes nothing) included. Rejected
// ones are published as CommandRejected instead.
func (c *Counters) Updates() uint64 { return c.updates.Load() }

// SavesInFlight counts the pchannel's catalog saves running now: a gauge,
// not a counter. The actor starts one at a time, so it is 1 or 0, but for
// calls a stop or restart abandoned (AbandonedCalls) that are still
// running, which count until the catalog returns them: a gauge above 1
// that stays there is a catalog ignoring its context.
func (c *Counters) SavesInFlight() int64 { return c.savesInFlight.Load() }

// AbandonedCalls counts catalog calls (Load or Save) that were still running
// 100 ms after a stop, or a restart after a panic, cancelled them: the
// catalog ignored its context. The stop or restart went on without them
// and their late results were ignored. Anything above 0 points at a
// catalog to fix.
func (c *Counters) AbandonedCalls() uint64 { return c.abandonedCalls.Load() }

// SubscriberPanics counts the events whose publishing a subscriber of the
// event stream panicked in: the actor went on, and each subscriber after
// the panicking one missed the event (protoactor calls them in turn), the
// metrics collector among them if it subscribed later. It is counted here,
// not from events, so that it reaches the metrics whatever the collector
// missed; the Error line it logs goes to WithLogger's logger, which
// without one discards it. Anything above 0 points at a subscriber to fix.
func (c *Counters) SubscriberPanics() uint64 { return c.subscriberPanics.Load() }

// WithCounters has the actor keep c current. Without it (the default) the
// actor keeps no counts.
func WithCounters(c *Counters) Option {
	return optionFunc(func(cfg *config) {
		if c == nil {
			cfg.errs = append(cfg.errs, errors.New("nil counters"))
			return
		}
		cfg.counters = c
	})
}

func newConfig(pchannel string, walName wal.Name, catalog persistence.Catalog, opts []Option) (*config, error) {
	c := &config{
		pchannel:    pchannel,
		walName:     walName,
		catalog:     catalog,
		logger:      zap.NewNop(),
		backoff:     saveplan.DefaultBackoff,
		saveTimeout: DefaultSaveTimeout,
		flushTime:   DefaultStopFlushTimeout,
	}
	for _, o := range opts {
		if o == nil {
			c.errs = append(c.errs, errors.New("nil option"))
			continue
		}
		o.apply(c)
	}
	errs := c.errs
	if err := persistence.ValidatePChannel(pchannel); err != nil {
		errs = append(errs, err)
	}
	if isNil(catalog) {
		errs = append(errs, errors.New("nil catalog"))
	}
	if err := c.backoff.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidBackoff, err))
	}
	if c.saveTimeout <= 0 {
		errs = append(errs, fmt.Errorf("save timeout %v is not positive", c.saveTimeout))
	}
	if c.flushTime <= 0 {
		errs = append(errs, fmt.Errorf("stop flush timeout %v is not positive", c.flushTime))
	}
	if c.minInterval < 0 {
		errs = append(errs, fmt.Errorf("min save interval %v is negative", c.minInterval))
	}
	// The WAL and the vchannels too, so that every problem is told at once.
	from, err := newSpawn(walName, c.vchannels)
	if err != nil {
		errs = append(errs, err)
	}
	if c.preloaded != nil && *c.preloaded != nil {
		// An unknown WAL is told once, by newSpawn.
		if check, err := wal.NewChecker(walName); err == nil {
			// Marshal, not Check: an ID of a registered type must also
			// read back and be ordered without a panic, as a vchannel's.
			if _, err := check.Marshal(*c.preloaded); err != nil {
				errs = append(errs, fmt.Errorf("preloaded checkpoint %s: %w", wal.String(*c.preloaded), err))
			}
		}
	}
	c.from, c.vchannels = from, nil
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: pchannel %s: %w", ErrInvalidOption, shorten.Quoted(pchannel), errors.Join(errs...))
	}
	// No stack of the logger's own: where a pchannel logs, it is the
	// mailbox loop's, the same on every line (a development logger put
	// 25 lines of it under each failed save). A catalog's panic gives
	// its own stack as a field.
	base := c.logger
	c.logger = c.logger.With(zap.String("pchannel", pchannel)).WithOptions(noStack)
	if starter, ok := catalog.(persistence.SaveStarter); ok {
		if promoted.Split(catalog, "Save", "StartSave") {
			// A wrapper that embeds a catalog (struct{ *persistence.Bolt }),
			// at any depth, and changes its Save alone: started, its saves
			// would never reach that Save.
			log := c.logger.Debug
			if splitWarned.first(reflect.TypeOf(catalog), base) {
				log = c.logger.Warn
			}
			log("the catalog changes Save and keeps the StartSave of a catalog it embeds, which would not call that Save: its saves go through its Save, each holding a goroutine while it waits; give it a StartSave too, to start them without one (at Warn once for each type of catalog and logger)",
				zap.String("catalog", fmt.Sprintf("%T", catalog)))
		} else {
			c.starter = starter
		}
	}
	return c, nil
}

// splitWarned is the types of split catalogs (promoted.Split) already
// warned of, by logger: a thousand pchannels on one such catalog gave a
// thousand Warns, where one says it.
var splitWarned = &onceEach{seen: map[onceKey]struct{}{}}

// onceEach tells the first time a catalog type meets a logger. It holds
// the logger weakly, and forgets it once it is collected: a program that
// gives each pchannel a logger of its own keeps no entry of those gone.
type onceEach struct {
	mu   sync.Mutex
	seen map[onceKey]struct{} // guarded by mu
}

type onceKey struct {
	catalog reflect.Type
	logger  weak.Pointer[zap.Logger]
}

// first reports whether this is the first call for catalog and logger.
func (o *onceEach) first(catalog reflect.Type, logger *zap.Logger) bool {
	k := onceKey{catalog, weak.Make(logger)}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[k]; ok {
		return false
	}
	o.seen[k] = struct{}{}
	if logger != nil {
		runtime.AddCleanup(logger, o.forget, k)
	}
	return true
}

func (o *onceEach) forget(k onceKey) {
	o.mu.Lock()
	delete(o.seen, k)
	o.mu.Unlock()
}

// noStack makes a logger add no stack to any line.
var noStack = zap.AddStacktrace(zap.LevelEnablerFunc(func(zapcore.Level) bool { return false }))

// validVChannel checks a vchannel name against what catalogs and logs can
// carry (persistence.ValidateVChannel). An empty one is left to the tracker,
// which rejects it with messages.ErrEmptyVChannel.
func validVChannel(name string) error {
	if name == "" {
		return nil
	}
	return persistence.ValidateVChannel(name)
}

// isNil reports a nil interface, and a typed nil pointer in one, such as a
// (*persistence.Bolt)(nil): it would fail every call later.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
