package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/wal"
)

// dumpOf is a dump of n kafka checkpoints, laid out as dump lays it out.
func dumpOf(t *testing.T, n int) string {
	d := dumpFile{Format: dumpFormat, Checkpoints: make([]dumpEntry, n)}
	for i := range d.Checkpoints {
		raw, err := wal.Marshal(wal.KafkaID(i))
		require.NoError(t, err)
		d.Checkpoints[i] = dumpEntry{PChannel: fmt.Sprintf("p%d", i), WAL: "kafka", Checkpoint: fmt.Sprintf("kafka:%d", i), ID: raw}
	}
	out, err := json.MarshalIndent(d, "", "  ")
	require.NoError(t, err)
	return string(out)
}

// endsAfter is a context that ends as it is asked for the err+1th time,
// as a --timeout or a Ctrl-C part way through a parse would end it.
type endsAfter struct {
	context.Context
	cancel context.CancelFunc
	asked  atomic.Int64
	err    int64
}

func newEndsAfter(t *testing.T, err int64) *endsAfter {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return &endsAfter{Context: ctx, cancel: cancel, err: err}
}

func (c *endsAfter) Err() error {
	if c.asked.Add(1) > c.err {
		c.cancel()
	}
	return c.Context.Err()
}

// A restore's parse ends with its context (--timeout, Ctrl-C), whatever
// the size of the dump, and nothing comes of it. It went on to the end,
// which for a dump of a million checkpoints took seconds.
func TestReadDumpEndsWithItsContext(t *testing.T) {
	doc := dumpOf(t, 5*ctxEvery)
	entries, ids, err := readDump(context.Background(), strings.NewReader(doc), "-")
	require.NoError(t, err)
	require.Len(t, entries, 5*ctxEvery)
	require.Len(t, ids, 5*ctxEvery)

	entries, ids, err = readDump(newEndsAfter(t, 2), strings.NewReader(doc), "-")
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "nothing written")
	require.Nil(t, entries)
	require.Nil(t, ids)

	// Where it ends: the parse looks at its context every ctxEvery
	// checkpoints; the checks after it, too.
	ended, end := context.WithCancel(context.Background())
	end()
	for asked, want := range map[int64]string{
		0: "parsing standard input: context canceled after 0 checkpoints; nothing written",
		2: fmt.Sprintf("parsing standard input: context canceled after %d checkpoints; nothing written", 2*ctxEvery),
		5: "checking standard input: context canceled after 0 checkpoints; nothing written",
		7: fmt.Sprintf("checking standard input: context canceled after %d checkpoints; nothing written", 2*ctxEvery),
	} {
		ctx := context.Context(newEndsAfter(t, asked))
		if asked == 0 {
			ctx = ended
		}
		entries, ids, err := checkDump(ctx, []byte(doc), "standard input")
		require.ErrorIs(t, err, context.Canceled)
		require.EqualError(t, err, want)
		require.Nil(t, entries)
		require.Nil(t, ids)
	}
}

