package persistence

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// Close of a damaged Bolt waits abandonAfter at most for a call still in
// flight: a panic inside bbolt may have left one of bbolt's locks held,
// and a call waiting on it never returns. Here the call entered and never
// exits; the damage is a panic under the Bolt's guard.
func TestBoltCloseAbandonsACallOfADamagedFile(t *testing.T) {
	b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.enter(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := b.guard("test", func() error { panic("a damaged page") }); !errors.Is(err, ErrCorruptStore) {
		t.Fatalf("a panic under the guard = %v, want ErrCorruptStore", err)
	}
	start := time.Now()
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(abandonAfter + 10*time.Second):
		t.Fatal("Close of a damaged Bolt waited for a call that never returns")
	}
	if waited := time.Since(start); waited < abandonAfter {
		t.Fatalf("Close returned after %v, before the %v a call is given", waited, abandonAfter)
	}
}
