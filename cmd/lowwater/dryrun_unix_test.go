//go:build unix

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
)

// A dry run fails where the write would: on a file this user may not
// write. It used to say "would raise" and exit 0, and the real set then
// failed. Run as root, the test runs the tool as nobody, for whom
// permissions hold.
func TestDryRunChecksTheFileCanBeWritten(t *testing.T) {
	dir, err := os.MkdirTemp("", "lowwater-dry")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	tool := filepath.Join(dir, "lowwater")
	raw, err := os.ReadFile(binary)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(tool, raw, 0o755))

	seeded := seedBolt(t, seed)
	path := filepath.Join(dir, "checkpoints.db")
	data, err := os.ReadFile(seeded)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o644))
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(path, 0o444))
	}

	run := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tool, append([]string{"--catalog", "bolt:" + path}, args...)...)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("run %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String()
	}
	code, out := run("get", "by-dev-rootcoord-dml_0")
	require.Equal(t, cli.ExitOK, code, "the file can be read: %s", out)
	code, out = run("set", "by-dev-rootcoord-dml_0", "kafka:9999")
	require.Equal(t, cli.ExitFailed, code, "the file cannot be written: %s", out)
	code, out = run("set", "by-dev-rootcoord-dml_0", "kafka:9999", "--dry-run")
	require.Equal(t, cli.ExitFailed, code, out)
	require.Contains(t, out, path+" could not be written")
	require.Contains(t, out, "permission denied")
	code, out = run("delete", "by-dev-rootcoord-dml_0", "--dry-run")
	require.Equal(t, cli.ExitFailed, code, out)

	// A restore into a file it would create: the directory must take it.
	dump := filepath.Join(dir, "dump.json")
	wantCode(t, on(t, "bolt:"+seeded, "dump", dump), cli.ExitOK)
	require.NoError(t, os.Chmod(dump, 0o644))
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { os.Chmod(dir, 0o755) }) // before the RemoveAll
	}
	for _, dst := range []string{filepath.Join(dir, "new.db"), filepath.Join(dir, "missing", "new.db")} {
		restore := func(args ...string) (int, string) {
			path = dst // run's catalog
			return run(append([]string{"restore", dump}, args...)...)
		}
		code, out = restore()
		require.Equal(t, cli.ExitFailed, code, "the directory cannot be written: %s", out)
		code, out = restore("--dry-run")
		require.Equal(t, cli.ExitFailed, code, out)
		require.Contains(t, out, filepath.Dir(dst)+" could not be written")
		_, err := os.Stat(dst)
		require.ErrorIs(t, err, os.ErrNotExist)
	}
}
