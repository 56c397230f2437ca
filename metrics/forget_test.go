package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestForgetWinsOverLateEvents moves pchannels away 1,000 times through
// the real event stream (spawn, an update and its save, stop, Forget), with
// the collector fed asynchronously as in production, so that most of each
// run's events reach it after its Forget. Once it has caught up, none of
// them left a series, a running pchannel or a lost count; and a pchannel
// that comes back after its Forget is counted again, from its new run only.
func TestForgetWinsOverLateEvents(t *testing.T) {
	const cycles, names = 1000, 250 // each name moves away 4 times
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pchannel label %t", labelled), func(t *testing.T) {
			collector := collectorOf(t, labelled)
			reg := registry(t, collector)
			system := quietSystem(t)
			sub, err := collector.Subscribe(system.EventStream)
			require.NoError(t, err)
			defer sub.Close()
			catalog := persistence.NewMemory()

			run := func(name string, checkpoint int64) *actor.PID {
				props, err := actors.NewProps(name, wal.Kafka, catalog,
					actors.WithCounters(collector.Counters(name)), actors.WithBackoff(fast),
					actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(checkpoint)}))
				require.NoError(t, err)
				pid := system.Root.Spawn(props)
				require.NoError(t, actors.Request(ctxtest.Within(
					testBound), system.Root, pid,
					&messages.UpdateCheckpoint{VChannel: "v", Checkpoint: wal.KafkaID(checkpoint + 1)}))
				return pid
			}
			for i := range cycles {
				name := fmt.Sprintf("moved-%d", i%names)
				pid := run(name, int64(10*i))
				require.NoError(t, system.Root.PoisonFuture(pid).Wait())
				collector.Forget(name)
			}
			back := run("moved-0", 100_000) // moved back here: counted again
			defer func() { require.NoError(t, system.Root.PoisonFuture(back).Wait()) }()
			// An update is answered during recovery: wait for Recovered to
			// be published, so that the sentinel below comes after it.
			require.Eventually(t, func() bool {
				st, err := actors.GetState(ctxtest.Within(testBound), system.Root, back)
				return err == nil && st.Recovered
			}, testBound, tick, "the pchannel that came back did not recover")

			// The collector has caught up once the event published last
			// has been counted: one of the pchannel that runs, since any
			// event of a pchannel it has not seen counts that one running.
			system.EventStream.Publish(&messages.VChannelDropped{Header: messages.Header{PChannel: "moved-0", At: time.Now()}, VChannel: "s"})
			require.Eventually(t, func() bool {
				return sample(t, reg, "lowwater_vchannels_dropped_total", labelled, "moved-0") == 1
			}, testBound, tick, "the collector did not catch up")

			if labelled {
				var stale []string
				forgotten := map[string]bool{}
				for _, s := range seriesOf(t, reg, "moved-") {
					if name := s[strings.Index(s, `pchannel="`):]; !strings.HasPrefix(name, `pchannel="moved-0"`) {
						stale = append(stale, s)
						forgotten[name[:strings.Index(name[len(`pchannel="`):], `"`)+len(`pchannel="`)]] = true
					}
				}
				if len(stale) > 0 {
					t.Errorf("%d series of %d forgotten pchannels remain, such as %v", len(stale), len(forgotten), stale[:min(3, len(stale))])
				}
				assert.Equal(t, 1.0, sample(t, reg, "lowwater_pchannels", true, "moved-0"))
				assert.Equal(t, 1.0, sample(t, reg, "lowwater_updates_total", true, "moved-0"), "only the new run's update")
				return
			}
			assert.Equal(t, 1.0, sample(t, reg, "lowwater_pchannels", false, ""), "only the pchannel that came back runs")
			assert.Equal(t, float64(cycles+1), sample(t, reg, "lowwater_updates_total", false, ""), "no update lost from the total")
			assert.Equal(t, 0.0, sample(t, reg, "lowwater_pchannels_recovering", false, ""))
		})
	}
}

// sample returns the value of the metric name (for pchannel when
// labelled), summed over its other labels; 0 when there is none.
func sample(t *testing.T, reg *prometheus.Registry, name string, labelled bool, pchannel string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, fam := range fams {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			match := !labelled
			for _, l := range m.GetLabel() {
				if l.GetName() == "pchannel" && l.GetValue() == pchannel {
					match = true
				}
			}
			if !match {
				continue
			}
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}

// seriesOf lists every series whose pchannel label starts with prefix.
func seriesOf(t *testing.T, reg *prometheus.Registry, prefix string) []string {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	var out []string
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pchannel" && strings.HasPrefix(l.GetValue(), prefix) {
					out = append(out, fam.GetName()+labelString(m.GetLabel()))
				}
			}
		}
	}
	return out
}

// stubbornLoad is a catalog whose Load ignores its context until released.
type stubbornLoad struct {
	*persistence.Memory
	entered, release chan struct{}
}

func (s stubbornLoad) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Memory.Load(ctx, pchannel)
}

