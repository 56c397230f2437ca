package tests

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// starter is a SaveStarter over a Memory whose StartSave each test
// scripts through start; by default a save is handed to the test, which
// tells it when and how it chooses.
type starter struct {
	*persistence.Memory
	started chan *startedSave
	start   func(s *startedSave) error
	saves   atomic.Int32 // calls of Save
}

var _ persistence.SaveStarter = (*starter)(nil)

type startedSave struct {
	mem      *persistence.Memory
	ctx      context.Context
	pchannel string
	v        wal.MessageID
	done     func(error)
}

// tell stores the value under the pchannel it was started for, unless err
// is set, and tells the save, from a goroutine of its own as the contract
// asks.
func (s *startedSave) tell(err error) {
	if err == nil {
		err = s.mem.Save(context.Background(), s.pchannel, s.v)
	}
	go s.done(err)
}

func newStarter() *starter {
	s := &starter{Memory: persistence.NewMemory(), started: make(chan *startedSave, 16)}
	s.start = func(ss *startedSave) error { s.started <- ss; return nil }
	return s
}

func (s *starter) StartSave(ctx context.Context, pchannel string, v wal.MessageID, done func(error)) error {
	return s.start(&startedSave{mem: s.Memory, ctx: ctx, pchannel: pchannel, v: v, done: done})
}

func (s *starter) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	s.saves.Add(1)
	return s.Memory.Save(ctx, pchannel, v)
}

// next waits for the next started save.
func (s *starter) next(t *testing.T) *startedSave {
	t.Helper()
	select {
	case ss := <-s.started:
		return ss
	case <-time.After(eventWait):
		t.Fatalf("no save started within %v", eventWait)
		return nil
	}
}

// A save started through the catalog's StartSave holds nothing while it
// waits: it is in flight until the catalog tells it, and only then
// persisted, published and settled. A catalog that tells twice is
// believed once.
func TestStartedSaveIsPersistedWhenTold(t *testing.T) {
	h := newHarness(t)
	cat := newStarter()
	counters := &actors.Counters{}
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}), actors.WithCounters(counters))

	first := cat.next(t)
	require.Equal(t, pch, first.pchannel)
	require.Equal(t, k(10), first.v)
	require.True(t, h.state(pid, false).SaveInFlight, "a started save that was not told yet is in flight")
	from := h.rec.Len()
	first.tell(nil)
	ev := waitFrom(t, h.rec, from, persistedIs(k(10)))
	require.Equal(t, 1, ev.Attempts)
	require.Equal(t, k(10), loadNow(t, cat.Memory))
	first.tell(nil) // a second time: believed once

	h.update(pid, "a", 20)
	second := cat.next(t)
	require.Equal(t, k(20), second.v)
	second.tell(nil)
	waitFor(t, h.rec, persistedIs(k(20)))
	require.Len(t, collect[*messages.CheckpointPersisted](h.rec), 2, "one CheckpointPersisted per value: %s", describe(h.rec.Since(0)))
	require.Zero(t, cat.saves.Load(), "Save called beside StartSave")

	stopped, _ := h.poison(pid)
	require.Zero(t, counters.SavesInFlight(), "a save told twice is counted done once")
	require.Equal(t, k(20), stopped.LastPersisted)
	require.True(t, stopped.Flushed)
	require.NoError(t, stopped.Reason)
}

// What a StartSave may do besides starting the save: refuse it at once,
// panic, decline it (errors.ErrUnsupported: Save then runs it), or tell
// it before it returns. Each is a failed save retried on the backoff, or
// a save that lands; none stops the pchannel.
func TestStartSaveRefusedPanickingDecliningOrEager(t *testing.T) {
	refused := errors.New("the store is busy")
	for name, tc := range map[string]struct {
		start    func(s *startedSave) error
		wantErr  error  // of the first attempt's PersistFailed, or nil: it persists
		wantText string // in that error, if set
		saves    int32  // calls of Save
	}{
		"refused":   {start: func(*startedSave) error { return refused }, wantErr: refused},
		"panicking": {start: func(*startedSave) error { panic("a catalog's bug") }, wantErr: actors.ErrCatalogPanicked},
		"declining": {start: func(*startedSave) error { return fmt.Errorf("not this one: %w", errors.ErrUnsupported) }, saves: 1},
		// A decline told through done is a failure: it is StartSave's
		// return that declines.
		"declining through done": {start: func(s *startedSave) error { s.tell(fmt.Errorf("not this one: %w", errors.ErrUnsupported)); return nil },
			wantErr: errors.ErrUnsupported, wantText: "told through StartSave's done, where it fails the save"},
		// A panic is a failed save, even one whose value says "decline".
		"panicking with a decline": {start: func(*startedSave) error { panic(fmt.Errorf("oops: %w", errors.ErrUnsupported)) }, wantErr: actors.ErrCatalogPanicked},
		"eager": {start: func(s *startedSave) error {
			if err := s.mem.Save(s.ctx, pch, s.v); err != nil {
				return err
			}
			s.done(nil)
			return nil
		}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cat := newStarter()
			var attempts atomic.Int32
			cat.start = func(s *startedSave) error {
				if attempts.Add(1) == 1 {
					return tc.start(s)
				}
				s.tell(nil)
				return nil
			}
			pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}), actors.WithBackoff(fastBackoff))
			if tc.wantErr != nil {
				failed := waitFor(t, h.rec, func(*messages.PersistFailed) bool { return true })
				require.ErrorIs(t, failed.Err, tc.wantErr)
				require.ErrorContains(t, failed.Err, tc.wantText)
				require.Equal(t, k(10), failed.Value)
				require.Positive(t, failed.NextRetry, "a failed start is retried on the backoff")
			}
			ev := waitFor(t, h.rec, persistedIs(k(10)))
			require.Equal(t, k(10), loadNow(t, cat.Memory))
			if tc.wantErr != nil {
				require.Equal(t, 2, ev.Attempts)
			} else {
				require.Equal(t, 1, ev.Attempts)
			}
			require.Equal(t, tc.saves, cat.saves.Load(), "calls of Save")
			stopped, _ := h.poison(pid)
			require.Equal(t, k(10), stopped.LastPersisted)
		})
	}
}

