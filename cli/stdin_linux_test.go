//go:build linux

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the side a terminal emulator writes
// the keys to, and the terminal a program reads them from.
func openPTY(t *testing.T) (keys, tty *os.File) {
	t.Helper()
	keys, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { keys.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(keys.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(keys.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { tty.Close() })
	return keys, tty
}

// Only a terminal is one: not a pipe, a file, /dev/null (a character
// device too), nor a reader that is no file.
func TestIsTerminal(t *testing.T) {
	_, tty := openPTY(t)
	require.True(t, isTerminal(tty))

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "dump.json"))
	require.NoError(t, err)
	defer file.Close()
	null, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer null.Close()
	for name, in := range map[string]io.Reader{"pipe": r, "file": file, os.DevNull: null, "strings.Reader": strings.NewReader("")} {
		require.False(t, isTerminal(in), name)
	}
	require.False(t, isTerminal(nil))
	require.False(t, isTerminal((*os.File)(nil)))
}

// restore - on a terminal waited for the dump with no word: it seemed to
// hang. It now says what it reads and how to end or abort it; from a pipe
// it says nothing.
func TestRestoreFromATerminalSaysSo(t *testing.T) {
	const dump = `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"p","wal":"kafka","checkpoint":"kafka:7"}]}`
	keys, tty := openPTY(t)
	// Typed ahead, then Ctrl-D at the start of a line: the end of input.
	_, err := keys.WriteString(dump + "\n\x04")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "c.db")
	var out, errs bytes.Buffer
	code := Main(context.Background(), []string{"--catalog=bolt:" + path, "restore", "-"}, func(string) string { return "" },
		tty, &out, &errs)
	require.Equal(t, ExitOK, code, errs.String())
	require.Equal(t, "reading the dump from standard input: end it with Ctrl-D, or abort with Ctrl-C\n", errs.String())
	require.Equal(t, "p: created at kafka:7\nrestored 1 checkpoint into bbolt file "+path+" (1 written)\n", out.String())

	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	_, err = w.WriteString(dump)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	out.Reset()
	errs.Reset()
	code = Main(context.Background(), []string{"--catalog=bolt:" + path, "restore", "-"}, func(string) string { return "" },
		r, &out, &errs)
	require.Equal(t, ExitOK, code, errs.String())
	require.Empty(t, errs.String())
	require.Equal(t, "p: unchanged at kafka:7\nrestored 1 checkpoint into bbolt file "+path+" (0 written)\n", out.String())
}
