package tests

import (
	"context"
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

// Persisted reaches the minimum, and each CheckpointPersisted is durable
// when published.
func TestPersistedReachesMinimum(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	pid, rec := spawnRecovered(t, h, wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(20)}))
	require.False(t, rec.FromCatalog)
	require.Equal(t, k(10), rec.StartMessageID)

	ev := waitFor(t, h.rec, persistedIs(k(10)))
	require.Equal(t, 1, ev.Attempts)
	require.Equal(t, k(10), loadNow(t, mem))

	h.update(pid, "a", 30)
	ev = waitFor(t, h.rec, persistedIs(k(20)))
	require.Equal(t, k(20), loadNow(t, mem), "CheckpointPersisted published before the value was durable")
	require.Equal(t, 1, ev.Attempts)
	require.GreaterOrEqual(t, ev.Latency, time.Duration(0))

	// The persister reports to the parent asynchronously (see
	// TestGetStateAfterCheckpointPersisted): GetState catches up.
	s := h.statePersisted(pid, k(20))
	require.Equal(t, k(20), s.Minimum)
	require.Equal(t, []wal.MessageID{k(10), k(20)}, mem.History(pch))
}

// GetState.Persisted lags CheckpointPersisted: the persister publishes the
// event before it reports the value to its parent (actors/persister.go,
// saved: Publish, then do, then report), so a caller that reacts to the
// event with a GetState can read the previous value. The subscriber below
// asks at the moment of publication, which makes the race deterministic;
// an ordinary subscriber that hands the event to another goroutine sees
// the same thing about one time in a few hundred.
func TestGetStateAfterCheckpointPersisted(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	type seen struct{ event, state wal.MessageID }
	var (
		mu    sync.Mutex
		got   []seen
		asked = make(chan struct{}, 10)
	)
	sub := h.sys.EventStream.Subscribe(func(e any) {
		ev, ok := e.(*messages.CheckpointPersisted)
		if !ok || ev.PChannel != pch {
			return
		}
		pid := h.firstLive()
		if pid == nil { // published before spawn returned: nothing to ask
			asked <- struct{}{}
			return
		}
		s, err := actors.GetState(ctxtest.Within(reqTimeout), h.sys.Root, pid)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			got = append(got, seen{ev.Value, nil})
			asked <- struct{}{}
			return
		}
		got = append(got, seen{ev.Value, s.Persisted})
		asked <- struct{}{}
	})
	defer h.sys.EventStream.Unsubscribe(sub)
	pid, _ := spawnRecovered(t, h, wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"a": k(1)}))
	waitFor(t, h.rec, persistedIs(k(1)))
	h.update(pid, "a", 2)
	waitFor(t, h.rec, persistedIs(k(2)))
	// Stop only once the subscriber is done asking: a subscriber blocked
	// on the parent would hold the persister during the stop's flush.
	for range 2 {
		select {
		case <-asked:
		case <-time.After(eventWait):
			t.Fatal("the subscriber never asked")
		}
	}
	h.sys.EventStream.Unsubscribe(sub)
	h.poison(pid)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range got {
		assert.Equal(t, s.event, s.state, "GetState.Persisted when CheckpointPersisted(%s) was published", s.event)
	}
}

// A catalog failing the first K saves: PersistFailed K times at growing
// intervals, each retry saving the latest minimum, then success.
func TestSaveRetriedWithBackoffThenLatestSaved(t *testing.T) {
	const K = 4
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, repeat(faultinject.Error(), K)...)
	// The gate holds the first attempt, so that the minimum moves while it
	// is in flight: every retry must carry the new minimum.
	g := newGated(fi)
	held := g.holdNext(t, faultinject.OpSave)
	bo := actors.Backoff{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.2}
	pid, _ := spawnRecovered(t, h, wal.Kafka, g, actors.WithBackoff(bo),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10), "b": k(100)}))
	held.waitEntered(t)
	h.update(pid, "a", 50)
	h.update(pid, "a", 70)
	held.Release()
	first := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.Equal(t, k(10), first.Value)

	ok := waitFor(t, h.rec, persistedIs(k(70)))
	require.Equal(t, K+1, ok.Attempts)
	fails := collect[*messages.PersistFailed](h.rec)
	require.Len(t, fails, K)
	for i, f := range fails {
		require.Equal(t, i+1, f.Attempt)
		require.ErrorIs(t, f.Err, faultinject.ErrInjected)
		require.GreaterOrEqual(t, f.NextRetry, bo.Initial, "retry %d", i)
		require.LessOrEqual(t, f.NextRetry, bo.Max, "retry %d", i)
		if i > 0 {
			require.Greater(t, f.NextRetry, fails[i-1].NextRetry, "retry %d: intervals must grow", i)
			// Never a hot loop: the next attempt cannot fail before the
			// announced wait has passed.
			require.GreaterOrEqual(t, f.At.Sub(fails[i-1].At), fails[i-1].NextRetry, "retry %d came early", i)
			require.Equal(t, k(70), f.Value, "retry %d did not save the latest minimum", i)
		}
	}
	require.Equal(t, []wal.MessageID{k(70)}, mem.History(pch), "only the latest minimum reaches the store")
	require.Equal(t, k(70), loadNow(t, mem))
	require.Equal(t, K+1, fi.Calls(faultinject.OpSave))
}

