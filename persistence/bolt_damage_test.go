package persistence_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// damagedRecords is how many pchannels the damaged files hold: enough for a
// branch page over several leaf pages.
const damagedRecords = 400

// writeHealthyBolt fills a bbolt file through the Bolt catalog and closes
// it, so that the damage below lands on pages bbolt itself laid out.
func writeHealthyBolt(t *testing.T, path string) {
	t.Helper()
	b := openBolt(t, path, persistence.WithNoSync(true))
	ctx := context.Background()
	for i := range damagedRecords {
		if err := b.Save(ctx, damagedName(i), wal.KafkaID(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

func damagedName(i int) string { return fmt.Sprintf("pchannel-%04d", i) }

// bboltPageSize is the page size OpenBolt writes with: the OS page size.
var bboltPageSize = os.Getpagesize()

// Page header fields of bbolt's on-disk format (go.etcd.io/bbolt/internal/common/page.go).
const (
	pageHeaderSize = 16
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	leafElemSize   = 16 // a branch element's size too
)

// damage rewrites the file at path in place.
type damage func(t *testing.T, data []byte) []byte

func truncateTo(size int) damage {
	return func(t *testing.T, data []byte) []byte { return data[:min(size, len(data))] }
}

// overDataPages rewrites every page after the two meta pages.
func overDataPages(fill func(page []byte)) damage {
	return func(t *testing.T, data []byte) []byte {
		for off := 2 * bboltPageSize; off < len(data); off += bboltPageSize {
			fill(data[off:min(off+bboltPageSize, len(data))])
		}
		return data
	}
}

// flipLeafElements flips bits in the element headers (where each key sits
// and how long it and its value are) of every leaf page holding records:
// bytes names which header bytes, mask the bits.
func flipLeafElements(mask byte, bytes ...int) damage {
	return func(t *testing.T, data []byte) []byte { return flipLeaves(t, data, mask, bytes) }
}

func flipLeaves(t *testing.T, data []byte, mask byte, bytes []int) []byte {
	flipped := 0
	for off := 2 * bboltPageSize; off+bboltPageSize <= len(data); off += bboltPageSize {
		page := data[off : off+bboltPageSize]
		flags := binary.LittleEndian.Uint16(page[8:])
		count := int(binary.LittleEndian.Uint16(page[10:]))
		if flags != leafPageFlag || count < 2 {
			continue // the root leaf holding only the bucket, or not a leaf
		}
		for e := range count {
			elem := page[pageHeaderSize+e*leafElemSize:]
			for _, i := range bytes {
				elem[i] ^= mask
			}
		}
		flipped++
	}
	if flipped == 0 {
		t.Fatal("no leaf page found to damage")
	}
	return data
}

func damagedCases() []struct {
	name   string
	damage damage
} {
	rng := rand.New(rand.NewPCG(1, 2))
	return []struct {
		name   string
		damage damage
	}{
		{"empty", truncateTo(0)},
		{"truncated to 8 KiB", truncateTo(8 << 10)},
		{"truncated to one page", truncateTo(bboltPageSize)},
		{"truncated to 4000 bytes", truncateTo(4000)},
		{"truncated to 3 pages", truncateTo(3 * bboltPageSize)},
		{"truncated mid page", truncateTo(5*bboltPageSize + 100)},
		{"zeroed data pages", overDataPages(func(p []byte) { clear(p) })},
		{"garbage over data pages", overDataPages(func(p []byte) {
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
		})},
		// A leaf's count lowered: its last records are out of reach, with
		// every check of what it does reach passing.
		{"leaf element counts lowered", func(t *testing.T, data []byte) []byte {
			lowered := 0
			for off := 2 * bboltPageSize; off+bboltPageSize <= len(data); off += bboltPageSize {
				page := data[off : off+bboltPageSize]
				if count := binary.LittleEndian.Uint16(page[10:]); binary.LittleEndian.Uint16(page[8:]) == leafPageFlag && count >= 2 {
					binary.LittleEndian.PutUint16(page[10:], count-1)
					lowered++
				}
			}
			if lowered == 0 {
				t.Fatal("no leaf page found to damage")
			}
			return data
		}},
		// Leaf element header: flags, pos, ksize, vsize (4 bytes each).
		{"flipped position bytes in leaf pages", flipLeafElements(0x80, 7)},
		{"flipped size bytes in leaf pages", flipLeafElements(0xff, 8, 12)},
		{"flipped low position bits in leaf pages", flipLeafElements(0x01, 5)},
		// A record flagged as a bucket whose root page lies far past the
		// file: bbolt's consistency check follows it on a goroutine of its
		// own, where the fault ended the process.
		{"record flagged as a bucket rooted past the file", bucketPastTheFile},
		// A cycle of branch pages grew bbolt's cursor stack until memory
		// ran out; a branch key sized past the file faulted bbolt's check.
		{"branch page pointing at itself", onBranchElement(func(page []byte, id uint64, elem []byte) {
			binary.LittleEndian.PutUint64(elem[8:], id)
		})},
		{"branch key sized past the file", onBranchElement(func(page []byte, id uint64, elem []byte) {
			binary.LittleEndian.PutUint32(elem[4:], 1<<23)
		})},
		// bbolt's consistency check counted up to the freelist page's
		// overflow, four billion map entries: OpenBolt never returned.
		{"freelist page with a huge overflow", onFreelist(func(page []byte) { page[15] = 0xA2 })},
		{"freelist counting more pages than it holds", onFreelist(func(page []byte) {
			binary.LittleEndian.PutUint16(page[10:], 0xFFFF)
			binary.LittleEndian.PutUint64(page[pageHeaderSize:], 1<<40)
		})},
		// One byte of a key: a look-up misses a record that is there, or
		// LoadAll finds two under one name and reads one for the other.
		{"a key made equal to the one before it", onLiveLeafKeys(func(first, second []byte) { copy(second, first) })},
		{"a key made greater than the one after it", onLiveLeafKeys(func(first, second []byte) { first[len(first)-1] = '9' + 1 })},
	}
}

// onFreelist damages the freelist page the newest meta page names.
func onFreelist(damage func(page []byte)) damage {
	return func(t *testing.T, data []byte) []byte {
		le := binary.LittleEndian
		var freelist, txid uint64
		for _, off := range []int{0, bboltPageSize} {
			meta := data[off+pageHeaderSize:]
			if tx := le.Uint64(meta[48:]); tx >= txid {
				txid, freelist = tx, le.Uint64(meta[32:])
			}
		}
		page := data[freelist*uint64(bboltPageSize):]
		if le.Uint16(page[8:]) != 0x10 || le.Uint16(page[10:]) == 0 {
			t.Fatalf("page %d is not a freelist page that frees pages", freelist)
		}
		damage(page[:bboltPageSize])
		return data
	}
}

// onLiveLeafKeys damages the first two keys of a leaf page the catalog's
// bucket reaches (its root's second child), both of the same length.
func onLiveLeafKeys(damage func(first, second []byte)) damage {
	return func(t *testing.T, data []byte) []byte {
		le := binary.LittleEndian
		root := uint64(bucketRoot(t, data))
		branch := data[root*uint64(bboltPageSize):]
		if le.Uint16(branch[8:]) != branchPageFlag || le.Uint16(branch[10:]) < 2 {
			t.Fatalf("the bucket's root page %d is not a branch page", root)
		}
		leaf := le.Uint64(branch[pageHeaderSize+leafElemSize+8:])
		page := data[leaf*uint64(bboltPageSize) : (leaf+1)*uint64(bboltPageSize)]
		if le.Uint16(page[8:]) != leafPageFlag || le.Uint16(page[10:]) < 2 {
			t.Fatalf("page %d is not a leaf page of records", leaf)
		}
		key := func(i int) []byte {
			elem := page[pageHeaderSize+i*leafElemSize:]
			pos, ksize := le.Uint32(elem[4:]), le.Uint32(elem[8:])
			at := pageHeaderSize + uint32(i)*leafElemSize + pos
			return page[at : at+ksize]
		}
		damage(key(0), key(1))
		return data
	}
}

// onBranchElement damages the last element of the catalog bucket's root
// page, a branch page in a file of damagedRecords records.
func onBranchElement(damage func(page []byte, id uint64, elem []byte)) damage {
	return func(t *testing.T, data []byte) []byte {
		id := uint64(bucketRoot(t, data))
		page := data[id*uint64(bboltPageSize) : (id+1)*uint64(bboltPageSize)]
		count := int(binary.LittleEndian.Uint16(page[10:]))
		if binary.LittleEndian.Uint16(page[8:]) != branchPageFlag || count == 0 {
			t.Fatalf("the bucket's root page %d is not a branch page", id)
		}
		at := pageHeaderSize + (count-1)*leafElemSize
		damage(page, id, page[at:at+leafElemSize])
		return data
	}
}

// bucketPastTheFile flags the first record of a leaf page the catalog's
// bucket reaches as a nested bucket and points its root page far past the
// file.
func bucketPastTheFile(t *testing.T, data []byte) []byte {
	le := binary.LittleEndian
	root := uint64(bucketRoot(t, data))
	branch := data[root*uint64(bboltPageSize):]
	if le.Uint16(branch[8:]) != branchPageFlag {
		t.Fatalf("the bucket's root page %d is not a branch page", root)
	}
	leaf := le.Uint64(branch[pageHeaderSize+8:])
	page := data[leaf*uint64(bboltPageSize) : (leaf+1)*uint64(bboltPageSize)]
	if le.Uint16(page[8:]) != leafPageFlag || le.Uint16(page[10:]) < 2 {
		t.Fatalf("page %d is not a leaf page of records", leaf)
	}
	elem := page[pageHeaderSize : pageHeaderSize+leafElemSize]
	pos, ksize, vsize := le.Uint32(elem[4:]), le.Uint32(elem[8:]), le.Uint32(elem[12:])
	if vsize < 16 {
		t.Fatalf("page %d: a record of %d bytes has no room for a bucket header", leaf, vsize)
	}
	le.PutUint32(elem[0:], 0x01) // bucketLeafFlag
	value := page[pageHeaderSize+pos+ksize:]
	le.PutUint64(value, 1<<22) // the bucket's root page
	return data
}

// bucketRoot is the root page of the catalog's bucket in the file data.
func bucketRoot(t *testing.T, data []byte) (root int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error { root = int(tx.Bucket([]byte(defaultBucket)).Root()); return nil }); err != nil {
		t.Fatal(err)
	}
	return root
}

func rewrite(t *testing.T, path string, d damage) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, d(t, data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// noPanic runs call and turns a panic into a test failure naming op.
func noPanic(t *testing.T, op string, call func() error) (err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s panicked: %v", op, p)
			err = fmt.Errorf("panicked: %v", p)
		}
	}()
	return call()
}

// wantCorruptStore checks that err says the store is damaged and names it.
func wantCorruptStore(t *testing.T, op string, err error, path string) {
	t.Helper()
	if !errors.Is(err, persistence.ErrCorruptStore) {
		t.Fatalf("%s = %v, want ErrCorruptStore", op, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Fatalf("%s error %q does not name the file %s", op, err, path)
	}
}

// TestBoltDamagedFile opens bbolt files damaged the ways disks and copies
// damage them: no call panics, the damage is reported as ErrCorruptStore
// naming the file (or, for a record whose bytes alone are hit, as that
// record's ErrCorruptRecord), once ErrCorruptStore is reported every later
// call reports it too, and the store is never served as if it were empty.
func TestBoltDamagedFile(t *testing.T) {
	for _, tc := range damagedCases() {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			writeHealthyBolt(t, path)
			rewrite(t, path, tc.damage)

			var b *persistence.Bolt
			err := noPanic(t, "OpenBolt", func() error {
				var err error
				b, err = persistence.OpenBolt(path)
				return err
			})
			if err != nil {
				wantCorruptStore(t, "OpenBolt", err, path)
				// It names the damage, as a read-only open does: a
				// panic inside bbolt would send an operator looking for
				// a bug rather than a backup.
				if strings.Contains(err.Error(), "panicked") {
					t.Errorf("OpenBolt = %v, want the damage named", err)
				}
				if b != nil {
					t.Fatal("OpenBolt returned a Bolt with its error")
				}
				// The damaged file is not left locked by the failed open.
				_, err := persistence.OpenBolt(path, persistence.WithOpenTimeout(100*time.Millisecond))
				if errors.Is(err, persistence.ErrLocked) {
					t.Fatalf("second OpenBolt = %v: the failed open kept the lock", err)
				}
				return
			}
			defer b.Close()
			if n := useDamaged(t, b, path); n == 0 {
				t.Fatal("no call reported the damage")
			}
		})
	}
}

// useDamaged calls LoadAll, then Load and Save for every pchannel, and
// returns how many calls reported damage.
func useDamaged(t *testing.T, b *persistence.Bolt, path string) (reported int) {
	t.Helper()
	ctx := context.Background()
	storeDamaged := false
	check := func(op string, err error) {
		t.Helper()
		switch {
		case storeDamaged || errors.Is(err, persistence.ErrCorruptStore):
			wantCorruptStore(t, op, err, path)
			storeDamaged = true
			reported++
		case errors.Is(err, persistence.ErrCorruptRecord):
			reported++
		case err != nil:
			t.Fatalf("%s = %v, want nil, ErrCorruptRecord or ErrCorruptStore", op, err)
		}
	}
	check("LoadAll", noPanic(t, "LoadAll", func() error {
		all, err := b.LoadAll(ctx)
		if err == nil && len(all) != damagedRecords {
			t.Errorf("LoadAll = %d records and no error, want %d", len(all), damagedRecords)
		}
		return err
	}))
	for i := range damagedRecords {
		check("Load", noPanic(t, "Load", func() error {
			_, err := b.Load(ctx, damagedName(i))
			return err
		}))
		check("Save", noPanic(t, "Save", func() error { return b.Save(ctx, damagedName(i), wal.KafkaID(5000+i)) }))
	}
	return reported
}

// TestBoltDamagedWhileOpen damages an open store on disk, the ways disks
// do, and lets each kind of call meet the damage first. That call reports
// ErrCorruptStore instead of panicking, and from then on the Bolt refuses
// every call without writing a byte to the file. bbolt may have panicked
// holding its own locks (while a transaction starts, or in a rollback
// after a failed write): Close still returns, and lets go of the file, so
// that opening it again finds the damage and not a lock.
func TestBoltDamagedWhileOpen(t *testing.T) {
	damages := map[string]func(t *testing.T, path string){
		"flipped positions in leaf pages": func(t *testing.T, path string) {
			writeInPlace(t, path, flipLeafElements(0x80, 7)(t, readFile(t, path)))
		},
		"data pages overwritten": func(t *testing.T, path string) {
			writeInPlace(t, path, overDataPages(func(p []byte) { fill(p, 0xff) })(t, readFile(t, path)))
		},
		"both meta pages": func(t *testing.T, path string) {
			data := readFile(t, path)
			data[pageHeaderSize] ^= 0xff // the magic number of each
			data[bboltPageSize+pageHeaderSize] ^= 0xff
			writeInPlace(t, path, data)
		},
		"truncated": func(t *testing.T, path string) {
			if err := os.Truncate(path, int64(3*bboltPageSize)); err != nil {
				t.Fatal(err)
			}
		},
		"truncated to nothing": func(t *testing.T, path string) {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
		},
	}
	ctx := context.Background()
	calls := map[string]func(b *persistence.Bolt) error{
		"Save":   func(b *persistence.Bolt) error { return b.Save(ctx, damagedName(0), wal.KafkaID(9999)) },
		"Delete": func(b *persistence.Bolt) error { return b.Delete(ctx, damagedName(0)) },
		"LoadAll": func(b *persistence.Bolt) error {
			_, err := b.LoadAll(ctx)
			return err
		},
		"Inspect": func(b *persistence.Bolt) error {
			_, err := b.Inspect(ctx)
			return err
		},
	}
	modes := map[string][]persistence.BoltOption{
		"single":       {persistence.WithGroupCommit(false)},
		"group commit": {persistence.WithGroupCommitDelay(time.Millisecond)},
	}
	for damageName, damage := range damages {
		for firstName := range calls {
			for modeName, opts := range modes {
				t.Run(damageName+"/"+firstName+" first/"+modeName, func(t *testing.T) {
					path := filepath.Join(t.TempDir(), "checkpoints.db")
					writeHealthyBolt(t, path)
					b := openBolt(t, path, opts...)
					if _, err := b.LoadAll(ctx); err != nil {
						t.Fatal(err)
					}
					damage(t, path)
					damaged := readFile(t, path)

					first := noPanic(t, firstName, func() error { return calls[firstName](b) })
					wantCorruptStore(t, firstName, first, path)
					if strings.HasPrefix(damageName, "truncated") && !strings.Contains(fmt.Sprint(first), "truncated while open?") {
						t.Errorf("%s of a file truncated under it = %v, want it said", firstName, first)
					}
					for name, call := range calls {
						wantCorruptStore(t, name+" after "+firstName, noPanic(t, name, func() error { return call(b) }), path)
					}
					_, err := noPanicValue(t, "Load", func() (wal.MessageID, error) { return b.Load(ctx, damagedName(1)) })
					wantCorruptStore(t, "Load after "+firstName, err, path)
					if !bytes.Equal(readFile(t, path), damaged) {
						t.Fatal("the damaged Bolt wrote to its file")
					}
					closeWithin(t, b, 10*time.Second)
					_, err = persistence.OpenBolt(path, persistence.WithOpenTimeout(100*time.Millisecond))
					wantCorruptStore(t, "OpenBolt after Close", err, path)
				})
			}
		}
	}
}

// TestBoltDamagedUnderConcurrentCalls damages both meta pages while
// goroutines load and save without pause. A call into bbolt may panic
// holding bbolt's locks; the calls behind it wait for their turn in the
// Bolt, not on those locks, so each returns, with ErrCorruptStore if it
// met the damage, and Close returns too. (A commit that lands before any
// call meets the damage writes a good meta page again: then nothing
// fails, and that is right too.)
func TestBoltDamagedUnderConcurrentCalls(t *testing.T) {
	for modeName, opts := range map[string][]persistence.BoltOption{
		"single":       {persistence.WithGroupCommit(false)},
		"group commit": {persistence.WithGroupCommitDelay(time.Millisecond)},
	} {
		t.Run(modeName, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			writeHealthyBolt(t, path)
			b := openBolt(t, path, opts...)
			ctx := context.Background()
			const callers = 8
			var calls, failed atomic.Int64
			var stop atomic.Bool
			errs := make(chan error, callers)
			for g := range callers {
				go func() {
					for i := 0; !stop.Load(); i++ {
						var err error
						if g%2 == 0 {
							_, err = b.Load(ctx, damagedName(i%damagedRecords))
						} else {
							err = b.Save(ctx, damagedName(i%damagedRecords), wal.KafkaID(5000+i))
						}
						calls.Add(1)
						if err != nil {
							failed.Add(1)
							errs <- err
							return
						}
					}
					errs <- nil
				}()
			}
			require.Eventually(t, func() bool { return calls.Load() > 100 }, 10*time.Second, time.Millisecond, "calls under way")
			data := readFile(t, path)
			data[pageHeaderSize] ^= 0xff
			data[bboltPageSize+pageHeaderSize] ^= 0xff
			writeInPlace(t, path, data)
			after := calls.Load()
			require.Eventually(t, func() bool {
				return calls.Load() > after+100 || failed.Load() == callers
			}, 10*time.Second, time.Millisecond, "calls after the damage, or every caller failed")
			stop.Store(true)
			deadline := time.After(10 * time.Second)
			for range callers {
				select {
				case err := <-errs:
					if err != nil {
						wantCorruptStore(t, "a call racing the damage", err, path)
					}
				case <-deadline:
					t.Fatal("a call racing the damage did not return within 10 s")
				}
			}
			closeWithin(t, b, 10*time.Second)
		})
	}
}

