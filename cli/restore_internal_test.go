package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// cutAtSave ends the command (a Ctrl-C) as its save number at begins.
// The cut and the numbering are one step: a save numbered after at
// begins after the cut. Apart, a save could take its number after the
// cut's and store before it, as if it had begun first.
type cutAtSave struct {
	*persistence.Memory
	at    int64
	mu    sync.Mutex
	saves atomic.Int64
	cut   func()
}

func (c *cutAtSave) Save(ctx context.Context, pchannel string, id wal.MessageID) error {
	c.mu.Lock()
	if c.saves.Add(1) == c.at {
		c.cut()
	}
	c.mu.Unlock()
	return c.Memory.Save(ctx, pchannel, id)
}

// A restore cut short part way, its writes under way together and ending
// in any order, counts as written only what is stored, and starts no
// write once it knows of the cut.
func TestRestoreCutPartWayCountsWhatItWrote(t *testing.T) {
	const n = 5000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cat := &cutAtSave{Memory: persistence.NewMemory(), at: 300, cut: cancel}
	s := newStore(ctx, catalogurl.URL{}, io.Discard)
	defer s.end()
	s.cat = cat
	entries, acts, ids := make([]dumpEntry, n), make([]action, n), make([]wal.MessageID, n)
	for i := range n {
		entries[i], acts[i], ids[i] = dumpEntry{PChannel: fmt.Sprintf("p%05d", i)}, create, wal.KafkaID(i+1)
	}

	done, errs := s.writeAll(ctx, entries, nil, acts, ids, false)
	require.NotEmpty(t, errs)
	require.ErrorIs(t, errs[0], context.Canceled)
	stored, err := cat.LoadAll(context.Background())
	require.NoError(t, err)
	written := 0
	for i, d := range done {
		if d {
			written++
			require.Equal(t, wal.KafkaID(i+1), stored[entries[i].PChannel])
		}
	}
	require.Len(t, stored, written)
	require.Less(t, written, int(cat.at))
	require.LessOrEqual(t, cat.saves.Load(), cat.at+restoreWriters, "writes started after the cut was known")
}

// Every failure that says something else is reported, the first with the
// count: several writes under way may each leave something to say.
func TestRestoreReportsEachDistinctFailure(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupt signal received"))
	down := errors.New("disk full")
	var stderr bytes.Buffer
	err := reportFailures(ctx, &stderr, []error{
		context.Canceled,
		fmt.Errorf("writing p1: %w; it may or may not have been written: 'get p1' shows which", down),
		context.Canceled,
		down,
		fmt.Errorf("writing p2: %w; it may or may not have been written: 'get p2' shows which", down),
		down,
	}, 7, 0, 10)
	var re *reportedError
	require.ErrorAs(t, err, &re)
	require.EqualError(t, err, "after 7 of 10 checkpoints written: interrupt signal received; "+
		"those written are listed on standard output (2 more, under way when it was cut, may have been written too), "+
		"and a rerun writes the rest")
	require.Equal(t, "lowwater: after 7 of 10 checkpoints written: interrupt signal received; "+
		"those written are listed on standard output (2 more, under way when it was cut, may have been written too), "+
		"and a rerun writes the rest\n"+
		"lowwater: writing p1: disk full; it may or may not have been written: 'get p1' shows which\n"+
		"lowwater: disk full\n"+
		"lowwater: writing p2: disk full; it may or may not have been written: 'get p2' shows which\n",
		stderr.String())
}

// A write on etcd cut short says what it may have left, and how to find
// out: the cut's cause does not take the place of that.
func TestRestoreCutKeepsWhatAWriteLeft(t *testing.T) {
	ctx, cancel := context.WithTimeoutCause(context.Background(), 0, fmt.Errorf("%w: --timeout 1s passed", context.DeadlineExceeded))
	defer cancel()
	<-ctx.Done()
	left := &outcomeError{fmt.Errorf("writing p1: %w; it may or may not have been written: 'get p1' shows which",
		context.DeadlineExceeded)}
	var stderr bytes.Buffer
	err := reportFailures(ctx, &stderr, []error{context.DeadlineExceeded, left}, 3, 5, 10)
	require.EqualError(t, err, "after 3 of 10 checkpoints written, 5 stored already as the dump has them: context deadline exceeded: --timeout 1s passed; "+
		"those written are listed on standard output (1 more, under way when it was cut, may have been written too), "+
		"and a rerun writes the rest")
	require.Equal(t, "lowwater: after 3 of 10 checkpoints written, 5 stored already as the dump has them: context deadline exceeded: --timeout 1s passed; "+
		"those written are listed on standard output (1 more, under way when it was cut, may have been written too), "+
		"and a rerun writes the rest\n"+
		"lowwater: writing p1: context deadline exceeded; it may or may not have been written: 'get p1' shows which\n",
		stderr.String())
}

