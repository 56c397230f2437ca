package invariants

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// The fault matrix: each fault a catalog shows in the field, in each phase
// of a pchannel's life. Every cell starts from the same place: the catalog
// stores kafka:5, the actor is spawned with vchannels a@10 and b@20 and the
// default options (backoff 100 ms ×1.5 up to 10 s with 20 % jitter, save
// timeout 5 s, stop flush 3 s). Then:
//
//   - recovery: the fault hits the recovery read(s); the actor recovers
//     kafka:5 and saves its minimum kafka:10.
//   - steady:   after kafka:10 is saved, the fault hits the save of kafka:20
//     that Update(a, 30) causes.
//   - graceful: kafka:10 is saved, Update(a, 30) leaves kafka:20 pending
//     (WithMinSaveInterval(1h) holds it back), the fault is armed, and a
//     Poison's flush meets it.
//   - hard:     the fault hits the save of kafka:20, then Stop comes.
//
// Each cell states the exact lifecycle events after the phase began, the
// checkpoint the catalog holds at the end and, for stops, how long the stop
// took (fake time, exact). Every cell also checks the retry schedule: each
// retry comes exactly the NextRetry its failure announced later, the k-th
// consecutive wait lies in the backoff's k-th window (×1.5 per failure,
// 20 % jitter, never below 100 ms nor above 10 s), and a success resets it.
//
// The faults: error (the next two calls fail), hang (past the per-attempt
// timeout), slow (latency below it), panic, corrupt (a record that does not
// decode; repaired after two failures), stored ahead (another writer saved
// a higher checkpoint), cancelled (a hang that only the stop ends).
func TestFaultMatrix(t *testing.T) {
	for _, c := range matrix {
		t.Run(c.fault+"/"+c.phase, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runCell(t, c) })
		})
	}
}

// noStop marks a cell whose phase does not stop the actor.
const noStop = time.Duration(-1)

// corrupt marks a cell that ends with the corrupt record still stored.
const corrupt = int64(-1)

type cell struct {
	fault, phase string
	events       []string
	persisted    int64
	took         time.Duration
}

