package etcdcatalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRoundTripSetsTheWaitBeforeACopy(t *testing.T) {
	wait := func(r roundTrip, most time.Duration) time.Duration {
		t.Helper()
		d, ok := r.hedgeAfter(most)
		require.True(t, ok)
		return d
	}
	var r roundTrip
	require.Equal(t, firstHedge, wait(r, 5*time.Second), "nothing measured")
	require.Equal(t, 500*time.Millisecond, wait(r, 500*time.Millisecond), "the most it may wait")

	r.observe(2 * time.Millisecond)
	require.Equal(t, roundTrip{srtt: 2 * time.Millisecond, rttvar: time.Millisecond}, r)
	require.Equal(t, minHedge, wait(r, 5*time.Second), "6 ms, below the least wait")

	// One answer slow by a second raises the wait to about a second.
	r.observe(time.Second)
	require.Equal(t, roundTrip{srtt: 126750 * time.Microsecond, rttvar: 250250 * time.Microsecond}, r)
	require.Equal(t, 1127750*time.Microsecond, wait(r, 5*time.Second))
	require.Equal(t, 500*time.Millisecond, wait(r, 500*time.Millisecond))

	// A cluster far away, whose transactions take about as long each:
	// twice the mean, not the mean and four deviations (340 ms).
	r = roundTrip{srtt: 300 * time.Millisecond, rttvar: 10 * time.Millisecond}
	require.Equal(t, 600*time.Millisecond, wait(r, 5*time.Second))
	// A copy sent at half the time left, 250 ms, would be answered at
	// 550: none is sent.
	_, ok := r.hedgeAfter(250 * time.Millisecond)
	require.False(t, ok)
}

func TestAReadThatMeasuredNothingBorrowsTheLongerEstimate(t *testing.T) {
	var c Catalog
	require.Equal(t, roundTrip{}, c.estimate(&c.readTrips), "nothing measured")

	c.pageTrips.observe(20 * time.Millisecond)
	c.saveTrips.observe(8 * time.Millisecond)
	require.Equal(t, roundTrip{srtt: 20 * time.Millisecond, rttvar: 10 * time.Millisecond}, c.estimate(&c.readTrips))
	d, ok := c.estimate(&c.readTrips).hedgeAfter(5 * time.Second)
	require.True(t, ok)
	require.Equal(t, 60*time.Millisecond, d, "the pages' mean and four deviations, not firstHedge")

	c.readTrips.observe(2 * time.Millisecond)
	require.Equal(t, roundTrip{srtt: 2 * time.Millisecond, rttvar: time.Millisecond}, c.estimate(&c.readTrips), "its own, once measured")

	// A save or a page borrows nothing: a read's estimate is shorter.
	var fresh Catalog
	fresh.readTrips.observe(2 * time.Millisecond)
	require.Equal(t, roundTrip{}, fresh.estimate(&fresh.saveTrips))
	require.Equal(t, roundTrip{}, fresh.estimate(&fresh.pageTrips))
}

// copies is a call whose copies each do what answers says for their
// number, and records when each was made.
type copies struct {
	mu      sync.Mutex
	sent    []time.Time
	ended   int
	answers func(n int, ctx context.Context) (string, error)
}

func (c *copies) call(ctx context.Context) (string, error) {
	c.mu.Lock()
	n := len(c.sent)
	c.sent = append(c.sent, time.Now())
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.ended++
		c.mu.Unlock()
	}()
	return c.answers(n, ctx)
}

// hang answers nothing until ctx ends, as a member that answers nothing.
func hang(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// after is a first copy's wait that does not change.
func after(d time.Duration) func() (time.Duration, bool) {
	return func() (time.Duration, bool) { return d, true }
}

// A call's first copy waits for the estimate as it stands when the wait
// set at its start has passed: in a burst, the answers meanwhile tell that
// the cluster takes longer now. An estimate that fell meanwhile sends no
// copy earlier than the first wait.
func TestHedgedAsksAgainBeforeItsFirstCopy(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name        string
		waits       []time.Duration // the estimate, asked at the start, then each time its wait passes
		first, next time.Duration   // when the first copy is sent, and the next one at the least
	}{
		{"the estimate rose", []time.Duration{10 * ms, 80 * ms, 80 * ms}, 80 * ms, (80 + 160) * ms},
		{"it rose twice", []time.Duration{10 * ms, 40 * ms, 120 * ms, 120 * ms}, 120 * ms, (120 + 240) * ms},
		{"it fell", []time.Duration{60 * ms, 10 * ms}, 60 * ms, (60 + 120) * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked atomic.Int32
			firstCopy := func() (time.Duration, bool) {
				return tc.waits[min(int(asked.Add(1))-1, len(tc.waits)-1)], true
			}
			c := &copies{answers: func(n int, ctx context.Context) (string, error) {
				if n == 2 {
					return "second copy", nil
				}
				return hang(ctx)
			}}
			began := time.Now()
			got := hedged(context.Background(), firstCopy, 1, maxHedges, c.call)
			require.NoError(t, got.err)
			require.Len(t, c.sent, 3)
			require.GreaterOrEqual(t, c.sent[1].Sub(began), tc.first)
			require.Less(t, c.sent[1].Sub(began), tc.first+400*ms)
			require.GreaterOrEqual(t, c.sent[2].Sub(began), tc.next, "the next copy did not wait twice the first's wait")
			require.EqualValues(t, len(tc.waits), asked.Load(), "the estimate was not asked again each time its wait passed")
		})
	}
}