// With the default backoff the first retry waits at least 100 ms (the
// reference waited 500 ms; a 15-minute MaxElapsedTime made it hot-loop).
func TestDefaultBackoffFirstRetry(t *testing.T) {
	h := newHarness(t)
	fi := faultinject.Wrap(persistence.NewMemory())
	fi.Script(faultinject.OpSave, faultinject.Error(), faultinject.Error())
	spawnRecovered(t, h, wal.Kafka, fi, actors.WithVChannels(map[string]wal.MessageID{"a": k(1)}))
	ok := waitFor(t, h.rec, persistedIs(k(1)))
	require.Equal(t, 3, ok.Attempts)
	fails := collect[*messages.PersistFailed](h.rec)
	require.Len(t, fails, 2)
	require.GreaterOrEqual(t, fails[0].NextRetry, 100*time.Millisecond)
	require.LessOrEqual(t, fails[0].NextRetry, 150*time.Millisecond) // 100 ms lifted by 20 % jitter
	require.GreaterOrEqual(t, fails[1].NextRetry, fails[0].NextRetry)
	require.GreaterOrEqual(t, fails[1].At.Sub(fails[0].At), fails[0].NextRetry)
	require.GreaterOrEqual(t, ok.At.Sub(fails[1].At), fails[1].NextRetry)
}

// No value at or below the persisted one ever reaches the catalog, under
// random failures, adds below the floor, drops and updates; every stored
// value was a minimum of the tracker (I1, I2).
func TestNothingAtOrBelowPersistedReachesCatalog(t *testing.T) {
	h := newHarness(t)
	rng := newRand(t)
	mem := persistence.NewMemory()
	var (
		mu       sync.Mutex
		lastOK   wal.MessageID
		attempts int
		bad      []string
	)
	fi := faultinject.Wrap(mem, faultinject.WithSaveFailureRate(0.3), faultinject.WithSeed(rng.Int64()),
		faultinject.WithOnSave(func(_ string, v wal.MessageID, err error) {
			mu.Lock()
			defer mu.Unlock()
			attempts++
			if !wal.Less(lastOK, v) {
				bad = append(bad, fmt.Sprintf("save of %s with %s persisted", v, wal.String(lastOK)))
			}
			if err == nil {
				lastOK = v
			}
		}))
	given := make(map[string]wal.MessageID)
	model := make(map[string]int64)
	for i := range 20 {
		n := rng.Int64N(100)
		given[fmt.Sprintf("v%02d", i)] = k(n)
		model[fmt.Sprintf("v%02d", i)] = n
	}
	// minima holds every minimum the tracker had (I1: each stored value
	// must be one of them), computed from the model after each command,
	// which the actor applies in the order sent.
	minima := map[wal.MessageID]bool{}
	noteMinimum := func() {
		m := int64(0)
		first := true
		for _, n := range model {
			if first || n < m {
				m, first = n, false
			}
		}
		minima[k(m)] = true
	}
	noteMinimum()
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(given))
	next := 20
	for i := range 3000 {
		switch r := rng.IntN(100); {
		case r < 3 && len(model) > 1: // drop
			for name := range model {
				delete(model, name)
				h.sys.Root.Send(pid, &messages.DropVChannel{VChannel: name})
				break
			}
		case r < 6: // add, often below what is persisted
			name := fmt.Sprintf("v%02d", next)
			next++
			n := max(int64(i/2)-rng.Int64N(200), 0) // an offset: never negative
			model[name] = n
			h.sys.Root.Send(pid, &messages.AddVChannel{VChannel: name, Checkpoint: k(n)})
		default:
			for name, n := range model {
				n += rng.Int64N(20)
				model[name] = n
				h.sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: name, Checkpoint: k(n)})
				break
			}
		}
		noteMinimum()
		if i%300 == 299 {
			// Let the saves catch up now and then, so that later adds fall
			// below a persisted value.
			min := h.state(pid, false).Minimum
			waitFor(t, h.rec, func(e *messages.CheckpointPersisted) bool { return !e.Value.LT(min) })
		}
	}
	require.Empty(t, collect[*messages.CommandRejected](h.rec))
	stopped, _ := h.poison(pid)
	require.True(t, stopped.Flushed, "%+v", stopped)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, bad)
	hist := mem.History(pch)
	requireStrictlyIncreasing(t, hist, "stored checkpoints")
	for _, v := range hist {
		require.True(t, minima[v], "stored %s was never a minimum", v)
	}
	t.Logf("%d save attempts, %d stored, %d failures", attempts, len(hist), fi.Failures(faultinject.OpSave))
}

