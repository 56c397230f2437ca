package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// hookOpened puts wrap between every command of the test and the catalog
// it opens.
func hookOpened(t *testing.T, wrap func(persistence.Inspector) persistence.Inspector) {
	openedHook = wrap
	t.Cleanup(func() { openedHook = nil })
}

// cutOnWrite ends the command (cut: a Ctrl-C, or a wait for its --timeout)
// as its write reaches the catalog.
type cutOnWrite struct {
	persistence.Inspector
	cut func(ctx context.Context)
}

func (c cutOnWrite) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.cut(ctx)
	return c.Inspector.Save(ctx, pchannel, id)
}

func (c cutOnWrite) Replace(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.cut(ctx)
	return c.Inspector.(replacer).Replace(ctx, pchannel, id)
}

func (c cutOnWrite) Delete(ctx context.Context, pchannel string) error {
	c.cut(ctx)
	return c.Inspector.Delete(ctx, pchannel)
}

// runMain runs the tool under ctx and returns what it printed on stdout
// and stderr, and its exit code.
func runMain(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	var out, errs bytes.Buffer
	code = Main(ctx, args, func(string) string { return "" }, nil, &out, &errs)
	return out.String(), errs.String(), code
}

// interrupted is a command's context and the Ctrl-C that ends it, with
// the cause signal.NotifyContext gives.
func interrupted(t *testing.T) (context.Context, func(context.Context)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	return ctx, func(context.Context) { cancel(errors.New("interrupt signal received")) }
}

// untilDone waits for the command's --timeout.
func untilDone(ctx context.Context) { <-ctx.Done() }

// A set or delete that --timeout or a Ctrl-C cut short as it wrote said
// "context deadline exceeded (--timeout 1s passed)" and no more: not what
// was being done, nor whether anything was written. On bbolt, whose
// transaction nothing cuts short once begun, a cut write wrote nothing.
func TestCutShortWriteSaysItsStepOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(5)))
	require.NoError(t, b.Close())
	catalog := "--catalog=bolt:" + path

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"set, Ctrl-C", []string{"set", "p", "kafka:9"},
			"lowwater: writing p: interrupt signal received; nothing written\n"},
		{"set, --timeout", []string{"--timeout=1s", "set", "p", "kafka:9"},
			"lowwater: writing p: context deadline exceeded: --timeout 1s passed; nothing written\n"},
		{"delete, Ctrl-C", []string{"delete", "--force", "p"},
			"lowwater: deleting p: interrupt signal received; nothing deleted\n"},
		{"lowering, Ctrl-C", []string{"set", "--force", "p", "kafka:1"},
			"warning: p: replay: consumers restart at kafka:1 and re-read what follows it up to kafka:5 (4 messages)\n" +
				"lowwater: writing p: interrupt signal received; nothing written\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cut := interrupted(t)
			if strings.HasPrefix(c.args[0], "--timeout") {
				cut = untilDone
			}
			hookOpened(t, func(i persistence.Inspector) persistence.Inspector { return cutOnWrite{i, cut} })
			out, errs, code := runMain(ctx, append([]string{catalog}, c.args...)...)
			want := ExitInterrupted
			if strings.HasPrefix(c.args[0], "--timeout") {
				want = ExitFailed
			}
			require.Equal(t, want, code, errs)
			require.Equal(t, c.want, errs)
			require.Empty(t, out)

			b, err := persistence.OpenBolt(path)
			require.NoError(t, err)
			defer b.Close()
			got, err := b.Load(context.Background(), "p")
			require.NoError(t, err)
			require.Equal(t, wal.KafkaID(5), got)
		})
	}
}

// ownedByHand starts an etcd holding kafka:5 for p under an owner key put
// by hand, and returns the --catalog flag of it: a --force write goes
// around that owner through the catalog the command opened (openedHook).
func ownedByHand(t *testing.T) string {
	t.Helper()
	eps := etcdtest.Start(t)
	catalog := "--catalog=etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli"
	_, _, code := runMain(context.Background(), catalog, "set", "p", "kafka:5")
	require.Equal(t, ExitOK, code)
	putOwnerByHand(t, eps)
	return catalog
}