// endless is a stream of one byte, read in pieces, that fails the test
// once more than limit bytes are taken from it.
type endless struct {
	b     byte
	read  int
	limit int
	t     *testing.T
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read > e.limit {
		e.t.Errorf("%d bytes read of a stream no dump begins like", e.read)
		return 0, errors.New("read too far")
	}
	p = p[:min(len(p), 512)]
	for i := range p {
		p[i] = e.b
	}
	e.read += len(p)
	return len(p), nil
}

// A stream that cannot be a dump is refused from its first bytes: one of
// zeros (restore - < /dev/zero, or the wrong end of a pipe) was read up to
// the dump's bound, a GiB, in memory before the parse refused it.
func TestRestoreRefusesWhatCannotBeADumpUnread(t *testing.T) {
	for _, c := range []struct {
		b    byte
		said string
	}{
		{0, `it begins with '\x00'`},
		{'[', `it begins with '['`},
		{0xfd, "it begins with byte 0xfd"},
		{'\n', "its first 4096 bytes are white space"}, // yes '' | restore -
	} {
		stream := &endless{b: c.b, limit: 1 << 20, t: t}
		_, _, err := readDump(context.Background(), stream, "-")
		var ue *usageError
		require.ErrorAs(t, err, &ue)
		require.True(t, ue.inFile)
		require.EqualError(t, err, "standard input: not a dump file: not a JSON object ("+c.said+")")
		require.LessOrEqual(t, stream.read, sniffSize)
	}
	// A dump saved as UTF-16 or UTF-32, with its byte-order mark or
	// without, white space first or not.
	for in, wide := range map[string]string{
		"\xff\xfe{\x00\"\x00":           "UTF-16",
		"\xfe\xff\x00{\x00\"":           "UTF-16",
		"\xff\xfe\x00\x00{\x00\x00\x00": "UTF-32",
		"{\x00\"\x00":                   "UTF-16 or UTF-32",
		"\x00{\x00\"":                   "UTF-16 or UTF-32",
		" \x00\n\x00{\x00\"\x00":        "UTF-16 or UTF-32",
		"\x00\n\x00\n\x00{":             "UTF-16 or UTF-32",
	} {
		_, _, err := readDump(context.Background(), bytes.NewReader([]byte(in)), "-")
		require.EqualError(t, err, "standard input: not a dump file: not a JSON object ("+wide+" text: save it as UTF-8)", "%q", in)
	}
}

// A dump an editor saved with a byte-order mark, as JSON's RFC lets a
// reader take it, and one after white space, parse as they are.
func TestRestoreTakesAByteOrderMark(t *testing.T) {
	const dump = `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"p","wal":"kafka","checkpoint":"kafka:9"}]}`
	for _, in := range []string{"\uFEFF" + dump, "\n \t\r\n" + dump} {
		entries, ids, err := readDump(context.Background(), bytes.NewReader([]byte(in)), "-")
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.Equal(t, []wal.MessageID{wal.KafkaID(9)}, ids)
	}
}

// failingSaves fails every write, as a full disk does.
type failingSaves struct{ persistence.Inspector }

func (failingSaves) Save(context.Context, string, wal.MessageID) error {
	return errors.New("disk full")
}

// A restore through a symbolic link to a file not made yet makes the
// catalog at the link's target. One that wrote nothing removes the file
// it made, which is the target, and leaves the operator's link: it used
// to remove the link and leave the file, and before that the file was an
// empty store that every later restore refused.
func TestRestoreThroughALinkToNothingYet(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data", "c.db")
	require.NoError(t, os.Mkdir(filepath.Dir(target), 0o700))
	link := filepath.Join(dir, "link.db")
	require.NoError(t, os.Symlink(filepath.Join("data", "c.db"), link))
	dump := filepath.Join(dir, "dump.json")
	require.NoError(t, os.WriteFile(dump, []byte(`{"format":"lowwater-checkpoints/1",`+
		`"checkpoints":[{"pchannel":"p0","wal":"kafka","checkpoint":"kafka:1200"}]}`), 0o600))
	isLink := func() bool {
		info, err := os.Lstat(link)
		return err == nil && info.Mode()&os.ModeSymlink != 0
	}

	hookOpened(t, func(i persistence.Inspector) persistence.Inspector { return failingSaves{i} })
	_, errs, code := runMain(context.Background(), "--catalog=bolt:"+link, "restore", dump)
	require.Equal(t, ExitFailed, code, errs)
	require.Contains(t, errs, "disk full")
	require.NoFileExists(t, target, "a restore that wrote nothing left the file it made")
	require.True(t, isLink(), "the operator's link was removed")

	openedHook = nil
	out, errs, code := runMain(context.Background(), "--catalog=bolt:"+link, "restore", dump)
	require.Equal(t, ExitOK, code, errs)
	require.Equal(t, "p0: created at kafka:1200\nrestored 1 checkpoint into bbolt file "+link+" (1 written)\n", out)
	require.True(t, isLink())
	out, errs, code = runMain(context.Background(), "--catalog=bolt:"+target, "get", "p0")
	require.Equal(t, ExitOK, code, errs)
	require.Contains(t, out, "kafka:1200")
}
