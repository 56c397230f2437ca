package persistence

import (
	"context"
	"path/filepath"
	"testing"
	"time"

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
	select {
	case err := <-saved:
		if err != nil {
			t.Fatalf("Save = %v, want nil: its batch committed before Close returned", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Save did not return")
	}
	if elapsed := time.Since(start); elapsed < delay {
		t.Fatalf("the batch committed after %v, before its delay of %v", elapsed, delay)
	}

	b, err = OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got, err := b.Load(context.Background(), "p"); err != nil || got != wal.KafkaID(42) {
		t.Fatalf("Load after reopening = (%v, %v), want kafka:42", got, err)
	}
}

// waitJoined waits until the open batch of g holds n saves.
func waitJoined(t *testing.T, g *groupCommit, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		joined := 0
		if g.open != nil {
			joined = len(g.open.saves)
		}
		g.mu.Unlock()
		if joined >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d saves joined the open batch within 10 s, want %d", joined, n)
		}
		time.Sleep(time.Millisecond)
	}
}
