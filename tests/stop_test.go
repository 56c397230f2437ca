package tests

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// Graceful stop (Poison) waits for the save in flight and then saves the
// pending minimum, on a slow catalog.
func TestGracefulStopFlushes(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem, faultinject.WithLatency(200*time.Millisecond))
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}))
	// The save of 10 is in flight (200 ms); 20 and 30 come meanwhile.
	h.update(pid, "a", 20)
	h.update(pid, "a", 30)
	stopped, took := h.poison(pid)
	t.Logf("graceful stop took %v", took)
	require.True(t, stopped.Graceful)
	require.True(t, stopped.Flushed)
	require.Nil(t, stopped.Dropped)
	require.Equal(t, k(30), stopped.LastPersisted)
	require.Equal(t, k(30), loadNow(t, mem))
	require.Less(t, took, actors.DefaultStopFlushTimeout)
	requireStrictlyIncreasing(t, mem.History(pch), "stored checkpoints")
}

// Graceful stop cuts a retry wait short: the pending value is tried now,
// not after the backoff.
func TestGracefulStopHurriesRetry(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Error())
	slow := actors.Backoff{Initial: 5 * time.Second, Max: 10 * time.Second, Multiplier: 1.5}
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(slow), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	f := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.GreaterOrEqual(t, f.NextRetry, 5*time.Second)
	h.update(pid, "a", 15)
	stopped, took := h.poison(pid)
	t.Logf("graceful stop took %v", took)
	require.True(t, stopped.Flushed)
	require.Equal(t, k(15), stopped.LastPersisted)
	require.Equal(t, k(15), loadNow(t, mem))
	require.Less(t, took, time.Second)
}

// Hard stop (Stop) does not flush: the save in flight is cancelled, the
// pending minimum is reported as dropped, the stop is prompt and no
// goroutine is left.
func TestHardStopDropsPending(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	g := newGated(mem)
	pid, _ := spawnRecovered(t, h, wal.Kafka, g, actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}))
	waitFor(t, h.rec, persistedIs(k(10)))
	held := g.holdNext(t, faultinject.OpSave)
	h.update(pid, "a", 20)
	held.waitEntered(t) // the save of 20 hangs
	h.update(pid, "a", 30)

	stopped, took := h.stop(pid)
	t.Logf("hard stop took %v", took)
	require.False(t, stopped.Graceful)
	require.False(t, stopped.Flushed)
	require.Equal(t, k(30), stopped.Dropped)
	require.Equal(t, k(10), stopped.LastPersisted)
	require.Less(t, took, time.Second, "hard stop waited on a hanging save")
	require.Equal(t, k(10), loadNow(t, mem))
	require.Len(t, collect[*messages.CheckpointPersisted](h.rec), 1)

	h.close()
	goleak.VerifyNone(t)
}

// A graceful stop on a catalog that hangs longer than the flush timeout
// gives up after about the timeout, reporting what it dropped.
func TestGracefulStopFlushTimeout(t *testing.T) {
	const flush = 150 * time.Millisecond
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Pass(), faultinject.Hang())
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithStopFlushTimeout(flush),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}))
	waitFor(t, h.rec, persistedIs(k(10)))
	h.update(pid, "a", 20) // its save hangs until cancelled

	stopped, took := h.poison(pid)
	t.Logf("graceful stop with a hanging catalog took %v (flush timeout %v)", took, flush)
	require.True(t, stopped.Graceful)
	require.True(t, stopped.Recovered)
	require.False(t, stopped.Flushed)
	require.Equal(t, k(20), stopped.Dropped)
	require.Equal(t, k(10), stopped.LastPersisted)
	require.GreaterOrEqual(t, took, flush)
	require.Less(t, took, flush+time.Second)
	require.Equal(t, k(10), loadNow(t, mem))
	require.Equal(t, 2, fi.Calls(faultinject.OpSave))

	h.close()
	goleak.VerifyNone(t)
}

// A stop during a recovery read that hangs cancels the read and leaves no
// goroutine.
func TestStopDuringHangingRecovery(t *testing.T) {
	h := newHarness(t)
	fi := faultinject.Wrap(persistence.NewMemory())
	fi.Script(faultinject.OpLoad, faultinject.Hang())
	g := newGated(fi)
	held := g.holdNext(t, faultinject.OpLoad) // only to know the read began
	held.Release()
	pid := h.spawn(wal.Kafka, g, actors.WithVChannels(map[string]wal.MessageID{"a": k(1)}))
	held.waitEntered(t)
	require.False(t, h.state(pid, false).Recovered)
	stopped, took := h.stop(pid)
	t.Logf("hard stop during a hanging recovery took %v", took)
	require.Less(t, took, time.Second)
	require.False(t, stopped.Recovered)
	require.False(t, stopped.Flushed)
	require.ErrorIs(t, stopped.Reason, messages.ErrHardStop)
	require.Equal(t, k(1), stopped.Dropped)
	require.Empty(t, collect[*messages.Recovered](h.rec))
	h.close()
	goleak.VerifyNone(t)
}

