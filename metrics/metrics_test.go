package metrics_test

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/events"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/internal/testkit/promtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testBound = 10 * time.Second
	tick      = 2 * time.Millisecond
)

// fast retries keep the outage phases short.
var fast = actors.Backoff{Initial: 5 * time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 1.5}

// scrape GETs url and returns every sample as "name{l="v",...}" -> value;
// a histogram gives its _count and _sum. It returns an error rather than
// failing: it runs inside Eventually.
func scrape(url string) (map[string]float64, error) {
	fams, err := promtest.Scrape(url)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64)
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			key := name + labelString(m.GetLabel())
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelString(m.GetLabel())] = float64(m.Histogram.GetSampleCount())
				out[name+"_sum"+labelString(m.GetLabel())] = m.Histogram.GetSampleSum()
			}
		}
	}
	return out, nil
}

func labelString(labels []*dto.LabelPair) string {
	if len(labels) == 0 {
		return ""
	}
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// The collector follows a pchannel through recovery against a catalog that
// is down, saves, a rejected command, an outage and its end, and a stop;
// scraped over HTTP each time, its values move as they should.
func TestScrapeMoves(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pchannel label %t", labelled), func(t *testing.T) {
			var opts []metrics.Option
			lbl, lblR := "", func(r string) string { return fmt.Sprintf("{reason=%q}", r) }
			if labelled {
				opts = append(opts, metrics.WithPChannelLabel())
				lbl = `{pchannel="p0"}`
				lblR = func(r string) string { return fmt.Sprintf("{pchannel=\"p0\",reason=%q}", r) }
			}
			collector, err := metrics.New(opts...)
			require.NoError(t, err)
			reg := prometheus.NewPedanticRegistry() // checks Collect against Describe
			reg.MustRegister(collector)
			srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
			defer srv.Close()
			url := srv.URL + "/metrics"
			eventually := func(what string, ok func(m map[string]float64) bool) map[string]float64 {
				t.Helper()
				var last map[string]float64
				var lastErr error
				if !assert.Eventually(t, func() bool {
					m, err := scrape(url)
					if err != nil {
						lastErr = err
						return false
					}
					last = m
					return ok(m)
				}, testBound, tick, what) {
					t.Fatalf("%s: last scrape: %v, last error: %v", what, last, lastErr)
				}
				return last
			}

			system := quietSystem(t)
			sub, err := collector.Subscribe(system.EventStream)
			require.NoError(t, err)
			defer sub.Close()
			catalog := faultinject.Wrap(persistence.NewMemory())
			catalog.SetDown(true) // recovery fails until it comes back

			props, err := actors.NewProps("p0", wal.Kafka, catalog,
				actors.WithCounters(collector.Counters("p0")), actors.WithBackoff(fast),
				actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
			require.NoError(t, err)
			pid := system.Root.Spawn(props)

			m := eventually("recovering while the catalog is down", func(m map[string]float64) bool {
				return m["lowwater_pchannels_recovering"+lbl] == 1 && m["lowwater_recovery_failures_total"+lbl] >= 1
			})
			assert.Equal(t, 1.0, m["lowwater_pchannels"+lbl])
			catalog.SetDown(false)
			eventually("recovered and saved the spawn minimum", func(m map[string]float64) bool {
				return m["lowwater_pchannels_recovering"+lbl] == 0 && m["lowwater_saves_total"+lbl] == 1
			})

			require.NoError(t, actors.Request(ctxtest.Within(
				time.Second), system.Root, pid, &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
				{VChannel: "a", Checkpoint: wal.KafkaID(30)}, {VChannel: "b", Checkpoint: wal.KafkaID(40)}}}))
			rollback := &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(1)}
			require.ErrorIs(t, actors.Request(ctxtest.Within(time.Second), system.Root, pid, rollback), messages.ErrCheckpointRollback)
			m = eventually("updates, an advance, a rejection, a second save", func(m map[string]float64) bool {
				return m["lowwater_saves_total"+lbl] == 2 && m["lowwater_commands_rejected_total"+lblR("rollback")] == 1
			})
			assert.Equal(t, 2.0, m["lowwater_updates_total"+lbl], "counters are exact")
			assert.Equal(t, 1.0, m["lowwater_minimum_advances_total"+lbl])
			assert.Equal(t, 0.0, m["lowwater_persist_lag_seconds"+lbl])

			// An outage: saves fail, the pchannel retries, the lag grows.
			catalog.SetDown(true)
			require.NoError(t, actors.Request(ctxtest.Within(
				time.Second), system.Root, pid, &messages.UpdateBatch{Updates: []messages.VChannelCheckpoint{
				{VChannel: "a", Checkpoint: wal.KafkaID(50)}, {VChannel: "b", Checkpoint: wal.KafkaID(60)}}}))
			m = eventually("failing and retrying", func(m map[string]float64) bool {
				return m["lowwater_save_failures_total"+lblR("error")] >= 2 && m["lowwater_pchannels_retrying"+lbl] == 1 &&
					m["lowwater_persist_lag_seconds"+lbl] > 0
			})
			lag := m["lowwater_persist_lag_seconds"+lbl]
			collector.Counters("p0") // asking again for a running pchannel changes nothing
			m = eventually("still retrying", func(m map[string]float64) bool { return true })
			assert.Equal(t, 1.0, m["lowwater_pchannels_retrying"+lbl])
			eventually("the lag grows while down", func(m map[string]float64) bool { return m["lowwater_persist_lag_seconds"+lbl] > lag })

			catalog.SetDown(false)
			m = eventually("caught up after the outage", func(m map[string]float64) bool {
				return m["lowwater_saves_total"+lbl] == 3 && m["lowwater_pchannels_retrying"+lbl] == 0 &&
					m["lowwater_persist_lag_seconds"+lbl] == 0
			})
			assert.Equal(t, 4.0, m["lowwater_updates_total"+lbl])
			assert.Equal(t, m["lowwater_saves_total"+lbl], m["lowwater_save_latency_seconds_count"+lbl])
			assert.Equal(t, 0.0, m["lowwater_saves_in_flight"+lbl])

			require.NoError(t, system.Root.PoisonFuture(pid).Wait())
			m = eventually("stopped", func(m map[string]float64) bool { return m["lowwater_pchannels"+lbl] == 0 })
			assert.Equal(t, 0.0, m["lowwater_events_dropped_total"])
		})
	}
}

