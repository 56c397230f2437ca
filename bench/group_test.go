package bench

import (
	"context"
	"flag"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// groupPChannels is how many pchannels advance together in 2f:
// -group-pchannels, 1,000 in make bench.
var groupPChannels = 1000

func init() {
	flag.IntVar(&groupPChannels, "group-pchannels", groupPChannels,
		"how many pchannels advance together in BenchmarkGroupCommit")
}

// BenchmarkGroupCommit (2f) is 1,000 pchannels of one vchannel each on a
// bbolt file with fsync, all advancing together: each of b.N rounds moves
// every pchannel's vchannel forward and waits until all 1,000 new minima
// are durable. commit=single is one write transaction (one fsync) per
// save; commit=group is persistence.WithGroupCommit, which commits
// concurrent saves together.
// Both keep the promise that a save returns only once its value is
// durable. ns/op is one round; saves/s counts successful saves.
//
// commit=none is the same rounds on a catalog that acknowledges every save
// at once, touching no file: what is left is the cost of the save path
// itself, the implementation's own share of a save.
//
// impl=bboltbatch/commit=group is the reference: 1,000 goroutines, each
// putting its own key b.N times with bbolt's db.Batch directly (default
// delay and size), no catalog around it.
// cpu-µs/save is the process's user and system CPU time over the timed
// loop (getrusage), divided by the saves.
func BenchmarkGroupCommit(b *testing.B) {
	b.Run("impl="+implBoltBatch+"/commit=group", func(b *testing.B) { benchBoltBatch(b, groupPChannels) })
	for _, impl := range impls {
		for _, mode := range []string{"single", "group", "none"} {
			b.Run("impl="+impl+"/commit="+mode, func(b *testing.B) {
				benchGroupCommit(b, impl, mode, groupPChannels)
			})
		}
	}
}

// fewPChannels is how many pchannels advance together in
// BenchmarkGroupCommitFew.
const fewPChannels = 100

// BenchmarkGroupCommitFew is BenchmarkGroupCommit's group commit with 100
// pchannels, where a batch never fills: a policy that waits for a full
// batch or a delay, as bbolt's DB.Batch does (10 ms by default), waits
// out the delay on every round, while one that commits as soon as the
// commit before it has ended waits for no timer.
func BenchmarkGroupCommitFew(b *testing.B) {
	b.Run("impl="+implBoltBatch+"/commit=group", func(b *testing.B) { benchBoltBatch(b, fewPChannels) })
	for _, impl := range impls {
		b.Run("impl="+impl+"/commit=group", func(b *testing.B) {
			benchGroupCommit(b, impl, "group", fewPChannels)
		})
	}
}

func benchGroupCommit(b *testing.B, impl, mode string, n int) {
	var catalog persistence.Catalog = instant{persistence.NewMemory()}
	if mode != "none" {
		bolt, err := persistence.OpenBolt(filepath.Join(b.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(mode == "group"))
		if err != nil {
			b.Fatal(err)
		}
		catalog = bolt
	}
	m := counted(catalog)
	defer m.Close()
	pchannels := names("pchannel-", n)
	id := ids(b.N + 1)
	// The first save of every pchannel (its minimum at spawn) is set-up.
	started := m.untilCount(n)
	f := newFleet(b, impl, spec{pchannels: pchannels, vchannels: at([]string{"v"}, id[0]), catalog: m})
	defer f.close(b)
	waitUntil(b, started, "the first saves")

	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	t0 := time.Now()
	for r := 1; r <= b.N; r++ {
		done := m.untilCount(n * (r + 1))
		for i := range pchannels {
			f.update(i, "v", id[r])
		}
		waitUntil(b, done, "a round of saves")
	}
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	reportSaves(b, n*b.N, elapsed, cpu)
}

// instant acknowledges every valid save at once and keeps nothing.
type instant struct{ persistence.Catalog }

func (instant) Save(_ context.Context, pchannel string, v wal.MessageID) error {
	return persistence.CheckSaveArgs(pchannel, v)
}

// implBoltBatch is raw bbolt db.Batch, the reference of group commit.
const implBoltBatch = "bboltbatch"

func benchBoltBatch(b *testing.B, n int) {
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "raw.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bucket := []byte("checkpoints")
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err }); err != nil {
		b.Fatal(err)
	}
	keys := names("pchannel-", n)
	vals := make([][]byte, b.N+1)
	for r := range vals {
		vals[r] = wal.KafkaID(r).Marshal()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	t0 := time.Now()
	// Each writer saves its key b.N times, each save waiting for its
	// commit, as a persister does: while one batch commits the next fills.
	errs := make(chan error, n)
	for _, k := range keys {
		go func() {
			for r := 1; r <= b.N; r++ {
				if err := db.Batch(func(tx *bbolt.Tx) error { return tx.Bucket(bucket).Put([]byte(k), vals[r]) }); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range keys {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(t0)
	cpu := cpuTime() - cpu0
	b.StopTimer()
	reportSaves(b, n*b.N, elapsed, cpu)
}

func reportSaves(b *testing.B, saves int, elapsed, cpu time.Duration) {
	b.ReportMetric(float64(saves)/elapsed.Seconds(), "saves/s")
	b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(saves), "cpu-µs/save")
}

// cpuTime is the user plus system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func waitUntil(b *testing.B, c <-chan time.Time, what string) {
	b.Helper()
	select {
	case <-c:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%s did not happen within two minutes", what)
	}
}
