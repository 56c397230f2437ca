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
	"strings"
	"testing"
	"time"

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
	leafPageFlag   = 0x02
	leafElemSize   = 16
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
		// Leaf element header: flags, pos, ksize, vsize (4 bytes each).
		{"flipped position bytes in leaf pages", flipLeafElements(0x80, 7)},
		{"flipped size bytes in leaf pages", flipLeafElements(0xff, 8, 12)},
		{"flipped low position bits in leaf pages", flipLeafElements(0x01, 5)},
	}
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

// TestBoltDamagedWhileOpen damages the pages of an open store on disk:
// the call that meets the damage reports ErrCorruptStore instead of
// panicking, and from then on the Bolt refuses every call without writing
// a byte to the file.
func TestBoltDamagedWhileOpen(t *testing.T) {
	t.Run("single", func(t *testing.T) { testBoltDamagedWhileOpen(t) })
	t.Run("group commit", func(t *testing.T) {
		testBoltDamagedWhileOpen(t, persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(time.Millisecond))
	})
}

func testBoltDamagedWhileOpen(t *testing.T, opts ...persistence.BoltOption) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	writeHealthyBolt(t, path)
	b := openBolt(t, path, opts...)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}

	// Written through the file, seen through bbolt's shared mapping.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := flipLeafElements(0x80, 7)(t, data)
	writeInPlace(t, path, damaged)

	// The Save meets the damage first (its cursor reads the leaf), then
	// LoadAll and Load find the Bolt refusing.
	err = noPanic(t, "Save", func() error { return b.Save(ctx, damagedName(0), wal.KafkaID(9999)) })
	wantCorruptStore(t, "Save", err, path)
	_, err = noPanicValue(t, "LoadAll", func() (map[string]wal.MessageID, error) { return b.LoadAll(ctx) })
	wantCorruptStore(t, "LoadAll after the damage", err, path)
	_, err = noPanicValue(t, "Load", func() (wal.MessageID, error) { return b.Load(ctx, damagedName(1)) })
	wantCorruptStore(t, "Load after the damage", err, path)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, damaged) {
		t.Fatal("the damaged Bolt wrote to its file")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close of a damaged Bolt = %v", err)
	}
}

// TestBoltDamagedMetaWhileOpen damages both meta pages of an open store.
// bbolt panics while starting the next transaction, still holding the
// locks it took (on a batch's timer goroutine, with group commit, where
// nothing could catch it and the process died). The Save reports
// ErrCorruptStore, Close returns rather than waiting on those locks for
// good, and it lets go of the file: opening it again finds the damage,
// not a lock.
func TestBoltDamagedMetaWhileOpen(t *testing.T) {
	for name, opts := range map[string][]persistence.BoltOption{
		"single":       nil,
		"group commit": {persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(time.Millisecond)},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			writeHealthyBolt(t, path)
			b := openBolt(t, path, opts...)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The magic number of each meta page.
			data[pageHeaderSize] ^= 0xff
			data[bboltPageSize+pageHeaderSize] ^= 0xff
			writeInPlace(t, path, data)

			ctx := context.Background()
			err = noPanic(t, "Save", func() error { return b.Save(ctx, damagedName(0), wal.KafkaID(9999)) })
			wantCorruptStore(t, "Save", err, path)
			_, err = noPanicValue(t, "Load", func() (wal.MessageID, error) { return b.Load(ctx, damagedName(1)) })
			wantCorruptStore(t, "Load after the damage", err, path)

			closed := make(chan error, 1)
			go func() { closed <- b.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatalf("Close of a damaged Bolt = %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close of a Bolt whose bbolt panicked starting a transaction did not return within 10 s")
			}
			_, err = persistence.OpenBolt(path, persistence.WithOpenTimeout(100*time.Millisecond))
			wantCorruptStore(t, "OpenBolt after Close", err, path)
		})
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
