package saveplan

import (
	"math"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func k(v int64) wal.MessageID { return wal.KafkaID(v) }

// fixed is a deterministic BackOff: 10ms, 20ms, 40ms, ...
type fixed struct{ next time.Duration }

func (f *fixed) Reset() { f.next = 10 * time.Millisecond }
func (f *fixed) NextBackOff() time.Duration {
	d := f.next
	f.next *= 2
	return d
}

func newPlan(persisted wal.MessageID) *Plan { return New(persisted, &fixed{}, 0) }

func TestOfferAtOrBelowFloorSavesNothing(t *testing.T) {
	p := newPlan(k(10))
	require.Equal(t, Step{}, p.Offer(k(5)))
	require.Equal(t, Step{}, p.Offer(k(10)))
	require.False(t, p.Pending())
	require.True(t, p.Settled())
	require.Equal(t, Step{Save: k(11)}, p.Offer(k(11)))
}

func TestNilFloorSavesFirstMinimum(t *testing.T) {
	p := newPlan(nil)
	require.Equal(t, Step{}, p.Offer(nil), "no vchannel, no minimum, nothing to save")
	require.Equal(t, Step{Save: k(0)}, p.Offer(k(0)))
}

func TestBurstDuringSaveCostsOneFurtherSave(t *testing.T) {
	p := newPlan(nil)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	for v := int64(2); v <= 10_000; v++ {
		require.Equal(t, Step{}, p.Offer(k(v)), "a save is in flight")
	}
	require.Equal(t, k(1), p.InFlight())
	require.Equal(t, Step{Save: k(10_000)}, p.Succeeded(), "only the latest minimum is saved")
	require.Equal(t, k(1), p.Persisted())
	require.Equal(t, Step{}, p.Succeeded())
	require.Equal(t, k(10_000), p.Persisted())
	require.True(t, p.Settled())
}

func TestRetrySavesLatestAfterBackoff(t *testing.T) {
	p := newPlan(nil)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed())
	require.Equal(t, Step{}, p.Offer(k(2)), "no save while the retry timer is armed")
	require.Equal(t, Step{Save: k(2)}, p.TimerFired(), "the retry saves the latest minimum, not the one that failed")
	require.Equal(t, 2, p.Attempt())
	require.Equal(t, Step{Wait: 20 * time.Millisecond}, p.Failed(), "waits grow")
	require.Equal(t, Step{Save: k(2)}, p.TimerFired())
	require.Equal(t, 3, p.Attempt())
	require.Equal(t, Step{}, p.Succeeded())
	require.Equal(t, 0, p.Attempt())
	require.Equal(t, Step{Save: k(3)}, p.Offer(k(3)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed(), "a success resets the backoff")
	require.Equal(t, Step{Wait: 20 * time.Millisecond}, func() Step { p.TimerFired(); return p.Failed() }())
	require.Equal(t, Step{Save: k(3)}, p.TimerFired())
	require.Equal(t, Step{}, p.Succeeded())
	require.Equal(t, Step{Save: k(4)}, p.Offer(k(4)))
	require.Equal(t, Step{}, p.Succeeded(), "a success at the first attempt")
	require.Equal(t, Step{Save: k(5)}, p.Offer(k(5)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed(), "still from the start after successes in a row")
	require.Equal(t, Step{Save: k(5)}, p.TimerFired())
	requireAdopt(t, p, k(6), Step{}, true)
	require.Equal(t, Step{Save: k(7)}, p.Offer(k(7)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed(), "adopting a stored value resets the backoff too")
}

func TestAdoptStoredAhead(t *testing.T) {
	p := newPlan(k(1))
	require.Equal(t, Step{Save: k(5)}, p.Offer(k(5)))
	requireAdopt(t, p, k(7), Step{}, true) // stored ahead of the minimum: nothing left to save
	require.Equal(t, k(7), p.Persisted())
	require.Equal(t, Step{}, p.Offer(k(7)))
	require.Equal(t, Step{Save: k(8)}, p.Offer(k(8)))
	requireAdopt(t, p, k(8), Step{}, true) // stored equal: nothing left of it to save
	require.Equal(t, k(8), p.Persisted())
	requireAdopt(t, p, k(8), Step{}, false) // the floor already: it does not rise
	requireAdopt(t, p, k(3), Step{}, false) // below the floor, nothing in flight: it never lowers
	require.Equal(t, k(8), p.Persisted())
}

// A catalog that names, as ahead, a stored value that does not reach the
// one in flight proves nothing: the value is tried again at once after a
// first attempt (a racing store's report may be stale), and on the
// backoff after later ones, never again and again without a pause (which
// looped for good).
func TestAdoptNotAheadIsTriedAgain(t *testing.T) {
	p := New(k(1), &fixed{next: 10 * time.Millisecond}, 0)
	require.Equal(t, Step{Save: k(8)}, p.Offer(k(8)))
	requireAdopt(t, p, k(6), Step{Save: k(8)}, false) // after a first attempt: at once
	require.Equal(t, k(1), p.Persisted(), "not adopted")
	require.Equal(t, 2, p.Attempt())
	requireAdopt(t, p, wal.PulsarID{LedgerID: 99}, Step{Wait: 10 * time.Millisecond}, false) // after a later attempt: on the backoff
	require.Equal(t, k(1), p.Persisted(), "another WAL's value is never adopted")
	require.Equal(t, Step{Save: k(8)}, p.TimerFired())
	requireAdopt(t, p, k(7), Step{Wait: 20 * time.Millisecond}, false)
	require.Equal(t, k(1), p.Persisted(), "a stale report never raises or lowers the floor")
	require.Equal(t, Step{Save: k(8)}, p.TimerFired())
	require.Equal(t, Step{}, p.Succeeded())
	require.Equal(t, k(8), p.Persisted())
}

func TestFenceStopsSavingForGood(t *testing.T) {
	p := newPlan(nil)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	p.Fence()
	require.True(t, p.Fenced())
	require.Equal(t, Step{}, p.Offer(k(2)))
	require.Equal(t, Step{}, p.TimerFired())
	require.Equal(t, Step{}, p.Flush())
	require.False(t, p.Pending())
	require.True(t, p.Settled())
}

// A catalog closed stops saving for good, even a retry already waiting,
// and leaves the plan settled: a graceful stop waits for nothing. What was
// acknowledged before stays persisted.
func TestCatalogClosedStopsSavingForGood(t *testing.T) {
	p := newPlan(k(1))
	require.Equal(t, Step{Save: k(2)}, p.Offer(k(2)))
	require.Equal(t, Step{}, p.Succeeded())
	require.Equal(t, Step{Save: k(3)}, p.Offer(k(3)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed())
	require.Equal(t, Step{Save: k(3)}, p.TimerFired())
	p.CatalogClosed()
	require.True(t, p.Closed())
	require.False(t, p.Fenced())
	require.Nil(t, p.InFlight())
	require.Equal(t, Step{}, p.Offer(k(4)))
	require.Equal(t, Step{}, p.TimerFired())
	require.Equal(t, Step{}, p.Flush())
	require.False(t, p.Pending())
	require.True(t, p.Settled())
	require.Equal(t, k(2), p.Persisted())
}

func TestMinIntervalSpacesSuccesses(t *testing.T) {
	p := New(nil, &fixed{}, time.Second)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	require.Equal(t, Step{Wait: time.Second}, p.Succeeded())
	require.Equal(t, Step{}, p.Offer(k(2)))
	require.False(t, p.Settled())
	require.Equal(t, Step{Save: k(2)}, p.TimerFired())
}

func TestFlushCutsWaitShort(t *testing.T) {
	p := newPlan(nil)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed())
	require.Equal(t, Step{Save: k(1)}, p.Flush())
	require.Equal(t, Step{}, p.Flush(), "never two saves in flight")
}

// Flushing ignores the min save interval: after a success the next pending
// value is saved at once. A failure still backs off.
func TestFlushIgnoresMinInterval(t *testing.T) {
	p := New(nil, &fixed{}, time.Minute)
	require.Equal(t, Step{Save: k(1)}, p.Offer(k(1)))
	require.Equal(t, Step{}, p.Offer(k(2)), "the save of 1 is in flight")
	require.Equal(t, Step{}, p.Flush(), "still in flight")
	require.Equal(t, Step{Save: k(2)}, p.Succeeded(), "no min interval while flushing")
	require.Equal(t, Step{Wait: 10 * time.Millisecond}, p.Failed(), "failures still back off")
	require.Equal(t, Step{Save: k(2)}, p.TimerFired())
	require.Equal(t, Step{}, p.Succeeded(), "settled: nothing pending, no wait")
	require.True(t, p.Settled())

	// Without Flush, the same sequence waits the interval after a success.
	q := New(nil, &fixed{}, time.Minute)
	q.Offer(k(1))
	q.Offer(k(2))
	require.Equal(t, Step{Wait: time.Minute}, q.Succeeded())
}

// TestPlanInvariants drives the plan with random inputs and checks, after
// every step, the promises the persister relies on (I1, I2, I4, I5).
func TestPlanInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		floor := rapid.Int64Range(-1, 20).Draw(t, "floor")
		var persisted wal.MessageID
		if floor >= 0 {
			persisted = k(floor)
		}
		p := New(persisted, &fixed{}, 0)
		minimum := int64(0)
		var lastSaved wal.MessageID
		check := func(s Step) {
			if s.Save != nil {
				require.True(t, wal.Less(p.Persisted(), s.Save), "save %s not above floor %s", s.Save, wal.String(p.Persisted()))
				require.True(t, s.Save.EQ(p.Target()), "a save carries the latest minimum")
				require.True(t, s.Save.EQ(p.InFlight()))
			}
			require.False(t, wal.Less(p.Persisted(), persisted), "floor lowered")
			persisted = p.Persisted()
		}
		t.Repeat(map[string]func(*rapid.T){
			"offer": func(t *rapid.T) {
				// The minimum moves both ways: an Add can lower it.
				minimum = max(minimum+rapid.Int64Range(-3, 5).Draw(t, "delta"), 0)
				check(p.Offer(k(minimum)))
			},
			"succeed": func(t *rapid.T) {
				if p.InFlight() == nil {
					t.Skip("nothing in flight")
				}
				v := p.InFlight()
				require.True(t, wal.Less(lastSaved, v), "acknowledged values strictly increase")
				lastSaved = v
				check(p.Succeeded())
				require.True(t, p.Persisted().EQ(v))
			},
			"fail": func(t *rapid.T) {
				if p.InFlight() == nil {
					t.Skip("nothing in flight")
				}
				s := p.Failed()
				require.Positive(t, s.Wait)
				check(s)
			},
			"timer": func(t *rapid.T) { check(p.TimerFired()) },
			"":      func(t *rapid.T) {},
		})
		// Once the catalog is healthy, the plan reaches the minimum (I3).
		for i := 0; i < 3 && !p.Settled(); i++ {
			if p.InFlight() == nil {
				check(p.TimerFired())
			}
			if p.InFlight() != nil {
				check(p.Succeeded())
			}
		}
		require.True(t, p.Settled())
		require.False(t, wal.Less(p.Persisted(), p.Target()))
	})
}

