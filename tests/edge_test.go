package tests

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// A graceful stop while a crashed persister waits for its restart: the
// pending minimum should still be flushed (I7: a catalog panic loses no
// checkpoint; graceful stop flushes within the bound).
func TestGracefulStopWhilePersisterAwaitsRestart(t *testing.T) {
	const flush = 500 * time.Millisecond
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Error())
	// The first restart waits Initial: long enough to stop meanwhile.
	slow := actors.Backoff{Initial: 5 * time.Second, Max: 10 * time.Second, Multiplier: 1.5}
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(slow), actors.WithStopFlushTimeout(flush), h.crashingLogger(1),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}))
	waitFor(t, h.rec, any1[*messages.PersisterRestarted])
	h.update(pid, "a", 20)
	stopped, took := h.poison(pid)
	t.Logf("graceful stop with a crashed persister took %v; stopped %+v; history %v", took, stopped, mem.History(pch))
	require.True(t, stopped.Flushed, "pending minimum dropped by a graceful stop while the persister was down (took %v)", took)
	require.Equal(t, k(20), loadNow(t, mem))
}

// fencing is a catalog whose writer lost the pchannel: every Save fails
// with ErrFenced (faultinject has no such fault).
type fencing struct {
	persistence.Catalog
	mu    sync.Mutex
	saves int
}

func (f *fencing) Save(context.Context, string, wal.MessageID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saves++
	return errFencedByTerm
}

// errFencedByTerm says by whom, as a catalog's fencing error does.
var errFencedByTerm = fmt.Errorf("%w: a record of term 8 is stored", persistence.ErrFenced)

func (f *fencing) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saves
}

// A fenced writer stops saving for good: no retry, no further save; it
// publishes OwnershipLost and stops itself.
func TestFencedWriterStops(t *testing.T) {
	h := newHarness(t)
	cat := &fencing{Catalog: persistence.NewMemory()}
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithBackoff(fastBackoff),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	f := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.ErrorIs(t, f.Err, persistence.ErrFenced)
	require.Zero(t, f.NextRetry)
	lost := waitFor(t, h.rec, any1[*messages.OwnershipLost])
	require.ErrorIs(t, lost.Cause, persistence.ErrFenced)
	require.ErrorContains(t, lost.Cause, "a record of term 8 is stored", "the catalog's word on why, carried on")
	stopped := waitFor(t, h.rec, any1[*messages.Stopped])
	h.forget(pid)
	require.Nil(t, stopped.LastPersisted)
	require.Equal(t, 1, cat.count(), "a fenced writer saved again")
	require.Len(t, collect[*messages.PersistFailed](h.rec), 1)
	_, err := actors.GetState(ctxtest.Within(200*time.Millisecond), h.sys.Root, pid)
	require.Error(t, err, "the fenced actor still answers")
	t.Logf("stopped after fencing: %+v", stopped)
}

// heldFencing refuses every save with errFencedByTerm, the first once
// release is closed.
type heldFencing struct {
	persistence.Catalog
	entered, release chan struct{}
	once             sync.Once
}

func (f *heldFencing) Save(ctx context.Context, _ string, _ wal.MessageID) error {
	f.once.Do(func() {
		close(f.entered)
		select {
		case <-f.release:
		case <-ctx.Done():
		}
	})
	return errFencedByTerm
}

// A graceful stop whose flush is fenced says by whom in Stopped, as
// OwnershipLost would have: the persister learns it first, and the
// actor, stopping, hears of it from the persister's status alone, which
// gave bare ErrFenced, "writer does not own the pchannel".
func TestAGracefulStopFencedSaysByWhom(t *testing.T) {
	h := newHarness(t)
	cat := &heldFencing{Catalog: persistence.NewMemory(), entered: make(chan struct{}), release: make(chan struct{})}
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	select {
	case <-cat.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no save began")
	}
	h.forget(pid)
	stopped := make(chan *messages.Stopped, 1)
	go func() {
		ev, err := actors.Poison(ctxtest.Within(10*time.Second), h.sys, pid)
		assert.NoError(t, err)
		stopped <- ev
	}()
	// The stop has begun once the pchannel no longer answers.
	require.Eventually(t, func() bool {
		_, err := actors.GetState(ctxtest.Within(50*time.Millisecond), h.sys.Root, pid)
		return err != nil
	}, 10*time.Second, 10*time.Millisecond)
	close(cat.release)
	ev := <-stopped
	require.NotNil(t, ev)
	require.False(t, ev.Flushed)
	require.Equal(t, k(10), ev.Dropped)
	require.ErrorIs(t, ev.Reason, persistence.ErrFenced)
	require.ErrorContains(t, ev.Reason, "a record of term 8 is stored", "the catalog's word on why")
}

