package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/internal/core/tracker"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Option configures a PChannel actor.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Backoff paces retries of failed saves and failed recoveries; see
// DefaultBackoff.
type Backoff = saveplan.Backoff

// DefaultBackoff waits 100 ms, then ×1.5 per failure up to 10 s, with 20 %
// jitter that never goes below the first interval nor above the cap. It
// never gives up.
var DefaultBackoff = saveplan.DefaultBackoff

// Defaults of the options below.
const (
	DefaultSaveTimeout      = 5 * time.Second
	DefaultStopFlushTimeout = 3 * time.Second
)

// ErrInvalidOption is returned by NewProps for a configuration that cannot
// work; nothing is spawned.
var ErrInvalidOption = errors.New("lowwater: invalid option")

type config struct {
	pchannel string
	walName  string
	catalog  persistence.Catalog
	// vchannels is WithVChannels' map, read once by newConfig and dropped:
	// spawn keeps it, compactly, for restarts, and first is built from it.
	vchannels map[string]wal.MessageID
	spawn     spawnSet
	// first is the tracker newConfig built to validate the vchannels; the
	// first actor spawned takes it, any other one builds its own.
	first       atomic.Pointer[tracker.Tracker]
	logger      *zap.Logger
	backoff     Backoff
	saveTimeout time.Duration
	flushTime   time.Duration
	minInterval time.Duration
	stallAfter  time.Duration
	ownership   context.Context
	preloaded   *wal.MessageID
	counters    *Counters
	errs        []error
	// seq numbers the catalog calls and timers of every incarnation of the
	// pchannel and its persister, so that a late one is never taken for
	// the current one.
	seq atomic.Uint64
}

// WithVChannels sets the vchannels tracked from the start, as recovered
// from the WAL's own metadata. Their minimum is the start message ID when
// the catalog holds no checkpoint.
func WithVChannels(checkpoints map[string]wal.MessageID) Option {
	return optionFunc(func(c *config) { c.vchannels = checkpoints })
}

// WithLogger sets the logger; the default is zap.NewNop. lowwater never
// logs through a global logger.
func WithLogger(l *zap.Logger) Option {
	return optionFunc(func(c *config) {
		if l == nil {
			c.errs = append(c.errs, errors.New("nil logger"))
			return
		}
		c.logger = l
	})
}

// WithBackoff sets the retry schedule of saves and recovery.
func WithBackoff(b Backoff) Option {
	return optionFunc(func(c *config) { c.backoff = b })
}

// WithSaveTimeout bounds each catalog call (save or recovery read), so that
// a hung store or an etcd leader change costs one attempt, not the actor.
// It is the call's context deadline: a catalog that ignores its context is
// not stopped by it, but a stop never waits for such a call longer than
// 100 ms after cancelling it (see the package doc).
func WithSaveTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.saveTimeout = d })
}

// WithStopFlushTimeout bounds how long a graceful stop (Poison) waits for
// the pending checkpoint to be saved, or, during recovery, for the stored
// checkpoint to be read first. PoisonFuture returns within d + 100 ms
// (plus scheduling) whatever the catalog does, even if it ignores its
// context; StopFuture within 100 ms.
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
// stops saving and stops, leaving the pchannel to its next owner. A save
// refused with persistence.ErrFenced ends it the same way. The watch costs
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
// that recovery needs no read of its own. The value is validated like a
// stored record: one of another WAL fails recovery.
func WithPreloaded(checkpoint wal.MessageID) Option {
	return optionFunc(func(c *config) { c.preloaded = &checkpoint })
}

// Counters are counts that no event carries, for monitoring (package
// metrics exports them). The actor only adds to them, atomically and without
// allocating; read them from any goroutine. They belong to the caller, so
// they outlive restarts of the actor: give each pchannel its own, and the
// same one again when it is respawned.
type Counters struct {
	// Updates counts the vchannel checkpoint updates applied: one per
	// accepted UpdateCheckpoint and one per accepted entry of an
	// UpdateBatch. Rejected ones are published as CommandRejected instead.
	Updates atomic.Uint64
	// SavesInFlight is 1 while a catalog save of the pchannel runs and 0
	// otherwise (at most one is in flight): a gauge, not a counter.
	SavesInFlight atomic.Int64
	// AbandonedCalls counts catalog calls (Load or Save) that were still
	// running joinGrace (100 ms) after a stop cancelled them: the catalog
	// ignored its context. The stop went on without them and their late
	// results were ignored. Anything above 0 points at a catalog to fix.
	AbandonedCalls atomic.Uint64
}

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