// 10,000 updates while one save is in flight cost at most 2 further saves
// (I4): the persister keeps only the latest minimum.
func TestUpdatesDuringSaveAreCoalesced(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	g := newGated(fi)
	held := g.holdNext(t, faultinject.OpSave)
	pid, _ := spawnRecovered(t, h, wal.Kafka, g, actors.WithVChannels(map[string]wal.MessageID{"a": k(0), "b": k(0)}))
	held.waitEntered(t) // the save of 0 is in flight

	const N = 10_000
	for i := int64(1); i <= N/2; i++ {
		h.sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: k(2 * i)})
		h.sys.Root.Send(pid, &messages.UpdateCheckpoint{VChannel: "b", Checkpoint: k(2*i + 1)})
	}
	s := h.state(pid, false)
	require.Equal(t, k(N), s.Minimum)
	require.Nil(t, s.Persisted)
	require.Zero(t, fi.Calls(faultinject.OpSave), "the held save has not reached the store yet")

	// The persister tells the parent about the save in flight by message.
	require.True(t, h.eventually(pid, func(s *messages.State) bool { return s.SaveInFlight }).SaveInFlight)
	held.Release()
	waitFor(t, h.rec, persistedIs(k(N)))
	h.poison(pid)
	saves := fi.Calls(faultinject.OpSave)
	t.Logf("%d updates during one save: %d further save(s), history %v", N, saves-1, mem.History(pch))
	require.LessOrEqual(t, saves-1, 2)
	// The updates queued while the test sent them are applied in runs, each
	// of which publishes one event: the events chain from 0 to N.
	advanced := collect[*messages.MinimumAdvanced](h.rec)
	require.NotEmpty(t, advanced)
	require.LessOrEqual(t, len(advanced), N-1, "at most one event a rise")
	from := k(0)
	for _, ev := range advanced {
		require.True(t, ev.From.EQ(from) && from.LT(ev.To), "%s→%s after %s", ev.From, ev.To, from)
		from = ev.To
	}
	require.Equal(t, k(N), from)
}

// An Add below the persisted value pulls the minimum down; nothing is saved
// until the minimum passes the persisted value again: the stored checkpoint
// never goes backward.
func TestAddBelowPersistedSavesNothingUntilPassed(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithVChannels(map[string]wal.MessageID{"a": k(100)}))
	waitFor(t, h.rec, persistedIs(k(100)))

	h.mustRequest(pid, &messages.AddVChannel{VChannel: "b", Checkpoint: k(50)})
	s := h.state(pid, false)
	require.Equal(t, k(50), s.Minimum)
	require.Equal(t, k(100), s.Persisted, "the floor does not follow an Add down")
	h.update(pid, "b", 80)  // minimum 80, below the floor
	h.update(pid, "b", 100) // minimum 100, at the floor
	h.update(pid, "b", 120) // minimum 100 (a)
	h.update(pid, "a", 130) // minimum 120: above the floor
	waitFor(t, h.rec, persistedIs(k(120)))
	h.poison(pid)

	require.Equal(t, []wal.MessageID{k(100), k(120)}, mem.History(pch))
	require.Equal(t, 2, fi.Calls(faultinject.OpSave), "a save at or below the floor reached the catalog")
	require.Empty(t, collect[*messages.PersistFailed](h.rec))
	var tos []wal.MessageID
	for _, e := range collect[*messages.MinimumAdvanced](h.rec) {
		tos = append(tos, e.To)
	}
	require.Equal(t, []wal.MessageID{k(80), k(100), k(120)}, tos)
}

