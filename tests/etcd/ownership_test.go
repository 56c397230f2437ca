package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/ctxtest"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// lostWithin bounds the time from the loss of ownership in etcd to the
// actor's OwnershipLost: the owner key's watch reports a revoked lease at
// once, a closed session ends its context at once.
const lostWithin = 2 * time.Second

// TestOwnershipLostAndTakenOver runs a pchannel actor on an *Owned catalog
// with WithOwnership(Owned.Context()), ends the ownership in etcd, and
// checks: OwnershipLost is published, the actor stops, none of its saves
// reaches etcd after the owner key is gone; then a second node owns the
// pchannel with a higher term, its actor recovers the last checkpoint the
// first one saved and goes on saving.
func TestOwnershipLostAndTakenOver(t *testing.T) {
	eps := etcdtest.Start(t)
	admin := newClient(t, eps)
	for _, tc := range []struct {
		name string
		// busy keeps updating the first actor while its ownership ends,
		// so that saves are in flight at that moment.
		busy bool
		lose func(t *testing.T, owner *node)
	}{
		{"LeaseRevoked", false, func(t *testing.T, owner *node) {
			// As an expiry does: the owner key goes with the lease, and
			// the session learns it only at its next keep-alive.
			_, err := admin.Revoke(ctxT(t), owner.session.Lease())
			require.NoError(t, err)
		}},
		{"SessionClosedWhileSaving", true, func(t *testing.T, owner *node) {
			require.NoError(t, owner.session.Close())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testTakeover(t, eps, admin, "p-"+tc.name, tc.busy, tc.lose) })
	}
}

func testTakeover(t *testing.T, eps []string, admin *clientv3.Client, pch string, busy bool, lose func(*testing.T, *node)) {
	a, b := newNode(t, eps, 10), newNode(t, eps, 10)
	s := newSystem(t)
	from := currentRevision(t, admin) + 1

	oa := a.own(t, pch)
	pa := s.spawn(pch, oa, actors.WithOwnership(oa.Context()), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	rec, _ := waitFrom(t, s.rec, pch, 0, eventWait, anyEvent[*messages.Recovered])
	require.False(t, rec.FromCatalog)
	for n := int64(1); n <= 20; n++ {
		s.update(pa, "v", n)
	}
	// k(20) is the latest minimum: once it is acknowledged nothing is
	// pending or in flight.
	waitFrom(t, s.rec, pch, 0, eventWait, persistedIs(k(20)))

	var feed *feeder
	if busy {
		feed = startFeeder(s, pa, "v", 21, 2*time.Millisecond)
		waitFrom(t, s.rec, pch, 0, eventWait, persistedAtLeast(k(25)))
	}
	mark := s.rec.Len()
	lostAt := time.Now()
	lose(t, a)
	lost, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.OwnershipLost])
	if feed != nil {
		feed.stop()
	}
	stopped, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.Stopped])
	t.Logf("OwnershipLost %v after the loss (cause: %v)", lost.At.Sub(lostAt), lost.Cause)
	within(t, lost.At.Sub(lostAt), lostWithin, "OwnershipLost")
	require.True(t, errors.Is(lost.Cause, etcdcatalog.ErrOwnerChanged) || errors.Is(lost.Cause, etcdcatalog.ErrSessionDone),
		"cause %v", lost.Cause)
	require.ErrorIs(t, context.Cause(oa.Context()), oa.Err(), "Context ends with Err as its cause")
	require.ErrorIs(t, oa.Context().Err(), context.Canceled)

	// The actor is gone: commands go to dead letters.
	err := actors.Request(ctxtest.Within(reqTimeout), s.sys.Root, pa, &messages.UpdateCheckpoint{VChannel: "v", Checkpoint: k(1 << 40)})
	require.ErrorIs(t, err, actor.ErrDeadLetter)
	acksA := collect[*messages.CheckpointPersisted](s.rec, pch, 0)
	lastAckA := acksA[len(acksA)-1].Value
	if busy {
		// The persister's last report may be dropped with the stop.
		require.True(t, stopped.LastPersisted.LTE(lastAckA), "Stopped says %s, acknowledged %s", stopped.LastPersisted, lastAckA)
	} else {
		require.Equal(t, lastAckA, stopped.LastPersisted)
	}

	// The second node owns it with a higher term (no wait: the owner key
	// went with the session) and recovers what the first saved.
	ob := b.own(t, pch)
	require.Greater(t, ob.Term(), oa.Term())
	mark = s.rec.Len()
	pb := s.spawn(pch, ob, actors.WithOwnership(ob.Context()), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	recB, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.Recovered])
	require.True(t, recB.FromCatalog)
	// The vchannel restarts from the start message ID, and moves on.
	next := int64(recB.StartMessageID.(wal.KafkaID))
	s.update(pb, "v", next)
	for n := next + 1; n <= next+10; n++ {
		s.update(pb, "v", n)
	}
	waitFrom(t, s.rec, pch, mark, eventWait, persistedIs(k(next+10)))

	deleted := ownerDeletedAt(t, admin, pch, from)
	h := history(t, admin, pch, from)
	requireIncreasing(t, h)
	requireAcknowledgedStored(t, h, collect[*messages.CheckpointPersisted](s.rec, pch, 0))
	var lastA wal.MessageID
	for _, v := range h {
		switch v.rec.Term {
		case oa.Term():
			require.Less(t, v.rev, deleted, "the first owner wrote %s after its owner key was deleted", v.rec.Checkpoint)
			lastA = v.rec.Checkpoint
		case ob.Term():
			require.Greater(t, v.rev, deleted)
		default:
			t.Fatalf("record of unknown term %d at revision %d", v.rec.Term, v.rev)
		}
	}
	last := h[len(h)-1].rec
	require.Equal(t, persistence.Record{Checkpoint: k(next + 10), Term: ob.Term()}, last)
	// Nothing acknowledged is lost, and the new owner starts exactly from
	// what the old one stored last. A save that committed as the actor
	// stopped may be stored yet not acknowledged (its reply was dropped
	// with the actor), hence >= when saves were in flight.
	require.Equal(t, lastA, recB.StartMessageID)
	if busy {
		require.False(t, recB.StartMessageID.LT(lastAckA), "recovered %s, acknowledged %s", recB.StartMessageID, lastAckA)
	} else {
		require.Equal(t, lastAckA, recB.StartMessageID, "Recovered.StartMessageID == last CheckpointPersisted of the first owner")
	}
	t.Logf("first owner: term %d, %d acknowledged, last %s, last stored %s; second owner: term %d, recovered %s",
		oa.Term(), len(acksA), lastAckA, lastA, ob.Term(), recB.StartMessageID)
}

