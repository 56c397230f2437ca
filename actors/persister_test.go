package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// barePersister is a persister made ready as Started does (ready), with no actor
// around it and a backoff and save timeout of an hour, so that none of its
// timers fires during a test: what it does shows in its plan, its save in
// flight and the events it publishes.
func barePersister(t *testing.T) (*persister, *[]messages.Event) {
	cfg, err := newConfig("p", wal.Kafka, persistence.NewMemory(), []Option{WithSaveTimeout(time.Hour),
		WithBackoff(Backoff{Initial: time.Hour, Max: time.Hour, Multiplier: 1})})
	require.NoError(t, err)
	events := eventstream.NewEventStream()
	var published []messages.Event
	events.Subscribe(func(ev any) { published = append(published, ev.(messages.Event)) })
	s := &persister{cfg: cfg, status: newSaveStatus(nil), events: events, inbox: newMailbox()}
	s.ready()
	t.Cleanup(func() { stopTimer(s.timer); stopTimer(s.watchdog) })
	return s, &published
}

// takeSave takes the save s started, in place of its mailbox, which would
// run it once the handler returns: the test tells its result by hand.
func takeSave(t *testing.T, s *persister) *call {
	t.Helper()
	k := s.save
	require.NotNil(t, k, "no save started")
	require.Same(t, task(k), s.inbox.after)
	s.inbox.after = nil
	return k
}

// A persister's mailbox outlives its restarts, so a result of a call of
// an earlier incarnation may come while a save of this one is in flight:
// it must not be taken for that save's, whose value is not durable yet.
func TestPersisterTakesOnlyItsOwnSavesResult(t *testing.T) {
	s, published := barePersister(t)
	s.receiveDirect(offer{minimum: wal.KafkaID(5)})
	k := takeSave(t, s)

	require.True(t, s.receiveDirect(&callDone{seq: k.seq - 1}))
	require.Same(t, k, s.save)
	require.Nil(t, s.plan.Persisted(), "a stale result made the save in flight durable")
	require.Empty(t, *published)

	s.receiveDirect(&callDone{seq: k.seq})
	require.Nil(t, s.save)
	require.Equal(t, wal.KafkaID(5), s.plan.Persisted())
	require.Len(t, *published, 1)
	require.Equal(t, wal.KafkaID(5), (*published)[0].(*messages.CheckpointPersisted).Value)
}

// A retry waits for its own timer: one armed before it, firing late, does
// not start the save early.
func TestPersisterRetriesOnlyOnItsOwnTimer(t *testing.T) {
	s, _ := barePersister(t)
	s.receiveDirect(offer{minimum: wal.KafkaID(5)})
	s.receiveDirect(&callDone{seq: takeSave(t, s).seq, err: errors.New("catalog down")})
	require.Nil(t, s.save)
	require.NotNil(t, s.timer, "a failed save armed no retry")

	s.receiveDirect(&timerFired{seq: s.timerSeq - 1})
	require.Nil(t, s.save, "a stale timer started the retry")

	s.receiveDirect(&timerFired{seq: s.timerSeq})
	require.Equal(t, wal.KafkaID(5), takeSave(t, s).arg, "the retry's timer started another save")
}

// A save that ignores its context is reported overdue once, however many
// times the watchdog asks while it runs.
func TestPersisterReportsAnOverdueSaveOnce(t *testing.T) {
	s, published := barePersister(t)
	s.receiveDirect(offer{minimum: wal.KafkaID(5)})
	takeSave(t, s).ctx.began = time.Now().Add(-2 * overdueAfter(s.cfg.saveTimeout))

	s.receiveDirect(overdueCheck{})
	s.receiveDirect(overdueCheck{})
	require.Len(t, *published, 1)
	failed := (*published)[0].(*messages.PersistFailed)
	require.ErrorIs(t, failed.Err, ErrCatalogOverdue)
	require.Equal(t, wal.KafkaID(5), failed.Value)
}

// TestALateLookAtACallLooksAgain: a look at a running call that comes
// well past the time it was due (the process was stopped, and the
// catalog with it) does not call it overdue, but looks again a grace
// on; that look, on time, does. One on time calls it overdue at once.
func TestALateLookAtACallLooksAgain(t *testing.T) {
	const timeout = time.Second
	site := &callSite{op: "Save", timeout: timeout}
	onTime := newCall(site, 1, wal.KafkaID(1))
	onTime.ctx.began = time.Now().Add(-overdueAfter(timeout) - 10*time.Millisecond)
	_, err := onTime.overdue()
	require.ErrorIs(t, err, ErrCatalogOverdue)

	late := newCall(site, 2, wal.KafkaID(1))
	late.ctx.began = time.Now().Add(-overdueAfter(timeout) - 40*time.Second) // a process stopped 40 s
	wait, err := late.overdue()
	require.NoError(t, err, "a look 40 s late")
	require.Equal(t, joinGrace, wait)
	// The grace passes: the next look comes on time.
	late.ctx.began = late.ctx.began.Add(-joinGrace)
	late.checkAt = late.checkAt.Add(-joinGrace)
	_, err = late.overdue()
	require.ErrorIs(t, err, ErrCatalogOverdue)

	early := newCall(site, 3, wal.KafkaID(1))
	wait, err = early.overdue()
	require.NoError(t, err)
	require.InDelta(t, float64(overdueAfter(timeout)), float64(wait), float64(50*time.Millisecond))
}
