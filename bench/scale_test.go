package bench

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// scaleDrained makes BenchmarkScale wait until the actors have applied
// every update before the last one of each pchannel: its persist lag is
// then the last round of saves alone, without the backlog the producers
// leave when they outrun the actors.
var scaleDrained = flag.Bool("scale-drained", false, "BenchmarkScale: drain the backlog before the last sweep")

// scaleRate paces BenchmarkScale's producers to that many updates per
// second in all, so that both implementations are measured at the same
// load: 0, as fast as they go, is where lowwater's producers outrun its
// actors and its lag is the backlog they leave.
var scaleRate = flag.Int("scale-rate", 0, "BenchmarkScale: updates per second offered by all producers together (0: as fast as they go)")

// The shape of BenchmarkScale.
const (
	scalePChannels = 10_000
	scaleVChannels = 100
	// scaleLaps is how many times each vchannel moves in the update phase;
	// each lap raises every pchannel's minimum once.
	scaleLaps = 2
)

// BenchmarkScale (2e) is 10,000 pchannels of 100 vchannels each, recovered
// from a bbolt file that holds a checkpoint for every one of them (equal to
// the minimum of its vchannels, so that nothing needs saving at rest). One
// iteration reports:
//
//	recover-ms              spawn and recover all of them: lowwater reads
//	                        the file once (LoadAll, WithPreloaded) and
//	                        waits for every Recovered event; the baseline
//	                        loads pchannel by pchannel, as the reference does
//	goroutines              goroutines added, once every pchannel is idle
//	heap-bytes/pchannel     live heap added, after GC, per pchannel
//	stack-bytes/pchannel    goroutine stacks added, per pchannel
//	updates/s               GOMAXPROCS producers, each owning a share of the
//	                        pchannels, move every vchannel twice; saves go
//	                        to an in-memory sink, so that the figure is the
//	                        pchannels' and not the disk's
//	lag-p99-ms              from a pchannel's last update to the save of
//	                        the minimum it made, the 99th percentile
//	last-round-p99-ms       from the first of the pchannels' last updates
//	                        to the save of the 99th percentile's final
//	                        minimum: how long the last round took to be
//	                        durable, whoever pays for it (the baseline's
//	                        producers spend it inside Update, sending their
//	                        last updates over a longer span; lowwater's
//	                        updates wait in the mailboxes)
//	applied-p99-ms          lowwater only: from a pchannel's last update
//	                        to the rise of its minimum (MinimumAdvanced),
//	                        the 99th percentile: the update's wait for its
//	                        pchannel's turn
//	saved-after-rise-p99-ms lowwater only: from that rise to the save
//
// impl=sender is lowwater with one Sender per pchannel: the producers
// move one vchannel of each pchannel in turn, so a Sender rarely has two
// updates to coalesce, and each update is a batch of its own, asked and
// answered. It is the Sender's worst case, not its use.
//
// The input (names, IDs, one checkpoint map shared by every pchannel) is
// built before the first memory reading, so only what each implementation
// keeps per pchannel is counted. Run it with -benchtime=1x.
func BenchmarkScale(b *testing.B) {
	name := "/pchannels=10000/vchannels=100"
	if *scaleRate > 0 {
		name += fmt.Sprintf("/rate=%d", *scaleRate)
	}
	for _, impl := range []string{implBaseline, implLowwater, implSender} {
		b.Run("impl="+impl+name, func(b *testing.B) {
			for range b.N {
				benchScale(b, impl)
			}
		})
	}
}

