//go:build !race

package actors

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestPoolNewTaskIsNotStuckBehindLongTasks: with every core busy with
// long tasks and many more queued, a task someone waits for (GoNow: a
// request, a stop) still runs soon, not after the queue: it gets a worker
// that is surely waiting, and readied last, it runs next on its core.
// Without the race detector only: it shuffles the order in which ready
// goroutines get a core, on purpose (`make test` runs this test without
// it as well).
func TestPoolNewTaskIsNotStuckBehindLongTasks(t *testing.T) {
	const each = 10 * time.Millisecond
	p, done := busyPool(t, each)
	ran := make(chan time.Duration, 1)
	sent := time.Now()
	p.GoNow(funcTask(func() { ran <- time.Since(sent) }))
	select {
	case waited := <-ran:
		// Behind the queue, a worker arriving at each of the scheduler's
		// time slices, it would wait for about 40 of them.
		require.Less(t, waited, 10*each, "a new task waited behind the long ones")
	case <-time.After(time.Minute):
		t.Fatal("the new task did not run")
	}
	done.Wait()
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// TestPoolCallerIsNotStuckBehindTheNextTask: with every core busy with
// long tasks and more queued, the goroutine that a task someone waits for
// readies (a request's caller, woken by the reply) runs soon after that
// task, not after the long task its worker takes next from the queue. It
// waited for the scheduler to preempt that one: 10 ms at the median, in
// a trial of GetState under such a load, and up to 400 ms at the 99th
// percentile.
func TestPoolCallerIsNotStuckBehindTheNextTask(t *testing.T) {
	const each = 20 * time.Millisecond
	p, done := busyPool(t, each)
	var waits []time.Duration
	for range 5 {
		answered := make(chan time.Time)
		woke := make(chan time.Duration)
		go func() {
			at := <-answered // the caller, waiting for its reply
			woke <- time.Since(at)
		}()
		p.GoNow(funcTask(func() { answered <- time.Now() }))
		select {
		case d := <-woke:
			waits = append(waits, d)
		case <-time.After(time.Minute):
			t.Fatal("the caller did not run")
		}
	}
	slices.Sort(waits)
	// Behind the worker's next task, it would wait for a time slice.
	require.Less(t, waits[len(waits)/2], each/4, "the caller waited behind the next task: %v", waits)
	done.Wait()
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// busyPool is a pool given 40 long tasks per core, each computing for
// each: once it returns, every core runs one and the rest are queued.
// done ends with the last.
func busyPool(t *testing.T, each time.Duration) (*pool, *sync.WaitGroup) {
	t.Helper()
	long := 40 * runtime.GOMAXPROCS(0)
	p := newPool(time.Millisecond, 4)
	done := new(sync.WaitGroup)
	done.Add(long)
	for range long {
		p.Go(funcTask(func() {
			defer done.Done()
			for start := time.Now(); time.Since(start) < each; {
				// computes, as a subscriber might on each event
			}
		}))
	}
	// The first tasks start at once, a worker at a time.
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.live.Load() >= int64(runtime.GOMAXPROCS(0)) && p.queuedLocked() > long/2
	}, 5*time.Second, time.Millisecond, "the long tasks running, the rest queued")
	return p, done
}
