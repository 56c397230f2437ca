package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/wal"
)

func TestLagClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var l lagClock
	require.True(t, l.since().IsZero())

	for i := 1; i <= 5; i++ { // the minimum rises to 110, 120, … 150
		l.rose(wal.KafkaID(100+10*i), at(100*i))
	}
	l.rose(wal.KafkaID(150), at(900)) // no rise: nothing new
	require.Equal(t, at(100), l.since())

	l.persisted(wal.KafkaID(110)) // the save of the minimum at 100 ms
	require.Equal(t, at(200), l.since(), "waiting since the rise past 110")
	l.persisted(wal.KafkaID(125)) // a value between two rises
	require.Equal(t, at(300), l.since(), "125 was passed by the rise to 130")

	l.fell(wal.KafkaID(135)) // an Add at 135: 140 and 150 are no longer passed
	require.Equal(t, []rise{{wal.KafkaID(130), at(300)}, {wal.KafkaID(135), at(400)}}, l.rises)
	l.rose(wal.KafkaID(160), at(1000))
	l.persisted(wal.KafkaID(135))
	require.Equal(t, at(1000), l.since(), "past 135 only since the rise after the fall")

	l.persisted(wal.KafkaID(160))
	require.True(t, l.since().IsZero())
	l.reset()
	require.Empty(t, l.rises)
}

// Past maxRises the two rises closest in time merge into one at the
// earlier time: the clock may read long, never short.
func TestLagClockIsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	var l lagClock
	gaps := []int{5, 9, 1, 7} // ms between rises, repeated
	ms := 0
	for i := range 100 {
		ms += gaps[i%len(gaps)]
		l.rose(wal.KafkaID(i+1), t0.Add(time.Duration(ms)*time.Millisecond))
		require.LessOrEqual(t, len(l.rises), maxRises)
		for j := 1; j < len(l.rises); j++ {
			require.True(t, less(l.rises[j-1].to, l.rises[j].to), "values rise")
			require.True(t, l.rises[j-1].at.Before(l.rises[j].at), "times rise")
		}
	}
	require.Equal(t, wal.KafkaID(100), l.rises[len(l.rises)-1].to, "the last rise is the minimum")
	require.Equal(t, t0.Add(5*time.Millisecond), l.since(), "the first rise keeps its time")
	// Whatever value is persisted, the clock reads no later than the truth.
	for v := 1; v < 100; v++ {
		c := l
		c.rises = append([]rise(nil), l.rises...)
		c.persisted(wal.KafkaID(v))
		truth := 0 // the rise to v+1
		for i := range v + 1 {
			truth += gaps[i%len(gaps)]
		}
		require.False(t, c.since().After(t0.Add(time.Duration(truth)*time.Millisecond)), "persisted %d", v)
	}
}

// A rise timed earlier than the ones before it (events from two
// goroutines) moves them back to its time: the values below it were
// passed by then. Times keep rising with values.
func TestLagClockTakesAnEarlierRise(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	var l lagClock
	l.rose(wal.KafkaID(110), at(100))
	l.rose(wal.KafkaID(120), at(300))
	l.rose(wal.KafkaID(130), at(200))
	require.Equal(t, []rise{{wal.KafkaID(110), at(100)}, {wal.KafkaID(120), at(200)}, {wal.KafkaID(130), at(200)}}, l.rises)
}
