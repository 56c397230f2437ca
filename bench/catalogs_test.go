package bench

import (
	"context"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// slow adds a fixed latency to every Save, as a remote or fsyncing store
// has. The latency is held by hold, which blocks the calling thread in a
// sleep system call, as a real store blocks in fsync or a socket read,
// rather than parking on a Go timer: the runtime rounds sub-millisecond
// timers up to a millisecond when its threads are idle.
type slow struct {
	persistence.Catalog
	latency time.Duration
}

func (s slow) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	hold(s.latency)
	return s.Catalog.Save(ctx, pchannel, v)
}

// wakeup is about how late a thread wakes from nanosleep on these
// machines; hold subtracts it.
const wakeup = 20 * time.Microsecond

// hold returns about d after it is called.
func hold(d time.Duration) {
	end := time.Now().Add(d)
	if d > wakeup {
		sleepThread(d - wakeup)
	}
	for time.Now().Before(end) {
		runtime.Gosched()
	}
}

// meter counts the successful saves of the catalog it wraps, keeps the
// last value saved of each pchannel, and lets a benchmark wait, without
// sleeping, for a saved value.
type meter struct {
	persistence.Catalog

	mu      sync.Mutex
	saves   int
	last    map[string]wal.MessageID
	waiters []*waiter
}

// waiter is one wait: done is called, under meter.mu, after every
// successful save; when it returns true, the save's commit time is sent.
type waiter struct {
	done func(saves int, pchannel string, v wal.MessageID) bool
	at   chan time.Time
}

func (m *meter) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	err := m.Catalog.Save(ctx, pchannel, v)
	if err != nil {
		return err
	}
	m.saved(pchannel, v)
	return nil
}

// saved meters a successful save.
func (m *meter) saved(pchannel string, v wal.MessageID) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves++
	if m.last == nil {
		m.last = make(map[string]wal.MessageID)
	}
	if old := m.last[pchannel]; old == nil || old.LT(v) {
		m.last[pchannel] = v
	}
	kept := m.waiters[:0]
	for _, w := range m.waiters {
		if w.done(m.saves, pchannel, v) {
			w.at <- now
			continue
		}
		kept = append(kept, w)
	}
	clear(m.waiters[len(kept):])
	m.waiters = kept
}

// counter counts the successful saves of the catalog it wraps and lets
// one benchmark wait, without sleeping, for a save count: BenchmarkGroupCommit,
// which measures the CPU of a save. A save costs it one atomic add; the
// meter's lock and map write were a tenth of a save's CPU on a catalog
// that costs nothing, on both implementations alike.
type counter struct {
	persistence.Catalog
	saves atomic.Int64
	// want is the count the waiter waits for (math.MaxInt64 when none
	// does); at receives the time it was reached.
	want atomic.Int64
	mu   sync.Mutex
	at   chan time.Time // guarded by mu
}

// counted wraps catalog in a counter, with StartSave if catalog has it:
// the actors then start saves without waiting for them, as on that
// catalog alone; a counter of any other catalog has no StartSave, so that
// the actors call Save.
func counted(catalog persistence.Catalog) interface {
	persistence.Catalog
	untilCount(n int) <-chan time.Time
} {
	c := &counter{Catalog: catalog}
	c.want.Store(math.MaxInt64)
	if _, ok := catalog.(persistence.SaveStarter); ok {
		return startingCounter{c}
	}
	return c
}

func (c *counter) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	err := c.Catalog.Save(ctx, pchannel, v)
	if err == nil {
		c.saved()
	}
	return err
}

// startingCounter is a counter of a catalog that starts saves without
// waiting (bbolt with group commit): it passes StartSave on, and counts a
// save once it is told.
type startingCounter struct{ *counter }

func (c startingCounter) StartSave(ctx context.Context, pchannel string, v wal.MessageID, done func(error)) error {
	return c.Catalog.(persistence.SaveStarter).StartSave(ctx, pchannel, v, func(err error) {
		if err == nil {
			c.saved()
		}
		done(err)
	})
}

func (c *counter) saved() {
	if c.saves.Add(1) >= c.want.Load() {
		c.reached()
	}
}

// reached tells the waiter, once, if its count is reached.
func (c *counter) reached() {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at != nil && c.saves.Load() >= c.want.Load() {
		c.at <- now
		c.at = nil
		c.want.Store(math.MaxInt64)
	}
}

// untilCount returns a channel that receives the time the save count
// reached n. One waiter at a time: a new one replaces the last.
func (c *counter) untilCount(n int) <-chan time.Time {
	at := make(chan time.Time, 1)
	c.mu.Lock()
	c.at = at
	c.want.Store(int64(n))
	c.mu.Unlock()
	// A save that counted n before want was stored saw no waiter.
	if c.saves.Load() >= int64(n) {
		c.reached()
	}
	return at
}

// count returns the number of successful saves so far.
func (m *meter) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}

// reset sets the save count to zero.
func (m *meter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saves = 0
}

// untilSaved returns a channel that receives the commit time of the first
// save of pchannel at or above v (now, if one was already saved).
func (m *meter) untilSaved(pchannel string, v wal.MessageID) <-chan time.Time {
	return m.until(func(_ int, p string, got wal.MessageID) bool { return p == pchannel && !got.LT(v) },
		func() bool { last := m.last[pchannel]; return last != nil && !last.LT(v) })
}

func (m *meter) until(done func(int, string, wal.MessageID) bool, already func() bool) <-chan time.Time {
	at := make(chan time.Time, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if already() {
		at <- time.Now()
		return at
	}
	m.waiters = append(m.waiters, &waiter{done: done, at: at})
	return at
}

// sink reads from a real catalog and acknowledges saves in memory, for the
// scale benchmark: its update rate is about the pchannels, not the disk
// (BenchmarkGroupCommit measures the disk).
type sink struct {
	persistence.Catalog
	saves atomic.Int64

	// final is the value whose first save time is kept per pchannel in
	// savedAt; all is closed when every one of left pchannels saved it.
	final   wal.MessageID
	mu      sync.Mutex
	savedAt map[string]time.Time
	left    atomic.Int64
	all     chan struct{}
}

func (s *sink) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := persistence.CheckSaveArgs(pchannel, v); err != nil {
		return err
	}
	s.saves.Add(1)
	if s.final != nil && v.EQ(s.final) {
		now := time.Now()
		s.mu.Lock()
		_, seen := s.savedAt[pchannel]
		if !seen {
			s.savedAt[pchannel] = now
		}
		s.mu.Unlock()
		if !seen && s.left.Add(-1) == 0 {
			close(s.all)
		}
	}
	return nil
}
