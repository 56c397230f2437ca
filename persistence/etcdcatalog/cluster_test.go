package etcdcatalog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// TestLeaderStopDuringSaves saves continuously, as a persister does (each
// attempt with its own 500 ms deadline, each one offering the latest value),
// against a 3-member cluster whose leader is stopped halfway: saves resume,
// no acknowledged checkpoint is lost, and the stored value only rises.
func TestLeaderStopDuringSaves(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*etcdtest.Server)
	}{
		{"Kill", (*etcdtest.Server).Kill},         // no leadership transfer
		{"GracefulStop", (*etcdtest.Server).Stop}, // hands leadership over first
	} {
		t.Run(tc.name, func(t *testing.T) { testLeaderStop(t, tc.stop) })
	}
}

func testLeaderStop(t *testing.T, stop func(*etcdtest.Server)) {
	const (
		attemptTimeout = 500 * time.Millisecond
		acksEachSide   = 40
		resumeWithin   = 10 * time.Second
	)
	cluster := etcdtest.StartCluster(t, 3)
	require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
	cli := newClient(t, cluster.Endpoints())
	c := openCatalog(t, cluster.Endpoints(), nil)
	from := currentRevision(t, cli) + 1

	type ack struct {
		id wal.KafkaID
		at time.Time
	}
	acks := make(chan ack, 4096)
	quit := make(chan struct{})
	done := make(chan struct{})
	var failed int
	go func() {
		defer close(done)
		defer close(acks)
		// A steady pace, not a busy loop: the machine is shared.
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for next := wal.KafkaID(1); ; next++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
			err := c.Save(ctx, "p", next)
			cancel()
			if err != nil {
				failed++ // the next attempt offers a higher value
				continue
			}
			select {
			case acks <- ack{next, time.Now()}:
			case <-quit:
				return
			}
		}
	}()

	var acked []ack
	// receive waits for n more acknowledgements after the first at or after
	// since.
	receive := func(n int, since time.Time, within time.Duration) {
		t.Helper()
		timer := time.NewTimer(within)
		defer timer.Stop()
		for got := 0; got < n; {
			select {
			case a := <-acks:
				acked = append(acked, a)
				if !a.at.Before(since) {
					got++
				}
			case <-timer.C:
				t.Fatalf("%d of %d saves acknowledged within %v", got, n, within)
			}
		}
	}
	receive(acksEachSide, time.Time{}, resumeWithin)

	leader := cluster.Leader()
	require.GreaterOrEqual(t, leader, 0)
	stoppedAt := time.Now()
	stop(cluster.Members[leader])
	stopTook := time.Since(stoppedAt)
	receive(acksEachSide, stoppedAt, resumeWithin+stopTook)
	close(quit)
	<-done
	for a := range acks {
		acked = append(acked, a)
	}

	// The gap: from the stop to the first save acknowledged after it.
	var lastBefore, firstAfter time.Time
	for _, a := range acked {
		if a.at.Before(stoppedAt) {
			lastBefore = a.at
		} else if firstAfter.IsZero() {
			firstAfter = a.at
		}
	}
	t.Logf("leader %s stopped (the call took %v); last save before it %v earlier, first save after it %v later; %d attempts failed, %d acknowledged",
		cluster.Members[leader].Name(), stopTook, stoppedAt.Sub(lastBefore), firstAfter.Sub(stoppedAt), failed, len(acked))
	require.Less(t, firstAfter.Sub(stoppedAt), resumeWithin)

	final, to := rawRecord(t, cli, checkpointKey("p"))
	got := history(t, cli, checkpointKey("p"), from, to)
	requireIncreasing(t, got)
	require.Equal(t, got[len(got)-1], final.Checkpoint)
	stored := make(map[wal.MessageID]bool, len(got))
	for _, id := range got {
		stored[id] = true
	}
	for _, a := range acked {
		require.True(t, stored[a.id], "acknowledged %s is not in the history", a.id)
	}
	require.False(t, final.Checkpoint.LT(acked[len(acked)-1].id), "the last acknowledged save is stored")
}

