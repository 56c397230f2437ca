package bench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
)

// updateVChannels is the vchannel count of one pchannel in 2a and 2b.
const updateVChannels = 1000

// BenchmarkUpdate (2a) is single updates to one pchannel of 1000
// vchannels, from 1 and from 8 producers; ns/op and allocs/op are per
// update. Each producer owns every P-th vchannel and moves its vchannels
// forward in turn, so no update is a rollback and the minimum rises once
// per lap over the vchannels. On lowwater the time runs until the actor
// has applied the last update; building the message is part of it, since
// a caller must.
//
// Beside them run the references of reference_test.go: floor, mutex, and
// lowwater through an actors.Sender.
func BenchmarkUpdate(b *testing.B) {
	for _, impl := range []string{implBaseline, implLowwater, implFloor, implMutex, implSender} {
		for _, producers := range []int{1, 8} {
			b.Run(fmt.Sprintf("impl=%s/producers=%d", impl, producers), func(b *testing.B) {
				benchUpdate(b, impl, producers)
			})
		}
	}
}

func benchUpdate(b *testing.B, impl string, producers int) {
	vchannels := names("v", updateVChannels)
	cat := persistence.NewMemory()
	defer cat.Close()
	id := ids(b.N/updateVChannels + 2)
	f := newFleet(b, impl, spec{pchannels: []string{"p"}, vchannels: at(vchannels, id[0]), catalog: cat})
	defer f.close(b)
	per := b.N / producers

	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range producers {
		var mine []string
		for j := w; j < len(vchannels); j += producers {
			mine = append(mine, vchannels[j])
		}
		n := per
		if w == 0 {
			n += b.N % producers
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range n {
				f.update(0, mine[k%len(mine)], id[k/len(mine)+1])
			}
		}()
	}
	wg.Wait()
	f.barrier(b)
	b.StopTimer()
}

// batchSize is the UpdateBatch size of 2b.
const batchSize = 64

// BenchmarkUpdateBatch (2b) is the same updates as BenchmarkUpdate with one
// producer, 64 at a time. The updates are read from one slice built before
// the timer starts, as a consumer holds a batch read off the WAL: lowwater
// sends each 64 of them as one UpdateBatch (a slice of the input, no copy),
// the baseline makes 64 calls. ns/op and allocs/op are per update.
func BenchmarkUpdateBatch(b *testing.B) {
	for _, impl := range impls {
		b.Run("impl="+impl+fmt.Sprintf("/batch=%d", batchSize), func(b *testing.B) {
			vchannels := names("v", updateVChannels)
			cat := persistence.NewMemory()
			defer cat.Close()
			id := ids(b.N/updateVChannels + 2)
			f := newFleet(b, impl, spec{pchannels: []string{"p"}, vchannels: at(vchannels, id[0]), catalog: cat})
			defer f.close(b)
			all := make([]messages.VChannelCheckpoint, b.N)
			for k := range all {
				all[k] = messages.VChannelCheckpoint{VChannel: vchannels[k%updateVChannels], Checkpoint: id[k/updateVChannels+1]}
			}

			b.ReportAllocs()
			b.ResetTimer()
			for start := 0; start < b.N; start += batchSize {
				f.updateBatch(0, all[start:min(start+batchSize, b.N):min(start+batchSize, b.N)])
			}
			f.barrier(b)
			b.StopTimer()
		})
	}
}

// BenchmarkUpdateRising (2g) is single updates to one pchannel of 100
// vchannels from one producer, each of which raises the minimum (see
// rising), as a consumer that moves its vchannels round-robin makes them.
// Where BenchmarkUpdate's minimum rises once per lap, here every update is
// a rise, which lowwater publishes (MinimumAdvanced) and the baseline
// signals to its persister. ns/op and allocs/op are per update, until the
// actor has applied the last one.
func BenchmarkUpdateRising(b *testing.B) {
	for _, impl := range []string{implBaseline, implLowwater, implSender} {
		b.Run("impl="+impl+"/vchannels=100", func(b *testing.B) {
			r := newRising(100, b.N)
			cat := persistence.NewMemory()
			defer cat.Close()
			f := newFleet(b, impl, spec{pchannels: []string{"p"}, vchannels: r.initial(), catalog: cat})
			defer f.close(b)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.next(f)
			}
			f.barrier(b)
			b.StopTimer()
		})
	}
}
