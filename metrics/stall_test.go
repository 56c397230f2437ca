package metrics_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/metrics"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The age of the minimum is now minus the last rise (or the start of
// running), read at scrape time; pchannels_stalled follows MinimumStalled
// and MinimumResumed, and Stopped and Forget clear both.
func TestMinimumAgeAndStalled(t *testing.T) {
	t0, at := fixedClock()
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("pchannel label %t", labelled), func(t *testing.T) {
			now := t0
			c := collectorOf(t, labelled, metrics.WithClock(func() time.Time { return now }))
			reg := registry(t, c)
			want := func(clock float64, pchannel string, age, stalled, stalls float64) {
				t.Helper()
				now = at(clock)
				require.InDelta(t, age, sample(t, reg, "lowwater_minimum_age_seconds", labelled, pchannel), 1e-9, "age at %vs", clock)
				require.Equal(t, stalled, sample(t, reg, "lowwater_pchannels_stalled", labelled, pchannel), "stalled at %vs", clock)
				require.Equal(t, stalls, sample(t, reg, "lowwater_minimum_stalls_total", labelled, pchannel), "stalls at %vs", clock)
			}
			h := func(s float64) messages.Header { return messages.Header{PChannel: "p", At: at(s)} }

			c.Counters("p")
			want(1, "p", 0, 0, 0) // recovering: no age
			c.Observe(&messages.Recovered{Header: h(1)})
			want(4, "p", 3, 0, 0)
			c.Observe(&messages.MinimumAdvanced{Header: h(2), To: wal.KafkaID(5), Holder: "a"})
			want(4, "p", 2, 0, 0)
			c.Observe(&messages.MinimumStalled{Header: h(5), Holder: "a", Checkpoint: wal.KafkaID(5), Since: at(2), For: 3 * time.Second})
			want(6, "p", 4, 1, 1)
			c.Observe(&messages.MinimumAdvanced{Header: h(7), To: wal.KafkaID(6), Holder: "b"})
			c.Observe(&messages.MinimumResumed{Header: h(7), Holder: "a", StalledFor: 5 * time.Second})
			want(8, "p", 1, 0, 1)

			// Another pchannel: unlabelled, the age is the largest and the
			// stalled pchannels are counted.
			c.Observe(&messages.Recovered{Header: messages.Header{PChannel: "q", At: at(0)}})
			c.Observe(&messages.MinimumStalled{Header: messages.Header{PChannel: "q", At: at(8)}, Holder: "z", Since: at(0), For: 8 * time.Second})
			c.Observe(&messages.MinimumStalled{Header: h(9), Holder: "b", Since: at(7), For: 2 * time.Second})
			if labelled {
				want(10, "p", 3, 1, 2)
				want(10, "q", 10, 1, 1)
			} else {
				want(10, "", 10, 2, 3)
			}

			// Stopped clears the stall and the age.
			c.Observe(&messages.Stopped{Header: h(11), Graceful: true, Flushed: true})
			if labelled {
				want(12, "p", 0, 0, 2)
			} else {
				want(12, "", 12, 1, 3) // q is still stalled
			}

			// Forget wins over a late stall of the run that ended.
			now = at(13)
			c.Forget("q")
			c.Observe(&messages.MinimumStalled{Header: messages.Header{PChannel: "q", At: at(12)}, Holder: "z", Since: at(0), For: 12 * time.Second})
			if labelled {
				require.Empty(t, seriesOf(t, reg, "q"), "a late stall brought a forgotten pchannel back")
			} else {
				want(14, "", 0, 0, 3)
			}
			// A new run after the Forget counts again.
			c.Observe(&messages.Recovered{Header: messages.Header{PChannel: "q", At: at(14)}})
			c.Observe(&messages.MinimumStalled{Header: messages.Header{PChannel: "q", At: at(15)}, Holder: "z", Since: at(14), For: time.Second})
			if labelled {
				want(16, "q", 2, 1, 1)
			} else {
				want(16, "", 2, 1, 4)
			}
		})
	}
}

// Fed by a real actor through the event stream: the stall shows, and goes
// when the holder moves.
func TestStalledFromActor(t *testing.T) {
	c, err := metrics.New(metrics.WithPChannelLabel())
	require.NoError(t, err)
	reg := registry(t, c)
	system := quietSystem(t)
	sub, err := c.Subscribe(system.EventStream)
	require.NoError(t, err)
	defer sub.Close()
	const after = 150 * time.Millisecond // the window in which the resumed pchannel is not stalled again
	props, err := actors.NewProps("p", wal.Kafka, persistence.NewMemory(), actors.WithCounters(c.Counters("p")),
		actors.WithStallAfter(after), actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(1), "b": wal.KafkaID(2)}))
	require.NoError(t, err)
	pid := system.Root.Spawn(props)
	defer func() { require.NoError(t, system.Root.PoisonFuture(pid).Wait()) }()

	require.Eventually(t, func() bool { return sample(t, reg, "lowwater_pchannels_stalled", true, "p") == 1 }, testBound, tick)
	require.GreaterOrEqual(t, sample(t, reg, "lowwater_minimum_age_seconds", true, "p"), after.Seconds())
	require.Equal(t, 1.0, sample(t, reg, "lowwater_minimum_stalls_total", true, "p"))

	require.NoError(t, actors.Request(ctxtest.Within(testBound), system.Root, pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(3)}))
	require.Eventually(t, func() bool { return sample(t, reg, "lowwater_pchannels_stalled", true, "p") == 0 }, testBound, tick)
}
