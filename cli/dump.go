package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// dumpFormat names the layout of a dump file, so that a later layout is
// recognised rather than misread.
const dumpFormat = "lowwater-checkpoints/1"

// dumpFile is a portable copy of a catalog: it moves checkpoints between
// bbolt and etcd, and is readable and writable by hand.
type dumpFile struct {
	Format string `json:"format"`
	// Source describes the catalog dumped, for humans.
	Source      string      `json:"source,omitempty"`
	Checkpoints []dumpEntry `json:"checkpoints"`
}

// dumpEntry is one checkpoint. Checkpoint is the ID's text; ID its bytes
// (base64), the exact value, which restore checks against the text. A hand
// written entry may leave ID out, and WAL, which its text then names.
// Term is what the source held; restore does not write it (terms belong
// to one etcd cluster's history).
type dumpEntry struct {
	PChannel   string   `json:"pchannel"`
	WAL        wal.Name `json:"wal"`
	Checkpoint string   `json:"checkpoint"`
	ID         []byte   `json:"id,omitempty"`
	Term       uint64   `json:"term,omitempty"`
}

func dump(ctx context.Context, e *env, args []string) error {
	if e.opts.salvage {
		if e.opts.force {
			return usagef("dump --salvage reads what a damaged file holds, refusing nothing: --force is for a dump without it")
		}
		return salvageDump(ctx, e, args)
	}
	s, _, entries, err := e.read(ctx)
	if err != nil {
		return err
	}
	defer s.close()
	if err := s.warnStray(ctx); err != nil {
		return err
	}
	var good []dumpEntry
	corrupt, unfit := 0, 0
	for i, en := range entries {
		if i%ctxEvery == 0 && ctx.Err() != nil {
			// A million records take seconds to check.
			return lateDump(len(entries), ctx.Err())
		}
		if en.Err != nil {
			corrupt++
			fmt.Fprintf(e.stderr, "%s  %s: %s\n", unreadable(en), typed(en.PChannel), cause(en))
			continue
		}
		// entries has refused an ID that wal.Marshal refuses (one stored
		// by an older build that does not read back or compare, which
		// restore would refuse); a Marshal that fails only now, on a
		// second call, is reported the same way.
		raw, err := wal.Marshal(en.Checkpoint)
		if err != nil {
			corrupt++
			fmt.Fprintf(e.stderr, "CORRUPT  %s: %s\n", typed(en.PChannel), shownText(err.Error()))
			continue
		}
		text := wal.Text(en.Checkpoint)
		if err := readsBack(en.WAL, text, en.Checkpoint); err != nil {
			unfit++
			fmt.Fprintf(e.stderr, "UNFIT  %s: %s\n", typed(en.PChannel), err)
			continue
		}
		if wal.CheckPosition(en.Checkpoint) != nil {
			// Dumped as stored, as a dump is whole; restore refuses it, as
			// set does, and says so only then.
			fmt.Fprintf(e.stderr, "warning: %s: %s is not an offset; no node recovers from it, "+
				"and restore writes it only with --force (see verify)\n", typed(en.PChannel), shownID(en.Checkpoint))
		}
		good = append(good, dumpEntry{PChannel: en.PChannel, WAL: en.WAL, Checkpoint: text, ID: raw, Term: en.Term})
	}
	if corrupt > 0 {
		return &exitError{code: ExitCorrupt, err: fmt.Errorf("%s unreadable, nothing dumped: "+
			"a dump must be whole; repair them first (see verify)", count(corrupt, "record"))}
	}
	if unfit > 0 {
		return &exitError{code: ExitRefused, err: fmt.Errorf("%s whose text restore could not read back, nothing dumped: "+
			"their WAL's String and Parse disagree; copy the catalog itself instead", count(unfit, "checkpoint"))}
	}
	return emitDump(ctx, e, args, s.url.String(), good)
}

// emitDump writes the dump of entries, from source, to the file args
// name, or to stdout.
func emitDump(ctx context.Context, e *env, args []string, source string, good []dumpEntry) error {
	if len(args) == 0 || args[0] == "-" {
		// Laid out whole before the first byte goes: a dump cut short
		// would be no dump.
		var out chunks
		if err := writeDump(ctx, &out, source, good, maxDump); err != nil {
			return err
		}
		_, err := out.WriteTo(e.stdout)
		return err
	}
	// Before it says it dumps.
	if err := checkDumpTarget(args); err != nil {
		return err
	}
	// Said before the file is made: should the output be lost (a full
	// disk, a closed pipe), no file is left to block the same command.
	if _, err := fmt.Fprintf(e.prose, "dumping %s from %s to %s\n", count(len(good), "checkpoint"), source, shorten.Cut(args[0], 1<<10, shownText)); err != nil {
		return fmt.Errorf("writing the output: %w; no file made", err)
	}
	return writeNew(args[0], func(w io.Writer) error { return writeDump(ctx, w, source, good, maxDump) })
}