func newConfig(pchannel, walName string, catalog persistence.Catalog, opts []Option) (*config, error) {
	c := &config{
		pchannel:    pchannel,
		walName:     walName,
		catalog:     catalog,
		logger:      zap.NewNop(),
		backoff:     DefaultBackoff,
		saveTimeout: DefaultSaveTimeout,
		flushTime:   DefaultStopFlushTimeout,
	}
	for _, o := range opts {
		o.apply(c)
	}
	errs := c.errs
	if err := persistence.ValidatePChannel(pchannel); err != nil {
		errs = append(errs, err)
	}
	if catalog == nil {
		errs = append(errs, errors.New("nil catalog"))
	}
	if err := c.backoff.Validate(); err != nil {
		errs = append(errs, err)
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
	if err := c.takeVChannels(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		shown := pchannel
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		return nil, fmt.Errorf("%w: pchannel %q: %w", ErrInvalidOption, shown, errors.Join(errs...))
	}
	c.logger = c.logger.With(zap.String("pchannel", pchannel))
	return c, nil
}

// takeVChannels reads the vchannels given at spawn, while NewProps runs:
// it builds the first tracker from them, which validates them, and keeps
// them for restarts in a spawnSet rather than a copy of the map.
func (c *config) takeVChannels() error {
	cps := make([]messages.VChannelCheckpoint, 0, len(c.vchannels))
	for name, cp := range c.vchannels {
		if err := validVChannel(name); err != nil {
			return err
		}
		cps = append(cps, messages.VChannelCheckpoint{VChannel: name, Checkpoint: cp})
	}
	c.vchannels = nil
	t, err := tracker.NewFrom(c.walName, cps)
	if err != nil {
		return err
	}
	c.spawn = newSpawnSet(t.ShareNames(), cps)
	c.first.Store(t)
	return nil
}

// newTracker returns a tracker holding the vchannels given at spawn: the
// one newConfig built, the first time, else a new one, so that a restart of
// the actor rebuilds from the same input.
func (c *config) newTracker() *tracker.Tracker {
	if t := c.first.Swap(nil); t != nil {
		return t
	}
	cps, err := c.spawn.checkpoints(c.walName)
	if err == nil {
		var t *tracker.Tracker
		if t, err = tracker.NewFrom(c.walName, cps); err == nil {
			return t
		}
	}
	// newConfig validated these very checkpoints: unreachable.
	panic(fmt.Sprintf("lowwater: rebuilding the vchannels given at spawn: %v", err))
}

// spawnSet keeps the vchannels given at spawn for the actor's restarts, in
// less memory than a map: their names, which the first tracker shares until
// a vchannel is added or dropped (tracker.ShareNames), and their IDs
// marshalled back to back, each after its length in one byte.
type spawnSet struct {
	names []string
	ids   []byte
}

// newSpawnSet keeps cps; names are cps' names in the same order.
func newSpawnSet(names []string, cps []messages.VChannelCheckpoint) spawnSet {
	n := 0
	for _, c := range cps {
		n += 1 + len(c.Checkpoint.Marshal())
	}
	s := spawnSet{names: names, ids: make([]byte, 0, n)}
	for _, c := range cps {
		id := c.Checkpoint.Marshal()
		s.ids = append(append(s.ids, byte(len(id))), id...)
	}
	return s
}

// checkpoints decodes the set: IDs equal to those given, by value.
func (s spawnSet) checkpoints(walName string) ([]messages.VChannelCheckpoint, error) {
	cps := make([]messages.VChannelCheckpoint, len(s.names))
	rest := s.ids
	for i, name := range s.names {
		n := int(rest[0])
		id, err := wal.Unmarshal(walName, rest[1:1+n])
		if err != nil {
			return nil, err
		}
		rest = rest[1+n:]
		cps[i] = messages.VChannelCheckpoint{VChannel: name, Checkpoint: id}
	}
	return cps, nil
}

// validVChannel checks a vchannel name against what catalogs and logs can
// carry (persistence.ValidateVChannel). An empty one is left to the tracker,
// which rejects it with messages.ErrEmptyVChannel.
func validVChannel(name string) error {
	if name == "" {
		return nil
	}
	return persistence.ValidateVChannel(name)
}
