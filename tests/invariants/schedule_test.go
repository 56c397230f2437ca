package invariants

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/core/saveplan"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// outage is longer than the 15 minutes after which cenkalti's default
// ExponentialBackOff gives up (MaxElapsedTime), the reference's bug.
const outage = 16 * time.Minute

// The default schedule driven directly, through more than 15 minutes of
// failures: every wait lies in its window (×1.5 from 100 ms, 20 % jitter,
// never below 100 ms nor above 10 s), it never returns Stop, and Reset
// starts again from the first window.
func TestBackoffNeverGivesUp(t *testing.T) {
	b := actors.DefaultBackoff()
	bo := saveplan.Backoff(b).New()
	var elapsed time.Duration
	k := 0
	for ; elapsed < outage; k++ {
		w := bo.NextBackOff()
		require.NotEqual(t, cbackoff.Stop, w, "gave up after %v", elapsed)
		lo, hi := backoffWindow(b, k)
		require.GreaterOrEqual(t, w, lo, "wait #%d at %v", k, elapsed)
		require.LessOrEqual(t, w, hi, "wait #%d at %v", k, elapsed)
		elapsed += w
	}
	// 11 waits to reach the cap, then one per 6.7 s to 10 s.
	require.GreaterOrEqual(t, k, 11+int((outage-30*time.Second)/(10*time.Second)))
	require.LessOrEqual(t, k, 11+int(outage/(6666*time.Millisecond))+1)
	bo.Reset()
	lo, hi := backoffWindow(b, 0)
	w := bo.NextBackOff()
	require.GreaterOrEqual(t, w, lo)
	require.LessOrEqual(t, w, hi)
}

// The persister's plan through a 16-minute outage with minima arriving all
// along: each retry saves the latest minimum, none comes sooner than 100 ms
// or later than 10 s after the failure, it never gives up, and the plan
// allocates nothing per failure, offer or timer (I5: O(1) state).
func TestPlanOutageLongerThan15Minutes(t *testing.T) {
	ids := make([]wal.MessageID, 4096)
	for i := range ids {
		ids[i] = wal.KafkaID(i + 1)
	}
	p := saveplan.New(nil, saveplan.DefaultBackoff.New(), 0)
	step := p.Offer(ids[0])
	require.Equal(t, ids[0], step.Save)
	var elapsed time.Duration
	next, attempts := 1, 1
	for elapsed < outage {
		step = p.Failed()
		require.GreaterOrEqual(t, step.Wait, actors.DefaultBackoff().Initial)
		require.LessOrEqual(t, step.Wait, actors.DefaultBackoff().Max)
		require.Nil(t, step.Save)
		elapsed += step.Wait
		// Minima keep rising during the wait; none starts a save.
		for range 3 {
			require.Equal(t, saveplan.Step{}, p.Offer(ids[next]))
			next++
		}
		step = p.TimerFired()
		require.Equal(t, ids[next-1], step.Save, "the retry saves the latest minimum")
		attempts++
	}
	require.Equal(t, attempts, p.Attempt())
	require.Equal(t, saveplan.Step{}, p.Succeeded())
	require.Equal(t, ids[next-1], p.Persisted())

	allocs := testing.AllocsPerRun(1000, func() {
		p.Offer(ids[next%len(ids)])
		p.Failed()
		p.TimerFired()
		next++
	})
	require.Zero(t, allocs, "I5: the plan allocates per failure")
}

