package invariants

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// Regression tests of the lifecycle's corners, in fake time: each stop is
// timed exactly. The default stop flush timeout is 3 s; a call that ignores
// its context is abandoned 100 ms after a stop cancelled it.

const grace = 100 * time.Millisecond

// A graceful stop that came before recovery ended skipped the flush: the
// README's Quick start persisted nothing in most runs. It now waits for the
// recovery read (here a slow one, 1 s) and flushes the minimum.
func TestRegressionPoisonDuringRecoveryFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScene(t)
		s.store(5)
		s.probe.script(faultinject.OpLoad, fault{kind: fLatency, delay: time.Second})
		s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
		s.update("a", 30)
		synctest.Wait() // the read is in flight
		took := s.stop(true)
		require.Equal(t, time.Second, took, "the stop waited for the read, and the save took no time")
		require.Equal(t, []string{"Recovered(kafka:5, catalog, 1)", "Persisted(kafka:20, 1)", "Stopped(graceful, kafka:20, flushed)"}, s.lifecycle(0))
		require.Equal(t, wal.KafkaID(20), s.stored())
	})
}

// A graceful stop during a recovery that keeps failing retries the read on
// the backoff until the stop flush timeout, and if it never succeeds stops
// with nothing saved and says why.
func TestRegressionPoisonDuringFailingRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScene(t)
		s.probe.setDown(true)
		s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
		synctest.Wait() // the first read failed; the retry waits
		took := s.stop(true)
		// It gives up as soon as the next retry would come too late.
		require.LessOrEqual(t, took, actors.DefaultStopFlushTimeout)
		evs := s.rec.Since(0)
		last := ofType[*messages.RecoveryFailed](evs)
		require.Greater(t, last[len(last)-1].NextRetry, actors.DefaultStopFlushTimeout-took, "no retry could come in time")
		st := ofType[*messages.Stopped](evs)
		require.Len(t, st, 1)
		require.False(t, st[0].Flushed)
		require.ErrorIs(t, st[0].Reason, messages.ErrNotRecovered)
		require.ErrorIs(t, st[0].Reason, faultinject.ErrInjected, "the reason carries the last read's error")
		require.Greater(t, len(ofType[*messages.RecoveryFailed](evs)), 2, "the stop read again, on the backoff")
		require.Empty(t, ofType[*messages.Recovered](evs))
	})
}

// With a Load that ignores its context, a stop waited forever (<-done in
// stop). Now a graceful one returns after the flush timeout plus the grace,
// a hard one after the grace, and the late result goes nowhere.
func TestRegressionStubbornLoadBoundsStop(t *testing.T) {
	for _, graceful := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			s := newScene(t)
			s.probe.script(faultinject.OpLoad, fault{kind: fStubborn, delay: time.Hour})
			var c actors.Counters
			s.spawn(actors.WithCounters(&c), actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10)}))
			synctest.Wait()
			took := s.stop(graceful)
			want := grace
			if graceful {
				want += actors.DefaultStopFlushTimeout
			}
			require.Equal(t, want, took)
			require.Equal(t, uint64(1), c.AbandonedCalls())
			time.Sleep(time.Hour) // the stubborn call returns, to no one
			synctest.Wait()
			require.Len(t, ofType[*messages.Stopped](s.rec.Since(0)), 1)
			require.Empty(t, ofType[*messages.RecoveryFailed](s.rec.Since(0)))
		})
	}
}

// With a Save that ignores its context, a graceful stop took the flush
// timeout plus the save timeout (8 s by default). Now: flush + grace.
func TestRegressionStubbornSaveBoundsStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScene(t)
		s.spawn(actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
		synctest.Wait()
		s.probe.script(faultinject.OpSave, fault{kind: fStubborn, delay: time.Hour})
		s.update("a", 30)
		synctest.Wait() // the save of kafka:20 is stuck
		took := s.stop(true)
		require.Equal(t, actors.DefaultStopFlushTimeout+grace, took)
		require.Equal(t, []string{"Recovered(kafka:10, spawn, 1)", "Persisted(kafka:10, 1)", "Stopped(graceful, kafka:10, dropped kafka:20)"}, s.lifecycle(0))
		time.Sleep(time.Hour)
		synctest.Wait()
	})
}

// A subscriber that panicked on CheckpointPersisted crashed the persister
// during a flush: the value was saved, yet the stop waited the whole flush
// timeout and reported it dropped. The persister's publish is guarded now.
func TestRegressionPanickingSubscriberDuringFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScene(t)
		s.spawn(actors.WithMinSaveInterval(time.Hour), actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)}))
		synctest.Wait()
		s.update("a", 30) // held back by the min save interval
		synctest.Wait()
		sub := s.sys.EventStream.Subscribe(func(e any) {
			if _, ok := e.(*messages.CheckpointPersisted); ok {
				panic("a subscriber's bug")
			}
		})
		defer s.sys.EventStream.Unsubscribe(sub)
		took := s.stop(true)
		require.Zero(t, took, "nothing waited: the save was instant")
		require.Equal(t, wal.KafkaID(20), s.stored())
		st := ofType[*messages.Stopped](s.rec.Since(0))
		require.Len(t, st, 1)
		require.True(t, st[0].Flushed)
		require.Equal(t, wal.KafkaID(20), st[0].LastPersisted)
		require.Empty(t, ofType[*messages.PersisterRestarted](s.rec.Since(0)))
	})
}
