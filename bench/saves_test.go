package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// rising drives one pchannel so that every update raises its minimum: the
// vchannel updated is always the one at the minimum, and it jumps past all
// the others. With n vchannels starting at 0..n-1, update k moves vchannel
// k mod n to k+n, and the minimum goes from k to k+1.
type rising struct {
	vchannels []string
	id        []wal.MessageID
	k         int
}

func newRising(vchannels, updates int) *rising {
	return &rising{vchannels: names("v", vchannels), id: ids(updates + vchannels + 1)}
}

// initial is the checkpoints at spawn; the minimum is id 0.
func (r *rising) initial() map[string]wal.MessageID {
	m := make(map[string]wal.MessageID, len(r.vchannels))
	for j, v := range r.vchannels {
		m[v] = r.id[j]
	}
	return m
}

// next applies the next update to pchannel 0 of f and returns the minimum
// after it.
func (r *rising) next(f fleet) wal.MessageID {
	n := len(r.vchannels)
	f.update(0, r.vchannels[r.k%n], r.id[r.k+n])
	r.k++
	return r.id[r.k]
}

// peek returns the minimum the next update will make.
func (r *rising) peek() wal.MessageID { return r.id[r.k+1] }

// savesRate is the pace of the producer in BenchmarkSaves.
const savesRate = 1_000_000 // updates per second

// BenchmarkSaves (2c) counts catalog saves per million updates, against a
// catalog that takes 100 µs and 1 ms per save. One pchannel of 1000
// vchannels, and every update raises its minimum: the worst case for the
// number of saves, which coalescing bounds to one per save cycle (the
// catalog's latency plus the implementation's own hand-offs).
//
// The producer is paced at the same rate (1M updates/s, smoothly) for
// both, because at full speed the count would mostly say how fast each
// side ingests: the faster ingester squeezes more updates into each save.
// ns/op is the pace.
func BenchmarkSaves(b *testing.B) {
	for _, impl := range impls {
		for _, latency := range []time.Duration{100 * time.Microsecond, time.Millisecond} {
			b.Run(fmt.Sprintf("impl=%s/catalog=%v", impl, latency), func(b *testing.B) {
				r := newRising(1000, b.N)
				m := &meter{Catalog: slow{Catalog: persistence.NewMemory(), latency: latency}}
				defer m.Close()
				started := m.untilSaved("p", r.id[0])
				f := newFleet(b, impl, spec{pchannels: []string{"p"}, vchannels: r.initial(), catalog: m})
				defer f.close(b)
				<-started // the minimum at spawn
				m.reset()

				b.ReportAllocs()
				b.ResetTimer()
				p := newPacer(savesRate, sleepThread)
				var last wal.MessageID
				for range b.N {
					last = r.next(f)
					p.tick()
				}
				done := m.untilSaved("p", last)
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatalf("%v not saved within a minute", last)
				}
				b.StopTimer()
				b.ReportMetric(float64(m.count())*1e6/float64(b.N), "saves/1M-updates")
			})
		}
	}
}

// pacer keeps a loop at a rate: every 100 ticks it sleeps until the
// schedule has caught up. This is rate limiting, not synchronisation.
// BenchmarkSaves sleeps in nanosleep (sleepThread), precise to some
// microseconds, because the runtime's timers wake a millisecond late on an
// idle machine, which would turn its pace into bursts of a thousand
// updates. BenchmarkScale's producers park instead (time.Sleep), as a
// consumer waiting on its WAL's network does: one that holds its thread
// in nanosleep also holds the P the actors' goroutine it just woke waits
// on, until the runtime takes the P back.
type pacer struct {
	start time.Time
	every time.Duration
	n     int
	sleep func(time.Duration)
}

func newPacer(perSecond int, sleep func(time.Duration)) *pacer {
	return &pacer{start: time.Now(), every: time.Second / time.Duration(perSecond), sleep: sleep}
}

func (p *pacer) tick() {
	p.n++
	if p.n%100 != 0 {
		return
	}
	if ahead := time.Until(p.start.Add(time.Duration(p.n) * p.every)); ahead > 0 {
		p.sleep(ahead)
	}
}

// lagVChannels and lagBurst shape BenchmarkPersistLag.
const (
	lagVChannels = 100
	lagBurst     = 100
)

// BenchmarkPersistLag (2d) is the time from the last update of a burst to
// the commit of a save at or above the minimum it made, with a 1 ms
// catalog. Each of b.N rounds is a burst of 100 updates that each raise the
// minimum of one pchannel of 100 vchannels. A save that starts before the
// burst ends takes a minimum from its middle, and the last update's
// minimum waits for it, then for a save of its own: two catalog latencies
// where one would do. saves/burst says how often that happens (at most one
// save is in flight per pchannel, so a burst costs one save or two). The
// clock starts just before the last update is issued and stops when the
// catalog's Save returns; save-start-p50-ms stops it when that Save began
// instead. ns/op is one round. impl=sender sends the burst through an
// actors.Sender, which ships it in a few batches.
func BenchmarkPersistLag(b *testing.B) {
	const latency = time.Millisecond
	for _, impl := range []string{implBaseline, implLowwater, implSender} {
		b.Run("impl="+impl+"/catalog=1ms", func(b *testing.B) {
			r := newRising(lagVChannels, b.N*lagBurst)
			e := &entered{Catalog: slow{Catalog: persistence.NewMemory(), latency: latency}}
			m := &meter{Catalog: e}
			defer m.Close()
			started := m.untilSaved("p", r.id[0])
			f := newFleet(b, impl, spec{pchannels: []string{"p"}, vchannels: r.initial(), catalog: m})
			defer f.close(b)
			<-started

			lags := make([]time.Duration, 0, b.N)
			starts := make([]time.Duration, 0, b.N)
			m.mu.Lock()
			saves0 := m.saves
			m.mu.Unlock()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for range lagBurst - 1 {
					r.next(f)
				}
				done := m.untilSaved("p", r.peek())
				t0 := time.Now()
				r.next(f)
				select {
				case at := <-done:
					lags = append(lags, at.Sub(t0))
					// One save at a time: the last to start is the one
					// that made the burst durable.
					starts = append(starts, e.lastStart().Sub(t0))
				case <-time.After(time.Minute):
					b.Fatal("a burst was not saved within a minute")
				}
			}
			b.StopTimer()
			m.mu.Lock()
			b.ReportMetric(float64(m.saves-saves0)/float64(b.N), "saves/burst")
			m.mu.Unlock()
			slices.Sort(lags)
			b.ReportMetric(ms(quantile(lags, 0.50)), "lag-p50-ms")
			b.ReportMetric(ms(quantile(lags, 0.99)), "lag-p99-ms")
			slices.Sort(starts)
			b.ReportMetric(ms(quantile(starts, 0.50)), "save-start-p50-ms")
		})
	}
}

// entered notes when the last Save of its catalog started: in
// BenchmarkPersistLag, how long after the burst's last update the save
// that made it durable began, apart from the catalog's own latency.
type entered struct {
	persistence.Catalog
	mu    sync.Mutex
	start time.Time // guarded by mu
}

func (e *entered) Save(ctx context.Context, pchannel string, v wal.MessageID) error {
	now := time.Now()
	e.mu.Lock()
	e.start = now
	e.mu.Unlock()
	return e.Catalog.Save(ctx, pchannel, v)
}

func (e *entered) lastStart() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.start
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