// checkDumpTarget refuses a dump to the file args name (none: stdout)
// when it cannot be made there: it exists, or its directory does not.
func checkDumpTarget(args []string) error {
	if len(args) == 0 || args[0] == "-" {
		return nil
	}
	if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
		return refused("%s is a directory: name a file in it, or - for standard output", args[0])
	}
	if _, err := os.Lstat(args[0]); err == nil {
		return existsRefusal(args[0])
	}
	if dir := filepath.Dir(args[0]); dir != "." {
		fi, err := os.Stat(dir)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		if err != nil {
			return fmt.Errorf("dumping to %s: %w; nothing written", args[0], err)
		}
	}
	return nil
}

// existsRefusal refuses a dump to path, which exists.
func existsRefusal(path string) error {
	return refused("%s exists, and a dump never writes over a file: name another, or - for standard output", path)
}

// writeNew writes to a file it creates, durably, what write writes to
// it. A dump never overwrites: it may be the only copy of another one.
// It is written into a file with no name of its own, or one only its
// own, in the same directory (createPartial), then given path whole: a
// dump killed part way (SIGKILL, SIGHUP, the OOM killer) left a fragment
// under path, which blocked the same command. A failed write (a full
// disk), a dump refused or ended by its context part way, remove what
// was written.
func writeNew(path string, write func(io.Writer) error) error {
	return writeVia(createPartial, path, write)
}

// writeVia is writeNew with the partial file made by create.
func writeVia(create func(path string) (*partial, error), path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer f.remove() // once named, or not, the partial name goes
	buf := bufio.NewWriterSize(f, chunkSize)
	out := &firstError{w: buf}
	failed := write(out) // the file's failure, or the dump's own
	if out.err == nil && failed == nil {
		if out.err = buf.Flush(); out.err == nil {
			out.err = f.Sync()
		}
	}
	if out.err == nil && failed == nil {
		out.err = f.name(path) // before Close: an unnamed file is named through its descriptor
	}
	// Synced already, or failed: a close that fails loses nothing more
	// (where writes fail only at close, as on NFS, Sync reports them).
	_ = f.Close()
	if errors.Is(out.err, os.ErrExist) {
		return existsRefusal(path) // made meanwhile
	}
	if out.err != nil {
		return fmt.Errorf("writing %s: %w (nothing kept)", path, out.err)
	}
	if failed == nil {
		syncDir(dir)
	}
	return failed
}

// partial is the file a dump is written into before it is whole.
type partial struct {
	*os.File
	// name gives the file the name to, which must not exist.
	name func(to string) error
	// remove removes the name the file had while it was written, if any.
	remove func()
}

// createNamedPartial makes the file a dump to path is written into, in
// its directory, under a name of its own (.lowwater-dump-*), which blocks
// nothing: a dump killed part way leaves it behind.
func createNamedPartial(path string) (*partial, error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".lowwater-dump-*")
	var pe *os.PathError
	if errors.As(err, &pe) {
		// Named as the file it would have been: the name made up for it
		// was never made.
		return nil, &os.PathError{Op: "create", Path: path, Err: pe.Err}
	}
	if err != nil {
		return nil, err
	}
	return &partial{
		File:   f,
		name:   func(to string) error { return linkNew(f.Name(), to) },
		remove: func() { _ = os.Remove(f.Name()) },
	}, nil
}

// linkNew gives the file at from the name to, which must not exist. A
// link fails if it does, whoever made it meanwhile; a file system with
// no links (FAT, some FUSE) gets a rename, once to is seen not to exist.
func linkNew(from, to string) error {
	err := os.Link(from, to)
	if err == nil || errors.Is(err, os.ErrExist) {
		return err
	}
	switch _, lerr := os.Lstat(to); {
	case lerr == nil:
		return os.ErrExist
	case !errors.Is(lerr, os.ErrNotExist):
		return err // not known to be free: the link's own failure
	}
	return os.Rename(from, to)
}

// syncDir makes a new name in dir durable, where the file system allows.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// firstError keeps the first error of w's writes.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if f.err == nil {
		f.err = err
	}
	return n, err
}

// readDump reads and checks a whole dump file before anything is written:
// a bad file changes nothing. The file "-" is stdin.
func readDump(ctx context.Context, stdin io.Reader, path string) ([]dumpEntry, []wal.MessageID, error) {
	data, err := readWhole(ctx, stdin, path)
	if path == "-" {
		path = "standard input" // for the messages below
	}
	if errors.Is(err, errTooBig) || len(data) > maxDump {
		return nil, nil, badFile("%s: larger than a dump can be (%d MiB)", path, maxDump>>20)
	}
	var other *notADump
	if errors.As(err, &other) {
		return nil, nil, badFile("%s: not a dump file: not a JSON object (%s)", path, other.why)
	}
	if err != nil {
		return nil, nil, err
	}
	// Checked between checkpoints, the parse ends soon after ctx; but one
	// value is decoded whole, in seconds should it fill the file (no dump
	// lowwater writes has such a value). It is then left to end on its
	// own, as readWhole leaves a read.
	type result struct {
		entries []dumpEntry
		ids     []wal.MessageID
		err     error
	}
	done := make(chan result, 1)
	go func() {
		entries, ids, err := checkDump(ctx, data, path)
		done <- result{entries, ids, err}
	}()
	select {
	case r := <-done:
		return r.entries, r.ids, r.err
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("parsing %s: %w; nothing written", path, ctx.Err())
	}
}

