package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// endsOnDelete ends the command (a --timeout, a Ctrl-C) right after its
// Delete has deleted; failSave, if set, is what every Save returns.
type endsOnDelete struct {
	persistence.Catalog
	end      func()
	failSave error
}

func (c *endsOnDelete) Delete(ctx context.Context, pchannel string) error {
	err := c.Catalog.Delete(ctx, pchannel)
	c.end()
	return err
}

func (c *endsOnDelete) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	if c.failSave != nil {
		return c.failSave
	}
	return c.Catalog.Save(ctx, pchannel, id)
}

// lowering is a store of the command whose context is ctx, and a catalog
// holding kafka:1000 for p, to be lowered.
func lowering(t *testing.T, ctx context.Context) (*persistence.Memory, *store) {
	mem := persistence.NewMemory()
	require.NoError(t, mem.Save(context.Background(), "p", wal.KafkaID(1000)))
	s := newStore(ctx, catalogurl.URL{}, io.Discard)
	t.Cleanup(s.end)
	return mem, s
}

// A forced lowering deletes, then saves: a command that ended between the
// two, its save under the same context, lost the checkpoint.
func TestLoweringOutlivesTheCommandsEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mem, s := lowering(t, ctx)
	require.NoError(t, s.apply(ctx, &endsOnDelete{Catalog: mem, end: cancel}, "p", lower, wal.KafkaID(500)))
	got, err := mem.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(500), got)
}

// hangingSave is a catalog whose Save waits for its context to end, as
// on an etcd that answers nothing.
type hangingSave struct{ persistence.Catalog }

func (hangingSave) Save(ctx context.Context, _ string, _ wal.MessageID) error {
	<-ctx.Done()
	return ctx.Err()
}

// What a write owes past the command's end ends cleanupGrace after the
// first of its --timeout and a signal. A signal during the save after the
// delete was ignored until the --timeout's grace, fixed before it; and
// each later wait (the release) took a second of its own after the one
// before.
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
			mem, s := lowering(t, ctx)
			var signalled time.Time
			time.AfterFunc(c.signal, func() { signalled = time.Now(); cancel() })
			if c.signal == 0 {
				<-ctx.Done()
			}
			err := s.replaceRecord(context.Background(), hangingSave{mem}, "p", wal.KafkaID(500))
			require.ErrorIs(t, err, context.Canceled)
			require.ErrorContains(t, err, "p: its record was deleted and kafka:500 not written")
			took := time.Since(signalled)
			require.GreaterOrEqual(t, took, cleanupGrace)
			require.Less(t, took, cleanupGrace+time.Second/2, "the save ends a second after the signal")
			// A wait after it has no second of its own.
			<-s.grace.Done()
			require.Less(t, time.Since(signalled), cleanupGrace+time.Second/2)
		})
	}
}

// lostDelete deletes, and reports the error of a delete whose reply was
// lost: applied all the same.
type lostDelete struct{ persistence.Catalog }

func (c lostDelete) Delete(ctx context.Context, pchannel string) error {
	if err := c.Catalog.Delete(ctx, pchannel); err != nil {
		return err
	}
	return errors.New("connection reset")
}

// A forced lowering whose delete failed and was applied all the same (on
// etcd, a deadline that landed during the call) lost the checkpoint: the
// error was returned, and nothing written in its place.
func TestLoweringAfterADeleteThatFailedButWasApplied(t *testing.T) {
	ctx := context.Background()
	mem, s := lowering(t, ctx)
	require.NoError(t, s.apply(ctx, lostDelete{mem}, "p", lower, wal.KafkaID(500)))
	got, err := mem.Load(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(500), got)
}

// When the save after the delete fails all the same, the error says what
// is left to do.
func TestLoweringWhoseSaveFailsSaysHowToFinish(t *testing.T) {
	ctx := context.Background()
	mem, s := lowering(t, ctx)
	down := errors.New("catalog down")
	err := s.apply(ctx, &endsOnDelete{Catalog: mem, end: func() {}, failSave: down}, "p", lower, wal.KafkaID(500))
	require.ErrorIs(t, err, down)
	require.ErrorContains(t, err, "p: its record was deleted and kafka:500 not written: 'set p kafka:500' writes it: catalog down")
}

// onEtcd opens a store for writing on an etcd of its own, for a command
// whose context is ctx, which cancel ends (a Ctrl-C).
func onEtcd(t *testing.T) (*env, context.Context, context.CancelFunc, *store) {
	eps := etcdtest.Start(t)
	u, err := catalogurl.Parse("etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli")
	require.NoError(t, err)
	e := &env{opts: options{url: u, timeout: time.Minute}, stdout: io.Discard, stderr: io.Discard}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := e.open(ctx, readWrite)
	require.NoError(t, err)
	return e, ctx, cancel, s
}

// A forced lowering on etcd whose command ended between the delete and
// the save lost the checkpoint: the tool's etcd session lived on the
// command's context, and its end fenced the save.
func TestLoweringOnEtcdOutlivesTheCommandsEnd(t *testing.T) {
	_, ctx, cancel, s := onEtcd(t)
	defer s.close()
	require.NoError(t, s.cat.Save(ctx, "p", wal.KafkaID(1000)))
	err := s.write(ctx, "p", 0, true, func(c persistence.Catalog) error {
		end := func() {
			cancel() // Ctrl-C, between the delete and the save
			if s.session.Ctx().Err() != nil {
				<-s.session.Done() // on the command's context: it ends now
			}
		}
		return s.apply(ctx, &endsOnDelete{Catalog: c, end: end}, "p", lower, wal.KafkaID(500))
	})
	require.NoError(t, err)
	got, err := s.cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(500), got)
}

// A write on etcd that the command's end cut short left the tool's owner
// key for its session's TTL: its release and its session's revoke ran
// under the command's context, over by then, and the next command within
// 10 s was refused as if a node owned the pchannel.
func TestAnInterruptedWriteLeavesNoOwner(t *testing.T) {
	e, ctx, cancel, s := onEtcd(t)
	err := s.write(ctx, "p", 0, false, func(c persistence.Catalog) error {
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
	err := s.write(ctx, "p", 0, false, func(c persistence.Catalog) error {
		err := c.Save(ctx, "p", wal.KafkaID(7))
		s.end() // the release that follows cannot be sent
		return err
	})
	require.NoError(t, err)
	require.Contains(t, stderr.String(), "warning: p: the tool's hold on it was not released (")
	require.Contains(t, stderr.String(), "no node can take it until this command's etcd lease ends, within 10 s\n")
	s.close()

	check, err := e.open(context.Background(), readOnly)
	require.NoError(t, err)
	defer check.close()
	got, err := check.cat.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), got)
}