// Each checkpoint decoded on its own, the checks of the whole document
// hold: keys in any order, a key given twice in any object, nothing after
// the dump's end, and the format checked before any checkpoint is.
func TestReadDumpChecksStreamed(t *testing.T) {
	const a = `{"pchannel":"a","wal":"kafka","checkpoint":"kafka:1"}`
	const b = `{"pchannel":"b","wal":"kafka","checkpoint":"kafka:2","id":"AAAAAAAAAAI="}`
	read := func(doc string) ([]dumpEntry, error) {
		entries, _, err := readDump(context.Background(), strings.NewReader(doc), "-")
		return entries, err
	}

	for _, doc := range []string{
		`{"checkpoints":[` + a + `,` + b + `],"format":"lowwater-checkpoints/1"}`,
		`{"source":"x","Checkpoints":[` + a + ` ,` + "\n" + b + `],"FORMAT":"lowwater-checkpoints/1"}` + "\n\n",
		` { "checkpoints" : [ ` + a + ` , ` + b + ` ] , "format" : "lowwater-checkpoints/1" } `,
	} {
		entries, err := read(doc)
		require.NoError(t, err, doc)
		require.Equal(t, []dumpEntry{
			{PChannel: "a", WAL: "kafka", Checkpoint: "kafka:1"},
			{PChannel: "b", WAL: "kafka", Checkpoint: "kafka:2", ID: []byte{0, 0, 0, 0, 0, 0, 0, 2}},
		}, entries, doc)
	}

	for doc, want := range map[string]string{
		// The format, given last, is checked before the checkpoints.
		`{"checkpoints":[{"pchannel":"a","wal":"kafka","checkpoint":"kafka:x"}],"format":"other/2"}`: `standard input: format "other/2", want "lowwater-checkpoints/1"`,
		`{"checkpoints":[` + a + `]}`: `standard input: format "", want "lowwater-checkpoints/1"`,
		// A key given twice, as encoding/json matches keys, in a
		// checkpoint, the first or a later one, and in the whole.
		`{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"a","wal":"kafka","checkpoint":"kafka:1","PChannel":"b"}]}`:                                  `standard input: checkpoint 0: key "PChannel" given twice in one object`,
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,{"pchannel":"b","\u0070channel":"c","wal":"kafka","checkpoint":"kafka:2"}]}`:                   `standard input: checkpoint 1: key "pchannel" given twice in one object`,
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,` + b + `,{"pchannel":"c","wal":"kafka","checkpoint":"kafka:1","chec\u212apoint":"kafka:9"}]}`: "standard input: checkpoint 2: key \"chec\u212apoint\" given twice in one object",
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `],"ſource":"x","Source":"y"}`:                                                                   `standard input: key "Source" given twice in one object`,
		`{"checkpoints":[` + a + `],"format":"lowwater-checkpoints/1","checkpoints":[` + b + `]}`:                                                                   `standard input: key "checkpoints" given twice in one object`,
		`{"format":"other/2","checkpoints":[` + a + `],"Format":"lowwater-checkpoints/1"}`:                                                                          `standard input: key "Format" given twice in one object`,
		// Nothing after the end.
		`{"checkpoints":[` + a + `],"format":"lowwater-checkpoints/1"}{}`: "standard input: more follows the dump's end: two dumps in one file, or a damaged one",
		`{"checkpoints":[` + a + `],"format":"lowwater-checkpoints/1"}]`:  "standard input: more follows the dump's end: two dumps in one file, or a damaged one",
		// Unknown keys, anywhere.
		`{"format":"lowwater-checkpoints/1","checkpoints":[],"sources":"x"}`:                                                        `standard input: not a dump file: json: unknown field "sources"`,
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,{"pchannel":"b","wal":"kafka","checkpoint":"kafka:2","t":1}]}`: `standard input: not a dump file: checkpoint 1: json: unknown field "t"`,
		// Not a dump's shape.
		`[]`: "standard input: not a dump file: not a JSON object (it begins with '[')",
		`{"format":"lowwater-checkpoints/1","checkpoints":{}}`:                    "standard input: not a dump file: checkpoints: not a JSON array",
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,"b"]}`:       "standard input: not a dump file: checkpoint 1: json: cannot unmarshal string into Go value of type cli.dumpEntry",
		`{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,` + a + `]}`: `standard input: checkpoint 1 ("a"): pchannel given twice`,
	} {
		entries, err := read(doc)
		require.EqualError(t, err, want, doc)
		require.Nil(t, entries)
		var ue *usageError
		require.ErrorAs(t, err, &ue)
		require.True(t, ue.inFile)
	}

	// A name that is not UTF-8 would be read as another, U+FFFD in its
	// place: refused, whether its bytes or its escapes say so.
	notUTF8 := "standard input: checkpoint 1: a string that is not UTF-8 (a raw byte, or an escaped half of a surrogate pair), " +
		"which would be read as U+FFFD: a name so read is another name"
	for _, name := range []string{"a\xffb", `\ud800`, `x\ud800y`, `\udc00`, `\ud800\u0041`, `\ud83d`} {
		doc := `{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,{"pchannel":"` + name + `","wal":"kafka","checkpoint":"kafka:1"}]}`
		entries, err := read(doc)
		require.EqualError(t, err, notUTF8, doc)
		require.Nil(t, entries)
	}
	// A pair of halves, an escaped backslash before a u, and U+FFFD
	// itself are names as written.
	for text, name := range map[string]string{`\ud83d\ude00`: "\U0001F600", `a\\ud800`: `a\ud800`, "\ufffd": "\ufffd", `\uFFFD`: "\ufffd"} {
		doc := `{"format":"lowwater-checkpoints/1","checkpoints":[{"pchannel":"` + text + `","wal":"kafka","checkpoint":"kafka:1"}]}`
		entries, err := read(doc)
		require.NoError(t, err, doc)
		require.Equal(t, name, entries[0].PChannel, doc)
	}

	// A dump cut anywhere is no dump.
	whole := `{"format":"lowwater-checkpoints/1","checkpoints":[` + a + `,` + b + `]}`
	for _, cut := range []string{"", whole[:1], whole[:len(whole)-2], whole[:len(whole)-1]} {
		_, err := read(cut)
		require.EqualError(t, err, "standard input: not a dump file: it ends before the dump does: empty, or cut short", cut)
	}
	for n := range len(whole) {
		entries, err := read(whole[:n])
		require.ErrorContains(t, err, "standard input: not a dump file: ", whole[:n])
		require.Nil(t, entries)
	}
}

