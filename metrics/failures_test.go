package metrics_test

import (
	"errors"
	"fmt"
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
// refused because it holds more is not retried, and the stored value is
// the persisted one: the lag clock stops, where it used to run on, with
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

	// Another writer stored 1000: the save of 130 is refused, not retried.
	ahead := &persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(1000), Attempted: wal.KafkaID(130)}
	c.Observe(&messages.PersistFailed{Header: h(2), Value: wal.KafkaID(130), Attempt: 1, Err: ahead})
	want(5, 0, 0, map[string]float64{"stored_ahead": 1})

	// An error is retried on the backoff.
	c.Observe(&messages.MinimumAdvanced{Header: h(6), To: wal.KafkaID(1100), Holder: "a"})
	c.Observe(&messages.PersistFailed{Header: h(7), Value: wal.KafkaID(1100), Attempt: 1, Err: errors.New("disk on fire"), NextRetry: time.Second})
	want(8, 2, 1, map[string]float64{"stored_ahead": 1, "error": 1})

	// The retry overruns its deadline: still running, not retried.
	overdue := fmt.Errorf("%w: Save still running", actors.ErrCatalogOverdue)
	c.Observe(&messages.PersistFailed{Header: h(9), Value: wal.KafkaID(1100), Attempt: 2, Err: overdue})
	want(10, 4, 0, map[string]float64{"stored_ahead": 1, "error": 1, "timeout": 1})

	c.Observe(&messages.CheckpointPersisted{Header: h(11), Value: wal.KafkaID(1100), Attempts: 2})
	want(12, 0, 0, map[string]float64{"stored_ahead": 1, "error": 1, "timeout": 1})
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