// checkDump parses data, the dump named path, and checks each checkpoint
// as set checks its arguments.
func checkDump(ctx context.Context, data []byte, path string) ([]dumpEntry, []wal.MessageID, error) {
	d, err := parseDump(ctx, data, path)
	if err != nil {
		return nil, nil, err
	}
	if d.Format != dumpFormat {
		return nil, nil, badFile("%s: format %s, want %q", path, shorten.QuotedText(d.Format), dumpFormat)
	}
	ids := make([]wal.MessageID, len(d.Checkpoints))
	seen := make(map[string]bool, len(d.Checkpoints))
	for i, de := range d.Checkpoints {
		if i%ctxEvery == 0 && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("checking %s: %w after %s; nothing written", path, ctx.Err(), count(i, "checkpoint"))
		}
		where := func() string { return fmt.Sprintf("%s: checkpoint %d (%s)", path, i, shortQuoted(de.PChannel)) }
		// Checked here, as on the command line: found at Save, it would
		// stop the restore half way.
		if err := persistence.ValidatePChannel(de.PChannel); err != nil {
			return nil, nil, badFile("%s: %v", where(), err)
		}
		if seen[de.PChannel] {
			return nil, nil, badFile("%s: pchannel given twice", where())
		}
		seen[de.PChannel] = true
		var id wal.MessageID
		var err error
		if de.WAL == "" {
			// A hand-written entry may leave "wal" out: the checkpoint's
			// text names it.
			if id, err = wal.ParseAny(de.Checkpoint); err == nil {
				de.WAL = id.WALName()
				d.Checkpoints[i].WAL = de.WAL
			}
		} else {
			id, err = wal.Parse(de.WAL, de.Checkpoint)
		}
		if err == nil {
			_, err = wal.Marshal(id) // as on the command line (parseID)
		}
		if err != nil {
			return nil, nil, badFile("%s: %s", where(), shownText(err.Error()))
		}
		if de.ID != nil {
			exact, err := wal.Unmarshal(de.WAL, de.ID)
			if err != nil {
				return nil, nil, badFile("%s: id: %s", where(), shownText(err.Error()))
			}
			// The bytes are what is written; the text, which a person
			// reads and may edit, must say the same, down to what orders
			// neither (a Pulsar partition).
			if !sameAs(exact, id, de.Checkpoint) {
				return nil, nil, badFile("%s: id bytes say %s, checkpoint says %s", where(), shownID(exact), shownID(id))
			}
			id = exact
		}
		ids[i] = id
	}
	return d.Checkpoints, ids, nil
}

// writeDump writes the dump of entries to w as encoding/json indents a
// dumpFile, one checkpoint at a time, and refuses it once it is longer
// than limit, which restore reads at most: a dump it would refuse whole.
// It ends with ctx, as a million records take seconds to lay out, and a
// dump finished after ctx ended is refused too. What it wrote before a
// refusal is the caller's to drop. Encoded whole and
// measured after, a catalog of large IDs took gigabytes of memory to be
// refused; a dump to a file now holds none of it, and one to stdout no
// more than itself (chunks).
//
// The output is escaped for stdout, a terminal perhaps (escapeJSON); a
// file gets the same bytes, as it may well be shown on one too.
func writeDump(ctx context.Context, w io.Writer, source string, entries []dumpEntry, limit int) error {
	head, err := json.MarshalIndent(dumpFile{Format: dumpFormat, Source: source, Checkpoints: []dumpEntry{}}, "", "  ")
	if err != nil {
		return err
	}
	d := dumpWriter{w: w, limit: limit}
	if len(entries) == 0 {
		d.write(escapeJSON(head), []byte("\n"))
	} else {
		d.write(escapeJSON(bytes.TrimSuffix(head, []byte("[]\n}"))), []byte("[\n"))
	}
	for i, c := range entries {
		if i%ctxEvery == 0 && ctx.Err() != nil {
			return lateDump(len(entries), ctx.Err())
		}
		raw, err := json.MarshalIndent(c, "    ", "  ")
		if err != nil {
			return err
		}
		sep := []byte(",\n")
		if i == len(entries)-1 {
			sep = []byte("\n  ]\n}\n")
		}
		if d.write([]byte("    "), escapeJSON(raw), sep); d.err != nil {
			return d.err
		}
	}
	if d.err != nil {
		return d.err
	}
	if err := ctx.Err(); err != nil {
		return lateDump(len(entries), err)
	}
	return nil
}