// putOwnerByHand puts an owner key of p under the prefix cli, with no
// lease, on the etcd at eps: --force writes around it, through the
// catalog the command opened (which a test may hook), once its session
// is made.
func putOwnerByHand(t *testing.T, eps []string) {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = client.Put(ctx, "cli/wal/p/owner", "by hand")
	require.NoError(t, err)
}

// On etcd a transaction cut short may have been applied all the same:
// the error says so, and how to find out.
func TestCutShortWriteSaysItsStepOnEtcd(t *testing.T) {
	catalog := ownedByHand(t)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "--force", "p", "kafka:9"},
			"lowwater: writing p: interrupt signal received; it may or may not have been written: 'get p' shows which\n"},
		{[]string{"delete", "--force", "p"},
			"lowwater: deleting p: interrupt signal received; it may or may not have been deleted: 'get p' shows which\n"},
		{[]string{"set", "--force", "p", "kafka:1"},
			"lowwater: writing p: interrupt signal received; it may or may not have been written: 'get p' shows which\n"},
	} {
		signal, ctrlC := interrupted(t)
		hookOpened(t, func(i persistence.Inspector) persistence.Inspector { return cutOnWrite{i, ctrlC} })
		out, errs, code := runMain(signal, append([]string{catalog}, c.args...)...)
		require.Equal(t, ExitInterrupted, code, errs)
		require.True(t, strings.HasSuffix(errs, c.want), "%v: %s", c.args, errs)
		require.Empty(t, out)
	}
}

// cutAfterRead ends the command (cut) as soon as its catalog read
// returns: a Ctrl-C, or the --timeout, while the records are laid out.
type cutAfterRead struct {
	persistence.Inspector
	cut func(context.Context)
}

func (c cutAfterRead) Inspect(ctx context.Context) ([]persistence.Entry, error) {
	entries, err := c.Inspector.Inspect(ctx)
	c.cut(ctx)
	return entries, err
}

// list, list --json and dump of a million records take seconds to lay
// out once read: a Ctrl-C or the --timeout then ends them, and nothing is
// printed, nor a dump file made.
func TestLayoutEndsWithTheCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(5)))
	require.NoError(t, b.Close())
	file := filepath.Join(t.TempDir(), "d.json")
	const (
		listing = "lowwater: listing 1 record: context canceled (interrupt signal received)\n"
		dumping = "lowwater: dumping 1 checkpoint: context canceled; nothing written (interrupt signal received)\n"
	)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"list"}, listing},
		{[]string{"list", "--json"}, listing},
		{[]string{"dump"}, dumping},
		{[]string{"dump", file}, dumping},
	} {
		ctx, cut := interrupted(t)
		hookOpened(t, func(i persistence.Inspector) persistence.Inspector { return cutAfterRead{i, cut} })
		out, errs, code := runMain(ctx, append([]string{"--catalog=bolt:" + path}, c.args...)...)
		require.Equal(t, ExitInterrupted, code, "%v: %s", c.args, errs)
		require.Equal(t, c.want, errs, c.args)
		require.Empty(t, out, c.args)
		require.NoFileExists(t, file, c.args)
	}
}

// afterWrite runs then once the write it wraps returned.
type afterWrite struct {
	persistence.Inspector
	then func()
}

func (a afterWrite) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	defer a.then()
	return a.Inspector.Save(ctx, pchannel, id)
}

// A command that cannot revoke its etcd session (etcd stopped answering)
// leaves its owner keys behind for the lease's time, which the same
// command run again takes for a running node's: it says so.
func TestUnrevokedSessionIsReported(t *testing.T) {
	srv := etcdtest.StartServer(t)
	eps := srv.Endpoints()
	catalog := "--catalog=etcd://" + strings.TrimPrefix(eps[0], "http://") + "/cli"
	putOwnerByHand(t, eps)

	hookOpened(t, func(i persistence.Inspector) persistence.Inspector { return afterWrite{i, srv.Stop} })
	out, errs, code := runMain(context.Background(), catalog, "set", "--force", "p", "kafka:9")
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "p: created at kafka:9\n", out)
	require.Regexp(t, `\nwarning: this command's etcd lease [0-9a-f]+ was not revoked \(etcdcatalog: revoke a session's lease: context deadline exceeded\): `+
		`what it owned stays held for up to 10 s, and a write to it until then is refused\n$`, errs)
}