// TestCallsNoMemberWithALeaderTakesEndWithTheirContextAndSaySo leaves one
// member of three running, which then has no leader, as one cut off from
// its peers has: a save made there, refused, is made again until its
// context ends, and its error says why, besides the deadline
// (rpctypes.ErrNoLeader). A load and a session's grant end with their
// context too.
func TestCallsNoMemberWithALeaderTakesEndWithTheirContextAndSaySo(t *testing.T) {
	const deadline = 2 * time.Second
	cluster := etcdtest.StartCluster(t, 3)
	require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
	lone := cluster.Members[0]
	cluster.Members[1].Stop()
	cluster.Members[2].Stop()
	require.Eventually(t, func() bool { return lone.Etcd().Server.Leader() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the last member running still has a leader")
	c := openCatalog(t, lone.Endpoints(), nil)

	for _, tc := range []struct {
		name string
		call func(context.Context) error
		// refused: the error says no member had a leader. The client
		// tries a load and a grant again itself, and ends them with the
		// context's error alone.
		refused bool
	}{
		{"Save", func(ctx context.Context) error { return c.Save(ctx, "p", wal.KafkaID(1)) }, true},
		{"Load", func(ctx context.Context) error { _, err := c.Load(ctx, "p"); return err }, false},
		{"NewSession", func(ctx context.Context) error {
			s, err := c.NewSession(ctx, 10)
			if err == nil {
				_ = s.Close()
			}
			return err
		}, false},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		began := time.Now()
		err := tc.call(ctx)
		took := time.Since(began)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, tc.name)
		if tc.refused {
			require.ErrorIs(t, err, rpctypes.ErrNoLeader, tc.name)
		}
		require.Less(t, took, deadline+time.Second, "%s took %v", tc.name, took)
		t.Logf("%s: %v after %v", tc.name, err, took.Round(time.Millisecond))
	}
}

// TestSavesGoOnWhileAMemberIsCutOffFromItsPeers cuts one member of three
// off from the other two, not from the client, which sends calls to each
// member in turn. Once that member knows it has no leader, it refuses
// each call that requires one, and the call is made again on the next
// member: every save of sixteen pchannels saving at once, half through
// the catalog and half through a Batcher, succeeds well within its
// deadline. Without the requirement, each save the client sent there
// waited out its whole deadline and failed, for as long as the cut
// lasted.
func TestSavesGoOnWhileAMemberIsCutOffFromItsPeers(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(leader int) int
	}{
		{"Follower", func(leader int) int { return (leader + 1) % 3 }},
		{"Leader", func(leader int) int { return leader }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := etcdtest.StartCluster(t, 3)
			require.Eventually(t, func() bool { return cluster.Leader() >= 0 }, 10*time.Second, 10*time.Millisecond)
			c := openCatalog(t, cluster.Endpoints(), nil)
			b := openBatcher(t, cluster.Endpoints(), nil)
			cut := tc.cut(cluster.Leader())
			cluster.Isolate(cut)
			t.Cleanup(func() { cluster.Rejoin(cut) })
			server := cluster.Members[cut].Etcd().Server
			require.Eventually(t, func() bool { return server.Leader() == 0 }, 10*time.Second, 10*time.Millisecond,
				"the cut member still has a leader")
			require.Eventually(t, func() bool { l := cluster.Leader(); return l >= 0 && l != cut }, 10*time.Second, 10*time.Millisecond,
				"the other two elect no leader")
			savesGoOn(t, map[string]persistence.Catalog{"catalog": c, "batcher": b})
		})
	}
}

// savesGoOn has eight pchannels of each catalog save 25 times at once,
// each save with a deadline of a second: every one succeeds, the slowest
// within half of it, and each pchannel then stores its last save.
func savesGoOn(t *testing.T, catalogs map[string]persistence.Catalog) {
	const pchannels, saves, deadline = 8, 25, time.Second
	slowest := make([]time.Duration, 0, len(catalogs)*pchannels)
	errs := make(chan error)
	for name, c := range catalogs {
		for p := range pchannels {
			slowest = append(slowest, 0)
			took := &slowest[len(slowest)-1] // never moved: the capacity is all of them
			go func() {
				for i := range saves {
					ctx, cancel := context.WithTimeout(context.Background(), deadline)
					began := time.Now()
					err := c.Save(ctx, fmt.Sprintf("%s-%d", name, p), wal.KafkaID(i+1))
					*took = max(*took, time.Since(began))
					cancel()
					if err != nil {
						errs <- fmt.Errorf("%s-%d, save %d: %w", name, p, i+1, err)
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for range len(catalogs) * pchannels {
		require.NoError(t, <-errs)
	}
	worst := slices.Max(slowest)
	t.Logf("%d saves, the slowest in %v", len(catalogs)*pchannels*saves, worst.Round(time.Millisecond))
	require.Less(t, worst, deadline/2)
	for name, c := range catalogs {
		for p := range pchannels {
			got, err := c.Load(ctxT(t), fmt.Sprintf("%s-%d", name, p))
			require.NoError(t, err)
			require.Equal(t, wal.MessageID(wal.KafkaID(saves)), got)
		}
	}
}
