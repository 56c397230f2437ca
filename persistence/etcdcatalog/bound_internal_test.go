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
						b.refuse(size)
						refusals, last = refusals+1, step
					} else {
						b.take(size)
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
				b.refuse(size)
				if refused == 0 || size < refused {
					refused = size
				}
			} else {
				b.take(size)
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
	b.refuse(1000)
	require.Equal(t, 500, b.limit)
	b.take(500)
	require.Equal(t, 750, b.limit)
	b.take(1200) // a size refused before, taken now
	require.Equal(t, 1000, b.limit, "at the option, never above it")
	b = newBound(1 << 20)
	b.refuse(800)
	b.take(400)
	b.take(900)
	require.Equal(t, 900, b.limit)
	b.take(900)
	require.Equal(t, 900, b.limit)

	// It refused a size it took before: learnt again from below.
	b.refuse(600)
	require.Equal(t, 300, b.limit)
}

// offerFull offers n transactions at the bound to a cluster of limit
// cluster, and returns how many it refused.
func offerFull(b *bound, cluster, n int) (refusals int) {
	for range n {
		if size := b.limit; size > cluster {
			b.refuse(size)
			refusals++
		} else {
			b.take(size)
		}
	}
	return refusals
}

// A cluster whose limit does not change refuses one probe in each
// reprobeAfter transactions, and the bound goes back to its limit at once.
func TestBoundProbesOnceInReprobeAfter(t *testing.T) {
	for _, cluster := range []int{1, 2, 100, 128, 1000} {
		t.Run(fmt.Sprint("cluster=", cluster), func(t *testing.T) {
			b := newBound(1 << 20)
			offerFull(&b, cluster, 200)
			require.Equal(t, cluster, b.limit)
			for cycle := range 12 {
				require.Equal(t, 1, offerFull(&b, cluster, reprobeAfter), "cycle %d", cycle)
				require.Equal(t, cluster, b.limit, "cycle %d", cycle)
			}
		})
	}
}

// A limit raised after the bound settled is learnt exactly, within a few
// probes; one lowered again, from below as at first.
func TestBoundLearnsARaisedLimit(t *testing.T) {
	for _, raised := range []int{101, 150, 200, 1000, 5000, 1 << 21} {
		t.Run(fmt.Sprint("raised=", raised), func(t *testing.T) {
			const option = 1 << 20
			b := newBound(option)
			offerFull(&b, 100, 200)
			require.Equal(t, 100, b.limit)
			want := min(option, raised)
			cycles := 0
			for ; b.limit != want; cycles++ {
				require.Less(t, cycles, 2*bits.Len(uint(raised))+2, "limit %d, want %d", b.limit, want)
				offerFull(&b, raised, reprobeAfter)
			}
			require.LessOrEqual(t, b.limit, option)
			offerFull(&b, raised, 10*reprobeAfter)
			require.Equal(t, want, b.limit, "kept")

			offerFull(&b, 60, 200) // lowered
			require.Equal(t, 60, b.limit)
		})
	}
}

// A probe waits for a transaction that reaches it: smaller ones taken
// meanwhile neither end it nor count toward the next.
func TestBoundProbeWaitsForALargeEnoughTransaction(t *testing.T) {
	b := newBound(1000)
	offerFull(&b, 100, 200)
	takes := 0
	for ; b.limit == 100; takes++ {
		require.Less(t, takes, reprobeAfter)
		b.take(100)
	}
	require.Equal(t, 200, b.limit, "the probe, at twice the largest taken")
	for range 3 * reprobeAfter {
		b.take(90)
	}
	require.Equal(t, 200, b.limit, "still probing")
	b.refuse(150)
	require.Equal(t, 100, b.limit)
	offerFull(&b, 100, reprobeAfter)
	require.Equal(t, 125, b.limit, "the next probe, halfway to the one refused")
}