// closeWithin closes b and fails unless Close returns nil within d.
func closeWithin(t *testing.T, b *persistence.Bolt, d time.Duration) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close of a damaged Bolt = %v", err)
		}
	case <-time.After(d):
		t.Fatalf("Close of a damaged Bolt did not return within %v", d)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fill(p []byte, v byte) {
	for i := range p {
		p[i] = v
	}
}

// writeInPlace writes data over the file at path, as a disk would damage
// it under an open store: through the file, seen through bbolt's shared
// mapping.
func writeInPlace(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func noPanicValue[V any](t *testing.T, op string, call func() (V, error)) (v V, err error) {
	t.Helper()
	err = noPanic(t, op, func() error {
		var err error
		v, err = call()
		return err
	})
	return v, err
}

// TestBoltEmptyFileIsDamaged: an existing 0-byte file is a store that lost
// its content, not a new one; a missing file is still created.
func TestBoltEmptyFileIsDamaged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := persistence.OpenBolt(path)
	wantCorruptStore(t, "OpenBolt of an empty file", err, path)
	if !strings.Contains(err.Error(), "laid out only at a path where no file exists") {
		t.Fatalf("the error %q does not say what to do", err)
	}
	if b != nil {
		t.Fatal("OpenBolt returned a Bolt with its error")
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 0 {
		t.Fatalf("the empty file was changed: %v, %v", info, err)
	}
	fresh := openBolt(t, filepath.Join(t.TempDir(), "new.db"))
	if err := fresh.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBoltNotABoltFile: a file that never was a bbolt file (a wrong path)
// is refused as damage, as it must be, but as ErrNotBolt, saying it may be
// a wrong path before anyone restores a backup over it; a file whose meta
// pages alone were hit is damage, not ErrNotBolt: its other pages may be
// salvaged.
func TestBoltNotABoltFile(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"text":      []byte("hi\n"),
		"zeroes":    make([]byte, 16384),
		"a 4k text": bytes.Repeat([]byte("lorem ipsum "), 1000),
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := persistence.OpenBolt(path)
		wantCorruptStore(t, "OpenBolt of "+name, err, path)
		if !errors.Is(err, persistence.ErrNotBolt) || !strings.Contains(err.Error(), "not a bbolt file: no page of it, at any page size, is bbolt's (a wrong path?)") {
			t.Fatalf("OpenBolt of %s: %q is not ErrNotBolt saying it may be a wrong path", name, err)
		}
	}
	path := filepath.Join(dir, "checkpoints.db")
	b := openBolt(t, path)
	if err := b.Save(context.Background(), "p", wal.KafkaID(7)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[16] ^= 0xff // the first meta's magic number
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err = persistence.OpenBolt(path)
	if err != nil {
		t.Fatalf("OpenBolt with one meta page intact: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	data[4096+16] ^= 0xff // and the second's
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path)
	wantCorruptStore(t, "OpenBolt with both magic numbers hit", err, path)
	// Its other pages are bbolt's: damage, which a salvage may read.
	if errors.Is(err, persistence.ErrNotBolt) {
		t.Fatalf("a bbolt file whose meta pages alone were hit is ErrNotBolt: %v", err)
	}

	// Pages of 16 KiB: the first meta's magic hit, the second's checksum,
	// its magic intact, is damage, not a wrong path.
	big := filepath.Join(dir, "big.db")
	db, err := bolt.Open(big, 0o600, &bolt.Options{PageSize: 16384})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if data, err = os.ReadFile(big); err != nil {
		t.Fatal(err)
	}
	data[16] ^= 0xff
	data[16384+16+60] ^= 0xff // in the second meta, past its magic
	if err := os.WriteFile(big, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(big)
	wantCorruptStore(t, "OpenBolt of a 16 KiB-page file with both metas hit", err, big)
	if strings.Contains(err.Error(), "wrong path") {
		t.Fatalf("a bbolt file of 16 KiB pages called a wrong path: %v", err)
	}
}

// TestBoltKeyDamageIsRefused damages one byte of a key in a small store,
// whose bucket bbolt keeps inline and its consistency check does not
// order: the store opened, verify found nothing, and LoadAll read one
// pchannel's checkpoint as another's (two records under one name), or
// Load found nothing where a record was (keys out of order).
func TestBoltKeyDamageIsRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to string
		want     string
	}{
		{"a key made equal to the one before it", "slot-b", "slot-a", `key 1 ("slot-a") is not above the key before it ("slot-a")`},
		{"a key made greater than the one after it", "slot-a", "slot-z", `key 1 ("slot-b") is not above the key before it ("slot-z")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			b := openBolt(t, path, persistence.WithNoSync(true))
			for i, p := range []string{"slot-a", "slot-b", "slot-c"} {
				if err := b.Save(context.Background(), p, wal.KafkaID(10*(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			rewrite(t, path, func(t *testing.T, data []byte) []byte {
				// Every copy of the key: the live page, and any the
				// freelist holds.
				if n := bytes.Count(data, []byte(c.from)); n == 0 {
					t.Fatalf("no key %q in the file", c.from)
				}
				return bytes.ReplaceAll(data, []byte(c.from), []byte(c.to))
			})
			_, err := persistence.OpenBolt(path)
			wantCorruptStore(t, "OpenBolt", err, path)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenBolt = %v, want it to say %s", err, c.want)
			}
		})
	}
}

// TestBoltDamagedKeyIsNotNothingStored flips one byte of a key so that
// it still sorts where it stood: the file opens, but the record now lies
// under another name, which its name check tells. Load of the pchannel
// whose key it was said "nothing stored", and a node would have started
// from nothing and could have saved below what it had acknowledged. It is
// refused as a corrupt record until the misplaced one is deleted. Another
// pchannel with nothing stored is not held back: the record's check names
// orders-2, and held back every new pchannel of the file.
func TestBoltDamagedKeyIsNotNothingStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b := openBolt(t, path, persistence.WithNoSync(true))
	ctx := context.Background()
	for p, v := range map[string]int64{"orders-2": 500, "orders-4": 700} {
		if err := b.Save(ctx, p, wal.KafkaID(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		return bytes.ReplaceAll(data, []byte("orders-2"), []byte("orders-3"))
	})

	b = openBolt(t, path)
	defer b.Close()
	_, err := b.Load(ctx, "orders-2")
	var ce *persistence.CorruptRecordError
	if !errors.As(err, &ce) || ce.PChannel != "orders-2" || !strings.Contains(err.Error(), `a record under "orders-3" that was written for this one`) {
		t.Fatalf("Load(orders-2) = %v, want a corrupt record naming orders-3", err)
	}
	// A save is refused as well: the misplaced record may hold more.
	if err := b.Save(ctx, "orders-2", wal.KafkaID(100)); !errors.As(err, &ce) || ce.PChannel != "orders-2" {
		t.Fatalf("Save(orders-2, kafka:100) = %v, want it refused as a corrupt record", err)
	}
	if got, err := b.Load(ctx, "orders-4"); err != nil || got != wal.KafkaID(700) {
		t.Fatalf("Load(orders-4) = (%v, %v), want kafka:700", got, err)
	}
	if got, err := b.Load(ctx, "payments-1"); err != nil || got != nil {
		t.Fatalf("Load(payments-1) = (%v, %v), want nothing stored: the misplaced record is orders-2's", got, err)
	}
	if err := b.Save(ctx, "payments-1", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save(payments-1) = %v beside orders-2's misplaced record", err)
	}
	_, err = b.Load(ctx, "orders-3")
	if !errors.Is(err, persistence.ErrCorruptRecord) || !strings.Contains(err.Error(), "another pchannel's record") {
		t.Fatalf("Load(orders-3) = %v, want another pchannel's record", err)
	}
	// Each read or save of it names the file and what mends it: a node's
	// log, where they are retried, is where an operator meets them.
	located := ", in " + path + " (lowwater verify says how to repair it)"
	if !strings.HasSuffix(err.Error(), located) {
		t.Fatalf("Load(orders-3) = %v, want it to end %q", err, located)
	}
	if err := b.Save(ctx, "orders-3", wal.KafkaID(1000)); !errors.Is(err, persistence.ErrCorruptRecord) || !strings.HasSuffix(err.Error(), located) {
		t.Fatalf("Save(orders-3) = %v, want a corrupt record ending %q", err, located)
	}
	if _, err := b.LoadAll(ctx); !errors.Is(err, persistence.ErrCorruptRecord) || !strings.HasSuffix(err.Error(), located) {
		t.Fatalf("LoadAll = %v, want a corrupt record ending %q", err, located)
	}
	// The operator deletes it: nothing is stored for orders-2 any more.
	if err := b.Delete(ctx, "orders-3"); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Load(ctx, "orders-2"); err != nil || got != nil {
		t.Fatalf("Load(orders-2) after the delete = (%v, %v), want nothing stored", got, err)
	}
}

// A key whose damaged length took in bytes of its record, leaving a name
// no catalog writes over a record that cannot be read: that record may be
// any pchannel's, and a Load that finds nothing says so.
func TestBoltUnreadableRecordUnderABadNameIsNotNothingStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	good, err := persistence.EncodeRecord("orders-4", persistence.Record{Checkpoint: wal.KafkaID(700)})
	if err != nil {
		t.Fatal(err)
	}
	plant(t, path, defaultBucket, map[string][]byte{"orders-2\x02\x00\x00": []byte("\x07\x00"), "orders-4": good})
	b := openBolt(t, path)
	defer b.Close()
	_, err = b.Load(context.Background(), "orders-2")
	if !errors.Is(err, persistence.ErrCorruptRecord) || !strings.Contains(err.Error(), `a record under "orders-2\x02\x00\x00" that cannot be read, which may be this one's`) {
		t.Fatalf("Load(orders-2) = %v, want a corrupt record naming the bad name", err)
	}
	if got, err := b.Load(context.Background(), "orders-4"); err != nil || got != wal.KafkaID(700) {
		t.Fatalf("Load(orders-4) = (%v, %v), want kafka:700", got, err)
	}
}

// TestBoltBucketNameFlippedIsDamage damages the catalog bucket's name: a
// writer's OpenBolt made a new, empty bucket beside it, and every Load
// said "nothing stored". A bucket carries a mark of its own name, so that
// a damaged name is known by any number of bits, and a sibling catalog's
// bucket is not taken for one however close its name.
func TestBoltBucketNameFlippedIsDamage(t *testing.T) {
	for _, damaged := range []string{
		"lowwauer-checkpoints", // one bit
		"lowgater-aheckpoints", // w→g, c→a: two bits
		"lowwater-checkpoint!", // s→!: three bits
	} {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		writeHealthyBolt(t, path)
		rewrite(t, path, func(t *testing.T, data []byte) []byte {
			return bytes.ReplaceAll(data, []byte(defaultBucket), []byte(damaged))
		})
		for _, readOnly := range []bool{false, true} {
			_, err := persistence.OpenBolt(path, persistence.WithReadOnly(readOnly))
			wantCorruptStore(t, "OpenBolt", err, path)
			if !strings.Contains(err.Error(), fmt.Sprintf("one named %q that holds its records", damaged)) {
				t.Fatalf("OpenBolt = %v, want the damaged name named", err)
			}
		}
	}

	// Siblings, one bit apart or two, each with its own records.
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	for i, bucket := range []string{"tenant-0", "tenant-1", "tenant-2"} {
		b := openBolt(t, path, persistence.WithBucket(bucket))
		if err := b.Save(context.Background(), "p", wal.KafkaID(int64(i))); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b := openBolt(t, path, persistence.WithBucket("tenant-1"))
	if got, err := b.Load(context.Background(), "p"); err != nil || got != wal.KafkaID(1) {
		t.Fatalf("Load = (%v, %v), want kafka:1", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// A bit of the bucket's name and a bit of its mark, both flipped: the
// bucket was known by neither, and a writer's OpenBolt made a new, empty
// one beside it, over which every pchannel read as nothing stored and a
// save below a stored checkpoint went through. A bucket whose mark is no
// name's it bears, holding lowwater's records, is damage.
func TestBoltBucketNameAndMarkFlippedIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	writeHealthyBolt(t, path)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(defaultBucket))
		return b.SetSequence(b.Sequence() ^ 1)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		return bytes.ReplaceAll(data, []byte(defaultBucket), []byte("lowwauer-checkpoints"))
	})
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, readOnly := range []bool{false, true} {
		_, err := persistence.OpenBolt(path, persistence.WithReadOnly(readOnly))
		wantCorruptStore(t, "OpenBolt", err, path)
		if !strings.Contains(err.Error(), `one named "lowwauer-checkpoints" that holds lowwater's records under a mark that is not its name's`) {
			t.Fatalf("read-only %t: OpenBolt = %v, want the bucket taken for damage", readOnly, err)
		}
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the refused opens changed the file (%v)", err)
	}
}

// A bucket made before buckets were marked: one bit from the name asked
// for is taken for damage, as before; the bucket itself is marked by the
// first writer that opens it, and from then on known by its mark.
func TestBoltUnmarkedBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(7)})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		bucket, err := tx.CreateBucket([]byte(defaultBucket))
		if err != nil {
			return err
		}
		return bucket.Put([]byte("p"), rec)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path, persistence.WithBucket("lowwauer-checkpoints"))
	wantCorruptStore(t, "OpenBolt", err, path)
	if !strings.Contains(err.Error(), "one bit away, made before lowwater marked its buckets") {
		t.Fatalf("OpenBolt = %v, want the unmarked bucket one bit away", err)
	}

	b := openBolt(t, path) // marks it
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	rewrite(t, path, func(t *testing.T, data []byte) []byte {
		return bytes.ReplaceAll(data, []byte(defaultBucket), []byte("lowgater-aheckpoints"))
	})
	_, err = persistence.OpenBolt(path)
	wantCorruptStore(t, "OpenBolt", err, path)
}