// The real actor through a 16-minute outage (fake time), minima rising every
// 30 s: every attempt saves the latest minimum, gaps follow the schedule,
// and once the catalog is back the latest minimum is saved within one
// backoff cap.
func TestActorOutageLongerThan15Minutes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := actors.DefaultBackoff()
		s := newScene(t)
		s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(0)}))
		synctest.Wait()
		require.Equal(t, wal.KafkaID(0), s.stored())
		s.probe.setDown(true)
		began := time.Now()
		var v int64
		for time.Since(began) < outage {
			v++
			s.update("a", v)
			time.Sleep(30 * time.Second)
		}
		synctest.Wait()
		healed := time.Now()
		s.probe.setDown(false)
		time.Sleep(b.Max)
		synctest.Wait()
		require.Equal(t, wal.KafkaID(v), s.stored())

		calls := savesOf(s.probe.snapshot(0))
		last := calls[len(calls)-1]
		require.Nil(t, last.err)
		require.LessOrEqual(t, last.start.Sub(healed), b.Max, "I3")
		failed := calls[1 : len(calls)-1]
		require.Greater(t, len(failed), int(outage/b.Max), "retried all along")
		for _, c := range failed {
			require.Equal(t, fDown, c.fault.kind)
			// The latest minimum when the attempt started: a rises every 30 s.
			require.Equal(t, wal.KafkaID(int64(c.start.Sub(began)/(30*time.Second))+1), c.value, "attempt at %v", c.start.Sub(began))
		}
		evs := s.rec.Since(0)
		checkSchedule(t, b, s.probe.snapshot(0), announcedWaits(evs, faultinject.OpSave), faultinject.OpSave, false)
		require.Equal(t, len(failed), len(ofType[*messages.PersistFailed](evs)))
		_ = s.stop(true)
	})
}

// I4: a burst of N rising minima during one save costs one further save,
// of the latest minimum, whatever N.
func TestBurstDuringSaveCostsOneFurtherSave(t *testing.T) {
	for _, n := range []int{1, 2, 100, 10000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newScene(t)
				s.probe.script(faultinject.OpSave, fault{kind: fLatency, delay: time.Second})
				s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(0)}))
				synctest.Wait() // the save of kafka:0 is in flight
				for i := 1; i <= n; i++ {
					s.sys.Root.Send(s.pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(int64(i))})
				}
				st := s.state()
				require.True(t, st.SaveInFlight)
				require.Equal(t, wal.KafkaID(int64(n)), st.Minimum)
				time.Sleep(time.Second)
				synctest.Wait()
				saves := savesOf(s.probe.snapshot(0))
				require.Len(t, saves, 2)
				require.Equal(t, wal.KafkaID(0), saves[0].value)
				require.Equal(t, wal.KafkaID(int64(n)), saves[1].value)
				// The burst is applied in runs of what queued, each of
				// which publishes one event: they chain from 0 to n.
				advanced := ofType[*messages.MinimumAdvanced](s.rec.Since(0))
				require.NotEmpty(t, advanced)
				require.LessOrEqual(t, len(advanced), n, "at most one event a rise")
				from := wal.MessageID(wal.KafkaID(0))
				for _, ev := range advanced {
					require.True(t, ev.From.EQ(from) && from.LT(ev.To), "%s→%s after %s", ev.From, ev.To, from)
					from = ev.To
				}
				require.Equal(t, wal.KafkaID(int64(n)), from)
				require.Equal(t, wal.KafkaID(int64(n)), s.stored())
				_ = s.stop(true)
			})
		})
	}
}

// I5: however long the catalog is down and however many minima arrive
// meanwhile, the actor holds O(1) state: after an hour of outage (fake time)
// and 200,000 rising minima the heap is where it was, and the persister
// neither hot-loops nor gives up.
func TestBoundedStateDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScene(t)
		s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(0)}))
		synctest.Wait()
		s.rec.Pause(true) // 200,000 events would be the heap growth
		s.probe.setDown(true)
		s.update("a", 1)
		synctest.Wait()
		before := heapAlloc()
		const n = 200_000
		for i := 2; i <= n; i++ {
			s.sys.Root.Send(s.pid, &messages.UpdateCheckpoint{VChannel: "a", Checkpoint: wal.KafkaID(int64(i))})
			if i%10_000 == 0 {
				time.Sleep(3 * time.Minute) // an hour in all
			}
		}
		synctest.Wait()
		require.Equal(t, wal.KafkaID(n), s.state().Minimum)
		after := heapAlloc()
		// The probe keeps a record per attempt (under 400 of them here).
		require.Less(t, after-before, int64(512<<10), "heap grew from %d to %d bytes", before, after)
		attempts := len(savesOf(s.probe.snapshot(0))) - 1
		require.Greater(t, attempts, int(time.Hour/actors.DefaultBackoff().Max))
		require.Less(t, attempts, int(time.Hour/(6666*time.Millisecond))+20)
		s.probe.setDown(false)
		time.Sleep(actors.DefaultBackoff().Max)
		synctest.Wait()
		require.Equal(t, wal.KafkaID(n), s.stored())
		_ = s.stop(true)
	})
}