// Dropping the slowest vchannel advances what is persisted.
func TestDropSlowestAdvancesPersisted(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	pid, _ := spawnRecovered(t, h, wal.Kafka, mem, actors.WithVChannels(map[string]wal.MessageID{"slow": k(10), "b": k(50), "c": k(60)}))
	waitFor(t, h.rec, persistedIs(k(10)))
	h.mustRequest(pid, &messages.DropVChannel{VChannel: "slow"})
	waitFor(t, h.rec, persistedIs(k(50)))
	require.Equal(t, k(50), loadNow(t, mem))
	require.Equal(t, []wal.MessageID{k(10), k(50)}, mem.History(pch))
}

// A catalog reporting that another writer got ahead is adopted: no retry of
// the refused value, the floor rises to the stored one.
func TestStoredAheadAdopted(t *testing.T) {
	h := newHarness(t)
	mem := persistence.NewMemory()
	fi := faultinject.Wrap(mem)
	fi.Script(faultinject.OpSave, faultinject.StoredAhead(k(500)))
	pid, _ := spawnRecovered(t, h, wal.Kafka, fi, actors.WithBackoff(fastBackoff), actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	f := waitFor(t, h.rec, any1[*messages.PersistFailed])
	require.ErrorIs(t, f.Err, persistence.ErrStoredAhead)
	require.Zero(t, f.NextRetry)
	require.Equal(t, k(500), f.Adopted)
	h.update(pid, "a", 400) // still below what the other writer stored
	h.update(pid, "a", 600)
	waitFor(t, h.rec, persistedIs(k(600)))
	h.poison(pid)
	require.Equal(t, []wal.MessageID{k(600)}, mem.History(pch))
	require.Equal(t, 2, fi.Calls(faultinject.OpSave))
}

func repeat(f faultinject.Fault, n int) []faultinject.Fault {
	out := make([]faultinject.Fault, n)
	for i := range out {
		out[i] = f
	}
	return out
}

// doneWatcher is a catalog that watches each call's context from a
// goroutine of its own, as a client with a connection per call may, and
// reports how the context ended.
type doneWatcher struct {
	*persistence.Memory
	ended chan string
}

func (d *doneWatcher) watch(ctx context.Context, op string) {
	done := ctx.Done()
	go func() {
		<-done
		d.ended <- fmt.Sprintf("%s: %v", op, ctx.Err())
	}()
}

func (d *doneWatcher) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	d.watch(ctx, "Load")
	return d.Memory.Load(ctx, pchannel)
}

func (d *doneWatcher) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	d.watch(ctx, "Save")
	return d.Memory.Save(ctx, pchannel, v)
}

// A call's context ends as soon as the call returns, not at its deadline:
// what the catalog started for it (a goroutine watching Done, a timer, a
// stream) is let go at once, not held for the save timeout.
func TestCatalogCallsContextEndsWhenItReturns(t *testing.T) {
	h := newHarness(t)
	cat := &doneWatcher{Memory: persistence.NewMemory(), ended: make(chan string, 4)}
	pid, _ := spawnRecovered(t, h, wal.Kafka, cat, actors.WithSaveTimeout(time.Hour),
		actors.WithVChannels(map[string]wal.MessageID{"a": k(10)}))
	waitFor(t, h.rec, persistedIs(k(10)))
	var ended []string
	for range 2 {
		select {
		case e := <-cat.ended:
			ended = append(ended, e)
		case <-time.After(eventWait):
			t.Fatalf("a call's context had not ended %v after it returned; ended so far: %q", eventWait, ended)
		}
	}
	require.ElementsMatch(t, []string{"Load: context canceled", "Save: context canceled"}, ended)
	h.poison(pid)
}