// A key whose damaged length gave its tail to the record ("orders-2"
// read as "orders", the record behind it unreadable) left a valid name
// over a record that cannot be read: Load of orders-2 said nothing was
// stored, and its first save went below what it had acknowledged. The
// record's name check, read from the wrong bytes, no longer names its
// key, so it may be any pchannel's: every name with nothing stored is
// held back, as under a misplaced record.
func TestBoltKeyThatLostItsTailIsNotNothingStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	rec, err := persistence.EncodeRecord("orders-2", persistence.Record{Checkpoint: wal.KafkaID(500)})
	if err != nil {
		t.Fatal(err)
	}
	shifted := append([]byte("-2"), rec[:len(rec)-2]...)
	plant(t, path, defaultBucket, map[string][]byte{"orders": shifted})
	for _, group := range []bool{false, true} {
		b := openBolt(t, path, persistence.WithGroupCommit(group))
		wantHeldBack(t, b, "orders", "orders-2", "order", "payments-1")
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b := openBolt(t, path)
	defer b.Close()
	all, err := b.LoadAll(context.Background())
	if err == nil {
		t.Fatalf("LoadAll = %v, want the unreadable record reported", all)
	}
}

// Damage to where a key begins in its page (one bit of a leaf element's
// position) shifts the key and its record together: "pch-000" read as
// "ch-000" and the record's first byte, over a record that cannot be
// read. The key keeps no prefix of the name, and a hold on names near
// it let Load of pch-000 say nothing was stored, and a save lower
// than what it had acknowledged go through. Such a record may be any
// pchannel's.
func TestBoltShiftedKeyIsNotNothingStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	rec, err := persistence.EncodeRecord("pch-000", persistence.Record{Checkpoint: wal.KafkaID(1000)})
	if err != nil {
		t.Fatal(err)
	}
	next, err := persistence.EncodeRecord("pch-001", persistence.Record{Checkpoint: wal.KafkaID(1007)})
	if err != nil {
		t.Fatal(err)
	}
	// The page holds "pch-000", its record, "pch-001", ... in a row: the
	// shifted element reads one byte further on, for as many bytes.
	page := slices.Concat([]byte("pch-000"), rec, []byte("pch-001"))
	key, value := page[1:1+len("pch-000")], page[1+len("pch-000"):1+len("pch-000")+len(rec)]
	plant(t, path, defaultBucket, map[string][]byte{string(key): value, "pch-001": next})
	for _, group := range []bool{false, true} {
		b := openBolt(t, path, persistence.WithGroupCommit(group))
		wantHeldBack(t, b, string(key), "pch-000", "zz-far-away")
		if got, err := b.Load(context.Background(), "pch-001"); err != nil || got != wal.KafkaID(1007) {
			t.Fatalf("group %v: Load(pch-001) = (%v, %v), want kafka:1007: a name with its own record reads", group, got, err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A record whose own bytes are damaged, under its own key, holds back
// that key alone: its name check still names the key, so it is nobody
// else's, and names with nothing stored start from nothing.
func TestBoltRecordDamagedUnderItsOwnKeyHoldsBackNoOtherName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	plant(t, path, defaultBucket, map[string][]byte{"orders-2": damagedRecord(t, "orders-2")})
	b := openBolt(t, path)
	defer b.Close()
	ctx := context.Background()
	_, err := b.Load(ctx, "orders-2")
	var ce *persistence.CorruptRecordError
	if !errors.As(err, &ce) || ce.PChannel != "orders-2" || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("Load(orders-2) = %v, want its own record corrupt", err)
	}
	for _, p := range []string{"orders", "orders-20", "payments-1"} {
		if got, err := b.Load(ctx, p); err != nil || got != nil {
			t.Fatalf("Load(%s) = (%v, %v), want nothing stored", p, got, err)
		}
		if err := b.Save(ctx, p, wal.KafkaID(1)); err != nil {
			t.Fatalf("Save(%s, kafka:1) = %v", p, err)
		}
	}
}

// wantHeldBack checks that each of names, which has nothing stored, is
// refused by Load and Save as a corrupt record naming the misplaced key,
// and that the record under key itself reads as corrupt.
func wantHeldBack(t *testing.T, b *persistence.Bolt, key string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, p := range names {
		_, err := b.Load(ctx, p)
		var ce *persistence.CorruptRecordError
		if !errors.As(err, &ce) || ce.PChannel != p || !strings.Contains(err.Error(), fmt.Sprintf("a record under %q that cannot be read, which may be this one's under a damaged key", key)) {
			t.Fatalf("Load(%s) = %v, want a corrupt record naming %q", p, err, key)
		}
		if err := b.Save(ctx, p, wal.KafkaID(1)); !errors.As(err, &ce) || ce.PChannel != p {
			t.Fatalf("Save(%s, kafka:1) = %v, want it refused as a corrupt record", p, err)
		}
	}
	if _, err := b.Load(ctx, key); !errors.Is(err, persistence.ErrCorruptRecord) {
		t.Fatalf("Load(%q) = %v, want the record under it corrupt", key, err)
	}
}

// damagedRecord is pchannel's record with a bit of its checksum flipped:
// damage to its own bytes, its name check whole.
func damagedRecord(t *testing.T, pchannel string) []byte {
	t.Helper()
	rec, err := persistence.EncodeRecord(pchannel, persistence.Record{Checkpoint: wal.KafkaID(7)})
	if err != nil {
		t.Fatal(err)
	}
	rec[len(rec)-1] ^= 0x01
	return rec
}

// A small store keeps its bucket inside the root page, and a damaged page
// count drops it: the file holds no bucket at all, and a writer's OpenBolt
// made a new, empty one, over which every Load said "nothing stored". A
// file that has committed transactions and holds no bucket is refused;
// deleting the buckets leaves one alike, and it is refused as well.
func TestBoltFileWithoutItsBucketIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []func(*bolt.Tx) error{
		func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte(defaultBucket)); return err },
		func(tx *bolt.Tx) error { return tx.DeleteBucket([]byte(defaultBucket)) },
	} {
		if err := db.Update(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path)
	wantCorruptStore(t, "OpenBolt", err, path)
	if !strings.Contains(err.Error(), "no bucket, though 3 transactions were committed to it") {
		t.Fatalf("OpenBolt = %v, want the missing bucket named", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Fatal("the refused open wrote to the file")
	}
	// A new file gets its bucket.
	b := openBolt(t, filepath.Join(t.TempDir(), "new.db"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// A key damaged on disk while the file is open (a program that ignores
// the lock writes into it) left Load of its pchannel finding nothing, and
// a node recovering it then started from nothing: the file was checked
// at open only. A Load that finds nothing checks the pages again, and
// looks for a misplaced record.
func TestBoltKeyDamagedWhileOpenIsNotNothingStored(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to string
		want     func(t *testing.T, err error)
	}{
		{"still in order", "pch-1200", "pch-1201", func(t *testing.T, err error) {
			var ce *persistence.CorruptRecordError
			if !errors.As(err, &ce) || ce.PChannel != "pch-1200" || !strings.Contains(err.Error(), `a record under "pch-1201" that was written for this one`) {
				t.Fatalf("Load(pch-1200) = %v, want a corrupt record naming pch-1201", err)
			}
		}},
		// Out of order, the key hides the names after it in its page
		// from bbolt's search too: the store is damaged.
		{"out of order", "pch-1200", "qch-1200", func(t *testing.T, err error) {
			if !errors.Is(err, persistence.ErrCorruptStore) || !strings.Contains(err.Error(), `("qch-1200") is not below`) {
				t.Fatalf("Load(pch-1200) = %v, want the store damaged", err)
			}
		}},
	} {
		for _, group := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/group=%t", c.name, group), func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "checkpoints.db")
				b := openBolt(t, path, persistence.WithGroupCommit(group), persistence.WithGroupCommitDelay(time.Millisecond))
				ctx := context.Background()
				for i := range 200 {
					if err := b.Save(ctx, fmt.Sprintf("pch-%04d", 10*i), wal.KafkaID(int64(1000+i))); err != nil {
						t.Fatal(err)
					}
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Every copy: the live page's, and any a freed page holds.
				for at := 0; ; {
					i := bytes.Index(data[at:], []byte(c.from))
					if i < 0 {
						break
					}
					if _, err := f.WriteAt([]byte(c.to), int64(at+i)); err != nil {
						t.Fatal(err)
					}
					at += i + 1
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				_, err = b.Load(ctx, c.from)
				c.want(t, err)
				if err := b.Save(ctx, c.from, wal.KafkaID(5)); err == nil {
					t.Fatal("Save(kafka:5) went through")
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The first key of a branch page damaged to sort above the second: bbolt
// searched the keys in halves, sent a look-up of a stored pchannel to the
// wrong child, and Load found nothing stored, at rest behind a damaged
// meta header (which skips bbolt's own check) and while open (where the
// pages are checked again). Branch keys must rise, the first included.
func TestBoltBranchKeyOutOfOrderIsDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	writeHealthyBolt(t, path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := bucketRoot(t, data)
	page := data[root*bboltPageSize:]
	if flags := binary.LittleEndian.Uint16(page[8:]); flags != branchPageFlag {
		t.Fatalf("the bucket's root page %d has flags %#x, not a branch page's", root, flags)
	}
	pos := binary.LittleEndian.Uint32(page[pageHeaderSize:])
	key0 := page[pageHeaderSize+int(pos):]
	if !bytes.HasPrefix(key0, []byte(damagedName(0))) {
		t.Fatalf("branch key 0 is %q, want %q", key0[:len(damagedName(0))], damagedName(0))
	}
	at := root*bboltPageSize + pageHeaderSize + int(pos) + 1 // its second byte
	want := `branch key 0 ("p\x9channel-0000") is not below the one after it`

	damaged := bytes.Clone(data)
	damaged[at] ^= 0xff
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path)
	wantCorruptStore(t, "OpenBolt", err, path)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("OpenBolt = %v, want %s", err, want)
	}

	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := openBolt(t, path)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[at] ^ 0xff}, int64(at)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = b.Load(context.Background(), "absent")
	wantCorruptStore(t, "Load of a name never saved", err, path)
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("Load = %v, want %s", err, want)
	}
	// From then on the store refuses every call, the names bbolt's search
	// would miss among them.
	for i := range damagedRecords {
		if got, err := b.Load(context.Background(), damagedName(i)); !errors.Is(err, persistence.ErrCorruptStore) {
			t.Fatalf("Load(%s) = (%v, %v), want the store damaged", damagedName(i), got, err)
		}
	}
}

// Two catalogs whose bucket names share a CRC-32 ("plumless" and
// "buckeroo") carry one mark: the second was taken for the first's under
// a damaged name, and refused. A bucket marked as its own name is a
// sibling, whatever else its mark matches.
func TestBoltSiblingBucketsOfOneCRC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	for i, bucket := range []string{"plumless", "buckeroo"} {
		b := openBolt(t, path, persistence.WithBucket(bucket))
		if err := b.Save(context.Background(), "p", wal.KafkaID(int64(i+1))); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i, bucket := range []string{"plumless", "buckeroo"} {
		b := openBolt(t, path, persistence.WithBucket(bucket), persistence.WithReadOnly(true))
		if got, err := b.Load(context.Background(), "p"); err != nil || got != wal.KafkaID(int64(i+1)) {
			t.Fatalf("%s: Load = (%v, %v), want kafka:%d", bucket, got, err, i+1)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A file gone back to an earlier commit under an open Bolt, its newest
// meta page damaged (bbolt then reads the one before, which names the
// commit before), is damage: a Load returned the checkpoint of the
// commit before, below the one acknowledged, and a save went on writing
// over the commit lost.
func TestBoltFileGoneBackWhileOpenIsDamage(t *testing.T) {
	for modeName, opts := range map[string][]persistence.BoltOption{
		"single":       {persistence.WithGroupCommit(false)},
		"group commit": nil,
	} {
		t.Run(modeName, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			writeHealthyBolt(t, path)
			b := openBolt(t, path, opts...)
			if err := b.Save(ctx, damagedName(0), wal.KafkaID(9999)); err != nil {
				t.Fatal(err)
			}
			data := readFile(t, path)
			le := binary.LittleEndian
			newest := 0
			if le.Uint64(data[bboltPageSize+pageHeaderSize+48:]) > le.Uint64(data[pageHeaderSize+48:]) {
				newest = 1
			}
			fill(data[newest*bboltPageSize:(newest+1)*bboltPageSize], 0)
			writeInPlace(t, path, data)

			got, err := noPanicValue(t, "Load", func() (wal.MessageID, error) { return b.Load(ctx, damagedName(0)) })
			if err == nil {
				t.Fatalf("Load = %v after the file went back, want ErrCorruptStore (kafka:9999 was acknowledged)", got)
			}
			wantCorruptStore(t, "Load", err, path)
			wantCorruptStore(t, "Save", noPanic(t, "Save", func() error { return b.Save(ctx, damagedName(1), wal.KafkaID(9999)) }), path)
			if !bytes.Equal(readFile(t, path), data) {
				t.Fatal("the Bolt wrote to its file after it went back")
			}
			closeWithin(t, b, 10*time.Second)
		})
	}
}
