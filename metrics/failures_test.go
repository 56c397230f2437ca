package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Only a failure with a backoff counts as retrying. A save the store
// refused because it holds more is not retried, and the stored value, once
// the persister took it (Adopted), is the persisted one: the lag clock stops, where it used to run on, with
// the pchannel counted as retrying, until the minimum passed the stored
// value. A save still running past its deadline is a timeout, not retried.
func TestFailuresThatAreNotRetried(t *testing.T) {
	t0, at := fixedClock()
	now := t0
	c, err := metrics.New(metrics.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	reg := registry(t, c)
	h := func(s float64) messages.Header { return messages.Header{PChannel: "p", At: at(s)} }
	want := func(clock float64, lag, retrying float64, failures map[string]float64) {
		t.Helper()
		now = at(clock)
		require.InDelta(t, lag, sample(t, reg, "lowwater_persist_lag_seconds", false, ""), 1e-9, "lag at %vs", clock)
		require.Equal(t, retrying, sample(t, reg, "lowwater_pchannels_retrying", false, ""), "retrying at %vs", clock)
		require.Equal(t, failures, failuresByReason(t, reg), "failures at %vs", clock)
	}

	c.Observe(&messages.Recovered{Header: h(0), StartMessageID: wal.KafkaID(100), FromCatalog: true})
	c.Observe(&messages.MinimumAdvanced{Header: h(1), To: wal.KafkaID(130), Holder: "a"})
	want(2, 1, 0, map[string]float64{})

	// A catalog that names another pchannel's record as ahead: the
	// persister did not take it (no Adopted) and tries again; the lag
	// clock runs on, however high the value named.
	foreign := &persistence.StoredAheadError{PChannel: "q", Stored: wal.KafkaID(1 << 40), Attempted: wal.KafkaID(130)}
	c.Observe(&messages.PersistFailed{Header: h(2), Value: wal.KafkaID(130), Attempt: 1, Err: foreign, NextRetry: time.Second})
	want(3, 2, 1, map[string]float64{"stored_ahead": 1})

	// Another writer stored 1000: the save of 130 is refused, not retried.
	ahead := &persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(1000), Attempted: wal.KafkaID(130)}
	c.Observe(&messages.PersistFailed{Header: h(3), Value: wal.KafkaID(130), Attempt: 2, Err: ahead, Adopted: wal.KafkaID(1000)})
	want(5, 0, 0, map[string]float64{"stored_ahead": 2})

	// An error is retried on the backoff.
	c.Observe(&messages.MinimumAdvanced{Header: h(6), To: wal.KafkaID(1100), Holder: "a"})
	c.Observe(&messages.PersistFailed{Header: h(7), Value: wal.KafkaID(1100), Attempt: 1, Err: errors.New("disk on fire"), NextRetry: time.Second})
	want(8, 2, 1, map[string]float64{"stored_ahead": 2, "error": 1})

	// The retry overruns its deadline: still running, not retried.
	overdue := fmt.Errorf("%w: Save still running", actors.ErrCatalogOverdue)
	c.Observe(&messages.PersistFailed{Header: h(9), Value: wal.KafkaID(1100), Attempt: 2, Err: overdue})
	want(10, 4, 0, map[string]float64{"stored_ahead": 2, "error": 1, "timeout": 1})

	c.Observe(&messages.CheckpointPersisted{Header: h(11), Value: wal.KafkaID(1100), Attempts: 2})
	want(12, 0, 0, map[string]float64{"stored_ahead": 2, "error": 1, "timeout": 1})
}

// An attempt that overran its deadline is one failure, counted when it
// overran: its own outcome, when the catalog returns at last (Late), is
// not counted again, and every other failure is, whatever its attempt
// number: a new run, or a restarted persister, numbers its attempts anew.
// Saves and recovery reads alike.
func TestAnOverdueAttemptCountsOnce(t *testing.T) {
	t0, at := fixedClock()
	c, err := metrics.New(metrics.WithClock(func() time.Time { return t0 }))
	require.NoError(t, err)
	reg := registry(t, c)
	h := func(s float64) messages.Header { return messages.Header{PChannel: "p", At: at(s)} }
	overdue := fmt.Errorf("%w: Save still running", actors.ErrCatalogOverdue)
	returned := errors.New("returned at last")

	readFailures := func() float64 { return sample(t, reg, "lowwater_recovery_failures_total", false, "") }
	c.Observe(&messages.RecoveryFailed{Header: h(0), Attempt: 1, Err: overdue})
	c.Observe(&messages.RecoveryFailed{Header: h(0), Attempt: 1, Err: returned, NextRetry: time.Second, Late: true})
	require.Equal(t, 1.0, readFailures(), "the overdue read and its own outcome")
	c.Observe(&messages.RecoveryFailed{Header: h(0), Attempt: 2, Err: errors.New("still down"), NextRetry: time.Second})
	require.Equal(t, 2.0, readFailures(), "the next read")

	fail := func(s float64, attempt int, err error, late bool) {
		c.Observe(&messages.PersistFailed{Header: h(s), Value: wal.KafkaID(200), Attempt: attempt, Err: err, NextRetry: time.Second, Late: late})
	}
	c.Observe(&messages.Recovered{Header: h(0), StartMessageID: wal.KafkaID(100), FromCatalog: true})
	c.Observe(&messages.MinimumAdvanced{Header: h(1), To: wal.KafkaID(200), Holder: "a"})
	fail(2, 1, overdue, false)
	require.Equal(t, map[string]float64{"timeout": 1}, failuresByReason(t, reg), "overran")
	fail(3, 1, returned, true)
	require.Equal(t, map[string]float64{"timeout": 1}, failuresByReason(t, reg), "the overdue attempt's own outcome")
	fail(4, 2, returned, false)
	require.Equal(t, map[string]float64{"timeout": 1, "error": 1}, failuresByReason(t, reg), "the next attempt")

	// Overdue, then the run stops and abandons the call: its outcome never
	// comes. The next run's attempt 1 is a failure of its own.
	fail(5, 3, overdue, false)
	c.Observe(&messages.Stopped{Header: h(6)})
	c.Observe(&messages.Recovered{Header: h(7), StartMessageID: wal.KafkaID(100), FromCatalog: true})
	fail(8, 1, returned, false)
	require.Equal(t, map[string]float64{"timeout": 2, "error": 2}, failuresByReason(t, reg), "a new run")
}