// A file larger than a dump can be is refused by its size, unread: a
// sparse file of a few GiB took seconds and a GiB of memory to refuse.
func TestReadDumpRefusesABigFileUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(4*maxDump))
	require.NoError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	entries, _, err := readDump(context.Background(), nil, path)
	runtime.ReadMemStats(&after)
	require.EqualError(t, err, path+": larger than a dump can be (1024 MiB)")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "read before it was refused")
	require.Nil(t, entries)
	var ue *usageError
	require.ErrorAs(t, err, &ue)
	require.True(t, ue.inFile)
}

// encodeAll lays d out as dump did before it encoded one checkpoint at a
// time: the whole document through encoding/json, then escaped.
func encodeAll(t *testing.T, d dumpFile) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(d))
	return string(escapeJSON(buf.Bytes()))
}

func encodeEach(d dumpFile, limit int) ([]byte, error) {
	var out chunks
	if err := writeDump(context.Background(), &out, d.Source, d.Checkpoints, limit); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, err := out.WriteTo(&buf)
	return buf.Bytes(), err
}

// A dump encoded one checkpoint at a time is the same bytes as the whole
// document through encoding/json: empty, one, several, with a source or
// none, with text to escape (HTML, C1 controls, a reversing mark, what is
// not UTF-8) in every string.
func TestDumpEncodedByCheckpointIsTheWholeDocument(t *testing.T) {
	odd := "<a&b>\u009b\u202e\xff\t\"q\""
	one := dumpEntry{PChannel: "p", WAL: "kafka", Checkpoint: "kafka:1", ID: []byte{0, 1, 2}, Term: 3}
	for _, d := range []dumpFile{
		{Format: dumpFormat, Checkpoints: []dumpEntry{}},
		{Format: dumpFormat, Source: "bolt:/tmp/c.db", Checkpoints: []dumpEntry{}},
		{Format: dumpFormat, Source: "etcd://" + odd, Checkpoints: []dumpEntry{one}},
		{Format: dumpFormat, Checkpoints: []dumpEntry{one, {PChannel: odd, WAL: "kafka", Checkpoint: odd}, {PChannel: "r", WAL: "rmq", Checkpoint: "rmq:" + odd, ID: []byte(odd)}}},
	} {
		got, err := encodeEach(d, maxDump)
		require.NoError(t, err)
		require.Equal(t, encodeAll(t, d), string(got))
		back, err := parseDump(context.Background(), got, "-")
		require.NoError(t, err)
		require.Len(t, back.Checkpoints, len(d.Checkpoints))
	}
}

// A dump longer than restore reads is refused, not written: restore
// would refuse it whole. Nothing is laid out past the limit.
func TestDumpLongerThanRestoreReadsIsRefused(t *testing.T) {
	d := dumpFile{Format: dumpFormat, Checkpoints: []dumpEntry{{PChannel: "p", WAL: "kafka", Checkpoint: "kafka:1"}, {PChannel: "q", WAL: "kafka", Checkpoint: "kafka:2"}}}
	out, err := encodeEach(d, maxDump)
	require.NoError(t, err)
	_, err = encodeEach(d, len(out))
	require.NoError(t, err, "exactly the limit")
	_, err = encodeEach(d, len(out)-1)
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitRefused, ee.code)
	require.EqualError(t, err, "the dump would be longer than the 0 MiB restore reads; nothing written: copy the catalog itself instead")

	empty, err := encodeEach(dumpFile{Format: dumpFormat}, maxDump)
	require.NoError(t, err)
	_, err = encodeEach(dumpFile{Format: dumpFormat}, len(empty)-1)
	require.ErrorAs(t, err, &ee, "an empty dump over the limit")

	// The writer stops at the limit: nothing past it is laid out.
	var w countingWriter
	err = writeDump(context.Background(), &w, "", []dumpEntry{{PChannel: strings.Repeat("p", 300), WAL: "kafka", Checkpoint: "kafka:1"},
		{PChannel: "q", WAL: "kafka", Checkpoint: "kafka:1"}}, 200)
	require.ErrorAs(t, err, &ee)
	require.LessOrEqual(t, w.n, 200, "written past the limit")
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// A dump to stdout is laid out in chunks, none copied to grow: the bytes
// come out as written, across chunk boundaries.
func TestChunksKeepTheBytesInOrder(t *testing.T) {
	var c chunks
	var want bytes.Buffer
	for i := range 3 * chunkSize / 1000 {
		p := bytes.Repeat([]byte{byte(i)}, 1+i%1999)
		n, err := c.Write(p)
		require.NoError(t, err)
		require.Equal(t, len(p), n)
		want.Write(p)
	}
	for _, b := range c {
		require.LessOrEqual(t, len(b), chunkSize)
		require.Equal(t, chunkSize, cap(b), "a chunk never grows")
	}
	var got bytes.Buffer
	n, err := c.WriteTo(&got)
	require.NoError(t, err)
	require.Equal(t, int64(want.Len()), n)
	require.Equal(t, want.Bytes(), got.Bytes())
}

