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
