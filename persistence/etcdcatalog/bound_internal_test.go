package etcdcatalog

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cluster that takes transactions up to its limit, offered full ones
// (as many saves as the bound lets in), leads the bound to that limit
// exactly, or to the option if lower, within a number of refusals of the
// order of the two's bit lengths, and then refuses none.
func TestBoundLearnsTheClustersLimit(t *testing.T) {
	for _, option := range []int{64, 1 << 20} {
		for _, cluster := range []int{2, 3, 22, 63, 64, 65, 128, 1000, 1 << 21} {
			t.Run(fmt.Sprintf("option=%d/cluster=%d", option, cluster), func(t *testing.T) {
				b := newBound(option)
				refusals, last := 0, 0
				for step := range 200 {
					size := b.limit
					if size > cluster {
						b.refuse(size, false)
						refusals, last = refusals+1, step
					} else {
						b.take(size, false)
					}
					require.Positive(t, b.limit)
					require.LessOrEqual(t, b.limit, option)
				}
				require.Equal(t, min(option, cluster), b.limit)
				require.LessOrEqual(t, refusals, bits.Len(uint(option))+bits.Len(uint(cluster)))
				require.Less(t, last, 100, "still refused at step %d of 200", last)
			})
		}
	}
}

// Offered transactions of any size up to the bound, a cluster never sees
// a size it refused again once the bound has settled, and the bound never
// goes above the smallest size refused.
func TestBoundNeverOffersWhatWasRefused(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		option, cluster := 1+r.IntN(4096), 2+r.IntN(4096)
		b := newBound(option)
		refused := 0
		for range 300 {
			size := 2 + r.IntN(max(b.limit-1, 1))
			if size > b.limit {
				continue // a lone save, or none: no transaction
			}
			if refused != 0 {
				require.Less(t, size, refused, "option %d, cluster %d", option, cluster)
			}
			if size > cluster {
				b.refuse(size, false)
				if refused == 0 || size < refused {
					refused = size
				}
			} else {
				b.take(size, false)
			}
			require.GreaterOrEqual(t, b.limit, 1)
			require.LessOrEqual(t, b.limit, option)
		}
	}
}

// Sizes are estimates: a cluster that took a size it refused before
// leaves the bound at what it took, probing no higher.
func TestBoundStaysAtWhatWasTakenAboveARefusal(t *testing.T) {
	b := newBound(1000)
	b.refuse(1000, false)
	require.Equal(t, 500, b.limit)
	b.take(500, false)
	require.Equal(t, 750, b.limit)
	b.take(1200, false) // a size refused before, taken now
	require.Equal(t, 1000, b.limit, "at the option, never above it")
	b = newBound(1 << 20)
	b.refuse(800, false)
	b.take(400, false)
	b.take(900, false)
	require.Equal(t, 900, b.limit)
	b.take(900, false)
	require.Equal(t, 900, b.limit)

	// It refused a size it took before: learnt again from below.
	b.refuse(600, false)
	require.Equal(t, 300, b.limit)
}

// offerFull offers n transactions to a cluster of limit cluster, one at
// a time, each built of entries of weight each (1 when 0) as far as the
// bound's offer lets in, and returns how many it refused.
func offerFull(b *bound, cluster, n, weight int) (refusals int) {
	weight = max(weight, 1)
	for range n {
		most, probe := b.offer()
		size := max(weight, most/weight*weight)
		if size > cluster {
			b.refuse(size, probe)
			refusals++
		} else {
			b.take(size, probe)
		}
	}
	return refusals
}

// A cluster whose limit does not change refuses one probe in each
// reprobeAfter transactions, and the bound stays at its limit.
func TestBoundProbesOnceInReprobeAfter(t *testing.T) {
	for _, cluster := range []int{1, 2, 100, 128, 1000} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) {
			b := newBound(1 << 20)
			offerFull(&b, cluster, 200, 1)
			require.Equal(t, cluster, b.limit)
			for cycle := range 12 {
				require.Equal(t, 1, offerFull(&b, cluster, reprobeAfter, 1), "cycle %d", cycle)
				require.Equal(t, cluster, b.limit, "cycle %d", cycle)
			}
		})
	}
}

// A limit raised after the bound settled is learnt exactly, within a few
// probes, whatever the entries weigh (an owned save weighs three, a save's
// bytes hundreds), and kept at one refusal a probe; one lowered again is
// learnt from below, as at first.
func TestBoundLearnsARaisedLimit(t *testing.T) {
	for _, weight := range []int{1, 3, 200} {
		for _, raised := range []int{1010, 1500, 2000, 10000, 50000, 1 << 21} {
			t.Run(fmt.Sprintf("weight=%d/raised=%d", weight, raised), func(t *testing.T) {
				const option = 1 << 20
				b := newBound(option)
				offerFull(&b, 1000, 200, weight)
				require.Equal(t, 1000/weight*weight, b.taken, "settled")
				want := min(option, raised) / weight * weight // the largest transaction it takes
				chunks := 0
				for ; b.taken != want; chunks++ {
					require.Less(t, chunks, 2*bits.Len(uint(raised)), "largest taken %d, want %d", b.taken, want)
					offerFull(&b, raised, reprobeAfter, weight)
				}
				for range 4 {
					require.LessOrEqual(t, offerFull(&b, raised, reprobeAfter, weight), 1)
					require.Equal(t, want, b.taken, "kept")
				}

				offerFull(&b, 600, 200, weight) // lowered
				require.Equal(t, 600/weight*weight, b.taken)
				require.LessOrEqual(t, offerFull(&b, 600, reprobeAfter, weight), 1)
			})
		}
	}
}

// A probe that no transaction can reach above the limit (entries weigh
// more than the gap left, or too few are queued) does not stand for
// good: doubled, it is tried, and a raised limit learnt. It stood, and no
// probe came again.
func TestBoundDoublesAProbeNoTransactionReaches(t *testing.T) {
	b := newBound(1000)
	offerFull(&b, 32, 200, 3) // owned saves at --max-txn-ops 32: 30 taken
	require.Equal(t, 30, b.taken)
	require.Less(t, b.limit, 33)
	offerFull(&b, 256, 8*reprobeAfter, 3) // the limit raised
	require.Equal(t, 255, b.taken)
}

// Transactions in flight together are offered the probe one at a time:
// a probe the cluster refuses costs one transaction, not one a loop.
func TestBoundOffersItsProbeToOneTransactionAtATime(t *testing.T) {
	b := newBound(1 << 20)
	offerFull(&b, 100, 200, 1)
	for b.probe == 0 {
		b.take(100, false)
	}
	var sizes []int
	probes := 0
	for range 4 { // four commit loops build at once
		size, probe := b.offer()
		sizes = append(sizes, size)
		if probe {
			probes++
		}
	}
	require.Equal(t, 1, probes)
	require.Equal(t, []int{200, 100, 100, 100}, sizes)
	b.refuse(200, true)
	for range 3 {
		b.take(100, false)
	}
	require.Equal(t, 100, b.limit)
	require.Zero(t, b.probe)
	size, probe := b.offer()
	require.Equal(t, 100, size)
	require.False(t, probe, "no probe before reprobeAfter more")
}