// TestFencedSaveStopsActor runs the first owner's actor without
// WithOwnership, so that only the catalog's fencing stands in its way: once
// another node owns the pchannel and has saved, the stale actor's next save
// is refused with ErrFenced, it publishes OwnershipLost and stops, and the
// store keeps the new owner's value.
func TestFencedSaveStopsActor(t *testing.T) {
	const pch = "p"
	eps := etcdtest.Start(t)
	admin := newClient(t, eps)
	a, b := newNode(t, eps, 10), newNode(t, eps, 10)
	s := newSystem(t)
	from := currentRevision(t, admin) + 1

	oa := a.own(t, pch)
	pa := s.spawn(pch, oa, actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	s.update(pa, "v", 10)
	waitFrom(t, s.rec, pch, 0, eventWait, persistedIs(k(10)))

	_, err := admin.Revoke(ctxT(t), a.session.Lease())
	require.NoError(t, err)
	ob := b.own(t, pch)
	mark := s.rec.Len()
	pb := s.spawn(pch, ob, actors.WithOwnership(ob.Context()), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	recB, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.Recovered])
	require.Equal(t, k(10), recB.StartMessageID)
	s.update(pb, "v", 15)
	waitFrom(t, s.rec, pch, mark, eventWait, persistedIs(k(15)))

	mark = s.rec.Len()
	s.update(pa, "v", 100)
	failed, _ := waitFrom(t, s.rec, pch, mark, eventWait, func(e *messages.PersistFailed) bool { return e.Value.EQ(k(100)) })
	require.ErrorIs(t, failed.Err, persistence.ErrFenced)
	require.Zero(t, failed.NextRetry, "a fenced save is not retried")
	lost, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.OwnershipLost])
	require.ErrorIs(t, lost.Cause, persistence.ErrFenced)
	stopped, _ := waitFrom(t, s.rec, pch, mark, eventWait, anyEvent[*messages.Stopped])
	require.Equal(t, k(10), stopped.LastPersisted)
	require.Equal(t, k(100), stopped.Dropped)

	// The first owner's writes (its spawn minimum's too, when its save
	// started before the update to 10 came), then the second owner's
	// one: the fenced save of 100 wrote nothing.
	h := history(t, admin, pch, from)
	requireIncreasing(t, h)
	require.GreaterOrEqual(t, len(h), 2)
	for _, v := range h[:len(h)-1] {
		require.Equal(t, oa.Term(), v.rec.Term, "%v", h)
	}
	require.Equal(t, persistence.Record{Checkpoint: k(10), Term: oa.Term()}, h[len(h)-2].rec)
	require.Equal(t, persistence.Record{Checkpoint: k(15), Term: ob.Term()}, h[len(h)-1].rec)
	require.Equal(t, k(15), s.state(pb).Persisted)
}

// ownerDeletedAt returns the revision at which pchannel's owner key was
// first deleted at or after revision from.
func ownerDeletedAt(t testing.TB, cli *clientv3.Client, pchannel string, from int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	key := etcdcatalog.DefaultPrefix + "/wal/" + pchannel + "/owner"
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(from)) {
		require.NoError(t, wr.Err())
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return ev.Kv.ModRevision
			}
		}
	}
	t.Fatalf("owner key of %s never deleted: %v", pchannel, ctx.Err())
	return 0
}