// A catalog that tells a save and then declines it (errors.ErrUnsupported)
// breaks the contract: it is believed the first time, and Save is not
// called on top. Told at once, or only after the watchdog reported the
// save overdue and so waits on it: finishing the call a second time then
// closed a closed channel on a pool goroutine and ended the process.
func TestStartSaveToldThenDeclined(t *testing.T) {
	for name, late := range map[string]bool{"at once": false, "after the save is overdue": true} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			cat := newStarter()
			release := make(chan struct{})
			cat.start = func(s *startedSave) error {
				if late {
					<-release
				}
				if err := s.mem.Save(s.ctx, pch, s.v); err != nil {
					return err
				}
				s.done(nil)
				return fmt.Errorf("after all: %w", errors.ErrUnsupported)
			}
			counters := &actors.Counters{}
			pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}),
				actors.WithSaveTimeout(20*time.Millisecond), actors.WithCounters(counters))
			if late {
				failed := waitFor(t, h.rec, func(*messages.PersistFailed) bool { return true })
				require.ErrorIs(t, failed.Err, actors.ErrCatalogOverdue)
				close(release)
			}
			waitFor(t, h.rec, persistedIs(k(10)))
			stopped, _ := h.poison(pid)
			require.Equal(t, k(10), stopped.LastPersisted)
			require.Zero(t, cat.saves.Load(), "Save called for a save already told")
			require.Zero(t, counters.SavesInFlight())
			require.Len(t, collect[*messages.CheckpointPersisted](h.rec), 1, "%s", describe(h.rec.Since(0)))
		})
	}
}

// A StartSave that tells its save from within (against its contract)
// and then blocks is still in the catalog: the outcome is taken, and
// delivered once StartSave returns, so that the next save never runs
// beside it. It used to be delivered at once, and the next StartSave of
// the pchannel ran while the first had not returned.
func TestStartSaveToldWithinThenBlocking(t *testing.T) {
	h := newHarness(t)
	cat := newStarter()
	release := make(chan struct{})
	var inside, most atomic.Int32
	cat.start = func(s *startedSave) error {
		n := inside.Add(1)
		defer inside.Add(-1)
		if n > most.Load() {
			most.Store(n)
		}
		err := s.mem.Save(s.ctx, pch, s.v)
		s.done(err)
		if s.v.EQ(k(10)) {
			<-release
		}
		return nil
	}
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}),
		actors.WithSaveTimeout(20*time.Millisecond))
	h.update(pid, "a", 20)
	failed := waitFor(t, h.rec, func(*messages.PersistFailed) bool { return true })
	require.ErrorIs(t, failed.Err, actors.ErrCatalogOverdue)
	require.ErrorContains(t, failed.Err, "StartSave still running")
	require.Empty(t, collect[*messages.CheckpointPersisted](h.rec), "persisted while its StartSave had not returned")
	require.Equal(t, k(10), loadNow(t, cat.Memory))

	close(release)
	ev := waitFor(t, h.rec, persistedIs(k(10)))
	require.Equal(t, 1, ev.Attempts)
	waitFor(t, h.rec, persistedIs(k(20)))
	require.Equal(t, int32(1), most.Load(), "two StartSaves of one pchannel in the catalog at once")
	stopped, _ := h.poison(pid)
	require.Equal(t, k(20), stopped.LastPersisted)
}

