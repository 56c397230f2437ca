package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// blocked runs n tasks at once on p, each blocking until release is
// closed, and returns once all of them run.
func blocked(p *pool, n int, release <-chan struct{}, done *sync.WaitGroup) {
	var running sync.WaitGroup
	running.Add(n)
	done.Add(n)
	for range n {
		p.Go(funcTask(func() {
			defer done.Done()
			running.Done()
			<-release
		}))
	}
	running.Wait()
}

func TestPoolShedsIdleWorkers(t *testing.T) {
	p := newPool(5*time.Millisecond, 4)
	release := make(chan struct{})
	var done sync.WaitGroup
	blocked(p, 10, release, &done)
	require.EqualValues(t, 10, p.live.Load(), "a task that finds no idle worker gets a new one")
	close(release)
	done.Wait()
	// Beyond maxIdle, a worker exits as soon as it is idle.
	require.Eventually(t, func() bool { return p.live.Load() <= 4 }, 5*time.Second, time.Millisecond, "back to maxIdle workers")
	require.LessOrEqual(t, p.idleWorkers(), 4)
	// The rest exit after idleFor.
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
	require.Zero(t, p.idleWorkers())
	p.mu.Lock()
	for i := range p.queue.head.cells {
		require.Nil(t, p.queue.head.cells[i].msg, "cell %d of the queue still holds a task that ran", i)
	}
	p.mu.Unlock()

	// The pool works again after it emptied, and reuses an idle worker.
	ran := make(chan struct{})
	p.Go(funcTask(func() { close(ran) }))
	<-ran
	require.Eventually(t, func() bool { return p.idleWorkers() == 1 }, 5*time.Second, time.Millisecond, "the worker idle")
	again := make(chan struct{})
	p.Go(funcTask(func() { close(again) }))
	<-again
	require.EqualValues(t, 1, p.live.Load(), "an idle worker takes the next task")
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// Beyond maxIdle a worker exits as soon as it is idle, without waiting
// for a sweep: a burst leaves no more than maxIdle goroutines behind it.
func TestPoolKeepsNoMoreThanMaxIdle(t *testing.T) {
	p := newPool(time.Hour, 4)
	defer p.sweep.Stop()
	release := make(chan struct{})
	var done sync.WaitGroup
	blocked(p, 10, release, &done)
	close(release)
	done.Wait()
	require.Eventually(t, func() bool { return p.live.Load() <= 4 }, 5*time.Second, time.Millisecond, "back to maxIdle workers")
	require.Equal(t, 4, p.idleWorkers())
	// Two sweeps end the workers idle since the first.
	p.evict()
	p.evict()
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// TestPoolIsNeverCapped: a task that waits for another task (a graceful
// stop waits in a handler for its persister) must not starve it, however
// few workers are kept.
func TestPoolIsNeverCapped(t *testing.T) {
	p := newPool(time.Millisecond, 1)
	second := make(chan struct{})
	first := make(chan struct{})
	p.Go(funcTask(func() {
		p.Go(funcTask(func() { close(second) }))
		<-second
		close(first)
	}))
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("a task waiting for another task never ended")
	}
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

func TestCallEndedBeforeItRanNeverRuns(t *testing.T) {
	ran := false
	k := newCall(&callSite{op: "Save", timeout: time.Second, fn: catalogFunc(func(context.Context, wal.MessageID) (wal.MessageID, error) {
		ran = true
		return nil, nil
	})}, 1, wal.KafkaID(1))
	cfg := &config{logger: zap.NewNop()}
	require.True(t, k.end(cfg), "ended before it ran")
	k.run()
	require.False(t, ran, "the catalog was called after the call ended")
	res, ok := k.wait(time.Now().Add(time.Second), nil, nil)
	require.True(t, ok)
	require.ErrorIs(t, res.err, context.Canceled)
}

func TestCallContextDeadlineAndCancel(t *testing.T) {
	t.Run("deadline, Err only", func(t *testing.T) {
		c := &callContext{began: time.Now(), timeout: -time.Millisecond}
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after the deadline")
		}
	})
	t.Run("deadline, Done", func(t *testing.T) {
		c := &callContext{began: time.Now(), timeout: 20 * time.Millisecond}
		require.NoError(t, c.Err())
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed at the deadline")
		}
		require.ErrorIs(t, c.Err(), context.DeadlineExceeded)
		d, ok := c.Deadline()
		require.True(t, ok)
		require.Equal(t, c.began.Add(20*time.Millisecond), d)
	})
	t.Run("cancel before Done", func(t *testing.T) {
		c := &callContext{began: time.Now(), timeout: time.Hour}
		c.cancel(context.Canceled)
		select {
		case <-c.Done():
		default:
			t.Fatal("Done open after cancel")
		}
		require.ErrorIs(t, c.Err(), context.Canceled)
	})
	t.Run("cancel after Done, derived contexts follow", func(t *testing.T) {
		c := &callContext{began: time.Now(), timeout: time.Hour}
		child, stop := context.WithCancel(c)
		defer stop()
		c.cancel(context.Canceled)
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a derived context outlived the call")
		}
		require.True(t, errors.Is(child.Err(), context.Canceled))
		require.Nil(t, c.Value("k"))
	})
}

