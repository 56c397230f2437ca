package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// lastTx is the ID of the last transaction the closed file at path
// committed.
func lastTx(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	return tx.ID()
}

// Replace writes what Save refuses (a lower checkpoint, another WAL's, in
// place of a record that cannot be read), in one commit: no moment finds
// the record gone. What it wrote is a record as any other, which Save
// then raises and never lowers.
func TestBoltReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	plant(t, path, defaultBucket, map[string][]byte{"bad": damagedRecord(t, "bad"), "foreign": foreignRecord(t, "foreign")})
	b := openBolt(t, path)
	ctx := context.Background()
	if err := b.Save(ctx, "p", wal.KafkaID(9)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	before := lastTx(t, path)

	b = openBolt(t, path)
	for p, id := range map[string]wal.MessageID{"p": wal.KafkaID(5), "bad": wal.KafkaID(3), "foreign": wal.KafkaID(2)} {
		if err := b.Replace(ctx, p, id); err != nil {
			t.Fatalf("Replace(%s, %v) = %v", p, id, err)
		}
		if got, err := b.Load(ctx, p); err != nil || got != id {
			t.Fatalf("Load(%s) after Replace = (%v, %v), want %v", p, got, err, id)
		}
	}
	var ahead *persistence.StoredAheadError
	if err := b.Save(ctx, "p", wal.KafkaID(4)); !errors.As(err, &ahead) || ahead.Stored != wal.KafkaID(5) {
		t.Fatalf("Save below a replaced record = %v, want StoredAheadError at kafka:5", err)
	}
	if err := b.Save(ctx, "bad", wal.KafkaID(6)); err != nil {
		t.Fatalf("Save above a replaced record = %v", err)
	}

	// Bad arguments change nothing.
	for _, c := range []struct {
		p  string
		id wal.MessageID
	}{{"", wal.KafkaID(1)}, {"p", nil}, {"a\xffb", wal.KafkaID(1)}} {
		if err := b.Replace(ctx, c.p, c.id); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("Replace(%q, %v) = %v, want ErrInvalidArgument", c.p, c.id, err)
		}
	}
	if got, err := b.Load(ctx, "p"); err != nil || got != wal.KafkaID(5) {
		t.Fatalf("Load after refused replaces = (%v, %v), want kafka:5", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Replace(ctx, "p", wal.KafkaID(1)); !errors.Is(err, persistence.ErrClosed) {
		t.Fatalf("Replace after Close = %v, want ErrClosed", err)
	}
	// Three replaces and a save: a commit each.
	if got := lastTx(t, path) - before; got != 4 {
		t.Fatalf("%d commits, want 4", got)
	}

	r := openBolt(t, path, persistence.WithReadOnly(true))
	defer r.Close()
	wantReadOnly(t, "Replace", r.Replace(ctx, "p", wal.KafkaID(1)), path, "replace", "p")
}

// Under group commit, replaces under way together share commits, as
// saves do, and each writes its own record.
func TestBoltReplaceGrouped(t *testing.T) {
	const n = 500
	path := filepath.Join(t.TempDir(), "c.db")
	records := make(map[string][]byte, n)
	for i := range n {
		p := fmt.Sprintf("p%03d", i)
		rec, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(1000)})
		if err != nil {
			t.Fatal(err)
		}
		records[p] = rec
	}
	plant(t, path, defaultBucket, records)
	before := lastTx(t, path)

	ctx := context.Background()
	b := openBolt(t, path, persistence.WithGroupCommit(true))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- b.Replace(ctx, fmt.Sprintf("p%03d", i), wal.KafkaID(i)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	stored, err := b.LoadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if p := fmt.Sprintf("p%03d", i); stored[p] != wal.KafkaID(i) {
			t.Fatalf("%s = %v, want kafka:%d", p, stored[p], i)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lastTx(t, path) - before; got > n/10 {
		t.Fatalf("%d replaces took %d commits", n, got)
	}
}