// A pchannel whose vchannels start above its stored checkpoint owes a
// save as it recovers: while the catalog refuses it, the lag grows from
// Recovered on, though no MinimumAdvanced follows it.
func TestLagCountsFromRecoveryWhenTheMinimumIsAboveTheStoredCheckpoint(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	system := quietSystem(t)
	sub, err := collector.Subscribe(system.EventStream)
	require.NoError(t, err)
	defer sub.Close()
	catalog := faultinject.Wrap(persistence.NewMemory())
	catalog.SetDown(true) // every save fails
	props, err := actors.NewProps("p0", wal.Kafka, catalog, actors.WithBackoff(fast),
		actors.WithCounters(collector.Counters("p0")), actors.WithPreloaded(wal.KafkaID(10)),
		actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(20), "b": wal.KafkaID(30)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.StopFuture(pid).Wait()) }()

	var lag float64
	require.Eventually(t, func() bool {
		lag = valueOf(t, collector, "lowwater_persist_lag_seconds")
		return valueOf(t, collector, "lowwater_pchannels_retrying") == 1 && lag > 0
	}, testBound, tick, "the save of kafka:20 owed since recovery fails, and the lag shows it")
	require.Eventually(t, func() bool { return valueOf(t, collector, "lowwater_persist_lag_seconds") > lag }, testBound, tick,
		"the lag grows while the save fails")
	st, err := actors.GetState(ctxtest.Within(time.Second), system.Root, pid)
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(20), st.Minimum)
	require.Equal(t, wal.KafkaID(10), st.Persisted)
}