// A dump to a file is written as it is laid out; refused part way, or
// ended by its context, it leaves no file, and says why as it is.
func TestADumpCutShortLeavesNoFile(t *testing.T) {
	t.Run("partial=unnamed-on-linux", func(t *testing.T) {
		testADumpCutShortLeavesNoFile(t, createPartial, runtime.GOOS == "linux")
	})
	t.Run("partial=named", func(t *testing.T) { testADumpCutShortLeavesNoFile(t, createNamedPartial, false) })
}

// testADumpCutShortLeavesNoFile writes dumps into partial files made by
// create, which have no name while written if unnamed.
func testADumpCutShortLeavesNoFile(t *testing.T, create func(path string) (*partial, error), unnamed bool) {
	writeNew := func(path string, write func(io.Writer) error) error { return writeVia(create, path, write) }
	entries := []dumpEntry{{PChannel: "p", WAL: "kafka", Checkpoint: "kafka:1"}, {PChannel: "q", WAL: "kafka", Checkpoint: "kafka:2"}}
	var ee *exitError
	path := filepath.Join(t.TempDir(), "d.json")
	err := writeNew(path, func(w io.Writer) error { return writeDump(context.Background(), w, "", entries, 150) })
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitRefused, ee.code)
	require.NotContains(t, err.Error(), "writing ", "a refusal, not a failed write")
	require.NoFileExists(t, path)
	left, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Empty(t, left, "nothing is left of a dump refused part way")

	ended, end := context.WithCancel(context.Background())
	end()
	err = writeNew(path, func(w io.Writer) error { return writeDump(ended, w, "", entries, maxDump) })
	require.ErrorIs(t, err, context.Canceled)
	require.EqualError(t, err, "dumping 2 checkpoints: context canceled; nothing written")
	require.NoFileExists(t, path)

	// While it is written, the dump is not under its name: killed then,
	// it leaves a file of its own, which blocks nothing, or, on Linux,
	// nothing at all.
	require.NoError(t, writeNew(path, func(w io.Writer) error {
		require.NoFileExists(t, path, "a dump not yet whole is under its name")
		left, err := os.ReadDir(filepath.Dir(path))
		require.NoError(t, err)
		if unnamed {
			require.Empty(t, left, "a dump not yet whole has a name")
		} else {
			require.Len(t, left, 1, "the dump not yet whole: %v", left)
		}
		return writeDump(context.Background(), w, "", entries, maxDump)
	}))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := encodeEach(dumpFile{Format: dumpFormat, Checkpoints: entries}, maxDump)
	require.NoError(t, err)
	require.Equal(t, string(want), string(data))
	left, err = os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, left, 1, "what was written under another name is gone: %v", left)

	// A file made under the name meanwhile is refused, and kept.
	other := filepath.Join(t.TempDir(), "d.json")
	err = writeNew(other, func(w io.Writer) error {
		require.NoError(t, os.WriteFile(other, []byte("theirs"), 0o600))
		return writeDump(context.Background(), w, "", entries, maxDump)
	})
	require.ErrorAs(t, err, &ee)
	require.Equal(t, ExitRefused, ee.code)
	data, err = os.ReadFile(other)
	require.NoError(t, err)
	require.Equal(t, "theirs", string(data))
	left, err = os.ReadDir(filepath.Dir(other))
	require.NoError(t, err)
	require.Len(t, left, 1, "the partial dump is gone: %v", left)
}

// A partial file that cannot be made is named in the error as the file
// it would have been: a read-only directory gave the name made up for a
// file that never was (".lowwater-dump-1117778479").
func TestAPartialFileNotMadeIsNamedAsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "d.json")
	for name, create := range map[string]func(string) (*partial, error){"unnamed": createPartial, "named": createNamedPartial} {
		_, err := create(path)
		var pe *os.PathError
		require.ErrorAs(t, err, &pe, name)
		require.Equal(t, path, pe.Path, name)
		require.ErrorIs(t, err, os.ErrNotExist, name)
	}
}

// The file a dump is written into, with no name yet, is named in errors
// (a full disk's) as the file it becomes: "(a dump not yet named)" named
// a file nobody could find.
func TestAnUnnamedDumpIsNamedInErrorsAsItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	f, err := createPartial(path)
	require.NoError(t, err)
	defer f.remove()
	defer f.Close()
	if runtime.GOOS == "linux" {
		require.Equal(t, path, f.Name())
	}
	require.NoError(t, f.Close())
	_, err = f.Write([]byte("x"))
	var pe *os.PathError
	require.ErrorAs(t, err, &pe)
	if runtime.GOOS == "linux" {
		require.Equal(t, path, pe.Path)
	}
}