// A panic inside the catalog crashes only the persister; it is restarted
// and the latest minimum is persisted (I7).
func TestPersisterCrashRestartsWithoutLoss(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Error(), faultinject.Pass(), faultinject.Error())
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff), h.crashingLogger(2),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}))
	r := waitFor(t, h.rec, any1[*messages.PersisterRestarted])
	require.Equal(t, 1, r.Restarts)
	require.Equal(t, persisterBug{n: 1}, r.Reason)
	h.update(pid, "a", 20)
	waitFor(t, h.rec, persistedIs(k(20)))

	// A second crash, with the minimum moving while the persister is down.
	h.update(pid, "a", 30)
	r = waitFrom(t, h.rec, 0, func(e *messages.PersisterRestarted) bool { return e.Restarts == 2 })
	require.Equal(t, persisterBug{n: 2}, r.Reason)
	h.update(pid, "a", 40)
	waitFor(t, h.rec, persistedIs(k(40)))
	require.Equal(t, k(40), loadNow(t, mem))
	h.poison(pid)
	hist := mem.History(pch)
	requireStrictlyIncreasing(t, hist, "stored checkpoints")
	require.Equal(t, k(40), hist[len(hist)-1])
	require.Len(t, collect[*messages.PersisterRestarted](h.rec), 2)
	t.Logf("history %v", hist)
}

// A panic inside the catalog is a failed save, as a failed Load is a failed
// recovery: PersistFailed saying so, a retry after the backoff, and no
// restart of the persister. The warning of each failed save gives the
// stack where the catalog panicked: its author had only the value.
func TestCatalogPanicIsAFailedSave(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.Panic(), faultinject.Panic())
	core, logs := observer.New(zap.WarnLevel)
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(1000)}), actors.WithLogger(zap.New(core)))
	f := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.Equal(t, k(10), f.Value)
	require.Equal(t, 1, f.Attempt)
	require.ErrorContains(t, f.Err, "catalog panicked in Save")
	require.ErrorIs(t, f.Err, actors.ErrCatalogPanicked)
	var panicked *actors.CatalogPanicError
	require.ErrorAs(t, f.Err, &panicked)
	require.Equal(t, "Save", panicked.Op)
	require.GreaterOrEqual(t, f.NextRetry, fastBackoff.Initial)
	waitFor(t, h.rec, persistedIs(k(10)))
	h.update(pid, "a", 20)
	waitFor(t, h.rec, persistedIs(k(20)))
	h.poison(pid)
	require.Len(t, collect[*messages.PersistFailed](h.rec), 2)
	require.Empty(t, collect[*messages.PersisterRestarted](h.rec))
	require.Equal(t, k(20), loadNow(t, mem))
	require.Contains(t, string(panicked.Stack), "faultinject.(*Catalog).Save", "where it panicked")
	failed := logs.FilterMessage("save failed").All()
	require.Len(t, failed, 2)
	for _, l := range failed {
		require.Contains(t, l.ContextMap()["stack"], "faultinject.(*Catalog).Save")
	}
}

// Restart on a real bbolt file: run, advance, stop gracefully, close,
// reopen, respawn: the start message ID is the last CheckpointPersisted.
func TestRestartOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lowwater.db")
	rng := newRand(t)
	h := newHarness(t)

	cat, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	given := make(map[string]wal.MessageID)
	model := make(map[string]int64)
	for i := range 5 {
		name := fmt.Sprintf("v%d", i)
		model[name] = rng.Int64N(100)
		given[name] = k(model[name])
	}
	pid, rec := spawnRecovered(t, h, wal.Kafka, cat, actors.WithBackoff(fastBackoff), actors.WithVChannels(given))
	require.False(t, rec.FromCatalog)
	for round := range 50 {
		var batch []messages.VChannelCheckpoint
		for name, n := range model {
			n += rng.Int64N(10)
			model[name] = n
			batch = append(batch, messages.VChannelCheckpoint{VChannel: name, Checkpoint: k(n)})
		}
		h.mustRequest(pid, &messages.UpdateBatch{Updates: batch})
		if round == 25 {
			s := h.state(pid, false)
			waitFor(t, h.rec, persistedIs(s.Minimum))
		}
	}
	final := h.state(pid, false).Minimum
	stopped, _ := h.poison(pid)
	require.True(t, stopped.Flushed)
	saved := collect[*messages.CheckpointPersisted](h.rec)
	require.NotEmpty(t, saved)
	last := saved[len(saved)-1].Value
	require.Equal(t, final, last, "graceful stop did not flush the minimum")
	require.Equal(t, last, stopped.LastPersisted)
	require.NoError(t, cat.Close())

	cat, err = persistence.OpenBolt(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, cat.Close()) }()
	from := h.rec.Len()
	pid = h.spawn(wal.Kafka, cat, actors.WithVChannels(map[string]wal.MessageID{"v0": k(0)}))
	rec = waitFrom(t, h.rec, from, any1[*messages.Recovered])
	require.True(t, rec.FromCatalog)
	require.Equal(t, last, rec.StartMessageID)
	s := h.state(pid, false)
	require.Equal(t, last, s.StartMessageID)
	require.Equal(t, last, s.Persisted)
	stopped, _ = h.poison(pid)
	require.Equal(t, last, stopped.LastPersisted)
	require.Empty(t, collect[*messages.PersistFailed](h.rec))
	require.Equal(t, last, loadNow(t, cat), "the stored checkpoint went backward")
	t.Logf("persisted %d times, last %s", len(saved), last)
}