// Every series is there from the first scrape, passes promlint, and the
// reasons are bounded.
func TestSeriesAndLint(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	problems, err := testutil.CollectAndLint(collector)
	require.NoError(t, err)
	assert.Empty(t, problems)
	n, err := testutil.GatherAndCount(registry(t, collector))
	require.NoError(t, err)
	assert.Equal(t, 7+6+1+20, n, "7 rejection reasons, 6 failure reasons, 1 histogram, 20 other series")

	collector.Observe(&messages.CommandRejected{Header: messages.Header{PChannel: "p9", At: time.Now()}, Err: fmt.Errorf("wrapped: %w", messages.ErrVChannelExists)})
	collector.Observe(&messages.PersistFailed{Header: messages.Header{PChannel: "p9", At: time.Now()}, Err: persistence.ErrFenced})
	collector.Observe(&messages.PersistFailed{Header: messages.Header{PChannel: "p9", At: time.Now()}, Err: fmt.Errorf("odd")})
	require.NoError(t, testutil.GatherAndCompare(registry(t, collector), strings.NewReader(`
# HELP lowwater_commands_rejected_total Commands rejected, by reason; a rejected command changes nothing.
# TYPE lowwater_commands_rejected_total counter
lowwater_commands_rejected_total{reason="empty_vchannel"} 0
lowwater_commands_rejected_total{reason="exists"} 1
lowwater_commands_rejected_total{reason="nil_checkpoint"} 0
lowwater_commands_rejected_total{reason="not_found"} 0
lowwater_commands_rejected_total{reason="other"} 0
lowwater_commands_rejected_total{reason="rollback"} 0
lowwater_commands_rejected_total{reason="wal_mismatch"} 0
# HELP lowwater_save_failures_total Failed save attempts, by reason; timeout includes an attempt still running past its deadline, counted then and not again when it returns.
# TYPE lowwater_save_failures_total counter
lowwater_save_failures_total{reason="canceled"} 0
lowwater_save_failures_total{reason="closed"} 0
lowwater_save_failures_total{reason="error"} 1
lowwater_save_failures_total{reason="fenced"} 1
lowwater_save_failures_total{reason="stored_ahead"} 0
lowwater_save_failures_total{reason="timeout"} 0
`), "lowwater_commands_rejected_total", "lowwater_save_failures_total"))
}

// Forget takes a labelled pchannel's series away, and keeps an unlabelled
// total from going down.
func TestForget(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		collector := collectorOf(t, labelled)
		applyUpdates(t, "p0", collector.Counters("p0"), 5)
		applyUpdates(t, "p1", collector.Counters("p1"), 7)
		collector.Observe(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p0", At: time.Now()}, Value: wal.KafkaID(1)})
		collector.Forget("p0")
		collector.Forget("nope")
		reg := registry(t, collector)
		if labelled {
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lowwater_updates_total Vchannel checkpoint updates accepted, an equal one included.
# TYPE lowwater_updates_total counter
lowwater_updates_total{pchannel="p1"} 7
`), "lowwater_updates_total"))
			continue
		}
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP lowwater_updates_total Vchannel checkpoint updates accepted, an equal one included.
# TYPE lowwater_updates_total counter
lowwater_updates_total 12
# HELP lowwater_saves_total Checkpoints the catalog acknowledged: durable.
# TYPE lowwater_saves_total counter
lowwater_saves_total 1
`), "lowwater_updates_total", "lowwater_saves_total"))
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, b := range [][]float64{nil, {}, {1, 1}, {2, 1}, {math.NaN()}, {0.1, math.NaN(), 1}, {0, 1}, {-1, 1}, {math.Inf(-1), 1}} {
		_, err := metrics.New(metrics.WithLatencyBuckets(b))
		assert.ErrorIs(t, err, metrics.ErrInvalidOption, "%v", b)
	}
	// A name that the classic exposition format cannot carry unquoted.
	for _, ns := range []string{"bad-ns", "1abc", "a:b", "ümlaut", "a b"} {
		_, err := metrics.New(metrics.WithNamespace(ns))
		assert.ErrorIs(t, err, metrics.ErrInvalidOption, "%q", ns)
	}
	c, err := metrics.New(metrics.WithNamespace("myapp"), metrics.WithLatencyBuckets([]float64{0.1, 1}))
	require.NoError(t, err)
	n, err := testutil.GatherAndCount(registry(t, c), "myapp_saves_total")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	c, err = metrics.New(metrics.WithNamespace("_my_app2"), metrics.WithLatencyBuckets([]float64{0.1, math.Inf(1)}))
	require.NoError(t, err)
	n, err = testutil.GatherAndCount(registry(t, c), "_my_app2_saves_total")
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// applyUpdates has a real pchannel actor apply n updates and count them in
// counters, then stops it.
func applyUpdates(t *testing.T, pchannel string, counters *actors.Counters, n int) {
	t.Helper()
	system := quietSystem(t)
	props, err := actors.NewProps(pchannel, wal.Kafka, persistence.NewMemory(), actors.WithCounters(counters),
		actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(0)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	for i := 1; i <= n; i++ {
		require.NoError(t, actors.Request(ctxtest.Within(5*time.Second), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(i)}))
	}
	require.NoError(t, system.Root.PoisonFuture(pid).Wait())
	require.Equal(t, uint64(n), counters.Updates())
}

