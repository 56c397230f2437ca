//go:build linux

package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/mattn/go-runewidth"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// verify's findings on a terminal of 50 columns are laid out within it,
// each continuation indented under its finding; piped, each is one line,
// for grep, and the words are the same. They used to run past the edge,
// cut by the terminal wherever its width fell.
func TestVerifyFindingsWrapOnATerminal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	ctx := context.Background()
	for _, p := range []string{"by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"} {
		require.NoError(t, b.Save(ctx, p, wal.KafkaID(7)))
	}
	require.NoError(t, b.Close())
	db, err := bolt.Open(path, 0o600, nil)
	require.NoError(t, err)
	require.NoError(t, db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(persistence.DefaultBucket))
		// One record moved under another pchannel's name, one whose
		// bytes are no record at all.
		if err := bk.Put([]byte("by-dev-rootcoord-dml_2"), bytes.Clone(bk.Get([]byte("by-dev-rootcoord-dml_0")))); err != nil {
			return err
		}
		return bk.Put([]byte("by-dev-rootcoord-dml_1"), []byte("not a record of lowwater's"))
	}))
	require.NoError(t, db.Close())
	args := []string{"--catalog=bolt:" + path, "verify"}

	var piped, errs bytes.Buffer
	require.Equal(t, ExitCorrupt, Main(ctx, args, func(string) string { return "" }, nil, &piped, &errs), errs.String())
	findings := strings.Split(strings.TrimSuffix(piped.String(), "\n"), "\n")
	require.Len(t, findings, 3, piped.String()) // two findings and the count
	require.Greater(t, runewidth.StringWidth(findings[1]), 50, "a finding short enough to need no wrapping tests nothing")

	const width = 50
	got, stderr, code := onTerminal(t, width, args)
	require.Equal(t, ExitCorrupt, code, stderr)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Greater(t, len(lines), len(findings), "nothing was wrapped: %q", got)
	for i, l := range lines {
		require.LessOrEqual(t, runewidth.StringWidth(l), width-1, "line %d: %q", i, l)
	}
	require.Equal(t, piped.String(), strings.ReplaceAll(got, "\n  ", " "), "the words changed")
}

// onTerminal runs the tool with args, its stdout a terminal of width
// columns, and returns what the terminal showed, newlines as "\n", what
// went to its stderr (a pipe) and its exit code.
func onTerminal(t *testing.T, width uint16, args []string) (shown, stderr string, code int) {
	t.Helper()
	keys, tty := openPTY(t)
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: width}))
	read := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		_, err := io.Copy(&out, keys)
		if err != nil && !errors.Is(err, syscall.EIO) { // EIO: the terminal was closed
			out.WriteString("\nread: " + err.Error())
		}
		read <- strings.ReplaceAll(out.String(), "\r\n", "\n")
	}()
	var errs bytes.Buffer
	code = Main(context.Background(), args, func(string) string { return "" }, nil, tty, &errs)
	require.NoError(t, tty.Close())
	return <-read, errs.String(), code
}