// WithOwnership: when the ownership context ends the actor publishes
// OwnershipLost, saves nothing more and stops.
func TestOwnershipLostStopsActor(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	owner, lose := context.WithCancelCause(context.Background())
	defer lose(nil)
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithOwnership(owner),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	waitFor(t, h.rec, persistedIs(k(10)))
	cause := errors.New("session expired")
	lose(cause)
	lost := waitFor(t, h.rec, any1[*messages.OwnershipLost])
	require.ErrorIs(t, lost.Cause, cause)
	stopped := waitFor(t, h.rec, any1[*messages.Stopped])
	h.forget(pid)
	require.Equal(t, k(10), stopped.LastPersisted)
	require.Equal(t, 1, fi.Calls(faultinject.OpSave))
	require.Equal(t, []wal.MessageID{k(10)}, mem.History(pch))
}

// WithOwnership: nothing is saved once the ownership context has ended,
// even before the actor has heard of it. A bbolt or memory catalog has no
// fencing of its own: a save made meanwhile would be a stale writer's.
func TestNoSaveOnceOwnershipEnded(t *testing.T) {
	t.Run("ended before spawn", func(t *testing.T) {
		for _, preload := range []bool{false, true} {
			for range 10 {
				h := newHarness(t)
				mem := persistence.NewMemory()
				owner, lose := context.WithCancelCause(context.Background())
				cause := errors.New("session expired")
				lose(cause)
				opts := []actors.Option{actors.WithOwnership(owner), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)})}
				if preload {
					opts = append(opts, actors.WithPreloaded(nil))
				}
				pid := h.spawn(wal.Kafka, mem, opts...)
				lost := waitFor(t, h.rec, any1[*messages.OwnershipLost])
				require.ErrorIs(t, lost.Cause, cause)
				stopped := waitFor(t, h.rec, any1[*messages.Stopped])
				h.forget(pid)
				require.False(t, stopped.Flushed)
				require.Empty(t, mem.History(pch), "saved with an ownership that had ended (preloaded %v)", preload)
				h.close()
			}
		}
	})
	t.Run("ended while running", func(t *testing.T) {
		h := newHarness(t)
		mem := persistence.NewMemory()
		owner, lose := context.WithCancelCause(context.Background())
		defer lose(nil)
		pid, _ := spawnRecovered(t, h, wal.Kafka, mem, actors.WithOwnership(owner),
			actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
		waitFor(t, h.rec, persistedIs(k(10)))
		lose(errors.New("session expired"))
		// After the end: applied but not saved, or refused if the stop has
		// begun (a dead letter); either way the rise must not be saved.
		_ = h.request(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(20)})
		waitFor(t, h.rec, any1[*messages.Stopped])
		h.forget(pid)
		require.Equal(t, []wal.MessageID{k(10)}, mem.History(pch))
	})
}