// lateDump refuses a dump of n checkpoints whose command ended (its
// --timeout, a Ctrl-C) before it was written whole.
func lateDump(n int, err error) error {
	return fmt.Errorf("dumping %s: %w; nothing written", count(n, "checkpoint"), err)
}

// dumpWriter writes to w until limit bytes are passed or a write fails.
type dumpWriter struct {
	w     io.Writer
	limit int
	n     int
	err   error
}

func (d *dumpWriter) write(parts ...[]byte) {
	for _, p := range parts {
		if d.err != nil {
			return
		}
		if d.n += len(p); d.n > d.limit {
			d.err = refused("the dump would be longer than the %d MiB restore reads; nothing written: copy the catalog itself instead",
				d.limit>>20)
			return
		}
		_, d.err = d.w.Write(p)
	}
}

// chunks holds what is written to it in chunks, none ever copied to grow
// it: a bytes.Buffer of a gigabyte's dump grew by doubling, to twice that.
type chunks [][]byte

const chunkSize = 64 << 10

func (c *chunks) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if len(*c) == 0 || len((*c)[len(*c)-1]) == chunkSize {
			*c = append(*c, make([]byte, 0, chunkSize))
		}
		last := &(*c)[len(*c)-1]
		k := min(len(p), chunkSize-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

func (c chunks) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, b := range c {
		k, err := w.Write(b)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// sameAs reports whether id, read from text, is exact down to its bytes,
// or to what the text may leave out (a Pulsar partition).
func sameAs(exact, id wal.MessageID, text string) bool {
	return sameBytes(exact, id) || sameBytes(exact, withStoredPartition(id, text, &persistence.Entry{Checkpoint: exact}))
}

// readsBack is why restore would not read exact back from text, its text
// in a dump, or nil: JSON carries only UTF-8, and a WAL's Parse may not
// read what its String wrote (or String may panic).
func readsBack(walName wal.Name, text string, exact wal.MessageID) error {
	if !utf8.ValidString(text) {
		return fmt.Errorf("its text %s is not UTF-8, which a dump cannot carry", shownText(shorten.Head(text, shorten.TextLen)))
	}
	id, err := wal.Parse(walName, text)
	if err != nil {
		return fmt.Errorf("its text does not read back: %s", shownText(err.Error()))
	}
	if !sameAs(exact, id, text) {
		return fmt.Errorf("its text reads back as %s", shownID(id))
	}
	return nil
}

// ctxEvery is how many checkpoints checkDump parses or checks between two
// looks at its context: a few milliseconds' work.
const ctxEvery = 1024

// parseDump parses data, a dump named path, in one pass: each checkpoint
// is decoded on its own, so that the memory it takes is about the file's
// and the entries', and ctx ends it. The format is left to the caller,
// as the keys may come in any order.
func parseDump(ctx context.Context, data []byte, path string) (dumpFile, error) {
	var d dumpFile
	notDump := func(err error) error { return badFile("%s: not a dump file: %v", path, endedEarly(err)) }
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if tok, err := dec.Token(); err != nil {
		return d, notDump(err)
	} else if tok != json.Delim('{') {
		return d, notDump(errors.New("not a JSON object"))
	}
	var keys [][]byte
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return d, notDump(err)
		}
		key, _ := tok.(string) // else Token fails
		// encoding/json keeps the last of a key given twice: a dump
		// edited by hand, or two put together, must not pass for one of
		// its halves.
		if err := givenTwice(keys, []byte(key)); err != nil {
			return d, badFile("%s: %v", path, cut(err))
		}
		keys = append(keys, []byte(key))
		switch {
		case strings.EqualFold(key, "format"):
			err = dec.Decode(&d.Format)
		case strings.EqualFold(key, "source"):
			err = dec.Decode(&d.Source)
		case strings.EqualFold(key, "checkpoints"):
			d.Checkpoints, err = parseEntries(ctx, dec, data, path)
			if err != nil {
				return d, err
			}
		default:
			err = fmt.Errorf("json: unknown field %q", key) // as DisallowUnknownFields says it
		}
		if err != nil {
			return d, notDump(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return d, notDump(err)
	}
	// Only the first value would be restored: two dumps in one file, or
	// one that was damaged, must not pass for the first one alone.
	if _, err := dec.Token(); err != io.EOF {
		return d, badFile("%s: more follows the dump's end: two dumps in one file, or a damaged one", path)
	}
	return d, nil
}

// parseEntries parses the value of "checkpoints" from dec, which reads
// data, one checkpoint at a time.
func parseEntries(ctx context.Context, dec *json.Decoder, data []byte, path string) ([]dumpEntry, error) {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return nil, badFile("%s: not a dump file: %v", path, endedEarly(err))
	case tok == nil:
		return nil, nil // null, as encoding/json reads it into a slice
	case tok != json.Delim('['):
		return nil, badFile("%s: not a dump file: checkpoints: not a JSON array", path)
	}
	var entries []dumpEntry
	for i := 0; dec.More(); i++ {
		if i%ctxEvery == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("parsing %s: %w after %s; nothing written", path, ctx.Err(), count(i, "checkpoint"))
		}
		start := dec.InputOffset()
		entries = append(entries, dumpEntry{}) // decoded in place
		if err := dec.Decode(&entries[i]); err != nil {
			return nil, badFile("%s: not a dump file: checkpoint %d: %v", path, i, endedEarly(err))
		}
		// From the comma before it, if any, which the decoder skips.
		value := bytes.TrimLeft(data[start:dec.InputOffset()], ", \t\r\n")
		if err := uniqueKeys(value); err != nil {
			return nil, badFile("%s: checkpoint %d: %v", path, i, cut(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, badFile("%s: not a dump file: %v", path, endedEarly(err))
	}
	return entries, nil
}

// endedEarly names the decoder's end of input for what it means here.
func endedEarly(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("it ends before the dump does: empty, or cut short")
	}
	return cut(err)
}

// cut is an error about a dump file as its text, cut to what shows in
// 512 bytes: it may name a key or a value of the file, of any length.
func cut(err error) error { return errors.New(shorten.Within(err.Error(), 512)) }

// uniqueKeys fails on an object in value, JSON that encoding/json has
// read without error, that gives a key twice, and on a string that is
// not UTF-8: encoding/json reads a byte that is not, or an escaped half
// of a surrogate pair, as U+FFFD, and a name so read is another name.
func uniqueKeys(value []byte) error {
	if !utf8.Valid(value) {
		return errNotUTF8
	}
	// The keys of the objects open, innermost last, and where each open
	// object's begin (-1 for an array), in arrays on the stack: a
	// million checkpoints then cost no allocation here.
	var keyArr [16][]byte
	var openArr [8]int
	keys, open := keyArr[:0], openArr[:0]
	isKey := false // the next string is a key
	for i := 0; i < len(value); i++ {
		switch value[i] {
		case '{':
			open = append(open, len(keys))
			isKey = true
		case '[':
			open = append(open, -1)
			isKey = false
		case '}':
			keys = keys[:open[len(open)-1]]
			open = open[:len(open)-1]
			isKey = false
		case ']':
			open = open[:len(open)-1]
			isKey = false
		case ',':
			isKey = open[len(open)-1] >= 0
		case '"':
			j := i + 1
			for ; value[j] != '"'; j++ {
				if value[j] != '\\' {
					continue
				}
				j++
				if value[j] != 'u' {
					continue
				}
				if r := hexRune(value[j+1:]); utf16.IsSurrogate(r) {
					if r >= 0xdc00 || !lowHalf(value[j+5:]) {
						return errNotUTF8
					}
					j += 6 // to the low half's u
				}
			}
			if isKey {
				key := value[i+1 : j]
				if bytes.IndexByte(key, '\\') >= 0 {
					var s string
					if err := json.Unmarshal(value[i:j+1], &s); err != nil {
						return err
					}
					key = []byte(s)
				}
				if err := givenTwice(keys[open[len(open)-1]:], key); err != nil {
					return err
				}
				keys = append(keys, key)
				isKey = false
			}
			i = j
		}
	}
	return nil
}

// errNotUTF8 is uniqueKeys' refusal of a string that is not UTF-8.
var errNotUTF8 = errors.New("a string that is not UTF-8 (a raw byte, or an escaped half of a surrogate pair), " +
	"which would be read as U+FFFD: a name so read is another name")

// lowHalf reports whether b begins with the escaped low half of a
// surrogate pair.
func lowHalf(b []byte) bool {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return false
	}
	r := hexRune(b[2:])
	return r >= 0xdc00 && r <= 0xdfff
}

// hexRune is the rune of four hex digits, which encoding/json has checked.
func hexRune(hex []byte) rune {
	var r rune
	for _, c := range hex[:4] {
		switch {
		case c >= 'a':
			c -= 'a' - 10
		case c >= 'A':
			c -= 'A' - 10
		default:
			c -= '0'
		}
		r = r<<4 | rune(c)
	}
	return r
}

// givenTwice fails if key is among keys, as encoding/json matches a key
// to a field: without regard to case, as bytes.EqualFold folds ("ſ" is
// "s", the Kelvin sign "k"). An object of a dump has a few keys: a
// linear search is the quickest.
func givenTwice(keys [][]byte, key []byte) error {
	for _, k := range keys {
		if bytes.EqualFold(k, key) {
			return fmt.Errorf("key %q given twice in one object", key)
		}
	}
	return nil
}

// readWhole reads path, or stdin for "-", whole (and a byte past maxDump
// at most): each checkpoint's keys are checked in its bytes once it is
// decoded, and a pipe cannot be read again. It
// returns when ctx ends, whatever the open or the read does: a named pipe
// no one writes, or a terminal no one types on, must not hold the command
// past its --timeout or a Ctrl-C. The read is then left to end with the
// process.
func readWhole(ctx context.Context, stdin io.Reader, path string) ([]byte, error) {
	what := path
	if path == "-" {
		if stdin == nil {
			return nil, errors.New("restore -: no standard input to read")
		}
		what = "standard input"
	}
	type result struct {
		data []byte
		err  error
	}
	read := make(chan result, 1)
	go func() {
		r := stdin
		if path != "-" {
			f, err := os.Open(path)
			if err != nil {
				read <- result{err: err}
				return
			}
			defer f.Close()
			r = f
		}
		// A file is read into a buffer of its size, and one too big is
		// refused unread; grown as io.ReadAll grows it, a dump took twice
		// its size and more. A stream's size is known only once read.
		var size int64 = -1
		if f, ok := r.(interface{ Stat() (os.FileInfo, error) }); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
				size = fi.Size()
			}
		}
		if size > maxDump {
			read <- result{err: errTooBig}
			return
		}
		sniffed, err := sniffDump(r)
		if err != nil {
			read <- result{err: err}
			return
		}
		if size < 0 {
			data, err := io.ReadAll(io.LimitReader(sniffed, maxDump+1))
			read <- result{data, err}
			return
		}
		var buf bytes.Buffer
		buf.Grow(int(size) + bytes.MinRead)
		_, err = buf.ReadFrom(io.LimitReader(sniffed, maxDump+1))
		read <- result{buf.Bytes(), err}
	}()
	select {
	case res := <-read:
		return res.data, res.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading %s: %w", what, ctx.Err())
	}
}

