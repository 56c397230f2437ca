package actors

import (
	"context"
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
	k := takeSave(t, s)
	k.ctx.began = time.Now().Add(-2 * overdueAfter(s.cfg.saveTimeout))
	endedOnTime(k)

	s.receiveDirect(overdueCheck{})
	s.receiveDirect(overdueCheck{})
	require.Len(t, *published, 1)
	failed := (*published)[0].(*messages.PersistFailed)
	require.ErrorIs(t, failed.Err, ErrCatalogOverdue)
	require.Equal(t, wal.KafkaID(5), failed.Value)
}

// TestTheGraceOfACallCountsFromTheEndOfItsContext: a call is overdue a
// grace after its context ended, not after its deadline: a process held
// past the deadline (the catalog with it) ends the context only as it
// goes on, and the catalog is then given its grace. A context ended on
// time leaves none past the deadline's; one not ended yet is ended by
// the look.
func TestTheGraceOfACallCountsFromTheEndOfItsContext(t *testing.T) {
	const timeout = time.Second
	site := &callSite{op: "Save", timeout: timeout}
	running := func(seq uint64, age time.Duration) *call {
		k := newCall(site, seq, wal.KafkaID(1))
		k.ctx.began = time.Now().Add(-age)
		return k
	}
	// later moves the call's clock on by d, as if d had passed.
	later := func(k *call, d time.Duration) { k.ctx.began = k.ctx.began.Add(-d) }

	onTime := running(1, overdueAfter(timeout)+10*time.Millisecond)
	endedOnTime(onTime)
	_, err := onTime.overdue()
	require.ErrorIs(t, err, ErrCatalogOverdue)

	held := running(2, overdueAfter(timeout)+40*time.Second) // a process stopped 40 s
	held.ctx.cancel(context.DeadlineExceeded)                // its timer fires as it goes on
	wait, err := held.overdue()
	require.NoError(t, err, "the catalog, held as long, had no time")
	require.InDelta(t, float64(joinGrace), float64(wait), float64(20*time.Millisecond))
	later(held, joinGrace)
	_, err = held.overdue()
	require.ErrorIs(t, err, ErrCatalogOverdue)

	unasked := running(3, overdueAfter(timeout)+10*time.Millisecond) // never asked for its Done
	wait, err = unasked.overdue()
	require.NoError(t, err)
	require.InDelta(t, float64(joinGrace), float64(wait), float64(20*time.Millisecond))
	_, ended := unasked.ctx.endedAfter()
	require.True(t, ended, "ended by the look")
	later(unasked, joinGrace)
	_, err = unasked.overdue()
	require.ErrorIs(t, err, ErrCatalogOverdue)

	early := running(4, 0)
	wait, err = early.overdue()
	require.NoError(t, err)
	require.InDelta(t, float64(overdueAfter(timeout)), float64(wait), float64(50*time.Millisecond))
}

// endedOnTime ends k's context as its timer would have at its deadline.
func endedOnTime(k *call) {
	k.ctx.mu.Lock()
	defer k.ctx.mu.Unlock()
	if k.ctx.err == nil {
		k.ctx.endLocked(context.DeadlineExceeded)
	}
	k.ctx.ended = k.ctx.timeout
}
