package etcd_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// TestEtcdDownTenSeconds stops the only etcd member for 10 s while a
// pchannel's vchannel keeps advancing, then restarts it on the same data
// and port.
func TestEtcdDownTenSeconds(t *testing.T) {
	testOutage(t, 10*time.Second, (*etcdtest.Server).Stop)
}

// testOutage checks what lowwater promises of an unreachable catalog:
//   - the persister retries on its backoff, never faster: each retry comes
//     at least the announced NextRetry after the previous failure, and the
//     number of attempts is at most what the schedule allows in the window
//     (no hot loop), at least a few (it never gave up);
//   - I3: once etcd is back, the latest minimum is persisted within one
//     backoff cap plus one save;
//   - I2: the stored values only rose.
func testOutage(t *testing.T, outage time.Duration, stop func(*etcdtest.Server)) {
	const pch = "p"
	b := actors.DefaultBackoff()
	srv := etcdtest.StartServer(t)
	admin := newClient(t, srv.Endpoints())
	cat := newCatalog(t, srv.Endpoints())
	s := newSystem(t)
	from := currentRevision(t, admin) + 1

	pid := s.spawn(pch, cat, actors.WithBackoff(b), actors.WithVChannels(map[string]wal.MessageID{"v": k(0)}))
	feed := startFeeder(s, pid, "v", 1, 20*time.Millisecond)
	defer feed.stop()
	waitFrom(t, s.rec, pch, 0, eventWait, persistedAtLeast(k(10)))

	mark := s.rec.Len()
	down := time.Now()
	stop(srv)
	stopTook := time.Since(down)
	first, _ := waitFrom(t, s.rec, pch, mark, outage, anyEvent[*messages.PersistFailed])
	// The outage itself is the fault under test, not a wait for a
	// condition: keep etcd down for the chosen time while updates go on.
	remaining := time.NewTimer(time.Until(down.Add(outage)))
	<-remaining.C

	last := feed.stop()
	minimum := s.state(pid).Minimum
	require.Equal(t, k(last), minimum)
	restartAt := time.Now()
	srv.Restart()
	up := time.Now()
	catchUp := b.Max + saveTimeout
	caught, _ := waitFrom(t, s.rec, pch, mark, catchUp+eventWait, persistedIs(minimum))

	failures := collect[*messages.PersistFailed](s.rec, pch, mark)
	acks := collect[*messages.CheckpointPersisted](s.rec, pch, mark)
	require.NotEmpty(t, acks)
	// The window in which failing attempts can start: from one save timeout
	// before the stop (an attempt already in flight) to the last failure.
	window := failures[len(failures)-1].At.Sub(down) + saveTimeout
	bound := maxAttempts(b, window)
	// slack is what an attempt may take beyond its timeout on a loaded
	// machine under the race detector.
	const slack = 500 * time.Millisecond
	t.Logf("etcd down %v (stop took %v, restart %v); first failure %v after the stop; %d failed attempts (bounds [%d, %d] for a %v window); "+
		"%s persisted %v after the restart returned (I3 bound %v), in %d attempts, latency %v",
		up.Sub(down).Round(time.Millisecond), stopTook.Round(time.Millisecond), up.Sub(restartAt).Round(time.Millisecond),
		first.At.Sub(down).Round(time.Millisecond), len(failures), minAttempts(b, restartAt.Sub(first.At), saveTimeout+slack), bound, window.Round(time.Millisecond),
		minimum, caught.At.Sub(up).Round(time.Millisecond), catchUp, caught.Attempts, caught.Latency.Round(time.Microsecond))

	// No hot loop: never sooner than announced, never more than the
	// schedule allows. And no giving up: a 10 s outage takes at least the
	// first few steps of the schedule.
	require.LessOrEqual(t, len(failures), bound)
	require.GreaterOrEqual(t, len(failures), minAttempts(b, restartAt.Sub(first.At), saveTimeout+slack))
	for i, f := range failures {
		require.Equal(t, i+1, f.Attempt, "attempts counted since the last success")
		require.GreaterOrEqual(t, f.NextRetry, b.Initial)
		require.LessOrEqual(t, f.NextRetry, b.Max)
		if i > 0 {
			prev := failures[i-1]
			require.GreaterOrEqual(t, f.At.Sub(prev.At), prev.NextRetry,
				"attempt %d failed %v after the previous failure, which announced a %v wait", f.Attempt, f.At.Sub(prev.At), prev.NextRetry)
		}
	}
	// The first success after the last failure counts every attempt since
	// the previous success. It is the save that caught up, unless an
	// attempt started before the updates stopped was still waiting for
	// etcd when it came back: that one lands first, with an older value,
	// and the latest minimum follows as the next save's first attempt.
	var next *messages.CheckpointPersisted
	for _, a := range acks {
		if a.At.After(failures[len(failures)-1].At) {
			next = a
			break
		}
	}
	require.NotNil(t, next)
	require.Equal(t, len(failures)+1, next.Attempts)
	if next != caught {
		require.Equal(t, 1, caught.Attempts, "the save after %s", next.Value)
	}
	// Nothing is acknowledged while etcd is down. (The late save above
	// lands after the restart, before the one that caught up.)
	for _, a := range acks {
		require.False(t, a.At.After(first.At) && a.At.Before(restartAt), "acknowledged %s while etcd was down", a.Value)
	}
	// I3, counted from when etcd serves again.
	within(t, caught.At.Sub(up), catchUp, "catching up after the restart")

	h := history(t, admin, pch, from)
	requireIncreasing(t, h)
	requireAcknowledgedStored(t, h, collect[*messages.CheckpointPersisted](s.rec, pch, 0))
	require.Equal(t, minimum, h[len(h)-1].rec.Checkpoint)
}
