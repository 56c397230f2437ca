package persistence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/wal"
)

func TestMemoryContract(t *testing.T) {
	catalogtest.Run(t, func(*testing.T) persistence.Catalog { return persistence.NewMemory() })
}

func TestMemoryHistory(t *testing.T) {
	m := persistence.NewMemory()
	defer m.Close()
	ctx := context.Background()
	for _, v := range []wal.KafkaID{1, 3, 3, 2, 5} {
		err := m.Save(ctx, "p", v)
		if v == 2 {
			if !errors.Is(err, persistence.ErrStoredAhead) {
				t.Fatalf("Save(2) over 3 = %v, want ErrStoredAhead", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Save(%d) = %v", v, err)
		}
	}
	want := []wal.MessageID{wal.KafkaID(1), wal.KafkaID(3), wal.KafkaID(3), wal.KafkaID(5)}
	got := m.History("p")
	if len(got) != len(want) {
		t.Fatalf("History = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("History = %v, want %v", got, want)
		}
	}
	got[0] = wal.KafkaID(100)
	if m.History("p")[0] != wal.KafkaID(1) {
		t.Fatal("History returned the catalog's own slice")
	}
	if h := m.History("other"); len(h) != 0 {
		t.Fatalf("History(other) = %v, want empty", h)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if len(m.History("p")) != len(want) {
		t.Fatal("History lost after Close")
	}
}

func TestMemoryPulsarEqualSaveKeepsStoredPartition(t *testing.T) {
	m := persistence.NewMemory()
	defer m.Close()
	ctx := context.Background()
	stored := wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 0}
	if err := m.Save(ctx, "p", stored); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(ctx, "p", wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 9}); err != nil {
		t.Fatalf("equal save = %v", err)
	}
	if got, err := m.Load(ctx, "p"); err != nil || got != stored {
		t.Fatalf("Load = (%#v, %v), want %#v", got, err, stored)
	}
}

func TestMemoryCorruptRecord(t *testing.T) {
	m := persistence.NewMemory()
	defer m.Close()
	ctx := context.Background()
	garbage := []byte("not a record")
	m.Put("bad", garbage)
	good, err := persistence.EncodeRecord("good", persistence.Record{Checkpoint: wal.KafkaID(8), Term: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Put("good", good)

	if got, err := m.Load(ctx, "good"); err != nil || got != wal.KafkaID(8) {
		t.Fatalf("Load(good) = (%v, %v), want kafka:8", got, err)
	}
	_, err = m.Load(ctx, "bad")
	wantCorrupt(t, "Load", err, "bad")
	_, err = m.LoadAll(ctx)
	wantCorrupt(t, "LoadAll", err, "bad")
	// A record that cannot be read cannot be proved lower: it is kept.
	wantCorrupt(t, "Save", m.Save(ctx, "bad", wal.KafkaID(1)), "bad")
	_, err = m.Load(ctx, "bad")
	wantCorrupt(t, "Load after Save", err, "bad")
}

func wantCorrupt(t *testing.T, call string, err error, pchannel string) {
	t.Helper()
	if !errors.Is(err, persistence.ErrCorruptRecord) {
		t.Fatalf("%s = %v, want ErrCorruptRecord", call, err)
	}
	var corrupt *persistence.CorruptRecordError
	if !errors.As(err, &corrupt) || corrupt.PChannel != pchannel {
		t.Fatalf("%s = %v, want a *CorruptRecordError for %q", call, err, pchannel)
	}
}
