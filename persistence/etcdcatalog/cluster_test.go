package etcdcatalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
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