var matrix = []cell{
	// recovery
	{"error", "recovery", []string{"RecoveryFailed(#1, injected)", "RecoveryFailed(#2, injected)", "Recovered(kafka:5, catalog, 3)", "Persisted(kafka:10, 1)"}, 10, noStop},
	{"hang", "recovery", []string{"RecoveryFailed(#1, deadline)", "Recovered(kafka:5, catalog, 2)", "Persisted(kafka:10, 1)"}, 10, noStop},
	{"slow", "recovery", []string{"Recovered(kafka:5, catalog, 1)", "Persisted(kafka:10, 1)"}, 10, noStop},
	{"panic", "recovery", []string{"RecoveryFailed(#1, panic)", "Recovered(kafka:5, catalog, 2)", "Persisted(kafka:10, 1)"}, 10, noStop},
	{"corrupt", "recovery", []string{"RecoveryFailed(#1, corrupt)", "RecoveryFailed(#2, corrupt)", "Recovered(kafka:5, catalog, 3)", "Persisted(kafka:10, 1)"}, 10, noStop},
	// Another writer stored kafka:50: it is the floor, nothing is saved
	// until the minimum passes it (then Update(a, 60), Update(b, 60)).
	{"stored ahead", "recovery", []string{"Recovered(kafka:50, catalog, 1)", "Persisted(kafka:60, 1)"}, 60, noStop},
	// The read hangs: a graceful stop waits for it up to the stop flush
	// timeout (3 s), then cancels it: no persister, no flush, nothing saved.
	{"cancelled", "recovery", []string{"Stopped(graceful, <none>, dropped kafka:10)"}, 5, 3 * time.Second},

	// steady state; error also shows the reset: after kafka:20 is saved, one
	// more failure on kafka:30 waits the first interval again.
	{"error", "steady", []string{"PersistFailed(kafka:20, #1, injected)", "PersistFailed(kafka:20, #2, injected)", "Persisted(kafka:20, 3)",
		"PersistFailed(kafka:30, #1, injected)", "Persisted(kafka:30, 2)"}, 30, noStop},
	{"hang", "steady", []string{"PersistFailed(kafka:20, #1, deadline)", "Persisted(kafka:20, 2)"}, 20, noStop},
	{"slow", "steady", []string{"Persisted(kafka:20, 1)"}, 20, noStop},
	// A catalog's panic is a failed save, retried on the backoff.
	{"panic", "steady", []string{"PersistFailed(kafka:20, #1, panic)", "Persisted(kafka:20, 2)"}, 20, noStop},
	{"corrupt", "steady", []string{"PersistFailed(kafka:20, #1, corrupt)", "PersistFailed(kafka:20, #2, corrupt)", "Persisted(kafka:20, 3)"}, 20, noStop},
	// Another writer stored kafka:25: adopted, not retried.
	{"stored ahead", "steady", []string{"PersistFailed(kafka:20, #1, stored ahead)"}, 25, noStop},

	// graceful stop: the flush retries within its 3 s.
	{"error", "graceful", []string{"PersistFailed(kafka:20, #1, injected)", "PersistFailed(kafka:20, #2, injected)", "Persisted(kafka:20, 3)", "Stopped(graceful, kafka:20, flushed)"}, 20, -2},
	// WithSaveTimeout(1s): the hung attempt ends within the flush.
	{"hang", "graceful", []string{"PersistFailed(kafka:20, #1, deadline)", "Persisted(kafka:20, 2)", "Stopped(graceful, kafka:20, flushed)"}, 20, -2},
	// The slow save of kafka:10 is in flight when the stop comes, kafka:20
	// pending behind it: the flush saves both, min save interval or not.
	{"slow", "graceful", []string{"Recovered(kafka:5, catalog, 1)", "Persisted(kafka:10, 1)", "Persisted(kafka:20, 1)", "Stopped(graceful, kafka:20, flushed)"}, 20, time.Second},
	{"panic", "graceful", []string{"PersistFailed(kafka:20, #1, panic)", "Persisted(kafka:20, 2)", "Stopped(graceful, kafka:20, flushed)"}, 20, -2},
	{"corrupt", "graceful", []string{"PersistFailed(kafka:20, #1, corrupt)", "PersistFailed(kafka:20, #2, corrupt)", "Persisted(kafka:20, 3)", "Stopped(graceful, kafka:20, flushed)"}, 20, -2},
	{"stored ahead", "graceful", []string{"PersistFailed(kafka:20, #1, stored ahead)", "Stopped(graceful, kafka:25, flushed)"}, 25, 0},
	// WithSaveTimeout(1h): the flush gives up after its 3 s and the stop
	// cancels the hung save.
	{"cancelled", "graceful", []string{"Stopped(graceful, kafka:10, dropped kafka:20)"}, 10, 3 * time.Second},

	// hard stop: no flush, no retry, a save in flight is cancelled.
	{"error", "hard", []string{"PersistFailed(kafka:20, #1, injected)", "Stopped(hard, kafka:10, dropped kafka:20)"}, 10, 0},
	{"hang", "hard", []string{"Stopped(hard, kafka:10, dropped kafka:20)"}, 10, 0},
	{"slow", "hard", []string{"Stopped(hard, kafka:10, dropped kafka:20)"}, 10, 0},
	{"panic", "hard", []string{"PersistFailed(kafka:20, #1, panic)", "Stopped(hard, kafka:10, dropped kafka:20)"}, 10, 0},
	{"corrupt", "hard", []string{"PersistFailed(kafka:20, #1, corrupt)", "Stopped(hard, kafka:10, dropped kafka:20)"}, corrupt, 0},
	{"stored ahead", "hard", []string{"PersistFailed(kafka:20, #1, stored ahead)", "Stopped(hard, kafka:25, flushed)"}, 25, 0},
	{"cancelled", "hard", []string{"Stopped(hard, kafka:10, dropped kafka:20)"}, 10, 0},
}

// sumOfWaits (took == -2) says the stop took exactly the sum of the waits
// its flush announced.
const sumOfWaits = time.Duration(-2)

