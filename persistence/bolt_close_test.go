package persistence

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lowwater/lowwater/wal"
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

// A call given a nil context, a caller's bug, is refused with
// ErrInvalidArgument, and counts as no call: it panicked inside enter,
// past the count, and Close then waited for it for ever. Memory alike.
func TestNilContextIsRefused(t *testing.T) {
	var noContext context.Context // nil, as a caller's bug passes it
	for _, tc := range []struct {
		name string
		open func(dir string) (Catalog, error)
	}{
		{"memory", func(string) (Catalog, error) { return NewMemory(), nil }},
		{"bolt", func(dir string) (Catalog, error) { return OpenBolt(filepath.Join(dir, "checkpoints.db")) }},
		{"bolt, group commit", func(dir string) (Catalog, error) {
			return OpenBolt(filepath.Join(dir, "checkpoints.db"), WithGroupCommit(true))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Save(context.Background(), "p", wal.KafkaID(7)); err != nil {
				t.Fatal(err)
			}
			refused := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%s(nil context) = %v, want ErrInvalidArgument", op, err)
				}
			}
			refused("Save", c.Save(noContext, "p", wal.KafkaID(9)))
			_, err = c.Load(noContext, "p")
			refused("Load", err)
			_, err = c.LoadAll(noContext)
			refused("LoadAll", err)
			refused("Delete", c.Delete(noContext, "p"))
			if b, ok := c.(*Bolt); ok && b.group != nil {
				refused("StartSave", b.StartSave(noContext, "p", wal.KafkaID(9), func(error) { t.Error("a refused start was told") }))
			}
			if got, err := c.Load(context.Background(), "p"); err != nil || got != wal.KafkaID(7) {
				t.Fatalf("Load = %v, %v; want kafka:7 unchanged", got, err)
			}
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close still waits 10 s after the refused calls")
			}
		})
	}
}

// A Close made while another waits for the calls in flight returns
// ErrClosed only once the first has released the file: whoever opens it
// next finds it free. It returned at once, and an open right after it
// found the file still locked.
func TestASecondCloseReturnsOnceTheFileIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		b, err := OpenBolt(path, WithGroupCommit(true), WithGroupCommitDelay(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		told := make(chan error, 1)
		if err := b.StartSave(context.Background(), "p", wal.KafkaID(1), func(err error) { told <- err }); err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() { first <- b.Close() }()
		synctest.Wait() // the first Close waits for the save, whose batch waits out its delay
		if err := b.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close = %v, want ErrClosed", err)
		}
		again, err := OpenBolt(path, WithOpenTimeout(10*time.Millisecond))
		if err != nil {
			t.Fatalf("open after the second Close: %v", err)
		}
		got, err := again.Load(context.Background(), "p")
		if err != nil || got != wal.KafkaID(1) {
			t.Fatalf("Load = (%v, %v), want kafka:1, the save the first Close waited for", got, err)
		}
		if err := again.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-first; err != nil {
			t.Fatalf("first Close = %v", err)
		}
		if err := <-told; err != nil {
			t.Fatalf("the save = %v", err)
		}
	})
}