// collectorOf is a new collector, with the pchannel label or without, and
// opts.
func collectorOf(t *testing.T, labelled bool, opts ...metrics.Option) *metrics.Collector {
	t.Helper()
	if labelled {
		opts = append(opts, metrics.WithPChannelLabel())
	}
	c, err := metrics.New(opts...)
	require.NoError(t, err)
	return c
}

// quietSystem is an actor system that logs nothing, shut down once the
// test has ended.
func quietSystem(t *testing.T) *actor.ActorSystem {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	return system
}

// fixedClock is the start of a test's own clock, and at(s), s seconds
// after it.
func fixedClock() (t0 time.Time, at func(s float64) time.Time) {
	t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	return t0, func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
}

func registry(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	return reg
}

// Counters alone counts no pchannel: a NewProps that fails after asking
// for them (a bad name, a bad option) leaves no series behind, with the
// pchannel label or without; a name no pchannel can have, not even in an
// event fed by hand, which as a label would fail every scrape. Its first
// event, or its first update counted, brings it in.
func TestCountersCountNoPChannel(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pchannel label %t", labelled), func(t *testing.T) {
			collector := collectorOf(t, labelled)
			reg := registry(t, collector)
			for _, name := range []string{"bad\x00name", "bad\xff", strings.Repeat("y", 513)} {
				_, err := actors.NewProps(name, wal.Kafka, persistence.NewMemory(), actors.WithCounters(collector.Counters(name)))
				require.ErrorIs(t, err, persistence.ErrInvalidArgument)
				collector.Observe(&messages.RecoveryFailed{Header: messages.Header{PChannel: name, At: time.Now()}, Err: persistence.ErrClosed})
			}
			_, err := actors.NewProps("refused", wal.Kafka, persistence.NewMemory(), actors.WithCounters(collector.Counters("refused")),
				actors.WithSaveTimeout(-1))
			require.ErrorIs(t, err, actors.ErrInvalidOption)
			families, err := reg.Gather()
			require.NoError(t, err, "a scrape must not fail")
			for _, f := range families {
				for _, m := range f.GetMetric() {
					if f.GetName() == "lowwater_pchannels" {
						require.Zero(t, m.GetGauge().GetValue())
					}
					for _, l := range m.GetLabel() {
						require.NotEqual(t, "pchannel", l.GetName(), "%s has a series of a pchannel that never ran", f.GetName())
					}
				}
			}

			collector.Counters("p0")
			collector.Observe(&messages.RecoveryFailed{Header: messages.Header{PChannel: "p0", At: time.Now()}, Err: persistence.ErrClosed})
			require.Equal(t, 1.0, valueOf(t, collector, "lowwater_pchannels"))
			require.Equal(t, 1.0, valueOf(t, collector, "lowwater_pchannels_recovering"))
			applyUpdates(t, "p1", collector.Counters("p1"), 2) // its events go to a system the collector does not watch
			families, err = reg.Gather()
			require.NoError(t, err)
			updates := 0.0
			for _, f := range families {
				if f.GetName() == "lowwater_updates_total" {
					for _, m := range f.GetMetric() {
						updates += m.GetCounter().GetValue()
					}
				}
			}
			require.Equal(t, 2.0, updates)
		})
	}
}

// Two collectors, for two actor systems at once, register in one registry
// as Subscribe says: each under a label of its own, or each with a
// namespace of its own.
func TestTwoCollectorsShareARegistry(t *testing.T) {
	newCollector := func(opts ...metrics.Option) *metrics.Collector {
		c, err := metrics.New(opts...)
		require.NoError(t, err)
		c.Observe(&messages.RecoveryFailed{Header: messages.Header{PChannel: "p0", At: time.Now()}, Err: persistence.ErrClosed})
		return c
	}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, prometheus.WrapRegistererWith(prometheus.Labels{"system": "a"}, reg).Register(newCollector()))
	require.NoError(t, prometheus.WrapRegistererWith(prometheus.Labels{"system": "b"}, reg).Register(newCollector()))
	require.NoError(t, reg.Register(newCollector(metrics.WithNamespace("other"))))
	families, err := reg.Gather()
	require.NoError(t, err)
	pchannels := map[string]int{}
	for _, f := range families {
		if strings.HasSuffix(f.GetName(), "_pchannels") {
			pchannels[f.GetName()] += len(f.GetMetric())
		}
	}
	require.Equal(t, map[string]int{"lowwater_pchannels": 2, "other_pchannels": 1}, pchannels)
	require.Error(t, reg.Register(newCollector()), "the same series with a label and without")
}

