// Package baseline re-implements, from scratch, the design lowwater
// replaces: Milvus' pchannelCheckpointManager (a mutex over an indexed heap
// of vchannels, a condition variable built from a closed channel, and one
// background goroutine per pchannel that saves the minimum). It exists only
// so that the benchmarks in package bench can put the two side by side in
// one process, on the same Catalog and the same wal IDs.
//
// It behaves as the reference does, flaws included, because those flaws
// are part of what the benchmarks compare:
//   - recovery reads the catalog once; an error leaves no manager;
//   - a stored record that does not decode as the pchannel's WAL panics;
//   - the backoff keeps the library's other defaults: the first retry waits
//     about 500 ms (±50 %), and after 15 minutes of failures NextBackOff
//     returns Stop, which the loop turns into retries without any wait;
//   - saves run under the manager's lifetime context, with no deadline of
//     their own;
//   - AddVChannel logs success even after it was refused, and no refusal
//     reaches the caller;
//   - Close drops whatever minimum is not yet saved.
//
// Do not use it outside benchmarks.
package baseline

import (
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Manager keeps the checkpoint of one pchannel, as the reference does.
type Manager struct {
	life     *lifetime
	cond     *chanCond
	pchannel string
	catalog  persistence.Catalog
	// vchannels is guarded by cond.L.
	vchannels *vchannels
	start     wal.MessageID
	logger    *zap.Logger
}

// Recover reads the stored checkpoint of pchannel and starts the manager's
// background goroutine. checkpoints are the vchannels known at recovery.
func Recover(ctx context.Context, catalog persistence.Catalog, walName wal.Name, pchannel string,
	checkpoints map[string]wal.MessageID,
) (*Manager, error) {
	vcs := newVChannels(checkpoints)
	stored, err := catalog.Load(ctx, pchannel)
	if err != nil {
		return nil, err
	}
	var start, previous wal.MessageID
	if stored != nil {
		start = mustUnmarshal(walName, stored.Marshal())
		previous = start
	} else {
		start = vcs.Minimum()
	}
	m := &Manager{
		life:      newLifetime(),
		cond:      newChanCond(&sync.Mutex{}),
		pchannel:  pchannel,
		catalog:   catalog,
		vchannels: vcs,
		start:     start,
		// The reference logs; the comparison runs it with its logger off.
		logger: zap.NewNop().With(zap.String("pchannel", pchannel), zap.String("component", "checkpoint-updater")),
	}
	go m.background(previous)
	return m, nil
}

// mustUnmarshal is the reference's MustUnmarshalMessageID: bytes that do
// not decode panic.
func mustUnmarshal(walName wal.Name, b []byte) wal.MessageID {
	id, err := wal.Unmarshal(walName, b)
	if err != nil {
		panic(err)
	}
	return id
}

// StartMessageID is the stored checkpoint, or the minimum at recovery.
func (m *Manager) StartMessageID() wal.MessageID { return m.start }

// Update moves a vchannel's checkpoint; a refusal is only logged. It wakes
// the background goroutine when the minimum rose (or there was none).
func (m *Manager) Update(vchannel string, checkpoint wal.MessageID) {
	m.cond.L.Lock()
	defer m.cond.L.Unlock()

	before := m.vchannels.Minimum()
	if err := m.vchannels.Update(vchannel, checkpoint); err != nil {
		m.logger.Warn("failed to update vchannel checkpoint", zap.String("vchannel", vchannel), zap.Error(err))
		return
	}
	if after := m.vchannels.Minimum(); before == nil || before.LT(after) {
		m.cond.UnsafeBroadcast()
	}
}

// AddVChannel starts tracking a vchannel. Like the reference, it logs
// "add vchannel checkpoint" whether or not the add was refused.
func (m *Manager) AddVChannel(vchannel string, checkpoint wal.MessageID) {
	m.cond.LockAndBroadcast()
	defer m.cond.L.Unlock()

	if err := m.vchannels.Add(vchannel, checkpoint); err != nil {
		m.logger.Warn("failed to add vchannel checkpoint", zap.String("vchannel", vchannel), zap.Error(err))
	}
	m.logger.Info("add vchannel checkpoint", zap.String("vchannel", vchannel), zap.Stringer("checkpoint", checkpoint))
}

// DropVChannel stops tracking a vchannel; a refusal is only logged.
func (m *Manager) DropVChannel(vchannel string) {
	m.cond.LockAndBroadcast()
	defer m.cond.L.Unlock()

	if err := m.vchannels.Drop(vchannel); err != nil {
		m.logger.Warn("failed to drop vchannel checkpoint", zap.String("vchannel", vchannel), zap.Error(err))
		return
	}
	m.logger.Info("drop vchannel checkpoint", zap.String("vchannel", vchannel))
}

// Minimum is the current minimum, for tests and benchmarks.
func (m *Manager) Minimum() wal.MessageID {
	m.cond.L.Lock()
	defer m.cond.L.Unlock()
	return m.vchannels.Minimum()
}

// Close stops the background goroutine and waits for it. A minimum not yet
// saved is dropped.
func (m *Manager) Close() {
	m.life.cancel()
	<-m.life.finished
}

// background saves every minimum above the last saved one, retrying with
// the reference's backoff.
func (m *Manager) background(previous wal.MessageID) {
	defer func() {
		close(m.life.finished)
		m.logger.Info("pchannel checkpoint updater is closed")
	}()
	m.logger.Info("pchannel checkpoint updater started", zap.String("previous", wal.String(previous)))

	// As in the reference: the fields are set after the constructor reset
	// the current interval to the library's 500 ms, and MaxElapsedTime keeps
	// its 15-minute default.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 10 * time.Second
	for {
		current, err := m.waitForAdvance(previous)
		if err != nil {
			return
		}
		if previous != nil && !previous.LT(current) {
			continue
		}
		if err := m.catalog.Save(m.life.ctx, m.pchannel, current); err != nil {
			next := b.NextBackOff()
			m.logger.Warn("failed to update pchannel checkpoint", zap.Stringer("checkpoint", current),
				zap.Duration("nextRetryInterval", next), zap.Error(err))
			select {
			case <-time.After(next):
				continue
			case <-m.life.ctx.Done():
				return
			}
		}
		b.Reset()
		previous = current
		m.logger.Debug("update pchannel checkpoint", zap.Stringer("current", current))
	}
}

// waitForAdvance blocks until there is a vchannel and, when previous is set,
// the minimum is above it.
func (m *Manager) waitForAdvance(previous wal.MessageID) (wal.MessageID, error) {
	m.cond.L.Lock()
	for m.vchannels.Len() == 0 || (previous != nil && m.vchannels.Minimum().LTE(previous)) {
		if err := m.cond.Wait(m.life.ctx); err != nil {
			return nil, err // Wait returns unlocked on error
		}
	}
	minimum := m.vchannels.Minimum()
	m.cond.L.Unlock()
	return minimum, nil
}

// chanCond is a condition variable whose Wait honours a context: a
// broadcast closes the channel the waiters hold, and the next Wait makes a
// new one.
type chanCond struct {
	L  sync.Locker
	ch chan struct{}
}

func newChanCond(l sync.Locker) *chanCond { return &chanCond{L: l} }

// LockAndBroadcast locks L and wakes every waiter.
func (c *chanCond) LockAndBroadcast() {
	c.L.Lock()
	c.UnsafeBroadcast()
}

// UnsafeBroadcast wakes every waiter; L must be held.
func (c *chanCond) UnsafeBroadcast() {
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}

// Wait unlocks L, waits for a broadcast or the end of ctx, and relocks L on
// a broadcast only: on ctx's end it returns ctx's error with L unlocked.
func (c *chanCond) Wait(ctx context.Context) error {
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	ch := c.ch
	c.L.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.L.Lock()
	return nil
}

// lifetime is the reference's async task notifier: a context that Close
// cancels, and a channel the goroutine closes when it is done.
type lifetime struct {
	ctx      context.Context
	cancel   context.CancelFunc
	finished chan struct{}
}

func newLifetime() *lifetime {
	ctx, cancel := context.WithCancel(context.Background())
	return &lifetime{ctx: ctx, cancel: cancel, finished: make(chan struct{})}
}
