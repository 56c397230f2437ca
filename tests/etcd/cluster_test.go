package etcd_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// TestClusterLeaderStop kills the leader of a 3-member cluster (no
// leadership transfer: the harder case) while a pchannel actor, owning its
// pchannel through a session, saves continuously.
func TestClusterLeaderStop(t *testing.T) {
	testLeaderStop(t, (*etcdtest.Server).Kill, 20)
}

// testLeaderStop checks, around a leader stop: saves through the actor
// resume within a few seconds; the ownership survives (the lease outlives
// the election); no acknowledged checkpoint is lost; the stored values only
// rise (the key's whole history, through a watch); and once updates stop,
// the latest minimum is stored.
func testLeaderStop(t *testing.T, stop func(*etcdtest.Server), acksEachSide int) {
	const (
		pch = "p"
		// resumeWithin is "a few seconds": an election (1 s election
		// timeout here) plus a failed attempt and a retry.
		resumeWithin = 5 * time.Second
	)
	cluster := etcdtest.StartCluster(t, 3)
	admin := newClient(t, cluster.Endpoints())
	from := currentRevision(t, admin) + 1
	n := newNode(t, cluster.Endpoints(), 10)
	o := n.own(t, pch)
	s := newSystem(t)
	pid := s.spawn(pch, o, actors.WithOwnership(o.Context()), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	feed := startFeeder(s, pid, "v", 1, 5*time.Millisecond)
	defer feed.stop()

	waitAcks := func(from, count int, within time.Duration) int {
		t.Helper()
		idx := from
		for range count {
			_, i := waitFrom(t, s.rec, pch, idx, within, anyEvent[*messages.CheckpointPersisted])
			idx = i + 1
		}
		return idx
	}
	waitAcks(0, acksEachSide, eventWait)

	leader := cluster.Leader()
	require.GreaterOrEqual(t, leader, 0, "no leader")
	mark := s.rec.Len()
	stoppedAt := time.Now()
	stop(cluster.Members[leader])
	stopTook := time.Since(stoppedAt)
	waitAcks(mark, acksEachSide, resumeWithin+stopTook)
	last := feed.stop()
	waitFrom(t, s.rec, pch, mark, eventWait, persistedIs(k(last)))

	require.Empty(t, collect[*messages.OwnershipLost](s.rec, pch, 0), "the ownership outlives a leader change")
	require.NoError(t, o.Err())
	acks := collect[*messages.CheckpointPersisted](s.rec, pch, 0)
	failures := collect[*messages.PersistFailed](s.rec, pch, 0)
	var lastBefore, firstAfter time.Time
	for _, a := range acks {
		if a.At.Before(stoppedAt) {
			lastBefore = a.At
		} else if firstAfter.IsZero() {
			firstAfter = a.At
		}
	}
	t.Logf("leader %s stopped (the call took %v): last save acknowledged %v before, first %v after; silence %v; "+
		"%d failed attempts; %d acknowledged in all, last %s",
		cluster.Members[leader].Name(), stopTook.Round(time.Millisecond), stoppedAt.Sub(lastBefore).Round(time.Microsecond),
		firstAfter.Sub(stoppedAt).Round(time.Millisecond), firstAfter.Sub(lastBefore).Round(time.Millisecond), len(failures), len(acks), k(last))
	within(t, firstAfter.Sub(stoppedAt), resumeWithin+stopTook, "the first save after the leader stop")

	h := history(t, admin, pch, from)
	requireIncreasing(t, h)
	requireAcknowledgedStored(t, h, acks)
	require.Equal(t, k(last), h[len(h)-1].rec.Checkpoint)
	for _, v := range h {
		require.Equal(t, o.Term(), v.rec.Term)
	}
}

// TestBatcherLeaderKill kills the leader of a 3-member cluster while 50
// pchannels, owned through one session, save through one Batcher: several
// keys to a transaction, each with its owner's compares. A transaction cut
// short by the kill may have committed unanswered; its saves are tried
// again, and find what they wrote. Every pchannel saves again within a few
// seconds, none loses its ownership, none has an acknowledged checkpoint
// missing from its key's history, which only rises, and each stores its
// latest minimum once updates stop.
func TestBatcherLeaderKill(t *testing.T) {
	const (
		pchannels    = 50
		acksEachSide = 10
		// resumeWithin is an election (1 s election timeout here) and
		// the attempts that fail meanwhile, each with its backoff, for
		// the last of the pchannels: 1.2–2.1 s in eight runs on 2 cores
		// (5.9–6.0 s before a save held by the killed leader was sent
		// again), with room for a loaded machine.
		resumeWithin = 15 * time.Second
	)
	cluster := etcdtest.StartCluster(t, 3)
	admin := newClient(t, cluster.Endpoints())
	from := currentRevision(t, admin) + 1
	n := newNode(t, cluster.Endpoints(), 10)
	batcher, err := etcdcatalog.NewBatcher(n.cat)
	require.NoError(t, err)
	t.Cleanup(func() { _ = batcher.Close() })
	names := make([]string, pchannels)
	owned := make([]*etcdcatalog.Owned, pchannels)
	for i := range names {
		names[i] = fmt.Sprintf("p-%02d", i)
		o, err := batcher.Own(ctxT(t), names[i], n.session)
		require.NoError(t, err)
		t.Cleanup(func() { _ = o.Close() })
		owned[i] = o
	}
	s := newSystem(t)
	feeders := make([]*feeder, pchannels)
	for i, name := range names {
		pid := s.spawn(name, owned[i], actors.WithOwnership(owned[i].Context()), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
		feeders[i] = startFeeder(s, pid, "v", 1, 10*time.Millisecond)
	}
	defer func() {
		for _, f := range feeders {
			f.stop()
		}
	}()
	// waitAcks waits, for every pchannel, for count acknowledgements at
	// index mark or later.
	waitAcks := func(mark, count int, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for _, name := range names {
			idx := mark
			for range count {
				_, i := waitFrom(t, s.rec, name, idx, max(time.Until(deadline), 0), anyEvent[*messages.CheckpointPersisted])
				idx = i + 1
			}
		}
	}
	waitAcks(0, acksEachSide, eventWait)

	leader := cluster.Leader()
	require.GreaterOrEqual(t, leader, 0, "no leader")
	mark := s.rec.Len()
	killedAt := time.Now()
	cluster.Members[leader].Kill()
	killTook := time.Since(killedAt)
	waitAcks(mark, acksEachSide, resumeWithin+killTook)
	resumed := time.Since(killedAt)
	last := make([]int64, pchannels)
	for i, f := range feeders {
		last[i] = f.stop()
	}
	failed := 0
	for i, name := range names {
		waitFrom(t, s.rec, name, mark, eventWait, persistedIs(k(last[i])))
		require.Empty(t, collect[*messages.OwnershipLost](s.rec, name, 0), "%s: the ownership outlives a leader change", name)
		require.NoError(t, owned[i].Err(), name)
		failed += len(collect[*messages.PersistFailed](s.rec, name, 0))
		h := history(t, admin, name, from)
		requireIncreasing(t, h)
		requireAcknowledgedStored(t, h, collect[*messages.CheckpointPersisted](s.rec, name, 0))
		require.Equal(t, k(last[i]), h[len(h)-1].rec.Checkpoint, name)
		for _, v := range h {
			require.Equal(t, owned[i].Term(), v.rec.Term, "%s at revision %d", name, v.rev)
		}
	}
	t.Logf("leader %s killed (the call took %v): every pchannel had %d saves acknowledged after it within %v; %d failed attempts",
		cluster.Members[leader].Name(), killTook.Round(time.Millisecond), acksEachSide, resumed.Round(time.Millisecond), failed)
}