// TestPoolQueuedTaskNeverWaitsOnBlockedWorkers: with every worker blocked,
// tasks that queue still run, each on a worker started for it.
func TestPoolQueuedTaskNeverWaitsOnBlockedWorkers(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	release := make(chan struct{})
	var done sync.WaitGroup
	blocked(p, 10, release, &done)
	blocked(p, 10, release, &done) // returns only once all 10 run
	require.EqualValues(t, 20, p.live.Load())
	close(release)
	done.Wait()
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
	requireSettled(t, p)
}

// requireSettled waits for a worker on its way to arrive, then checks
// that nothing is queued.
func requireSettled(t *testing.T, p *pool) {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.coming.Load() == 0
	}, 5*time.Second, time.Millisecond, "no worker on its way")
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Zero(t, p.queuedLocked(), "nothing left queued")
}

// TestPoolWakesOneWorkerAtATime: a task that comes while a worker is on
// its way is queued for it, and wakes none; the worker, once it runs,
// sends for the next if tasks are still queued, and for none otherwise.
func TestPoolWakesOneWorkerAtATime(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	ran := make(chan int, 2)
	p.mu.Lock()
	p.coming.Store(1) // as if one had been woken
	p.mu.Unlock()
	p.Go(funcTask(func() { ran <- 1 }))
	p.Go(funcTask(func() { ran <- 2 }))
	p.mu.Lock()
	require.Equal(t, 2, p.queuedLocked(), "queued for the worker on its way")
	require.Zero(t, p.live.Load(), "no worker woken or started")
	p.mu.Unlock()
	p.arrived() // it runs: tasks are still queued, so it sends for one
	// That one, once it runs, may have sent for the next already, with the
	// second task still queued: one each, never both at once by arrived.
	require.Contains(t, []int64{1, 2}, p.live.Load())
	got := map[int]bool{}
	for range 2 {
		select {
		case i := <-ran:
			got[i] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("queued tasks %v ran, not both", got)
		}
	}
	requireSettled(t, p)

	p.coming.Store(1)
	p.arrived() // nothing queued: it sends for no one
	require.Zero(t, p.coming.Load())
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// TestPoolGoNowPassesTheQueue: a task someone waits for (a request, a
// stop: see mailbox.start) gets a worker of its own at once, even while
// a worker is on its way and tasks are queued for it: it runs before them.
func TestPoolGoNowPassesTheQueue(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	p.coming.Store(1) // as if one had been woken
	ran := make(chan string, 2)
	p.Go(funcTask(func() { ran <- "queued" }))
	p.GoNow(funcTask(func() { ran <- "now" }))
	for _, want := range []string{"now", "queued"} {
		select {
		case got := <-ran:
			// The worker of GoNow's task takes the queued one after it.
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not run", want)
		}
	}
	p.arrived() // the one on its way comes at last, to find nothing to do
	requireSettled(t, p)
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// TestPoolGoNowReusesWaitingWorkers: a loop of tasks someone waits for,
// each after the one before (a caller asking GetState again and again),
// is run by a few workers, each taking a task only while it waits for
// one: it started a worker per task, up to the idle cap, until the next
// sweep.
func TestPoolGoNowReusesWaitingWorkers(t *testing.T) {
	p := newPool(time.Hour, 1024) // no sweep: only reuse keeps them few
	defer func() {
		// Once every worker is idle, two sweeps end them all.
		require.Eventually(t, func() bool { return int64(p.idleWorkers()) == p.live.Load() }, 5*time.Second, time.Millisecond)
		p.evict()
		p.evict()
		require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
	}()
	done := make(chan struct{})
	for range 1000 {
		p.GoNow(funcTask(func() { done <- struct{}{} }))
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a task did not run")
		}
	}
	require.Less(t, p.live.Load(), int64(64), "workers started for 1,000 tasks, one at a time")
}

// idleWorkers reports how many workers wait for a task.
func (p *pool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// queuedLocked counts the tasks queued; the caller holds mu.
func (p *pool) queuedLocked() int { return p.queue.len() - int(p.queue.taken) }

// TestPoolQueuedAsTheLastWorkerArrives: Go saw a worker on its way, and
// that worker arrived, found nothing queued and sent for no one, before
// Go queued its task. Go's second look at coming finds none on its way,
// and it sends one for the task itself.
func TestPoolQueuedAsTheLastWorkerArrives(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	ran := make(chan struct{})
	p.coming.Store(1) // as Go saw it
	p.arrived()       // nothing queued yet: it sends for no one
	require.Zero(t, p.live.Load())
	p.enqueue(funcTask(func() { close(ran) })) // the rest of that Go
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the task queued after the last worker arrived did not run")
	}
	requireSettled(t, p)
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// TestPoolLosesNoQueuedTask: senders queue tasks with no lock while the
// workers on their way arrive and the ones running park, and every task
// runs. Without Go's second look at coming, a task was left queued with
// no worker on its way in about one run of ten.
func TestPoolLosesNoQueuedTask(t *testing.T) {
	p := newPool(time.Millisecond, 4)
	const senders, rounds, each = 4, 200, 50
	for round := range rounds {
		var left sync.WaitGroup
		left.Add(senders * each)
		var sent sync.WaitGroup
		for range senders {
			sent.Add(1)
			go func() {
				defer sent.Done()
				for range each {
					p.Go(funcTask(left.Done))
				}
			}()
		}
		sent.Wait()
		all := make(chan struct{})
		go func() { left.Wait(); close(all) }()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			p.mu.Lock()
			queued, coming := p.queuedLocked(), p.coming.Load()
			p.mu.Unlock()
			t.Fatalf("round %d: %d tasks queued with %d workers on their way, not run within 10 s", round, queued, coming)
		}
	}
	requireSettled(t, p)
	require.Eventually(t, func() bool { return p.live.Load() == 0 }, 5*time.Second, time.Millisecond, "no worker left")
}

// idleStarter starts every save and never tells it.
type idleStarter struct{ persistence.SaveStarter }

func (idleStarter) StartSave(context.Context, string, wal.MessageID, func(error)) error { return nil }

// A call abandoned, or reported overdue, names what it waits on: the
// catalog's method still running, or the done of a StartSave that
// returned. Both used to say "Save", whichever it was.
func TestAbandonedCallNamesWhatItWaitsOn(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	blocking := catalogFunc(func(context.Context, wal.MessageID) (wal.MessageID, error) {
		close(entered)
		<-release // ignoring its context
		return nil, nil
	})
	system := quietSystem(t)
	// The late result goes to no one: a dead letter.
	nobody := system.NewLocalPID("nobody")
	for _, tc := range []struct {
		name      string
		site      *callSite
		op, state string
	}{
		{"a StartSave never told", &callSite{op: "Save", timeout: time.Millisecond, starter: idleStarter{}}, "StartSave", "StartSave's done not yet called"},
		{"a Save ignoring its context", &callSite{root: system.Root, self: nobody, op: "Save", timeout: time.Millisecond, fn: blocking}, "Save", "Save still running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newCall(tc.site, 1, wal.KafkaID(1))
			ran := make(chan struct{})
			go func() {
				defer close(ran)
				k.run()
			}()
			if tc.site.starter != nil {
				<-ran
			} else {
				<-entered
			}
			// Its context ended at its deadline, and its look due 10 ms
			// ago.
			k.ctx.began = time.Now().Add(-overdueAfter(k.ctx.timeout) - 10*time.Millisecond)
			endedOnTime(k)
			_, err := k.overdue()
			require.ErrorIs(t, err, ErrCatalogOverdue)
			require.ErrorContains(t, err, ": "+tc.state+" 100ms after its context ended (its deadline: 1ms)")

			core, logs := observer.New(zap.ErrorLevel)
			require.False(t, k.end(&config{logger: zap.New(core)}))
			require.Equal(t, 1, logs.Len())
			fields := logs.All()[0].ContextMap()
			require.Equal(t, tc.op, fields["op"])
			require.Equal(t, tc.state, fields["state"])
			if tc.site.fn != nil {
				close(release)
			}
			<-ran
		})
	}
}
