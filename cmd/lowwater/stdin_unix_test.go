//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/cli"
	"github.com/lowwater/lowwater/wal"
)

// restore - reads the dump from standard input, as dump - writes it to
// standard output: a catalog is copied through a pipe, with no file.
func TestRestoreFromStandardInput(t *testing.T) {
	src := seedBolt(t, map[string]wal.MessageID{"a": wal.KafkaID(7), "b": wal.KafkaID(9)})
	dst := filepath.Join(t.TempDir(), "copy.db")
	dump := exec.Command(binary, "--catalog", "bolt:"+src, "dump", "-")
	restore := exec.Command(binary, "--catalog", "bolt:"+dst, "restore", "-")
	pipe, err := dump.StdoutPipe()
	require.NoError(t, err)
	restore.Stdin = pipe
	var out strings.Builder
	restore.Stdout, restore.Stderr = &out, &out
	require.NoError(t, dump.Start())
	require.NoError(t, restore.Run(), "%s", out.String())
	require.NoError(t, dump.Wait())
	require.Contains(t, out.String(), "a: created at kafka:7")
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(7), "b": wal.KafkaID(9)}, stored(t, dst))

	// A file named "-" is given by a path that says so.
	one := `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"c","wal":"kafka","checkpoint":"kafka:3"}]}`
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "-"), []byte(one), 0o600))
	cmd := exec.Command(binary, "--catalog", "bolt:"+dst, "restore", "./-")
	cmd.Dir = dir
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", got)
	require.Equal(t, wal.KafkaID(3), stored(t, dst)["c"])

	// Not a dump on standard input is a usage error that names it.
	bad := exec.Command(binary, "--catalog", "bolt:"+dst, "restore", "-")
	bad.Stdin = strings.NewReader("not json")
	got, err = bad.CombinedOutput()
	require.Equal(t, cli.ExitUsage, exitCode(t, err), "%s", got)
	require.Contains(t, string(got), "standard input: not a dump file")
}

// A restore whose input never comes (a pipe whose writer stalls, a named
// pipe no one opens, a terminal no one types on) ends at --timeout, as
// every other wait of the tool does, and writes nothing.
func TestRestoreOfAStalledInputEndsAtTimeout(t *testing.T) {
	dst := seedBolt(t, map[string]wal.MessageID{"a": wal.KafkaID(7)})
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	fifo := filepath.Join(t.TempDir(), "dump.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))

	for name, file := range map[string]string{"standard input": "-", fifo: fifo} {
		cmd := exec.Command(binary, "--catalog", "bolt:"+dst, "--timeout", "300ms", "restore", file)
		cmd.Stdin = r // the write end stays open: no end of file
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		ended := make(chan error, 1)
		go func() { ended <- cmd.Wait() }()
		select {
		case err := <-ended:
			require.Equal(t, cli.ExitFailed, exitCode(t, err), "%s", out.String())
			require.Contains(t, out.String(), "reading "+name+": context deadline exceeded (--timeout 300ms passed)")
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-ended
			t.Fatalf("restore %s still waits for its input 30 s after a --timeout of 300ms", file)
		}
	}
	require.Equal(t, map[string]wal.MessageID{"a": wal.KafkaID(7)}, stored(t, dst))
}

// exitCode is the exit status err reports of a command that ran.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	return exit.ExitCode()
}
