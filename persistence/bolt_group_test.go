package persistence

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/wal"
)

// TestGroupCommitCloseWaitsForTheBatch closes a Bolt while a save waits
// in its batch for the delay: the batch commits on its timer, the save
// reports it durable, and Close returns after it; the value is in the
// file when it is opened again.
func TestGroupCommitCloseWaitsForTheBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	const delay = 200 * time.Millisecond
	b, err := OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(delay))
	if err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	start := time.Now()
	go func() { saved <- b.Save(context.Background(), "p", wal.KafkaID(42)) }()
	waitJoined(t, b.group, 1)
	if err := b.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	// Save has returned (Close waits for the calls in flight), but its
	// goroutine may not have sent its result yet: hence the deadline. Had
	// Close not waited for the batch, the commit would have found the
	// file closed.
	if err := within(t, saved, "Save's result"); err != nil {
		t.Fatalf("Save = %v, want nil: its batch committed before Close returned", err)
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Fatalf("the batch committed after %v, before its delay of %v", elapsed, delay)
	}

	if got := loadReopened(t, path, "p"); got != wal.KafkaID(42) {
		t.Fatalf("Load after reopening = %v, want kafka:42", got)
	}
}

// loadReopened opens the file at path again and loads pchannel from it.
func loadReopened(t *testing.T, path, pchannel string) wal.MessageID {
	t.Helper()
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.Load(context.Background(), pchannel)
	if err != nil {
		t.Fatalf("Load(%s) after reopening: %v", pchannel, err)
	}
	return got
}

// A Save whose context ends while it waits for its batch returns the
// context's error then, not at the commit: a Save under WithGroupCommit
// waited out its batch whatever its deadline, and a commit that hung held
// it for good. Its write stays in the batch, and Close still waits for
// the commit that makes it durable.
func TestGroupCommitSaveHonoursItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(MaxGroupCommitDelay))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	saved := make(chan error, 1)
	go func() { saved <- b.Save(ctx, "p", wal.KafkaID(42)) }()
	waitJoined(t, b.group, 1)
	cancel()
	if err := within(t, saved, "Save's result"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save = %v, want context.Canceled before its batch commits", err)
	}
	if got, err := b.Load(context.Background(), "p"); err != nil || got != nil {
		t.Fatalf("Load before the commit = (%v, %v), want nothing yet", got, err)
	}
	// The commit comes at the batch's delay; Close waits for it.
	if err := b.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got := loadReopened(t, path, "p"); got != wal.KafkaID(42) {
		t.Fatalf("Load after reopening = %v, want kafka:42: the write left in the batch", got)
	}
}

// A grouped Replace whose context ends before its batch commits still
// repairs what it was for: once its write commits, the misplaced record
// it replaced no longer fails the Load of the pchannel it was written for.
// The Replace forgot it on its own return, which came first.
func TestGroupCommitReplaceLeftInItsBatchRepairs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ctx := context.Background()
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, "x", wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// x's record moves under the key y: misplaced.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket([]byte(DefaultBucket))
		if err := bk.Put([]byte("y"), bytes.Clone(bk.Get([]byte("x")))); err != nil {
			return err
		}
		return bk.Delete([]byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	b, err = OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(MaxGroupCommitDelay))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Load(ctx, "x"); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("Load(x) = %v, want ErrCorruptRecord while y holds its record", err)
	}
	cut, cancel := context.WithCancel(ctx)
	replaced := make(chan error, 1)
	go func() { replaced <- b.Replace(cut, "y", wal.KafkaID(7)) }()
	waitJoined(t, b.group, 1)
	cancel()
	if err := within(t, replaced, "Replace's result"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Replace = %v, want context.Canceled before its batch commits", err)
	}
	require.Eventually(t, func() bool {
		got, err := b.Load(ctx, "x")
		return err == nil && got == nil
	}, 10*time.Second, time.Millisecond, "Load(x) finding nothing once the repair commits")
	if got, err := b.Load(ctx, "y"); err != nil || got != wal.KafkaID(7) {
		t.Fatalf("Load(y) = (%v, %v), want kafka:7", got, err)
	}
}

// waitJoined waits until the open batch of g holds n saves.
func waitJoined(t *testing.T, g *groupCommit, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.open != nil && len(g.open.saves) >= n
	}, 10*time.Second, time.Millisecond, "the saves joining the open batch")
}

// within receives from ch, within 10 s.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
		panic("unreachable")
	}
}