func TestBackoffValidate(t *testing.T) {
	require.NoError(t, DefaultBackoff.Validate())
	require.NoError(t, Backoff{Initial: MinInitial, Max: MinInitial, Multiplier: 1}.Validate())
	for _, b := range []Backoff{
		{Initial: 0, Max: time.Second, Multiplier: 1.5},
		{Initial: time.Nanosecond, Max: time.Nanosecond, Multiplier: 1},      // a hot loop
		{Initial: 999 * time.Microsecond, Max: time.Second, Multiplier: 1.5}, // just below MinInitial
		{Initial: time.Second, Max: time.Millisecond, Multiplier: 1.5},
		{Initial: time.Millisecond, Max: time.Second, Multiplier: 0.5},
		{Initial: time.Millisecond, Max: time.Second, Multiplier: 1.5, Jitter: 1},
		{Initial: time.Millisecond, Max: time.Second, Multiplier: 1.5, Jitter: -0.1},
		{Initial: time.Millisecond, Max: time.Second, Multiplier: math.NaN()},
		{Initial: time.Millisecond, Max: time.Second, Multiplier: 1.5, Jitter: math.NaN()},
	} {
		err := b.Validate()
		require.Error(t, err, "%+v", b)
		require.NotContains(t, err.Error(), "\n", "one line")
	}
}