// failuresByReason returns the non-zero save_failures_total series.
func failuresByReason(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, fam := range fams {
		if fam.GetName() != "lowwater_save_failures_total" {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && m.GetCounter().GetValue() != 0 {
					out[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// The lag is the age of the oldest rise the catalog does not hold: with
// saves landing every second while the minimum runs ahead, it reads how
// long ago the minimum passed the persisted checkpoint. It restarted at
// every save, and read well under a second whatever the backlog.
func TestLagIsTheAgeOfTheOldestRiseNotSaved(t *testing.T) {
	_, at := fixedClock()
	var now time.Time
	c, err := metrics.New(metrics.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	reg := registry(t, c)
	h := func(s float64) messages.Header { return messages.Header{PChannel: "p", At: at(s)} }
	lagAt := func(clock float64) float64 {
		t.Helper()
		now = at(clock)
		return sample(t, reg, "lowwater_persist_lag_seconds", false, "")
	}

	c.Observe(&messages.Recovered{Header: h(0), StartMessageID: wal.KafkaID(100), FromCatalog: true})
	for i := 1; i <= 15; i++ { // a rise every 200 ms: 110 at 0.2 s, … 250 at 3 s
		c.Observe(&messages.MinimumAdvanced{Header: h(0.2 * float64(i)), To: wal.KafkaID(100 + 10*i), Holder: "a"})
	}
	require.InDelta(t, 3.3, lagAt(3.5), 1e-9, "nothing saved: since the first rise")
	// Each save takes a second, and saves the minimum as it began.
	c.Observe(&messages.CheckpointPersisted{Header: h(1.1), Value: wal.KafkaID(110)})
	require.InDelta(t, 3.1, lagAt(3.5), 1e-9, "110 was passed at 0.4 s")
	c.Observe(&messages.CheckpointPersisted{Header: h(2.1), Value: wal.KafkaID(150)})
	require.InDelta(t, 2.3, lagAt(3.5), 1e-9, "150 was passed at 1.2 s")
	c.Observe(&messages.CheckpointPersisted{Header: h(3.1), Value: wal.KafkaID(250)})
	require.Zero(t, lagAt(3.5), "caught up")
}

// lateCatalog's first Save ignores its context: it returns an error only
// when the test releases it, long past its deadline.
type lateCatalog struct {
	persistence.Catalog
	calls   atomic.Int32
	release chan struct{}
}

func (c *lateCatalog) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	if c.calls.Add(1) == 1 {
		<-c.release
		return errors.New("returned at last")
	}
	return c.Catalog.Save(ctx, pchannel, v)
}

// Through the actors: a save that overruns its deadline is reported
// overdue, then fails when the catalog returns, then is retried and
// succeeds. The collector counts one failure, a timeout.
func TestAnOverdueSaveIsOneFailure(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	reg := registry(t, collector)
	system := quietSystem(t)
	sub, err := collector.Subscribe(system.EventStream)
	require.NoError(t, err)
	defer sub.Close()
	catalog := &lateCatalog{Catalog: persistence.NewMemory(), release: make(chan struct{})}
	props, err := actors.NewProps("p0", wal.Kafka, catalog, actors.WithBackoff(fast), actors.WithSaveTimeout(20*time.Millisecond),
		actors.WithCounters(collector.Counters("p0")), actors.WithPreloaded(wal.KafkaID(10)),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(20)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.StopFuture(pid).Wait()) }()

	require.Eventually(t, func() bool { return failuresByReason(t, reg)["timeout"] == 1 }, testBound, tick,
		"the save owed since recovery overran its deadline")
	close(catalog.release)
	require.Eventually(t, func() bool { return valueOf(t, collector, "lowwater_saves_total") == 1 }, testBound, tick,
		"retried, the save succeeds")
	// The collector takes the events in order: the overdue save's own
	// failure came before the success.
	require.Equal(t, map[string]float64{"timeout": 1}, failuresByReason(t, reg))
}

// A catalog that panicked with an error is counted an error whatever that
// error is: it was retried, as any panic is, where the closed catalog it
// named would have stopped the saves.
func TestACatalogPanicIsAnError(t *testing.T) {
	t0, at := fixedClock()
	c, err := metrics.New(metrics.WithClock(func() time.Time { return t0 }))
	require.NoError(t, err)
	reg := registry(t, c)
	h := messages.Header{PChannel: "p", At: at(1)}
	c.Observe(&messages.Recovered{Header: h, StartMessageID: wal.KafkaID(100), FromCatalog: true})
	for i, value := range []any{persistence.ErrClosed, persistence.ErrFenced, context.DeadlineExceeded} {
		panicked := &actors.CatalogPanicError{Op: "Save", Value: value}
		c.Observe(&messages.PersistFailed{Header: h, Value: wal.KafkaID(200), Attempt: i + 1, Err: panicked, NextRetry: time.Second})
	}
	require.Equal(t, map[string]float64{"error": 3}, failuresByReason(t, reg))
}
