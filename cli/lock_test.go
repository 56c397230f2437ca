package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The wait for a bbolt file lock ends with the command: at --timeout, or
// when the caller's context ends (Ctrl-C, in cmd/lowwater), not only at
// --lock-timeout. It used to sit out the whole --lock-timeout, deaf to both.
func TestLockWaitEndsWithTheCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoints.db")
	node, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer node.Close()
	require.NoError(t, node.Save(context.Background(), "p", wal.KafkaID(7)))
	// A dump to restore from, made of another file: the node holds this one.
	dump, other := filepath.Join(dir, "dump.json"), filepath.Join(dir, "other.db")
	made, err := persistence.OpenBolt(other)
	require.NoError(t, err)
	require.NoError(t, made.Save(context.Background(), "p", wal.KafkaID(9)))
	require.NoError(t, made.Close())
	var stdout, stderr bytes.Buffer
	code := cli.Main(context.Background(), []string{"--catalog", "bolt:" + other, "dump", dump},
		func(string) string { return "" }, nil, &stdout, &stderr)
	require.Equal(t, cli.ExitOK, code, stderr.String())

	run := func(ctx context.Context, args ...string) (int, string, time.Duration) {
		var stdout, stderr bytes.Buffer
		began := time.Now()
		code := cli.Main(ctx, append([]string{"--catalog", "bolt:" + path, "--lock-timeout", "1m"}, args...),
			func(string) string { return "" }, nil, &stdout, &stderr)
		return code, stderr.String(), time.Since(began)
	}
	for _, cmd := range [][]string{{"list"}, {"set", "p", "kafka:9"}, {"restore", dump}} {
		code, stderr, took := run(context.Background(), append([]string{"--timeout", "300ms"}, cmd...)...)
		require.Equal(t, cli.ExitFailed, code, stderr)
		require.Contains(t, stderr, "waiting for the lock of "+path+", which another process holds (most likely a running lowwater node: stop it first): context deadline exceeded: --timeout 300ms passed")
		require.Less(t, took, 20*time.Second, "--timeout did not end the wait")

		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(200*time.Millisecond, cancel) // as Ctrl-C would, at any time
		code, stderr, took = run(ctx, cmd...)
		stop.Stop()
		cancel()
		require.Equal(t, cli.ExitInterrupted, code, stderr)
		require.Contains(t, stderr, "waiting for the lock of "+path+", which another process holds (most likely a running lowwater node: stop it first): context canceled")
		require.Less(t, took, 20*time.Second, "the context did not end the wait")
	}

	// Past --lock-timeout the message names the lock holder, as before.
	stdout.Reset()
	stderr.Reset()
	code = cli.Main(context.Background(), []string{"--catalog", "bolt:" + path, "--lock-timeout", "250ms", "list"},
		func(string) string { return "" }, nil, &stdout, &stderr)
	require.Equal(t, cli.ExitFailed, code)
	require.Contains(t, stderr.String(), "is locked by another process")
	require.Contains(t, stderr.String(), "waited 250ms")

	require.NoError(t, node.Close())
	got, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	defer got.Close()
	v, err := got.Load(context.Background(), "p")
	require.NoError(t, err)
	require.Equal(t, wal.KafkaID(7), v, "nothing was written")
}