// TestBackoffSchedule checks the promises the reference broke: the first
// retry never comes before Initial, no wait exceeds Max, waits grow about
// ×1.5, and the schedule never gives up, even over a 15-minute outage.
func TestBackoffSchedule(t *testing.T) {
	b := DefaultBackoff.New()
	var total time.Duration
	var waits []time.Duration
	for total < 20*time.Minute {
		d := b.NextBackOff()
		require.NotEqual(t, backoff.Stop, d, "never gives up")
		require.GreaterOrEqual(t, d, DefaultBackoff.Initial)
		require.LessOrEqual(t, d, DefaultBackoff.Max)
		waits = append(waits, d)
		total += d
	}
	require.LessOrEqual(t, waits[0], 150*time.Millisecond, "first retry near the initial interval")
	// Unjittered growth is ×1.5; with ±20 % jitter each step's ratio stays
	// within [1.5·0.8/1.2, 1.5·1.2/0.8] until the cap.
	for i := 1; i < len(waits) && waits[i] < 6*time.Second; i++ {
		ratio := float64(waits[i]) / float64(waits[i-1])
		require.InDelta(t, 1.5, ratio, 1.5*1.2/0.8-1.5+1e-9, "step %d: %v -> %v", i, waits[i-1], waits[i])
	}
	for _, d := range waits[len(waits)-10:] {
		require.GreaterOrEqual(t, d, time.Duration(float64(DefaultBackoff.Max)/1.2*0.8), "capped at Max, jitter only below it")
	}
	b.Reset()
	require.LessOrEqual(t, b.NextBackOff(), 150*time.Millisecond, "reset starts over")

	nj := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}.New()
	for _, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		require.Equal(t, want*time.Millisecond, nj.NextBackOff())
	}
}

func requireAdopt(t *testing.T, p *Plan, stored wal.MessageID, want Step, adopted bool) {
	t.Helper()
	step, ok := p.Adopt(stored)
	require.Equal(t, want, step, "Adopt(%v)", stored)
	require.Equal(t, adopted, ok, "Adopt(%v) adopted", stored)
}