// A catalog call that a stop abandoned counts in abandoned_calls_total
// after its pchannel is forgotten, as its updates do: a counter that went
// down would read as a reset, and the call would vanish from rate().
func TestForgetKeepsAbandonedCallsInTheTotal(t *testing.T) {
	collector, err := metrics.New()
	require.NoError(t, err)
	reg := registry(t, collector)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		actor.WithDeadLetterThrottleInterval(time.Millisecond))
	defer system.Shutdown()
	cat := stubbornLoad{Memory: persistence.NewMemory(), entered: make(chan struct{}, 1), release: make(chan struct{})}
	defer close(cat.release)
	props, err := actors.NewProps("p1", wal.Kafka, cat, actors.WithCounters(collector.Counters("p1")),
		actors.WithVChannels(map[string]wal.MessageID{"v": wal.KafkaID(1)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	select {
	case <-cat.entered:
	case <-time.After(testBound):
		t.Fatal("the recovery's Load never started")
	}
	require.NoError(t, system.Root.StopFuture(pid).Wait())
	require.Equal(t, 1.0, sample(t, reg, "lowwater_abandoned_calls_total", false, ""))
	collector.Forget("p1")
	require.Equal(t, 1.0, sample(t, reg, "lowwater_abandoned_calls_total", false, ""))
}

// A forgotten pchannel is remembered, so that late events of its last run
// cannot bring it back, for ForgetHorizon or until it runs here again: a
// node that moves pchannels of ever new names away holds those of the
// last minutes only. It held every name it was ever given.
func TestForgottenNamesAreLetGo(t *testing.T) {
	t0, _ := fixedClock()
	now := t0
	c, err := metrics.New(metrics.WithClock(func() time.Time { return now }), metrics.WithPChannelLabel())
	require.NoError(t, err)
	reg := registry(t, c)
	stamped := func(pchannel string, at time.Time) messages.Header {
		return messages.Header{PChannel: pchannel, At: at}
	}

	c.Forget("a")
	c.Forget("b")
	require.Equal(t, 2, c.Remembered())
	c.Observe(&messages.VChannelAdded{Header: stamped("a", t0.Add(-time.Second)), VChannel: "v", Checkpoint: wal.KafkaID(1)})
	require.Zero(t, sample(t, reg, "lowwater_vchannels_added_total", true, "a"), "a late event of a's last run")

	// b is forgotten again later: its horizon runs from then.
	now = t0.Add(metrics.ForgetHorizon / 2)
	c.Forget("b")
	now = t0.Add(metrics.ForgetHorizon - time.Nanosecond)
	_, err = reg.Gather()
	require.NoError(t, err)
	require.Equal(t, 2, c.Remembered(), "within the horizon")
	now = t0.Add(metrics.ForgetHorizon)
	_, err = reg.Gather() // a scrape lets the expired go
	require.NoError(t, err)
	require.Equal(t, 1, c.Remembered(), "a expired, b renewed")
	now = t0.Add(metrics.ForgetHorizon/2 + metrics.ForgetHorizon)
	c.Forget("c") // so does a Forget
	require.Equal(t, 1, c.Remembered(), "b expired, c new")

	// Names forgotten one a second, by the hundred thousand: those of the
	// last minute are held, 60 of them.
	for i := range 100_000 {
		now = now.Add(time.Second)
		c.Forget(fmt.Sprintf("moved-%d", i))
	}
	require.Equal(t, int(metrics.ForgetHorizon/time.Second), c.Remembered())
}

// What a wave of pchannels moved away grew the collector to goes once
// they are forgotten and their names have expired: 100,000 of them held
// 3.6 MiB (7 with the pchannel label) in its maps of pchannels and series
// once forgotten, and 10 MiB in those of the names a minute after, the
// most they ever took, where the names of the last minute are a few.
//
// It measures the heap, so it runs alone in a process of its own: in the
// package's, an earlier test's garbage freed between two measures moved
// them by megabytes.
func TestAWaveOfForgetsIsLetGo(t *testing.T) {
	if os.Getenv(measuredAlone) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), measuredAlone+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("alone:\n%s", out)
		require.NoError(t, err, "the test alone failed")
		require.Contains(t, string(out), "--- PASS: "+t.Name(), "the test alone did not run")
		return
	}
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pchannel label %t", labelled), func(t *testing.T) {
			t0, _ := fixedClock()
			now := t0
			c := collectorOf(t, labelled, metrics.WithClock(func() time.Time { return now }))
			heap := func() int64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return int64(m.HeapAlloc)
			}
			const n = 100_000
			for i := range n {
				name := fmt.Sprintf("moved-%d", i)
				c.Counters(name)
				c.Observe(&messages.Stopped{Header: messages.Header{PChannel: name, At: now}})
			}
			for i := range n {
				c.Forget(fmt.Sprintf("moved-%d", i))
			}
			grown := heap()
			now = now.Add(metrics.ForgetHorizon)
			c.Forget("last")
			require.Equal(t, 1, c.Remembered())
			after := heap()
			// What the collector holds is the heap with it, less the heap
			// without it: the rest of the process (an earlier test's
			// goroutines ending) moves both alike.
			runtime.KeepAlive(c)
			c = nil
			without := heap()
			t.Logf("the collector held %d KiB after the wave's Forgets, %d once their names expired",
				(grown-without)>>10, (after-without)>>10)
			require.Greater(t, grown-without, int64(4<<20), "the wave took less than the test supposes: it proves nothing")
			require.Less(t, after-without, int64(1<<20), "the wave's memory was kept")
		})
	}
}

// measuredAlone tells a test that measures the heap that it runs in a
// process of its own.
const measuredAlone = "LOWWATER_METRICS_MEASURED_ALONE"