// gauge is the value of the one series of name that c reports.
// valueOf is the value of the first series named name: a gauge's or a
// counter's.
func valueOf(t *testing.T, c prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			if m := f.GetMetric()[0]; m.Counter != nil {
				return m.GetCounter().GetValue()
			}
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s", name)
	return 0
}

// The lag and age clocks follow the pchannel's own order: a vchannel added
// below the minimum can end the lag, a success or a stored-ahead refusal
// observed late never lowers the persisted checkpoint, a further rise
// keeps the lag's start, and a pchannel recovering again shows no age from
// its previous run.
func TestLagAndAgeFollowOnlyNewerValues(t *testing.T) {
	_, at := fixedClock()
	now := at(100)
	c, err := metrics.New(metrics.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	h := func(s float64) messages.Header { return messages.Header{PChannel: "p", At: at(s)} }
	k := func(n int) wal.MessageID { return wal.KafkaID(n) }
	lag := func() float64 { return valueOf(t, c, "lowwater_persist_lag_seconds") }

	c.Observe(&messages.Recovered{Header: h(0), StartMessageID: k(10), FromCatalog: true})
	c.Observe(&messages.MinimumAdvanced{Header: h(1), From: k(10), To: k(20)})
	require.Equal(t, 99.0, lag())
	c.Observe(&messages.VChannelAdded{Header: h(2), VChannel: "late", Checkpoint: k(5)})
	require.Zero(t, lag(), "a vchannel added below the persisted checkpoint leaves nothing to save")
	c.Observe(&messages.AddedBehind{Header: h(2), VChannels: []string{"late"}, Persisted: k(10), Minimum: k(5)})
	require.Equal(t, 1.0, valueOf(t, c, "lowwater_vchannels_added_behind_total"))
	c.Observe(&messages.AddedBehind{Header: h(2), VChannels: []string{"a", "b"}, Persisted: k(10), Minimum: k(5)})
	require.Equal(t, 3.0, valueOf(t, c, "lowwater_vchannels_added_behind_total"), "one per vchannel told")

	c.Observe(&messages.MinimumAdvanced{Header: h(3), From: k(5), To: k(30)})
	c.Observe(&messages.CheckpointPersisted{Header: h(4), Value: k(30), Attempts: 1})
	require.Zero(t, lag())
	c.Observe(&messages.CheckpointPersisted{Header: h(5), Value: k(20), Attempts: 1})
	require.Zero(t, lag(), "an older save observed late lowered the persisted checkpoint")
	c.Observe(&messages.PersistFailed{Header: h(6), Value: k(30), Attempt: 1,
		Err: &persistence.StoredAheadError{PChannel: "p", Stored: k(25), Attempted: k(30)}, Adopted: k(25)})
	require.Zero(t, lag(), "a stored value below the persisted one was adopted")

	c.Observe(&messages.MinimumAdvanced{Header: h(7), From: k(30), To: k(40)})
	c.Observe(&messages.MinimumAdvanced{Header: h(8), From: k(40), To: k(50)})
	require.Equal(t, 93.0, lag(), "a further rise restarted the lag clock")
	require.Equal(t, 92.0, valueOf(t, c, "lowwater_minimum_age_seconds"))

	c.Observe(&messages.Stopped{Header: h(9)})
	c.Observe(&messages.RecoveryFailed{Header: h(10), Attempt: 1, Err: persistence.ErrClosed})
	require.Zero(t, valueOf(t, c, "lowwater_minimum_age_seconds"), "a recovering pchannel showed its previous run's age")
}

// A collector subscribed after a pchannel recovered counts it running from
// its first event, and its minimum's age from then; it showed no
// pchannel while that one saved on.
func TestACollectorSubscribedLateCountsThePChannel(t *testing.T) {
	_, at := fixedClock()
	now := at(100)
	c, err := metrics.New(metrics.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	h := func(p string, s float64) messages.Header { return messages.Header{PChannel: p, At: at(s)} }

	c.Observe(&messages.CheckpointPersisted{Header: h("p", 40), Value: wal.KafkaID(5), Attempts: 1})
	c.Observe(&messages.Stopped{Header: h("gone", 50)})
	require.Equal(t, 1.0, valueOf(t, c, "lowwater_pchannels"), "a pchannel first seen stopping is not running")
	require.Equal(t, 60.0, valueOf(t, c, "lowwater_minimum_age_seconds"))
	c.Observe(&messages.MinimumAdvanced{Header: h("p", 70), From: wal.KafkaID(5), To: wal.KafkaID(9)})
	require.Equal(t, 30.0, valueOf(t, c, "lowwater_minimum_age_seconds"))
	require.Equal(t, 30.0, valueOf(t, c, "lowwater_persist_lag_seconds"))
	c.Observe(&messages.Stopped{Header: h("p", 80)})
	require.Zero(t, valueOf(t, c, "lowwater_pchannels"))
}

// A closed subscription is let go at the next Subscribe, with the event
// stream (and so the actor system) it held, and its drops stay counted:
// a node restarting in the process leaves nothing behind each time.
func TestClosedSubscriptionIsLetGo(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	dropped, gone := subscribeAndDrop(t, collector)

	second := eventstream.NewEventStream()
	sub, err := collector.Subscribe(second)
	require.NoError(t, err)
	defer sub.Close()
	runtime.GC()
	assert.Nil(t, gone.Value(), "the closed subscription's event stream is still held")
	assert.Equal(t, float64(dropped), valueOf(t, collector, "lowwater_events_dropped_total"), "its drops must stay counted")
}

// subscribeAndDrop subscribes collector to a stream of its own, makes the
// subscription drop events, closes it, and returns how many it dropped
// and a weak pointer to the stream. A scrape holds the collector's lock
// while the test does not read it, so that Observe waits and the buffer
// fills.
func subscribeAndDrop(t *testing.T, collector *metrics.Collector) (uint64, weak.Pointer[eventstream.EventStream]) {
	es := eventstream.NewEventStream()
	sub, err := collector.Subscribe(es, events.WithBuffer(8))
	require.NoError(t, err)
	ch := make(chan prometheus.Metric)
	go func() { collector.Collect(ch); close(ch) }()
	<-ch // the scrape holds the lock now
	for i := range 100 {
		es.Publish(&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, To: wal.KafkaID(i)})
	}
	for range ch {
	}
	sub.Close()
	require.Greater(t, sub.Dropped(), uint64(90), "a blocked collector must have dropped all but the buffer and the one in hand")
	return sub.Dropped(), weak.Make(es)
}

// A second subscription to events the collector takes already is refused:
// it would count each of them twice. Subscriptions that split the
// pchannels between them are not, nor one after the first is closed.
// A subscription made while an overlapping one closes, here from a check
// of the caller's that runs before the collector's, counts each event
// once: the closing one counts what was published before, the new one
// what was published once it was taken.
func TestSubscribeAsTheOverlappingOneClosesCountsOnce(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	es := eventstream.NewEventStream()
	advance := func(i int) {
		es.Publish(&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, To: wal.KafkaID(i)})
	}
	first, err := collector.Subscribe(es)
	require.NoError(t, err)
	second, err := collector.Subscribe(es, events.Admit(func(*events.Subscription) error {
		advance(1)
		first.Close()
		return nil
	}))
	require.NoError(t, err)
	advance(2)
	second.Close()
	require.Equal(t, float64(2), valueOf(t, collector, "lowwater_minimum_advances_total"))

	_, err = collector.Subscribe(es, events.Admit(func(*events.Subscription) error { return errors.New("refused by the caller") }))
	require.ErrorContains(t, err, "refused by the caller")
	third, err := collector.Subscribe(es)
	require.NoError(t, err, "a subscription the caller refused is not kept")
	third.Close()
}

func TestSubscribeTwiceIsRefused(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	es := eventstream.NewEventStream()
	first, err := collector.Subscribe(es)
	require.NoError(t, err)
	for _, opts := range [][]events.Option{nil, {events.WithBuffer(8)}, {events.ForPChannels("p0")}} {
		sub, err := collector.Subscribe(es, opts...)
		require.ErrorIs(t, err, metrics.ErrSubscribedTwice)
		require.Nil(t, sub)
	}
	const n = 10
	for i := range n {
		es.Publish(&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, To: wal.KafkaID(i + 1)})
	}
	first.Close() // after the events it buffered
	require.Equal(t, float64(n), valueOf(t, collector, "lowwater_minimum_advances_total"), "an event counted twice")

	p0, err := collector.Subscribe(es, events.ForPChannels("p0"))
	require.NoError(t, err, "the first subscription is closed")
	defer p0.Close()
	p1, err := collector.Subscribe(es, events.ForPChannels("p1", "p2"))
	require.NoError(t, err, "another pchannel's events")
	defer p1.Close()
	_, err = collector.Subscribe(es, events.ForPChannels("p2", "p3"))
	require.ErrorIs(t, err, metrics.ErrSubscribedTwice, "p2's events twice")
}
