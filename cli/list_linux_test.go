//go:build linux

package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// list on a terminal too narrow for its table puts each name on a line of
// its own, the rest of its record beneath it, and on one too narrow for
// that, each field on a line of its own: names of 64 bytes made a table of
// 104 columns, which a terminal of 80 broke wherever its width fell.
// Piped, and on a terminal wide enough, it is the table as it was.
func TestListOnANarrowTerminal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	long := func(i int) string {
		return "by-dev-rootcoord-dml_" + string(rune('0'+i)) + "_cluster-prod-eu-west-1-tenant-0042-abcdef"
	}
	require.Len(t, long(0), 64)
	for i := range 2 {
		require.NoError(t, b.Save(context.Background(), long(i), wal.KafkaID(123456789+int64(i))))
	}
	require.NoError(t, b.Save(context.Background(), "short", wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4}))
	require.NoError(t, b.Close())
	args := []string{"--catalog=bolt:" + path, "list"}

	var piped, errs bytes.Buffer
	require.Equal(t, ExitOK, Main(context.Background(), args, func(string) string { return "" }, nil, &piped, &errs), errs.String())
	table := "PCHANNEL                                                          WAL     CHECKPOINT       TERM  VERSION\n" +
		long(0) + "  kafka   kafka:123456789  0     2\n" +
		long(1) + "  kafka   kafka:123456790  0     2\n" +
		"short                                                             pulsar  pulsar:1:2:3@4   0     2\n" +
		"3 pchannels\n"
	require.Equal(t, table, piped.String())

	shown, stderr, code := onTerminal(t, 80, args)
	require.Equal(t, ExitOK, code, stderr)
	require.Equal(t, "PCHANNEL\n"+
		"  WAL     CHECKPOINT       TERM  VERSION\n"+
		long(0)+"\n"+
		"  kafka   kafka:123456789  0     2\n"+
		long(1)+"\n"+
		"  kafka   kafka:123456790  0     2\n"+
		"short\n"+
		"  pulsar  pulsar:1:2:3@4   0     2\n"+
		"3 pchannels\n", shown)
	for _, l := range strings.Split(shown, "\n") {
		require.Less(t, runewidth.StringWidth(l), 80, l)
	}

	// The rest beneath a name takes 40 columns: on a terminal of 41 it
	// fits; on one of 40, each record is laid out a field a line.
	shown, stderr, code = onTerminal(t, 41, args)
	require.Equal(t, ExitOK, code, stderr)
	require.True(t, strings.HasPrefix(shown, "PCHANNEL\n  WAL     CHECKPOINT       TERM  VERSION\n"), shown)
	shown, stderr, code = onTerminal(t, 40, args)
	require.Equal(t, ExitOK, code, stderr)
	require.Equal(t, "PCHANNEL    "+long(0)+"\n"+
		"WAL         kafka\n"+
		"CHECKPOINT  kafka:123456789\n"+
		"TERM        0\n"+
		"VERSION     2\n"+
		"\n"+
		"PCHANNEL    "+long(1)+"\n"+
		"WAL         kafka\n"+
		"CHECKPOINT  kafka:123456790\n"+
		"TERM        0\n"+
		"VERSION     2\n"+
		"\n"+
		"PCHANNEL    short\n"+
		"WAL         pulsar\n"+
		"CHECKPOINT  pulsar:1:2:3@4\n"+
		"TERM        0\n"+
		"VERSION     2\n"+
		"3 pchannels\n", shown)

	// The header takes 104 columns, and a terminal one more, since the
	// last is left empty.
	shown, stderr, code = onTerminal(t, 105, args)
	require.Equal(t, ExitOK, code, stderr)
	require.Equal(t, table, shown)
	shown, stderr, code = onTerminal(t, 104, args)
	require.Equal(t, ExitOK, code, stderr)
	require.True(t, strings.HasPrefix(shown, "PCHANNEL\n"), shown)
}

// The salvage's report and the line a dump to a file begins with are
// sentences: on a terminal they wrap at its width, where a path made them
// run past it. Piped, each is one line.
func TestDumpSaysWhatItDoesWithinATerminal(t *testing.T) {
	dir := t.TempDir() // about 60 columns
	path := filepath.Join(dir, "c.db")
	b, err := persistence.OpenBolt(path)
	require.NoError(t, err)
	require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(7)))
	require.NoError(t, b.Close())

	for _, how := range []string{"dump", "salvage"} {
		args := []string{"--catalog=bolt:" + path, "dump"}
		if how == "salvage" {
			args = append(args, "--salvage")
		}
		var piped, errs bytes.Buffer
		require.Equal(t, ExitOK, Main(context.Background(), append(args, filepath.Join(dir, how+"-piped.json")),
			func(string) string { return "" }, nil, &piped, &errs), errs.String())
		shown, stderr, code := onTerminal(t, 80, append(args, filepath.Join(dir, how+"-shown.json")))
		require.Equal(t, ExitOK, code, stderr)
		lines := strings.Split(strings.TrimSuffix(shown, "\n"), "\n")
		require.Greater(t, len(lines), strings.Count(piped.String(), "\n"), "nothing was wrapped: %q", shown)
		for i, l := range lines {
			require.LessOrEqual(t, runewidth.StringWidth(l), 79, "line %d: %q", i, l)
		}
		require.Equal(t, strings.ReplaceAll(piped.String(), "-piped.json", "-shown.json"), strings.ReplaceAll(shown, "\n  ", " "), "the words changed")
	}
}