// A --timeout that runs out once etcd has answered is not etcd's silence:
// the error names the timeout once, and asks no "is etcd up?". It did for
// a write cut short after the read, and, on a line of its own, after a
// restore that had written hundreds of records.
func TestTimeoutAfterEtcdAnsweredGivesNoHint(t *testing.T) {
	catalog := ownedByHand(t) // the hook holds the write until the timeout
	dump := filepath.Join(t.TempDir(), "d.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1","checkpoints":[
		{"pchannel":"p","wal":"kafka","checkpoint":"kafka:9"}]}`), 0o600))
	hookOpened(t, func(i persistence.Inspector) persistence.Inspector {
		return cutOnWrite{i, func(ctx context.Context) { <-ctx.Done() }}
	})

	for _, args := range [][]string{
		{"set", "--force", "p", "kafka:9"},
		{"restore", "--force", dump},
	} {
		_, errs, code := runMain(context.Background(), append([]string{catalog, "--timeout", "300ms"}, args...)...)
		require.Equal(t, ExitFailed, code, errs)
		require.Equal(t, 1, strings.Count(errs, "--timeout 300ms"), "%v: %s", args, errs)
		require.NotContains(t, errs, "is etcd up", args)
	}
}

// After a --timeout, the endpoints are probed whether or not etcd had
// answered: one that answered and then went away (killed part way through
// a restore) is named, where the error said only that the timeout passed,
// as if the dump had been too big for it. An etcd that answers, and
// answered the command nothing, was given too short a --timeout.
func TestTimeoutHintAfterAnswers(t *testing.T) {
	eps := etcdtest.Start(t)
	up := strings.TrimPrefix(eps[0], "http://")
	hint := func(endpoints string, answered bool) string {
		u, err := catalogurl.Parse("etcd://" + endpoints + "/cli")
		require.NoError(t, err)
		return timeoutHint(u.Endpoints, options{url: u}.etcd.ProbeAll(u.Endpoints), answered)
	}
	// The one that answers is named too: the time may have run out on it.
	require.Regexp(t, `^cannot connect to 127\.0\.0\.1:1: .*connection refused; etcd answers at `+regexp.QuoteMeta(up)+
		`, so the command may need a longer --timeout$`, hint("127.0.0.1:1,"+up, true))
	require.Empty(t, hint(up, true), "etcd is up: the command had too much to do")
	require.Equal(t, "etcd answers at "+up+", so the command needs a longer --timeout", hint(up, false))
}

// A write cut short by --timeout while etcd stops answering (SIGSTOP, a
// partition) gives up what it owes within cleanupGrace, and the probe of
// why etcd did not answer runs beside it, not after it: the command ends
// about a second past its --timeout, where it took two.
func TestTimeoutProbeRunsBesideTheCutWrite(t *testing.T) {
	eps := etcdtest.Start(t)
	front := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	catalog := "--catalog=etcd://" + front.Addr() + "/cli"
	_, errs, code := runMain(context.Background(), catalog, "set", "p", "kafka:5")
	require.Equal(t, ExitOK, code, errs)
	putOwnerByHand(t, eps)
	hookOpened(t, func(i persistence.Inspector) persistence.Inspector {
		return cutOnWrite{i, func(ctx context.Context) { front.Freeze(); <-ctx.Done() }}
	})

	const timeout = 500 * time.Millisecond
	began := time.Now()
	_, errs, code = runMain(context.Background(), catalog, "--timeout", timeout.String(), "set", "--force", "p", "kafka:9")
	took := time.Since(began)
	require.Equal(t, ExitFailed, code, errs)
	require.Contains(t, errs, front.Addr()+" takes connections but answers no request within 1s")
	// The release waits out its grace on the frozen etcd, and the probe
	// its second: side by side, a second and a bit past the timeout.
	t.Logf("ended %v past its --timeout", took-timeout)
	require.GreaterOrEqual(t, took, timeout+cleanupGrace)
	require.Less(t, took, timeout+cleanupGrace+etcdaccess.ProbeTime/2, "%s", errs)
}