// A started save that the catalog never tells is reported overdue, as a
// Save that ignores its context is, and a stop does not wait for it.
func TestStartedSaveNeverToldIsOverdue(t *testing.T) {
	h := newHarness(t)
	cat := newStarter()
	const saveTimeout = 50 * time.Millisecond
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}), actors.WithSaveTimeout(saveTimeout))
	cat.next(t) // and never told
	failed := waitFor(t, h.rec, func(*messages.PersistFailed) bool { return true })
	require.ErrorIs(t, failed.Err, actors.ErrCatalogOverdue)
	require.ErrorContains(t, failed.Err, "StartSave's done not yet called 100ms after its context ended (its deadline: 50ms)",
		"StartSave returned at once: the catalog's done is what is late")
	require.Zero(t, failed.NextRetry, "an overdue save is waited for, not retried")

	stopped, took := h.stop(pid)
	require.Less(t, took, 5*time.Second)
	require.Nil(t, stopped.LastPersisted)
	require.Equal(t, k(10), stopped.Dropped, "the minimum never told durable is reported dropped")
}

// gatheringStarter passes saves on to a Bolt, and counts those that went
// in. Started saves are held until want of them have come, then passed on
// together, so that all of them join one batch.
type gatheringStarter struct {
	*persistence.Bolt
	want int

	mu      sync.Mutex
	held    []func()
	entered atomic.Int32
}

func (c *gatheringStarter) StartSave(ctx context.Context, pchannel string, v wal.MessageID, done func(error)) error {
	c.mu.Lock()
	c.held = append(c.held, func() {
		if err := c.Bolt.StartSave(ctx, pchannel, v, done); err != nil {
			go done(err)
		}
	})
	var all []func()
	if len(c.held) == c.want {
		all, c.held = c.held, nil
	}
	c.mu.Unlock()
	for _, start := range all {
		start()
	}
	c.entered.Add(1)
	return nil
}

func (c *gatheringStarter) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	c.entered.Add(1)
	return c.Bolt.Save(ctx, pchannel, v)
}

// Hundreds of pchannels saving on bbolt with group commit hold no
// goroutine each while their saves wait for the batch to commit: the
// saves are started, not waited for.
func TestGroupCommitHoldsNoGoroutinePerSave(t *testing.T) {
	const pchannels = 500
	const delay = persistence.MaxGroupCommitDelay // the batch of all the saves waits this long
	bolt, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"),
		persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(delay))
	require.NoError(t, err)
	cat := &gatheringStarter{Bolt: bolt, want: pchannels}
	defer cat.Close()

	h := newHarness(t)
	var persisted atomic.Int32
	sub := h.sys.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*messages.CheckpointPersisted); ok {
			persisted.Add(1)
		}
	})
	defer h.sys.EventStream.Unsubscribe(sub)
	before := runtime.NumGoroutine()
	for i := range pchannels {
		props, err := actors.NewProps(fmt.Sprintf("p-%03d", i), wal.Kafka, cat, actors.WithLogger(h.logger),
			actors.WithVChannels(map[string]wal.MessageID{"a": k(int64(i + 1))}))
		require.NoError(t, err)
		pid := h.sys.Root.Spawn(props)
		h.mu.Lock()
		h.live = append(h.live, pid)
		h.mu.Unlock()
	}
	require.Eventually(t, func() bool { return cat.entered.Load() == pchannels }, eventWait, time.Millisecond,
		"every pchannel starts its first save")
	// The pool's workers shed within its idle time; what is left is not
	// one goroutine per waiting save. Looked at well inside the delay,
	// while every save still waits.
	require.Eventually(t, func() bool { return runtime.NumGoroutine()-before < pchannels/10 }, delay/3, time.Millisecond,
		"goroutines while %d saves wait for their batch: %d more than before", pchannels, runtime.NumGoroutine()-before)
	require.Zero(t, persisted.Load(), "the batch committed before its delay of %v", delay)
	require.Eventually(t, func() bool { return persisted.Load() == pchannels }, eventWait, time.Millisecond,
		"every save persisted once the batch committed")
}

// aheadLiar refuses its first saves as stored ahead, naming a value below
// the one saved, or, with other set, naming that pchannel and a value
// above: a catalog with a bug.
type aheadLiar struct {
	*persistence.Memory
	lies atomic.Int32
	// other is the pchannel the lie names, if not the one saved; stored
	// the value it names; bare, when set, makes it ErrStoredAhead alone,
	// with no *persistence.StoredAheadError.
	other  string
	stored wal.MessageID
	bare   bool
	// failFirst, when set, fails the first save plainly, before the lies.
	failFirst atomic.Bool
}