func benchScale(b *testing.B, impl string) {
	b.StopTimer()
	pchannels := names("pchannel-", scalePChannels)
	vchannels := names("v", scaleVChannels)
	id := ids(scaleLaps + 2)
	initial := at(vchannels, id[0])
	path := filepath.Join(b.TempDir(), "checkpoints.db")
	writeCheckpoints(b, path, pchannels, id[0])
	bolt, err := persistence.OpenBolt(path)
	if err != nil {
		b.Fatal(err)
	}
	final := id[scaleLaps]
	cat := &sink{Catalog: bolt, final: final, savedAt: make(map[string]time.Time, scalePChannels), all: make(chan struct{})}
	cat.left.Store(scalePChannels)
	defer cat.Close()

	mem0 := memAfterGC()
	goroutines0 := liveGoroutines() // after the collection: see liveGoroutines
	b.ReportAllocs()
	b.StartTimer()
	t0 := time.Now()
	f := newFleet(b, impl, spec{pchannels: pchannels, vchannels: initial, catalog: cat, preload: true})
	recovered := time.Since(t0)
	b.StopTimer()
	defer waitGoroutines(b, goroutines0)
	defer f.close(b)
	// Twice: a persister's start-up exchange with its parent may still be
	// queued behind the first round.
	f.barrier(b)
	f.barrier(b)
	mem1 := memAfterGC()
	goroutines := liveGoroutines() - goroutines0
	b.ReportMetric(float64(recovered)/float64(time.Millisecond), "recover-ms")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(float64(int64(mem1.HeapAlloc)-int64(mem0.HeapAlloc))/scalePChannels, "heap-bytes/pchannel")
	// A negative difference is the collector shrinking other goroutines'
	// stacks, not a saving of the pchannels: it counts as none.
	b.ReportMetric(float64(max(int64(mem1.StackInuse)-int64(mem0.StackInuse), 0))/scalePChannels, "stack-bytes/pchannel")

	var rises *riseTimes
	if af, ok := f.(*actorFleet); ok {
		rises = watchRises(af.sys, final)
		defer rises.close()
	}
	producers := runtime.GOMAXPROCS(0)
	b.StartTimer()
	t1 := time.Now()
	// sentAt is when each pchannel's last update was sent: the one that
	// makes its final minimum.
	sentAt := make([]time.Time, scalePChannels)
	last := scaleLaps*scaleVChannels - 1
	// sweeps runs the sweeps numbered from through to, each moving one
	// vchannel of every pchannel, each producer its share of them.
	sweeps := func(from, to int) {
		var wg sync.WaitGroup
		for w := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var pace *pacer
				if *scaleRate > 0 {
					pace = newPacer(max(*scaleRate/producers, 1), time.Sleep)
				}
				for k := from; k <= to; k++ {
					v, cp := vchannels[k%scaleVChannels], id[k/scaleVChannels+1]
					for i := w; i < scalePChannels; i += producers {
						if pace != nil {
							pace.tick()
						}
						f.update(i, v, cp)
						if k == last {
							sentAt[i] = time.Now()
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	if *scaleDrained {
		sweeps(0, last-1)
		f.barrier(b)
		sweeps(last, last)
	} else {
		sweeps(0, last)
	}
	f.barrier(b)
	elapsed := time.Since(t1)
	b.StopTimer()
	b.ReportMetric(float64(scalePChannels*scaleLaps*scaleVChannels)/elapsed.Seconds(), "updates/s")

	// Persist lag: from a pchannel's last update to the save of the
	// minimum it made.
	select {
	case <-cat.all:
	case <-time.After(time.Minute):
		b.Fatalf("%d pchannels did not save their final minimum within a minute", cat.left.Load())
	}
	first := slices.MinFunc(sentAt, time.Time.Compare)
	lags := make([]time.Duration, 0, scalePChannels)
	round := make([]time.Duration, 0, scalePChannels)
	cat.mu.Lock()
	for i, p := range pchannels {
		lags = append(lags, cat.savedAt[p].Sub(sentAt[i]))
		round = append(round, cat.savedAt[p].Sub(first))
	}
	cat.mu.Unlock()
	if rises != nil {
		rises.report(b, pchannels, sentAt, cat)
	}
	slices.Sort(lags)
	slices.Sort(round)
	b.ReportMetric(ms(quantile(lags, 0.99)), "lag-p99-ms")
	b.ReportMetric(ms(quantile(round, 0.99)), "last-round-p99-ms")
}

// riseTimes is when each pchannel's minimum rose to the final one, as its
// MinimumAdvanced event says: lowwater's lag splits there into the last
// update's wait for its pchannel's turn and the save after the rise.
type riseTimes struct {
	es  *eventstream.EventStream
	sub *eventstream.Subscription
	mu  sync.Mutex
	at  map[string]time.Time // guarded by mu
}

func watchRises(sys *actor.ActorSystem, final wal.MessageID) *riseTimes {
	r := &riseTimes{es: sys.EventStream, at: make(map[string]time.Time, scalePChannels)}
	r.sub = sys.EventStream.Subscribe(func(ev any) {
		if m, ok := ev.(*messages.MinimumAdvanced); ok && m.To.EQ(final) {
			r.mu.Lock()
			r.at[m.PChannel] = m.At
			r.mu.Unlock()
		}
	})
	return r
}

func (r *riseTimes) close() { r.es.Unsubscribe(r.sub) }

// report gives the 99th percentiles of the two parts of the lag:
// applied-p99-ms, from the last update sent to the minimum's rise, and
// saved-after-rise-p99-ms, from the rise to the save.
func (r *riseTimes) report(b *testing.B, pchannels []string, sentAt []time.Time, cat *sink) {
	var applied, saved []time.Duration
	r.mu.Lock()
	cat.mu.Lock()
	for i, p := range pchannels {
		if at, ok := r.at[p]; ok {
			applied = append(applied, at.Sub(sentAt[i]))
			saved = append(saved, cat.savedAt[p].Sub(at))
		}
	}
	cat.mu.Unlock()
	r.mu.Unlock()
	if len(applied) != len(pchannels) {
		b.Fatalf("%d of %d pchannels told their final rise", len(applied), len(pchannels))
	}
	slices.Sort(applied)
	slices.Sort(saved)
	b.ReportMetric(ms(quantile(applied, 0.99)), "applied-p99-ms")
	b.ReportMetric(ms(quantile(saved, 0.99)), "saved-after-rise-p99-ms")
}

// writeCheckpoints stores cp for every pchannel, without fsync: it is
// set-up, not measured.
func writeCheckpoints(b *testing.B, path string, pchannels []string, cp wal.MessageID) {
	bolt, err := persistence.OpenBolt(path, persistence.WithNoSync(true), persistence.WithGroupCommit(true))
	if err != nil {
		b.Fatal(err)
	}
	defer bolt.Close()
	errs := make(chan error, len(pchannels))
	for _, p := range pchannels {
		go func() { errs <- bolt.Save(context.Background(), p, cp) }()
	}
	for range pchannels {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// waitGoroutines waits until at most n goroutines run: the baseline's
// goroutines return a moment after Close, and those still exiting would
// count against the next run's "goroutines added".
func waitGoroutines(b *testing.B, n int) {
	deadline := time.Now().Add(30 * time.Second)
	for liveGoroutines() > n {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines still run 30 s after the fleet closed, want at most %d", liveGoroutines(), n)
		}
		runtime.Gosched()
	}
}

// liveGoroutines counts the goroutines with the world stopped.
// runtime.NumGoroutine subtracts the runtime's lists of dead goroutines,
// read without a lock (its source says the result can be inconsistent),
// and a collection moves thousands of dead ones between those lists as it
// frees their stacks (the baseline's, just closed): lowwater's count came
// out thousands below zero in some rounds. Read after a collection and
// with the world stopped (a profile with room for one record; an empty
// one only estimates, as NumGoroutine does), it holds still.
func liveGoroutines() int {
	n, _ := runtime.GoroutineProfile(make([]runtime.StackRecord, 1))
	return n
}

func memAfterGC() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
