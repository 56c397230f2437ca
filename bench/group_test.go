package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
)

// groupPChannels is how many pchannels advance together in 2f.
const groupPChannels = 1000

// BenchmarkGroupCommit (2f) is 1,000 pchannels of one vchannel each on a
// bbolt file with fsync, all advancing together: each of b.N rounds moves
// every pchannel's vchannel forward and waits until all 1,000 new minima
// are durable. commit=single is one write transaction (one fsync) per
// save; commit=group routes saves through bbolt's Batch
// (persistence.WithGroupCommit), which commits concurrent saves together.
// Both keep the promise that a save returns only once its value is
// durable. ns/op is one round; saves/s counts successful saves.
func BenchmarkGroupCommit(b *testing.B) {
	for _, impl := range impls {
		for _, group := range []bool{false, true} {
			mode := "single"
			if group {
				mode = "group"
			}
			b.Run("impl="+impl+"/commit="+mode, func(b *testing.B) {
				benchGroupCommit(b, impl, group)
			})
		}
	}
}

func benchGroupCommit(b *testing.B, impl string, group bool) {
	bolt, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(group))
	if err != nil {
		b.Fatal(err)
	}
	m := &meter{Catalog: bolt}
	defer m.Close()
	pchannels := names("pchannel-", groupPChannels)
	id := ids(b.N + 1)
	// The first save of every pchannel (its minimum at spawn) is set-up.
	started := m.untilCount(groupPChannels)
	f := newFleet(b, impl, spec{pchannels: pchannels, vchannels: at([]string{"v"}, id[0]), catalog: m})
	defer f.close(b)
	waitUntil(b, started, "the first saves")

	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for r := 1; r <= b.N; r++ {
		done := m.untilCount(groupPChannels * (r + 1))
		for i := range pchannels {
			f.update(i, "v", id[r])
		}
		waitUntil(b, done, "a round of saves")
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	b.ReportMetric(float64(groupPChannels*b.N)/elapsed.Seconds(), "saves/s")
}

func waitUntil(b *testing.B, c <-chan time.Time, what string) {
	b.Helper()
	select {
	case <-c:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%s did not happen within two minutes", what)
	}
}