func runCell(t *testing.T, c cell) {
	b := actors.DefaultBackoff()
	s := newScene(t)
	s.store(5)
	opts := []actors.Option{actors.WithVChannels(map[string]wal.MessageID{"a": wal.KafkaID(10), "b": wal.KafkaID(20)})}
	switch {
	case c.fault == "cancelled":
		opts = append(opts, actors.WithSaveTimeout(time.Hour))
	case c.fault == "hang" && c.phase == "graceful":
		opts = append(opts, actors.WithSaveTimeout(time.Second))
	}
	if c.phase == "graceful" {
		opts = append(opts, actors.WithMinSaveInterval(time.Hour))
	}

	op := faultinject.OpSave
	if c.phase == "recovery" {
		op = faultinject.OpLoad
	}
	// arm injects the cell's fault into the next call(s) of op.
	arm := func() {
		switch c.fault {
		case "error":
			s.probe.script(op, fault{kind: fError}, fault{kind: fError})
		case "hang", "cancelled":
			s.probe.script(op, fault{kind: fHang})
		case "slow":
			s.probe.script(op, fault{kind: fLatency, delay: time.Second})
		case "panic":
			s.probe.script(op, fault{kind: fPanic})
		case "corrupt":
			s.mem.Put(scenePChannel, []byte("not a record"))
			failures := 0
			s.probe.setAfter(func(cl call) {
				if cl.op == op && cl.err != nil {
					if failures++; failures == 2 {
						good, err := persistence.EncodeRecord(scenePChannel, persistence.Record{Checkpoint: s.stored0()})
						require.NoError(t, err)
						s.mem.Put(scenePChannel, good)
					}
				}
			})
		case "stored ahead":
			if c.phase == "recovery" {
				s.store(50)
			} else {
				// Another writer saved kafka:25; faultinject reports it to
				// the next save (the store would too).
				s.store(25)
				s.probe.script(op, fault{kind: fStoredAhead, stored: wal.KafkaID(25)})
			}
		}
	}

	from := 0
	took := noStop
	switch c.phase {
	case "recovery":
		arm()
		s.spawn(opts...)
		synctest.Wait()
		switch c.fault {
		case "cancelled":
			took = s.stop(true)
		case "stored ahead":
			st := s.state()
			require.Equal(t, wal.KafkaID(50), st.Persisted)
			require.Equal(t, wal.KafkaID(10), st.Minimum)
			require.Equal(t, wal.KafkaID(50), st.StartMessageID)
			s.update("a", 60)
			s.update("b", 60)
		}
		time.Sleep(time.Minute) // fake time: every retry is due by then
		synctest.Wait()
	case "steady", "graceful", "hard":
		if c.fault == "slow" && c.phase == "graceful" {
			// The slow save of kafka:10 is the first one.
			arm()
			s.spawn(opts...)
			synctest.Wait()
			s.update("a", 30)
			took = s.stop(true)
			break
		}
		s.spawn(opts...)
		synctest.Wait()
		require.Equal(t, []string{"Recovered(kafka:5, catalog, 1)", "Persisted(kafka:10, 1)"}, s.lifecycle(0))
		from = s.rec.Len()
		if c.phase == "graceful" {
			s.update("a", 30) // held back by the min save interval
			synctest.Wait()
			arm()
			took = s.stop(true)
			break
		}
		arm()
		s.update("a", 30)
		synctest.Wait()
		if c.phase == "hard" {
			took = s.stop(false)
			break
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if c.fault == "error" {
			// The reset: one more failure waits the first interval again.
			s.probe.script(op, fault{kind: fError})
			s.update("b", 40)
			time.Sleep(time.Minute)
			synctest.Wait()
		}
	}

	require.Equal(t, c.events, s.lifecycle(from), "lifecycle events")

	evs := s.rec.Since(0)
	calls := s.probe.snapshot(0)
	checkSchedule(t, b, calls, announcedWaits(evs, faultinject.OpLoad), faultinject.OpLoad, false)
	checkSchedule(t, b, calls, announcedWaits(evs, faultinject.OpSave), faultinject.OpSave, c.phase == "graceful")
	_, peak := s.probe.savesInFlight()
	require.LessOrEqual(t, peak, 1, "I4")

	switch c.took {
	case noStop:
		require.Equal(t, noStop, took)
	case sumOfWaits:
		var sum time.Duration
		for _, w := range announcedWaits(s.rec.Since(from), faultinject.OpSave) {
			sum += w
		}
		require.Equal(t, sum+s.probeLatency(), took, "stop took")
	default:
		require.Equal(t, c.took, took, "stop took")
	}

	if c.persisted == corrupt {
		_, err := s.mem.Load(context.Background(), scenePChannel)
		require.ErrorIs(t, err, persistence.ErrCorruptRecord)
	} else {
		require.Equal(t, wal.KafkaID(c.persisted), s.stored(), "stored checkpoint")
	}
	// I2: every value the catalog stored rose strictly (no lost reply
	// here, so no equal re-save either), and I1: each was a minimum.
	hist := s.mem.History(scenePChannel)
	for i := 1; i < len(hist); i++ {
		require.True(t, hist[i-1].LT(hist[i]), "history %v", hist)
	}
	if s.pid != nil {
		st := s.state()
		require.Equal(t, st.Persisted, s.stored(), "GetState.Persisted is the stored checkpoint once settled")
		require.False(t, st.SaveInFlight)
		_ = s.stop(true)
	}
	require.Empty(t, ofType[*messages.CommandRejected](s.rec.Since(0)))
}

// stored0 is what the corrupt record replaced: the value stored before.
func (s *scene) stored0() wal.MessageID {
	hist := s.mem.History(scenePChannel)
	return hist[len(hist)-1]
}

// probeLatency is the time the flush spent in hung saves of a graceful stop
// (the hang cell's one second).
func (s *scene) probeLatency() time.Duration {
	var d time.Duration
	for _, c := range s.probe.snapshot(0) {
		if c.op == faultinject.OpSave && c.fault.kind == fHang && c.returned {
			d += c.end.Sub(c.start)
		}
	}
	return d
}

func savesOf(calls []call) []call {
	var out []call
	for _, c := range calls {
		if c.op == faultinject.OpSave {
			out = append(out, c)
		}
	}
	return out
}
