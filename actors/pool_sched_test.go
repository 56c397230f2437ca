//go:build !race

package actors

import (
	"runtime"
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
	long := 40 * runtime.GOMAXPROCS(0)
	p := newPool(time.Millisecond, 4)
	var done sync.WaitGroup
	done.Add(long)
	for range long {
		p.Go(funcTask(func() {
			defer done.Done()
			for start := time.Now(); time.Since(start) < each; {
				// computes, as a subscriber might on each event
			}
		}))
	}
	// Every core busy, and the rest queued: the first tasks start at
	// once, a worker at a time.
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.live.Load() >= int64(runtime.GOMAXPROCS(0)) && p.queuedLocked() > long/2
	}, 5*time.Second, time.Millisecond, "the long tasks running, the rest queued")
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