// sniffDump refuses input that cannot be a dump from its first bytes, and
// returns the reader to read it all from: a stream of anything else (a
// tar file, /dev/zero, the wrong end of a pipe) was read up to maxDump,
// hundreds of MiB in memory, before the parse refused it. The bytes looked
// at are not taken from the stream, so that the parse still counts lines
// and offsets from its start; input that is all white space in the bytes
// looked at is left to the parse.
func sniffDump(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, sniffSize)
	head, err := br.Peek(sniffSize)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	if bom := "\uFEFF"; strings.HasPrefix(string(head[:min(len(head), len(bom))]), bom) {
		// Put there by an editor: JSON's RFC lets a reader ignore it.
		_, _ = br.Discard(len(bom))
		head = head[len(bom):]
	}
	i := bytes.IndexFunc(head, func(c rune) bool { return !strings.ContainsRune(" \t\r\n", c) })
	if wide := wideText(head); wide != "" {
		return nil, &notADump{why: wide + " text: save it as UTF-8"}
	}
	switch {
	case i >= 0 && head[i] != '{':
		return nil, &notADump{why: "it begins with " + shownByte(head[i])}
	case i < 0 && len(head) == sniffSize:
		// No dump has that much before it: a stream of blank lines.
		return nil, &notADump{why: fmt.Sprintf("its first %d bytes are white space", sniffSize)}
	}
	if errors.Is(err, io.EOF) {
		// All of it: a terminal says its end of input (Ctrl-D) once, and
		// the Peek that saw it has forgotten it.
		return bytes.NewReader(head), nil
	}
	return br, nil
}

