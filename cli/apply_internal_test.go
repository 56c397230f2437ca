package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
	"github.com/lowwater/lowwater/wal"
)

// A lowering or a replacement is one write, through a catalog that can
// (replacer); one that cannot is refused, and its record left as it was,
// rather than deleted and then saved, which a crash or a cut between the
// two turned into a lost checkpoint.
func TestLoweringNeedsAReplacer(t *testing.T) {
	ctx := context.Background()
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(ctx, "p", wal.KafkaID(1000)))
	s := newStore(ctx, catalogurl.URL{}, io.Discard)
	defer s.end()
	err := s.apply(ctx, mem, "p", lower, wal.KafkaID(500))
	require.EqualError(t, err, "p: *persistence.Memory cannot replace a record in one write")
	got, err := mem.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(1000), got)
}

// What a write owes past the command's end (the release of the tool's
// ownership, the revoke of its session) ends cleanupGrace after the first
// of its --timeout and a signal. A signal was ignored until the
// --timeout's grace, fixed before it; and each later wait took a second
// of its own after the one before.
func TestGraceEndsASecondAfterTheCommand(t *testing.T) {
	for _, c := range []struct {
		name string
		// signal is when a Ctrl-C comes; the --timeout is at a minute.
		signal time.Duration
	}{
		{"signal", 50 * time.Millisecond},
		{"already over", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s := newStore(ctx, catalogurl.URL{}, io.Discard)
			defer s.end()
			var signalled time.Time
			time.AfterFunc(c.signal, func() { signalled = time.Now(); cancel() })
			if c.signal == 0 {
				<-ctx.Done()
			}
			<-s.grace.Done()
			took := time.Since(signalled)
			require.GreaterOrEqual(t, took, cleanupGrace)
			require.Less(t, took, cleanupGrace+time.Second/2, "grace ends a second after the signal")
		})
	}
}

// onEtcd opens a store for writing on an etcd of its own, for a command
// whose context is ctx, which cancel ends (a Ctrl-C).
func onEtcd(t *testing.T) (*env, context.Context, context.CancelFunc, *store) {
	eps := etcdtest.Start(t)
	u, err := catalogurl.Parse("etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli")
	require.NoError(t, err)
	e := &env{command: "set", opts: options{url: u, timeout: time.Minute}, stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := e.open(ctx, readWrite)
	require.NoError(t, err)
	return e, ctx, cancel, s
}

// A write on etcd that the command's end cut short left the tool's owner
// key for its session's TTL: its release and its session's revoke ran
// under the command's context, over by then, and the next command within
// 10 s was refused as if a node owned the pchannel.
func TestAnInterruptedWriteLeavesNoOwner(t *testing.T) {
	e, ctx, cancel, s := onEtcd(t)
	err := s.write(ctx, "p", change{act: create}, false, func(c persistence.Catalog) error {
		cancel() // Ctrl-C, as the tool writes
		return c.Save(ctx, "p", wal.KafkaID(1))
	})
	require.ErrorIs(t, err, context.Canceled)
	began := time.Now()
	s.close()
	require.Less(t, time.Since(began), cleanupGrace+time.Second/2)

	check, err := e.open(context.Background(), readOnly)
	require.NoError(t, err)
	defer check.close()
	term, err := check.etcd.OwnerTerm(context.Background(), "p")
	require.NoError(t, err)
	require.Zero(t, term, "the tool's owner key is gone with the command")
}

// A write that landed stands when the release of the tool's hold on the
// pchannel fails after it (etcd stopped, or the grace ran out): it was
// reported as failed, and a restore left it off the list of those it
// wrote. The failed release is a warning.
func TestFailedReleaseKeepsTheWrite(t *testing.T) {
	e, ctx, _, s := onEtcd(t)
	var stderr strings.Builder
	s.stderr = &stderr
	err := s.write(ctx, "p", change{act: create}, false, func(c persistence.Catalog) error {
		err := c.Save(ctx, "p", wal.KafkaID(7))
		s.end() // the release that follows cannot be sent
		return err
	})
	require.NoError(t, err)
	require.Contains(t, stderr.String(), "warning: p: the tool's hold on it was not released (")
	require.Contains(t, stderr.String(), "no node can take it until this command's etcd lease ends, within 10 s\n")
	s.close()

	check, err := e.open(context.Background(), readWrite)
	require.NoError(t, err)
	defer check.close()
	got, err := check.cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), got)
	// The next command finds the hold, and says whose it is and when it
	// ends: it said "a running node", and to stop it.
	err = check.write(context.Background(), "p", change{act: raise}, false, func(persistence.Catalog) error {
		t.Error("written under the hold")
		return nil
	})
	host, _ := os.Hostname()
	require.Regexp(t, fmt.Sprintf(`^p is held by lowwater-cli set, pid %d on %s: it lets go as that command ends, `+
		`or within (10|[1-9]) s if it was killed; try again then, or --force$`, os.Getpid(), regexp.QuoteMeta(host)), err.Error())
}