func heapAlloc() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// The schedule in real time: with the catalog down, the gaps between save
// attempts (timestamps from faultinject's WithOnSave hook) are never
// shorter than the backoff window allows, whatever the scheduler does;
// slack is allowed only upward. Upward, a loaded, race-instrumented 2-core
// machine stalled one retry by 290 ms: each gap may overshoot by up to
// slack, which still tells the backoff (under 100 ms here) from any other
// timer a retry could wrongly wait for (the save timeout is 5 s), and the
// median overshoot must stay small, which one stall cannot move.
func TestRetryGapsRealTime(t *testing.T) {
	b := actors.Backoff{Initial: 20 * time.Millisecond, Max: 80 * time.Millisecond, Multiplier: 1.5, Jitter: 0.2}
	const slack, medianSlack = time.Second, 100 * time.Millisecond
	var mu sync.Mutex
	var returns []time.Time
	var errs []error
	s := newScene(t, faultinject.WithOnSave(func(_ string, _ wal.MessageID, err error) {
		mu.Lock()
		defer mu.Unlock()
		returns, errs = append(returns, time.Now()), append(errs, err)
	}))
	s.realTime = true
	s.probe.setDown(true)
	s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(0)}), actors.WithBackoff(b))
	// The recovery read fails too: it follows the same schedule.
	const failures = 8
	waitEvent(t, s.rec, 0, 10*time.Second, func(e *messages.RecoveryFailed) bool { return e.Attempt == 2 })
	s.probe.setDown(false)
	_, idx := waitEvent(t, s.rec, 0, 10*time.Second, func(*messages.CheckpointPersisted) bool { return true })
	s.probe.setDown(true)
	s.update("a", 1)
	waitEvent(t, s.rec, idx, 10*time.Second, func(e *messages.PersistFailed) bool { return e.Attempt == failures })
	s.probe.setDown(false)
	waitEvent(t, s.rec, idx, 10*time.Second, func(e *messages.CheckpointPersisted) bool { return e.Value == wal.KafkaID(1) })

	mu.Lock()
	defer mu.Unlock()
	// returns[0] is the save of kafka:0; then failures, then the success.
	require.GreaterOrEqual(t, len(returns), failures+2)
	k := 0
	var over []time.Duration
	for i := 2; i < len(returns); i++ {
		if errs[i-1] == nil {
			break
		}
		gap := returns[i].Sub(returns[i-1])
		lo, hi := backoffWindow(b, k)
		require.GreaterOrEqual(t, gap, lo, "gap %d (wait #%d) came too soon", i, k)
		require.LessOrEqual(t, gap, hi+slack, "gap %d (wait #%d)", i, k)
		over = append(over, gap-hi)
		k++
	}
	require.GreaterOrEqual(t, k, failures)
	slices.Sort(over)
	require.LessOrEqual(t, over[len(over)/2], medianSlack, "median overshoot of the gaps %v", over)
	// The announced waits match the gaps too, within the same slack.
	for _, w := range announcedWaits(s.rec.Since(idx), faultinject.OpSave) {
		require.GreaterOrEqual(t, w, b.Initial)
		require.LessOrEqual(t, w, b.Max)
	}
	_ = s.stop(true)
}