// WithPreloaded: recovery uses the value read beforehand (one LoadAll for
// many pchannels) and reads nothing itself.
func TestPreloadedRecovery(t *testing.T) {
	t.Run("stored", func(t *testing.T) {
		h := newHarness(t)
		mem := persistence.NewMemory()
		require.NoError(t, mem.Save(context.Background(), pch, k(500)))
		all, err := mem.LoadAll(context.Background())
		require.NoError(t, err)
		fi := faultinject.Wrap(mem)
		pid, rec := spawnRecovered(t, h, wal.Kafka, fi, actors.WithPreloaded(all[pch]),
			actors.WithVChannels(map[string]wal.MessageID{"a": k(100)}))
		require.True(t, rec.FromCatalog)
		require.Equal(t, k(500), rec.StartMessageID)
		require.Equal(t, 1, rec.Attempts)
		require.Zero(t, fi.Calls(faultinject.OpLoad))
		h.update(pid, "a", 600)
		waitFor(t, h.rec, persistedIs(k(600)))
		require.Equal(t, []wal.MessageID{k(500), k(600)}, mem.History(pch))
	})
	t.Run("nothing", func(t *testing.T) {
		h := newHarness(t)
		fi := faultinject.Wrap(persistence.NewMemory())
		_, rec := spawnRecovered(t, h, wal.Kafka, fi, actors.WithPreloaded(nil),
			actors.WithVChannels(map[string]wal.MessageID{"a": k(100)}))
		require.False(t, rec.FromCatalog)
		require.Equal(t, k(100), rec.StartMessageID)
		require.Zero(t, fi.Calls(faultinject.OpLoad))
		waitFor(t, h.rec, persistedIs(k(100)))
	})
	t.Run("foreign", func(t *testing.T) {
		// Refused at once: recovery would call it a corrupt record, which
		// the catalog's may not be.
		_, err := actors.NewProps(pch, wal.Kafka, persistence.NewMemory(), actors.WithPreloaded(wal.PulsarID{LedgerID: 1}),
			actors.WithVChannels(map[string]wal.MessageID{"a": k(100)}))
		require.ErrorIs(t, err, actors.ErrInvalidOption)
		require.ErrorIs(t, err, wal.ErrWALMismatch)
		require.ErrorContains(t, err, "preloaded checkpoint pulsar:1:0:0")
	})
}

// Each save attempt has its own deadline: a hung catalog costs one attempt.
func TestSaveTimeoutCostsOneAttempt(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Hang())
	const timeout = 50 * time.Millisecond
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithSaveTimeout(timeout),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	f := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.ErrorIs(t, f.Err, context.DeadlineExceeded)
	h.update(pid, "a", 11)
	waitFor(t, h.rec, persistedIs(k(11)))
	hist := mem.History(pch) // 10 too, if its retry beat the update
	requireStrictlyIncreasing(t, hist, "stored checkpoints")
	require.Equal(t, k(11), hist[len(hist)-1])
}

// A save that committed but whose reply was lost is retried with the same
// value, which the store accepts: no error loop.
func TestLostReplyRetrySucceeds(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.LostReply())
	spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	ok := waitFor(t, h.rec, persistedIs(k(10)))
	require.Equal(t, 2, ok.Attempts)
	require.Len(t, collect[*messages.PersistFailed](h.rec), 1)
	require.Equal(t, []wal.MessageID{k(10), k(10)}, mem.History(pch))
}

// WithMinSaveInterval spaces successful saves; a graceful stop does not
// wait for the interval.
func TestMinSaveInterval(t *testing.T) {
	const interval = 60 * time.Millisecond
	h := newHarness(t)
	mem := persistence.NewMemory()
	pid, _ := spawnRecovered(t, h, wal.Kafka, mem, actors.WithMinSaveInterval(interval),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(0)}))
	waitFor(t, h.rec, persistedIs(k(0)))
	for i := int64(1); i <= 3; i++ {
		h.update(pid, "a", i)
		waitFor(t, h.rec, persistedIs(k(i)))
	}
	saved := collect[*messages.CheckpointPersisted](h.rec)
	for i := 1; i < len(saved); i++ {
		// A save starts no sooner than interval after the previous success;
		// its own event comes after it returns.
		require.GreaterOrEqual(t, saved[i].At.Sub(saved[i-1].At), interval, "save %d", i)
	}
	h.update(pid, "a", 4)
	stopped, took := h.poison(pid)
	require.True(t, stopped.Flushed)
	require.Equal(t, k(4), loadNow(t, mem))
	require.Less(t, took, actors.DefaultStopFlushTimeout)
}