// A command stopped (Ctrl-Z) past its lease's TTL finds its lease gone
// when it ends: its owner keys went with it, and there is nothing to warn
// of. It warned that they stayed held.
func TestLeaseEndedAlreadyIsNoWarning(t *testing.T) {
	_, ctx, _, s := onEtcd(t)
	var stderr strings.Builder
	s.stderr = &stderr
	require.NoError(t, s.write(ctx, "p", change{act: create}, false, func(c persistence.Catalog) error {
		return c.Save(ctx, "p", wal.KafkaID(7))
	}))
	_, err := s.etcd.Client().Revoke(ctx, s.session.Lease()) // as the TTL's end does
	require.NoError(t, err)
	s.close()
	require.Empty(t, stderr.String())
}

// A holder is judged by what etcd says of its lease, in whole seconds
// counted down: a live holder renews a third of its TTL apart, so a lease
// of 3 s reading 1 s left is alive (it was taken for one not renewed), and
// one that has run out reads 0 until etcd removes it (it was taken for
// one etcd said nothing of: "a running node").
func TestHolderJudgedByItsLease(t *testing.T) {
	for _, c := range []struct {
		left, granted int64
		lapsing       bool
		ends          string
	}{
		{left: 1, granted: 3},
		{left: 2, granted: 6},
		{left: 1, granted: 6, lapsing: true, ends: "its lease is not being renewed, and ends within 1 s"},
		{left: 4, granted: 15, lapsing: true, ends: "its lease is not being renewed, and ends within 4 s"},
		{left: 0, granted: 6, lapsing: true, ends: "its lease has run out, and etcd removes its hold within moments"},
		{}, // etcd did not say
	} {
		h := holder{Owner: etcdcatalog.Owner{Term: 7, Lease: 1, Holder: "pod-a"}, left: c.left, granted: c.granted}
		require.Equal(t, c.lapsing, h.lapsing(), "%+v", c)
		if c.lapsing {
			require.Equal(t, c.ends, h.ends(), "%+v", c)
			require.Equal(t, "a node that looks gone, pod-a (term 7)", h.node())
		} else {
			require.Equal(t, "a running node, pod-a (term 7)", h.node())
		}
	}
}

// A command stopped (Ctrl-Z) past its lease's TTL, then resumed, wrote
// nothing, and said only "writer of term N is fenced: no owner".
func TestLeaseRanOutBeforeTheWriteIsSaid(t *testing.T) {
	_, ctx, _, s := onEtcd(t)
	err := s.write(ctx, "p", change{act: create}, false, func(c persistence.Catalog) error {
		if _, err := s.etcd.Client().Revoke(ctx, s.session.Lease()); err != nil { // as the TTL's end does
			return err
		}
		<-s.session.Done()
		return c.Save(ctx, "p", wal.KafkaID(7))
	})
	require.ErrorIs(t, err, persistence.ErrFenced)
	require.ErrorContains(t, err, "p: nothing written: this command's etcd lease ran out before the write (was the command "+
		"stopped, or etcd out of its reach, for 10 s?), and its hold with it; run it again: ")
	s.close()
}