// Once the estimate says a copy would not be answered in the time the
// call has, none is sent.
func TestHedgedSendsNoCopyTheEstimateSaysComesTooLate(t *testing.T) {
	var asked atomic.Int32
	firstCopy := func() (time.Duration, bool) { return 10 * time.Millisecond, asked.Add(1) == 1 }
	c := &copies{answers: func(n int, ctx context.Context) (string, error) {
		time.Sleep(100 * time.Millisecond) // the member's answer, slow
		return "slow", nil
	}}
	got := hedged(context.Background(), firstCopy, 2, maxHedges, c.call)
	require.Equal(t, "slow", got.resp)
	require.Len(t, c.sent, 1)
	require.EqualValues(t, 2, asked.Load())
}

// A call whose every copy failed on its member is sent to the others: the
// first time at once, then on the timer, so that members that all fail at
// once are not sent a burst; a copy that fails while another is pending
// sends nothing more.
func TestHedgedSendsACallWhoseMemberFailedToTheOthers(t *testing.T) {
	const ms = time.Millisecond
	unavailable := status.Error(codes.Unavailable, "keepalive ping failed to receive ACK within timeout")
	t.Run("every member fails", func(t *testing.T) {
		c := &copies{answers: func(int, context.Context) (string, error) { return "", unavailable }}
		began := time.Now()
		got := hedged(context.Background(), after(50*ms), 2, 3, c.call)
		require.ErrorIs(t, got.err, unavailable)
		require.Len(t, c.sent, 1+2*3)
		// At once, before the first wait's 50 ms, then after 100 and
		// 200 ms: the waits double as rounds go.
		require.Less(t, c.sent[1].Sub(began), 50*ms)
		require.GreaterOrEqual(t, c.sent[3].Sub(c.sent[1]), 100*ms)
		require.GreaterOrEqual(t, c.sent[5].Sub(c.sent[3]), 200*ms)
	})
	t.Run("one copy fails while another is pending", func(t *testing.T) {
		c := &copies{answers: func(n int, ctx context.Context) (string, error) {
			switch n {
			case 1:
				return "", unavailable
			case 2:
				time.Sleep(5 * ms) // after copy 1 failed, well before the next round at 150 ms
				return "copy", nil
			}
			return hang(ctx)
		}}
		got := hedged(context.Background(), after(50*ms), 2, maxHedges, c.call)
		require.Equal(t, "copy", got.resp)
		require.Len(t, c.sent, 3)
	})
}

func TestHedgedSendsCopiesUntilOneAnswers(t *testing.T) {
	errRefused := errors.New("refused")
	for _, tc := range []struct {
		name    string
		fanout  int
		answers func(n int, ctx context.Context) (string, error)
		want    answer[string]
		sent    int
	}{
		{"the first answers", 1, func(n int, ctx context.Context) (string, error) { return "first", nil }, answer[string]{resp: "first"}, 1},
		{"the first fails", 1, func(n int, ctx context.Context) (string, error) { return "", errRefused }, answer[string]{err: errRefused}, 1},
		{"the fourth answers", 1, func(n int, ctx context.Context) (string, error) {
			if n == 3 {
				return "fourth", nil
			}
			return hang(ctx)
		}, answer[string]{resp: "fourth"}, 4},
		// Copies 2 and 3 at 10 ms, 4 and 5 at 30.
		{"the fourth answers, copies sent two at a time", 2, func(n int, ctx context.Context) (string, error) {
			if n == 3 {
				return "fourth", nil
			}
			return hang(ctx)
		}, answer[string]{resp: "fourth"}, 5},
		{"a copy is refused as every member would refuse it, another hangs", 1, func(n int, ctx context.Context) (string, error) {
			if n == 1 {
				return "", rpctypes.ErrLeaseNotFound
			}
			return hang(ctx)
		}, answer[string]{err: rpctypes.ErrLeaseNotFound}, 2},
		{"the member of the only copy fails", 2, func(n int, ctx context.Context) (string, error) {
			switch n {
			case 0:
				return "", status.Error(codes.Unavailable, "keepalive ping failed to receive ACK within timeout")
			case 1:
				return "copy", nil
			}
			return hang(ctx)
		}, answer[string]{resp: "copy"}, 3},
		{"etcd times the only copy out", 2, func(n int, ctx context.Context) (string, error) {
			switch n {
			case 0:
				return "", rpctypes.ErrTimeoutDueToConnectionLost
			case 2:
				return "copy", nil
			}
			return hang(ctx)
		}, answer[string]{resp: "copy"}, 3},
		{"a copy fails, a later one answers", 1, func(n int, ctx context.Context) (string, error) {
			switch n {
			case 1:
				return "", errRefused
			case 2:
				return "third", nil
			}
			return hang(ctx)
		}, answer[string]{resp: "third"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const wait = 10 * time.Millisecond
			c := &copies{answers: tc.answers}
			began := time.Now()
			got := hedged(context.Background(), after(wait), tc.fanout, maxHedges, c.call)
			got.took = 0
			require.Equal(t, tc.want, got)
			require.Len(t, c.sent, tc.sent)
			require.Equal(t, tc.sent, c.ended, "a copy still runs")
			if tc.fanout == 1 {
				// Each copy after twice the wait before the last: at 10,
				// 30, 70 ms. A timer never fires early.
				for i := 1; i < len(c.sent); i++ {
					require.GreaterOrEqual(t, c.sent[i].Sub(began), wait*(1<<i-1), "copy %d", i+1)
				}
			}
		})
	}
}