// Invalid options are an error from NewProps, never a panic later.
func TestNewPropsRejectsInvalidOptions(t *testing.T) {
	mem := persistence.NewMemory()
	cases := map[string]struct {
		pchannel string
		walName  wal.Name
		cat      persistence.Catalog
		opts     []actors.Option
	}{
		"empty pchannel":   {"", wal.Kafka, mem, nil},
		"nil catalog":      {pch, wal.Kafka, nil, nil},
		"unknown WAL":      {pch, "nope", mem, nil},
		"nil logger":       {pch, wal.Kafka, mem, []actors.Option{actors.WithLogger(nil)}},
		"zero backoff":     {pch, wal.Kafka, mem, []actors.Option{actors.WithBackoff(actors.Backoff{})}},
		"max below init":   {pch, wal.Kafka, mem, []actors.Option{actors.WithBackoff(actors.Backoff{Initial: time.Second, Max: time.Millisecond, Multiplier: 2})}},
		"shrinking":        {pch, wal.Kafka, mem, []actors.Option{actors.WithBackoff(actors.Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: 0.5})}},
		"jitter 1":         {pch, wal.Kafka, mem, []actors.Option{actors.WithBackoff(actors.Backoff{Initial: time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 1})}},
		"zero save time":   {pch, wal.Kafka, mem, []actors.Option{actors.WithSaveTimeout(0)}},
		"zero flush time":  {pch, wal.Kafka, mem, []actors.Option{actors.WithStopFlushTimeout(0)}},
		"negative spacing": {pch, wal.Kafka, mem, []actors.Option{actors.WithMinSaveInterval(-time.Second)}},
		"foreign vchannel": {pch, wal.Kafka, mem, []actors.Option{actors.WithVChannels(map[string]wal.MessageID{"a": wal.PulsarID{}})}},
		"nil vchannel":     {pch, wal.Kafka, mem, []actors.Option{actors.WithVChannels(map[string]wal.MessageID{"a": nil})}},
		"empty vchannel":   {pch, wal.Kafka, mem, []actors.Option{actors.WithVChannels(map[string]wal.MessageID{"": k(1)})}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			props, err := actors.NewProps(c.pchannel, c.walName, c.cat, c.opts...)
			require.ErrorIs(t, err, actors.ErrInvalidOption)
			require.Nil(t, props)
		})
	}
	props, err := actors.NewProps(pch, wal.Pulsar, mem, actors.WithMinSaveInterval(0))
	require.NoError(t, err)
	require.NotNil(t, props)
}

// WithVChannels copies its map: changing it after NewProps changes nothing.
func TestWithVChannelsCopiesInput(t *testing.T) {
	h := newHarness(t)
	given := map[string]wal.MessageID{"a": k(10)}
	props, err := actors.NewProps(pch, wal.Kafka, persistence.NewMemory(), actors.WithVChannels(given), actors.WithLogger(h.logger))
	require.NoError(t, err)
	given["b"] = k(1)
	pid := h.sys.Root.Spawn(props)
	h.mu.Lock()
	h.live = append(h.live, pid)
	h.mu.Unlock()
	require.Equal(t, map[string]wal.MessageID{"a": k(10)}, h.state(pid, true).Checkpoints)
}

// Two pchannels on one catalog are independent; events name their own.
func TestTwoPChannelsOneCatalog(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	other := newRecorder("pch-other")
	sub := h.sys.EventStream.Subscribe(other.Observe)
	defer h.sys.EventStream.Unsubscribe(sub)
	props, err := actors.NewProps("pch-other", wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"x": k(7)}), actors.WithLogger(h.logger))
	require.NoError(t, err)
	p2 := h.sys.Root.Spawn(props)
	pid, _ := spawnRecovered(t, h, wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"a": k(100)}))
	waitFor(t, h.rec, persistedIs(k(100)))
	waitFor(t, other, persistedIs(k(7)))
	h.update(pid, "a", 200)
	waitFor(t, h.rec, persistedIs(k(200)))
	require.NoError(t, h.sys.Root.PoisonFuture(p2).Wait())
	all, err := mem.LoadAll(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{pch: k(200), "pch-other": k(7)}, all)
	for _, ev := range h.rec.Since(0) {
		require.Equal(t, pch, ev.EventHeader().PChannel)
	}
}