func (l *aheadLiar) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if l.failFirst.CompareAndSwap(true, false) {
		return errors.New("mystore: transient")
	}
	if l.lies.Add(-1) >= 0 {
		if l.bare {
			return fmt.Errorf("mystore: %w", persistence.ErrStoredAhead)
		}
		named := pchannel
		if l.other != "" {
			named = l.other
		}
		return &persistence.StoredAheadError{PChannel: named, Stored: l.stored, Attempted: v}
	}
	return l.Memory.Save(ctx, pchannel, v)
}

// A "stored ahead" that proves nothing is not adopted, and the save is
// tried again:
//   - one naming a value that is not ahead: at once after the first
//     attempt (a racing store's report may be stale), and on the backoff
//     after later ones; it used to start again at once every time,
//     publishing hundreds of thousands of PersistFailed a second;
//   - one about another pchannel's record, which says nothing of this
//     one's: on the backoff, as any failure (adopted, the pchannel took 50
//     for persisted with nothing stored);
//   - one naming a value of another WAL, which cannot be ahead: as one
//     not ahead;
//   - one naming no value: as one not ahead;
//   - ErrStoredAhead alone, with no *persistence.StoredAheadError: on the
//     backoff, as any failure.
//
// None is reported as adopted (PersistFailed.Adopted), which a watcher
// such as the metrics collector takes for persisted. Each breaks the
// Catalog contract, and is logged as such, once: each retry's warning
// said only that the save failed. One naming a value not ahead, which a
// racing store may report once, is logged so when a retry meets it too.
func TestStoredAheadThatProvesNothingIsRetried(t *testing.T) {
	for _, c := range []struct {
		name        string
		other       string
		stored      wal.MessageID
		bare        bool
		firstAtOnce bool
		broken      string // the contract breach logged, if any
	}{
		{name: "not ahead", stored: k(1), firstAtOnce: true,
			broken: "its *persistence.StoredAheadError names kafka:1, which is not at or above kafka:10, on a retry too"},
		{name: "another pchannel's", other: "someone-else", stored: k(50), broken: `its *persistence.StoredAheadError is about pchannel "someone-else"`},
		{name: "another WAL's", stored: wal.PulsarID{LedgerID: 99}, firstAtOnce: true,
			broken: "its *persistence.StoredAheadError names pulsar:99:0:0@0, which is not at or above kafka:10, on a retry too"},
		{name: "no value", stored: nil, firstAtOnce: true, broken: "its *persistence.StoredAheadError names no value stored"},
		{name: "bare", bare: true, broken: "it is no *persistence.StoredAheadError naming the value stored"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			cat := &aheadLiar{Memory: persistence.NewMemory(), other: c.other, stored: c.stored, bare: c.bare}
			cat.lies.Store(3)
			core, logs := observer.New(zap.ErrorLevel)
			pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}), actors.WithBackoff(fastBackoff),
				actors.WithLogger(zap.New(core)))
			ev := waitFor(t, h.rec, persistedIs(k(10)))
			require.Equal(t, 4, ev.Attempts)
			failed := collect[*messages.PersistFailed](h.rec)
			require.Len(t, failed, 3)
			for i, f := range failed {
				require.ErrorIs(t, f.Err, persistence.ErrStoredAhead)
				require.Equal(t, k(10), f.Value)
				require.Nil(t, f.Adopted, "not adopted")
				if i == 0 && c.firstAtOnce {
					require.Zero(t, f.NextRetry, "after a first attempt: tried again at once")
				} else {
					require.Positive(t, f.NextRetry, "on the backoff")
				}
			}
			require.Equal(t, k(10), loadNow(t, cat.Memory))
			stopped, _ := h.poison(pid)
			require.Equal(t, k(10), stopped.LastPersisted)
			broken := logs.FilterMessageSnippet("it breaks the Catalog contract").All()
			require.Len(t, broken, 1, "told once, not on each of the 3 refusals")
			require.Contains(t, broken[0].Message, "the catalog refused a save as stored ahead, but "+c.broken)
		})
	}
}

// A report naming a value not ahead, met once after a failure of another
// kind, is no breach of the contract: a racing store may make it once. It
// was logged as "on a retry too", the attempt counting the failure
// before it.
func TestAStaleStoredAheadAfterAnotherFailureIsNoBreach(t *testing.T) {
	h := newHarness(t)
	cat := &aheadLiar{Memory: persistence.NewMemory(), stored: k(1)}
	cat.failFirst.Store(true)
	cat.lies.Store(1)
	core, logs := observer.New(zap.ErrorLevel)
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}), actors.WithBackoff(fastBackoff),
		actors.WithLogger(zap.New(core)))
	ev := waitFor(t, h.rec, persistedIs(k(10)))
	require.Equal(t, 3, ev.Attempts, "a failure, a stale report, then the save")
	stopped, _ := h.poison(pid)
	require.Equal(t, k(10), stopped.LastPersisted)
	require.Empty(t, logs.FilterMessageSnippet("it breaks the Catalog contract").All())
}