func TestHedgedEndsWithItsContext(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		fanout, rounds int
		wait, timeout  time.Duration
		sent           int
	}{
		// Copies at 0, 10, 30 and 70 ms; the next would go at 150.
		{1, maxHedges, 10 * ms, 100 * ms, 4},
		// Two at a time: 1 + 2 + 2 + 2.
		{2, maxHedges, 10 * ms, 100 * ms, 7},
		// Copies at 0, 300, 800, 1300 and 1800 ms, the next at 2300: the
		// wait grows to maxHedgeGap, no further.
		{1, maxHedges, 300 * ms, 2100 * ms, 5},
		// No more than maxHedges, however short the wait.
		{1, maxHedges, time.Microsecond, 100 * ms, 1 + maxHedges},
		{2, maxHedges, time.Microsecond, 100 * ms, 1 + 2*maxHedges},
		{2, 100, time.Microsecond, 100 * ms, 1 + 2*maxHedges},
		// Or than rounds: a page of keys is sent again once.
		{2, 1, 10 * ms, 100 * ms, 3},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
		c := &copies{answers: func(_ int, ctx context.Context) (string, error) { return hang(ctx) }}
		got := hedged(ctx, after(tc.wait), tc.fanout, tc.rounds, c.call)
		cancel()
		require.ErrorIs(t, got.err, context.DeadlineExceeded)
		require.Len(t, c.sent, tc.sent, "fanout %d, wait %v", tc.fanout, tc.wait)
		require.Equal(t, tc.sent, c.ended)
	}
}

func TestRefusedByAll(t *testing.T) {
	for _, err := range []error{rpctypes.ErrLeaseNotFound, rpctypes.ErrCompacted, rpctypes.ErrTooManyOps,
		rpctypes.ErrLeaseTTLTooLarge, rpctypes.ErrPermissionDenied} {
		require.True(t, refusedByAll(err), "%v", err)
		require.True(t, refusedByAll(fmt.Errorf("wrapped: %w", err)), "%v", err)
	}
	for _, err := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTooManyRequests, rpctypes.ErrTimeout,
		context.DeadlineExceeded, errors.New("connection reset"), rpctypes.Error(status.Error(codes.Unavailable, "x"))} {
		require.False(t, refusedByAll(err), "%v", err)
	}
}

// Answers that overlap come in any order: one below the highest seen,
// but not below what was seen when its call began, is no going back.
// One below that is, told once; an answer to a call begun before it was
// told, whatever its revision, tells nothing of the store since: a
// pre-wipe answer read late raised the highest again, and the next
// answer told the wipe a second time.
func TestSawRevisionTellsAGoingBackOnce(t *testing.T) {
	core, logs := observer.New(zap.ErrorLevel)
	c := Catalog{client: clientv3.NewCtxClient(t.Context(), clientv3.WithZapLogger(zap.New(core)))}
	header := func(rev int64) *etcdserverpb.ResponseHeader { return &etcdserverpb.ResponseHeader{Revision: rev} }
	first := c.revisions.begin()
	c.sawRevision(first, header(100))
	early := seenRevision{floor: 40} // begun when 40 was the highest
	c.sawRevision(early, header(90))
	require.Equal(t, seenRevision{floor: 100}, c.revisions.begin())
	require.Zero(t, logs.Len())

	before := c.revisions.begin()
	overlapping := c.revisions.begin()
	c.sawRevision(before, header(3)) // wiped
	require.Equal(t, 1, logs.Len())
	require.Equal(t, seenRevision{floor: 3, era: 1}, c.revisions.begin())
	c.sawRevision(overlapping, header(2))   // begun before it was told
	c.sawRevision(overlapping, header(150)) // an answer from before the wipe, read late
	c.sawRevision(c.revisions.begin(), nil)
	require.Equal(t, 1, logs.Len())
	require.Equal(t, seenRevision{floor: 3, era: 1}, c.revisions.begin())

	after := c.revisions.begin()
	c.sawRevision(after, header(5))
	c.sawRevision(c.revisions.begin(), header(4)) // a second going back
	require.Equal(t, 2, logs.Len())
	require.Equal(t, int64(5), logs.All()[1].ContextMap()["revisionSeen"])
}