// TestGroupCommitRecyclesToldBatches: the saves of a batch whose saves
// were all started (StartSave) are kept, emptied, for the next batch once
// every one is told; those of a batch that a Save waits on are not, since
// each Save reads its own outcome there after the commit.
func TestGroupCommitRecyclesToldBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	told := make(chan error, 3)
	for i, p := range []string{"a", "b", "c"} {
		if err := b.StartSave(ctx, p, wal.KafkaID(i+1), func(err error) { told <- err }); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if err := within(t, told, "a started save's outcome"); err != nil {
			t.Fatalf("told %v, want nil", err)
		}
	}
	var s []batchedSave
	require.Eventually(t, func() bool { // after its last done returned
		b.group.mu.Lock()
		defer b.group.mu.Unlock()
		s = b.group.spare
		return s != nil
	}, 10*time.Second, time.Millisecond, "the told batch recycled")
	if len(s) != 0 || cap(s) < 3 {
		t.Fatalf("spare saves: len %d, cap %d; want the told batch's, emptied", len(s), cap(s))
	}
	for i, bs := range s[:cap(s)] {
		if bs.pchannel != "" || bs.checkpoint != nil || bs.raw != nil || bs.done != nil || bs.err != nil {
			t.Fatalf("spare save %d still holds %+v", i, bs)
		}
	}

	// Stored ahead: this Save is refused, and must read its own refusal
	// from the batch it waits on.
	if err := b.Save(ctx, "a", wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	refused := make(chan error, 1)
	go func() { refused <- b.Save(ctx, "a", wal.KafkaID(4)) }()
	waitJoined(t, b.group, 1)
	if err := b.StartSave(ctx, "b", wal.KafkaID(9), func(err error) { told <- err }); err != nil {
		t.Fatal(err)
	}
	if err := within(t, told, "the started save's outcome"); err != nil {
		t.Fatalf("told %v, want nil", err)
	}
	var ahead *StoredAheadError
	if err := within(t, refused, "the refused Save's outcome"); !errors.As(err, &ahead) {
		t.Fatalf("Save below the stored checkpoint = %v, want *StoredAheadError", err)
	}
	b.group.mu.Lock()
	defer b.group.mu.Unlock()
	if b.group.spare != nil {
		t.Fatal("a batch that a Save waited on was recycled")
	}
}

// A batch is committed once, by whoever takes it: the save that fills it,
// or its timer, which may fire while the filler commits (a stopped timer
// whose function has started runs all the same). The one that comes
// second finds it taken.
func TestGroupCommitBatchIsTakenOnce(t *testing.T) {
	g := &groupCommit{delay: time.Hour, commit: func(*batch) { t.Error("committed by a timer") }}
	var bt *batch
	full := false
	for i := range maxGroupSaves {
		bt, _, full = g.join(&batchedSave{pchannel: "p", checkpoint: wal.KafkaID(i), done: func(error) {}})
	}
	if !full {
		t.Fatalf("%d saves did not fill a batch", maxGroupSaves)
	}
	if g.take(bt) {
		t.Fatal("the timer took a batch its filler commits")
	}

	open, _, full := g.join(&batchedSave{pchannel: "p", checkpoint: wal.KafkaID(1), done: func(error) {}})
	defer open.timer.Stop()
	if full || open == bt {
		t.Fatal("a save after a full batch did not open a new one")
	}
	if !g.take(open) {
		t.Fatal("the timer of an open batch could not take it")
	}
	if g.take(open) {
		t.Fatal("a batch was taken twice")
	}
}

// A batch whose every save is refused is rolled back, not committed: the
// file is neither written nor synced for nothing (a restore refused
// record by record used to rewrite a meta page and the freelist). In a
// batch where one save is refused and another is not, the other commits.
func TestGroupCommitOfRefusedSavesWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(100*time.Millisecond))
	require.NoError(t, err)
	defer b.Close()
	ctx := context.Background()
	require.NoError(t, b.Save(ctx, "p", wal.KafkaID(10)))
	before, err := os.ReadFile(path)
	require.NoError(t, err)

	require.ErrorIs(t, b.Save(ctx, "p", wal.KafkaID(5)), ErrStoredAhead)
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(before, after), "a batch of refused saves wrote the file")

	results := make(chan error, 2)
	require.NoError(t, b.StartSave(ctx, "p", wal.KafkaID(5), func(err error) { results <- err }))
	require.NoError(t, b.StartSave(ctx, "q", wal.KafkaID(1), func(err error) { results <- err }))
	require.ErrorIs(t, within(t, results, "p's outcome"), ErrStoredAhead)
	require.NoError(t, within(t, results, "q's outcome"))
	all, err := b.LoadAll(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]wal.MessageID{"p": wal.KafkaID(10), "q": wal.KafkaID(1)}, all)
}