// wideText names the encoding of head if it is text in UTF-16 or UTF-32,
// as an editor on Windows saves it: by its byte-order mark, or, without
// one, by NUL bytes beside a JSON object's first characters (no dump
// holds a NUL). "" for anything else.
func wideText(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0xff, 0xfe, 0, 0}) || bytes.HasPrefix(head, []byte{0, 0, 0xfe, 0xff}):
		return "UTF-32"
	case bytes.HasPrefix(head, []byte{0xff, 0xfe}) || bytes.HasPrefix(head, []byte{0xfe, 0xff}):
		return "UTF-16"
	}
	start := head[:min(len(head), 64)]
	if bytes.IndexByte(start, 0) < 0 {
		return ""
	}
	narrow := bytes.ReplaceAll(start, []byte{0}, nil)
	if i := bytes.IndexFunc(narrow, func(c rune) bool { return !strings.ContainsRune(" \t\r\n", c) }); i >= 0 && narrow[i] == '{' {
		return "UTF-16 or UTF-32"
	}
	return ""
}

// sniffSize is how much of its input restore looks at before reading it.
const sniffSize = 4096

// notADump is sniffDump's refusal, and why.
type notADump struct{ why string }

func (e *notADump) Error() string { return "not a dump: " + e.why }

// shownByte is b as a character if it is one, ASCII, else in hex: as a
// character, a byte of a longer UTF-8 sequence would be another one.
func shownByte(b byte) string {
	if b < utf8.RuneSelf {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("byte 0x%02x", b)
}

// maxDump bounds what restore reads: a dump of a million pchannels is a
// few hundred MiB.
const maxDump = 1 << 30

// errTooBig is readWhole's refusal of a file larger than maxDump.
var errTooBig = errors.New("larger than a dump can be")

// restore writes a dump, pchannel by pchannel, with set's rules. Every
// write is planned first: if any is refused, nothing is written.
func restore(ctx context.Context, e *env, args []string) error {
	if args[0] == "-" && isTerminal(e.stdin) {
		fmt.Fprintln(e.stderr, "reading the dump from standard input: end it with Ctrl-D, or abort with Ctrl-C")
	}
	entries, ids, err := readDump(ctx, e.stdin, args[0])
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		// Nothing to write, and no file to create: a mistyped path is
		// not made into an empty catalog by an empty dump either. A file
		// that is there is opened all the same, to be judged.
		if e.opts.url.Kind == catalogurl.Bolt && e.opts.url.Path != "" {
			if _, err := os.Stat(e.opts.url.Path); err == nil {
				s, err := e.open(ctx, readOnly)
				if err != nil {
					return err
				}
				s.close()
			}
		}
		fmt.Fprintln(e.stdout, "the dump holds no checkpoint: nothing to restore, nothing written")
		return nil
	}
	s, err := e.open(ctx, e.writeMode(createFile))
	if err != nil {
		return err
	}
	defer s.close()
	written := 0
	defer func() {
		// Before close, the file still locked. A file built aside and
		// not placed goes whatever was written to it.
		if written == 0 || s.aside != "" {
			s.discardCreated()
		}
	}()
	byName, _, err := s.entries(ctx)
	if err != nil {
		return err
	}
	if err := s.knowOwners(ctx); err != nil {
		return err
	}
	// Lines for stdout wait in out, and errors go to stderr first: a closed
	// pipe on stdout (whose SIGPIPE ends the process) then neither cuts
	// the restore short nor hides why it failed or was refused.
	var out bytes.Buffer
	acts := make([]action, len(entries))
	var refusals []error
	// owned holds a dry run's warnings of writes around an owner: printed
	// after the replay warnings, as the writes of a real restore print
	// theirs.
	var owned []string
	for i, de := range entries {
		var en *persistence.Entry
		if v, ok := byName[de.PChannel]; ok {
			en = &v
		}
		if de.ID == nil {
			ids[i] = withStoredPartition(ids[i], de.Checkpoint, en) // as set's
			if en == nil {
				ids[i] = s.heldPartition(de.PChannel, ids[i], de.Checkpoint)
			}
		}
		act, err := plan(de.PChannel, en, ids[i], e.opts.force)
		if err == nil && act == create {
			act, err = s.create(ctx, de.PChannel, e.opts.force)
		}
		if err == nil && act != unchanged {
			err = s.checkTerm(ctx, de.PChannel, en, e.opts.force)
		}
		if err != nil {
			err = s.alsoOwned(ctx, de.PChannel, err)
		}
		if err == nil && act != unchanged {
			var w string
			w, err = s.checkOwner(ctx, de.PChannel, change{act: act, en: en, id: ids[i]}, e.opts.force)
			if w != "" {
				owned = append(owned, w)
			}
		}
		var ee *exitError
		switch {
		case err != nil && errors.As(err, &ee) && ee.code == ExitRefused:
			refusals = append(refusals, err)
			continue
		case err != nil:
			// Not a refusal: the catalog failed, or the command was cut
			// short. Nothing is written, and the rest would fail alike.
			return fmt.Errorf("checking %s before any write: %w; nothing written", shown(de.PChannel), err)
		}
		acts[i] = act
		if e.opts.dryRun {
			fmt.Fprintln(&out, describe(act, de.PChannel, en, ids[i], true))
		}
	}
	if len(refusals) > 0 {
		for _, r := range refusals {
			fmt.Fprintln(e.stderr, "refused: "+safeLines(r.Error()))
		}
		return refused("%d of %s refused; nothing written", len(refusals), count(len(entries), "checkpoint"))
	}
	for i, de := range entries {
		if en, ok := byName[de.PChannel]; ok {
			warnReplay(e.stderr, acts[i], de.PChannel, &en, ids[i])
		}
		if acts[i] == createBeside {
			s.warnBeside(e.stderr, de.PChannel, ids[i])
		}
	}
	if e.opts.dryRun {
		for _, w := range owned {
			s.warn(w)
		}
		_, err := e.stdout.Write(out.Bytes())
		return err
	}
	done, errs := s.writeAll(ctx, entries, byName, acts, ids, e.opts.force)
	same := 0 // stored already as the dump has them: nothing to write
	for i, de := range entries {
		if done[i] {
			written++
		}
		if acts[i] == unchanged {
			same++
		}
		if acts[i] == unchanged || done[i] {
			en := (*persistence.Entry)(nil)
			if v, ok := byName[de.PChannel]; ok {
				en = &v
			}
			fmt.Fprintln(&out, describe(acts[i], de.PChannel, en, ids[i], false))
		}
	}
	if len(errs) > 0 && s.aside != "" {
		cause := errs[0]
		if ctx.Err() != nil && errors.Is(cause, ctx.Err()) {
			cause = context.Cause(ctx)
		}
		// Named as the command named it, not by the name it was built
		// under, which is gone.
		return &renamedError{
			msg: strings.ReplaceAll(cause.Error(), s.aside, s.url.Path) + "; the new file " + s.url.Path +
				" was not made, and nothing was written: a rerun restores the whole dump",
			err: cause,
		}
	}
	if len(errs) > 0 {
		err := reportFailures(ctx, e.stderr, errs, written, same, len(entries))
		_, _ = e.stdout.Write(out.Bytes())
		return err
	}
	if err := s.place(); err != nil {
		return err
	}
	fmt.Fprintf(&out, "restored %s into %s (%d written)\n", count(len(entries), "checkpoint"), s.url, written)
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// renamedError is err with its message rewritten.
type renamedError struct {
	msg string
	err error
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// reportFailures prints the failures of a restore's writes, written of
// total having been written and same of them found stored as the dump has
// them, and returns the first as reported. Each
// other failure is printed too when it says something else: a
// replacement's names the record it may have left deleted. (A batch's
// commit fails every save in it alike, and a cut every write it stops.)
//
// A write the cut stopped while it waited may have been written all the
// same (a bbolt batch it had joined commits; an etcd transaction sent
// applies): they are counted apart, not listed, and not said written.
func reportFailures(ctx context.Context, stderr io.Writer, errs []error, written, same, total int) error {
	// A cut names --timeout, or the signal; but a replacement cut
	// between its delete and its save says which record it left
	// deleted, and how to write it (outcomeError).
	cutShort := func(err error) bool {
		var said *outcomeError
		return ctx.Err() != nil && errors.Is(err, ctx.Err()) && !errors.As(err, &said)
	}
	listed, unknown := "those written are listed on standard output", 0
	for _, err := range errs {
		if cutShort(err) {
			unknown++
		}
	}
	if unknown > 0 {
		listed += fmt.Sprintf(" (%d more, under way when it was cut, may have been written too)", unknown)
	}
	var first error
	seen := map[string]bool{}
	for _, err := range errs {
		if cutShort(err) {
			err = context.Cause(ctx)
		}
		if seen[err.Error()] {
			continue
		}
		seen[err.Error()] = true
		if first == nil {
			// A count of those written alone read as how far the dump
			// was gone through: 190 of 3,000 where a cut run had reached
			// the 521st, the others stored already.
			progress := fmt.Sprintf("%d of %s written", written, count(total, "checkpoint"))
			if same > 0 {
				progress += fmt.Sprintf(", %d stored already as the dump has them", same)
			}
			err = fmt.Errorf("after %s: %w; %s, and a rerun writes the rest", progress, err, listed)
			first = err
		}
		report(stderr, err)
	}
	return &reportedError{first}
}

// restoreWriters bounds the writes of a bbolt restore under way at once.
// The file is opened for restore with group commit (openBolt), whose
// batch takes every write that comes while the commit before it runs: a
// thousand writers keep the batches full. With a commit a record, a
// million records took over ten minutes.
const restoreWriters = 1000

// writeAll writes what acts says of entries, and says which it wrote
// (done): those are durable, whatever the order they ended in. On bbolt
// up to restoreWriters writes are under way at once, so that they share
// commits; on etcd one, in its own ownership. After the first
// failure, or once ctx ends, no write starts; those under way end, and
// errs holds every failure, the first first.
//
// The writers start as one, and each write that ends well adds one, up
// to restoreWriters: the first commits carry 1, 2, 4… records. A catalog
// that fails at once fails one record, not a thousand, and a disk that
// fills part way has taken what fitted.
func (s *store) writeAll(ctx context.Context, entries []dumpEntry, byName map[string]persistence.Entry,
	acts []action, ids []wal.MessageID, force bool) (done []bool, errs []error) {
	limit := restoreWriters
	if s.etcd != nil {
		limit = 1
	}
	done = make([]bool, len(entries))
	var (
		mu      sync.Mutex
		writers = 1 // guarded by mu
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, limit)
	slots <- struct{}{}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) == 0 && ctx.Err() != nil {
			errs = append(errs, ctx.Err())
		}
		return len(errs) > 0
	}
	for i, de := range entries {
		if acts[i] == unchanged {
			continue
		}
		<-slots // a write under way ends on its own, within its bounds
		if failed() {
			break
		}
		var en *persistence.Entry
		if v, ok := byName[de.PChannel]; ok {
			en = &v
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.write(ctx, de.PChannel, change{act: acts[i], en: en, id: ids[i]}, force, func(c persistence.Catalog) error {
				return s.apply(ctx, c, de.PChannel, acts[i], ids[i])
			})
			mu.Lock()
			grow := err == nil && writers < limit
			if err == nil {
				done[i] = true
			} else {
				errs = append(errs, err)
			}
			if grow {
				writers++
			}
			mu.Unlock()
			if grow {
				slots <- struct{}{}
			}
			slots <- struct{}{}
		}()
	}
	wg.Wait()
	return done, errs
}
