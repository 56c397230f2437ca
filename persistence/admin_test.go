package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/testkit/recordtest"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// foreignRecord is pchannel's well-formed record of a WAL this process
// never registered, as another program's catalog may hold: a header is
// readable, the ID is not.
func foreignRecord(t *testing.T, pchannel string) []byte {
	t.Helper()
	good, err := persistence.EncodeRecord(pchannel, persistence.Record{Checkpoint: wal.KafkaID(1), Term: 4})
	if err != nil {
		t.Fatal(err)
	}
	return recordtest.WithWAL(good, "nosuchwal")
}

// A record under a key damaged by one byte names the pchannel it was
// written for: a bit flipped, a byte overwritten, a byte more. One
// copied under a name further off names none, nor one no node could have
// been written for.
func TestInspectTellsWhoseAMisplacedRecordIs(t *testing.T) {
	for _, c := range []struct{ writtenFor, key, want string }{
		{"orders-dml-0", "nrders-dml-0", "orders-dml-0"},    // 'o' ^ 0x01
		{"orders-dml-0", "orders-dml-\xb0", "orders-dml-0"}, // '0' ^ 0x80: no UTF-8
		{"orders-dml-0", "orders-dXl-0", "orders-dml-0"},
		{"orders-dml-0", "orders-dml-0\x00", "orders-dml-0"},
		{"orders-dml-0", "orders-dml-0x", "orders-dml-0"},
		{"orders-dml-0", "payments-0", ""},
		{"orders-dml-0", "orders-dml-99", ""},
		{"", "\x00", ""}, // the empty name: no node's
	} {
		raw, err := persistence.EncodeRecord(c.writtenFor, persistence.Record{Checkpoint: wal.KafkaID(120)})
		if err != nil {
			t.Fatal(err)
		}
		m := persistence.NewMemory()
		m.Put(c.key, raw)
		entries, err := m.Inspect(context.Background())
		if err != nil || len(entries) != 1 {
			t.Fatalf("%q: Inspect = (%+v, %v), want one entry", c.key, entries, err)
		}
		var misplaced *persistence.MisplacedRecordError
		if !errors.As(entries[0].Err, &misplaced) || misplaced.WrittenFor != c.want || misplaced.Checkpoint != wal.KafkaID(120) {
			t.Errorf("%q: entry = %+v (%v), want a misplaced record written for %q", c.key, entries[0], entries[0].Err, c.want)
			continue
		}
		if want := fmt.Sprintf(", written for %q", c.want); c.want != "" && !strings.HasSuffix(misplaced.Error(), want) {
			t.Errorf("%q: %q, want it to end %q", c.key, misplaced.Error(), want)
		}
	}
}

func TestInspectListsEveryRecord(t *testing.T) {
	for name, open := range map[string]func(t *testing.T, recs map[string][]byte) persistence.Inspector{
		"memory": func(t *testing.T, recs map[string][]byte) persistence.Inspector {
			m := persistence.NewMemory()
			for k, v := range recs {
				m.Put(k, v)
			}
			return m
		},
		"bolt": func(t *testing.T, recs map[string][]byte) persistence.Inspector {
			path := filepath.Join(t.TempDir(), "c.db")
			plant(t, path, defaultBucket, recs)
			b := openBolt(t, path, persistence.WithReadOnly(true))
			t.Cleanup(func() { _ = b.Close() })
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			good, err := persistence.EncodeRecord("a-good", persistence.Record{Checkpoint: wal.PulsarID{LedgerID: 3, EntryID: 4, BatchIndex: 5, Partition: 6}, Term: 9})
			if err != nil {
				t.Fatal(err)
			}
			moved, err := persistence.EncodeRecord("someone-else", persistence.Record{Checkpoint: wal.KafkaID(120), Term: 3})
			if err != nil {
				t.Fatal(err)
			}
			c := open(t, map[string][]byte{"a-good": good, "b-garbage": []byte("garbage!garbage!"), "c-foreign": foreignRecord(t, "c-foreign"), "d-moved": moved})
			entries, err := c.Inspect(context.Background())
			if err != nil {
				t.Fatalf("Inspect = %v", err)
			}
			if len(entries) != 4 {
				t.Fatalf("Inspect = %d entries, want 4: %+v", len(entries), entries)
			}
			g, b, f, m := entries[0], entries[1], entries[2], entries[3]
			// Another pchannel's record: what it holds is told, not given
			// as this one's checkpoint.
			var misplaced *persistence.MisplacedRecordError
			if m.PChannel != "d-moved" || m.WAL != wal.Kafka || m.Term != 3 || m.Version != 2 || m.Checkpoint != nil || !errors.Is(m.Err, persistence.ErrCorruptRecord) ||
				!errors.As(m.Err, &misplaced) || misplaced.WAL != wal.Kafka || misplaced.Checkpoint != wal.KafkaID(120) || misplaced.Term != 3 ||
				misplaced.Err != nil || misplaced.WrittenFor != "" || !misplaced.Names("someone-else") || misplaced.Names("d-moved") ||
				m.Err.Error() != `persistence: pchannel "d-moved": corrupt checkpoint record: another pchannel's record: its key was damaged, or it was copied under this name; it holds kafka:120` {
				t.Errorf("moved entry = %+v (%v)", m, m.Err)
			}
			if g.PChannel != "a-good" || g.WAL != wal.Pulsar || g.Checkpoint != (wal.PulsarID{LedgerID: 3, EntryID: 4, BatchIndex: 5, Partition: 6}) ||
				g.Term != 9 || g.Version != 2 || g.Err != nil {
				t.Errorf("good entry = %+v", g)
			}
			var corrupt *persistence.CorruptRecordError
			if b.PChannel != "b-garbage" || b.WAL != "" || b.Checkpoint != nil || b.Version != 0 ||
				!errors.As(b.Err, &corrupt) || corrupt.PChannel != "b-garbage" || !errors.Is(b.Err, persistence.ErrCorruptRecord) {
				t.Errorf("garbage entry = %+v", b)
			}
			if f.PChannel != "c-foreign" || f.WAL != "nosuchwal" || f.Term != 4 || f.Checkpoint != nil ||
				!errors.Is(f.Err, persistence.ErrCorruptRecord) || !errors.Is(f.Err, wal.ErrUnknownWAL) {
				t.Errorf("foreign entry = %+v", f)
			}
		})
	}
}

func TestDeleteClearsACorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	plant(t, path, defaultBucket, map[string][]byte{"bad": []byte("garbage!garbage!")})
	b := openBolt(t, path)
	defer b.Close()
	ctx := context.Background()
	if _, err := b.Load(ctx, "bad"); !errors.Is(err, persistence.ErrCorruptRecord) {
		t.Fatalf("Load = %v, want ErrCorruptRecord", err)
	}
	if err := b.Delete(ctx, "bad"); err != nil {
		t.Fatalf("Delete = %v", err)
	}
	if got, err := b.Load(ctx, "bad"); err != nil || got != nil {
		t.Fatalf("Load after Delete = (%v, %v), want none", got, err)
	}
	if err := b.Save(ctx, "bad", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save after Delete = %v", err)
	}
}

func TestBoltReadOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.db")
	w := openBolt(t, path)
	ctx := context.Background()
	if err := w.Save(ctx, "p", wal.KafkaID(7)); err != nil {
		t.Fatal(err)
	}

	// A writer holds the file: a reader times out with ErrLocked.
	start := time.Now()
	_, err := persistence.OpenBolt(path, persistence.WithReadOnly(true), persistence.WithOpenTimeout(100*time.Millisecond))
	if !errors.Is(err, persistence.ErrLocked) {
		t.Fatalf("read-only open under a writer = %v, want ErrLocked", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("read-only open waited %v", waited)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Two readers at once; neither can write.
	r1 := openBolt(t, path, persistence.WithReadOnly(true))
	r2 := openBolt(t, path, persistence.WithReadOnly(true))
	for _, r := range []*persistence.Bolt{r1, r2} {
		if got, err := r.Load(ctx, "p"); err != nil || got != wal.KafkaID(7) {
			t.Fatalf("Load = (%v, %v)", got, err)
		}
		wantReadOnly(t, "Save", r.Save(ctx, "p", wal.KafkaID(8)), path, "save", "p")
		wantReadOnly(t, "Delete", r.Delete(ctx, "p"), path, "delete", "p")
		if got, err := r.Load(ctx, "p"); err != nil || got != wal.KafkaID(7) {
			t.Fatalf("Load after refused writes = (%v, %v), want kafka:7", got, err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A file that is not there, or holds no catalog, is an error, and is not
	// created.
	if _, err := persistence.OpenBolt(filepath.Join(dir, "missing.db"), persistence.WithReadOnly(true)); err == nil {
		t.Fatal("read-only open of a missing file succeeded")
	}
	if _, err := persistence.OpenBolt(path, persistence.WithReadOnly(true), persistence.WithBucket("other")); !errors.Is(err, persistence.ErrInvalidArgument) {
		t.Fatalf("read-only open without the bucket = %v, want ErrInvalidArgument", err)
	}
}

// wantReadOnly checks the refusal of a write (op) of pchannel on a
// read-only Bolt of the file at path: ErrReadOnly, naming the file, the
// write and the pchannel, and never bbolt's bare "database is in read-only
// mode".
func wantReadOnly(t *testing.T, call string, err error, path, op, pchannel string) {
	t.Helper()
	want := fmt.Sprintf("persistence: bolt catalog is read-only: %s: cannot %s pchannel %q", path, op, pchannel)
	if !errors.Is(err, persistence.ErrReadOnly) || err.Error() != want {
		t.Fatalf("%s on a read-only Bolt = %v, want %q (ErrReadOnly)", call, err, want)
	}
}
