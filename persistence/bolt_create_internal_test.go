package persistence

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/internal/creation"
)

// A new store is placed with its bucket in it: the file createBoltDB
// links into place is the file a process killed right after sees. It was
// placed without one, which OpenBolt made after: a kill between the two
// (about one in a hundred, killed at random while creating) left a file a
// node took for a new store, and the tool, restore included, refused as
// another program's.
func TestBoltIsPlacedWithItsBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	db, file, placed, err := createBoltDB(path, defaultBoltOptions())
	if err != nil || !placed {
		t.Fatalf("createBoltDB = placed %t, %v", placed, err)
	}
	defer file.Close()
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(DefaultBucket))
		if b == nil {
			t.Fatalf("the placed file holds no bucket %q", DefaultBucket)
		}
		if got, want := b.Sequence(), bucketMark([]byte(DefaultBucket)); got != want {
			t.Fatalf("bucket mark = %d, want %d", got, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*")); len(left) != 0 {
		t.Fatalf("creation left %v", left)
	}
}

// The temporary files of creations killed before they ended are removed
// by the next open that may write, once old enough that no creation still
// running can own them; other files, and younger ones, are kept.
func TestBoltRemovesWhatKilledCreationsLeft(t *testing.T) {
	for _, exists := range []bool{false, true} {
		dir := t.TempDir()
		path := filepath.Join(dir, "checkpoints.db")
		if exists {
			b, err := OpenBolt(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
		old := time.Now().Add(-2 * creation.StaleAge)
		files := map[string]bool{ // name: removed
			".checkpoints.db.lowwater-new-1234567": true,
			".checkpoints.db.lowwater-new-89":      true,
			".checkpoints.db.lowwater-new-young":   false, // not a name CreateTemp gives
			".other.db.lowwater-new-1234567":       false,
			"checkpoints.db.lowwater-new-1234567":  false,
			".checkpoints.db.new-20261204":         false, // a backup of the user's
			// A restore's file built aside, and the name its own creation
			// was made under.
			"..checkpoints.db.lowwater-new-123.lowwater-new-456": true,
			"..checkpoints.db.lowwater-new-123.lowwater-new-x":   false,
			"..other.db.lowwater-new-123.lowwater-new-456":       false,
		}
		for name := range files {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		if exists {
			// A second name of the placed file, left by a kill between
			// its link and the removal of the name it was made under:
			// the open that holds it locked removes the name.
			second := ".checkpoints.db.lowwater-new-777"
			if err := os.Link(path, filepath.Join(dir, second)); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
			files[second] = true
		}
		young := filepath.Join(dir, ".checkpoints.db.lowwater-new-42")
		if err := os.WriteFile(young, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		files[".checkpoints.db.lowwater-new-42"] = false

		b, err := OpenBolt(path, WithReadOnly(exists))
		if err == nil && exists {
			// A read-only open writes nothing, and removes nothing.
			for name := range files {
				if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
					t.Fatalf("read-only open: %s: %v", name, err)
				}
			}
			_ = b.Close()
			b, err = OpenBolt(path)
		}
		if err != nil {
			t.Fatal(err)
		}
		for name, removed := range files {
			_, err := os.Stat(filepath.Join(dir, name))
			if removed != os.IsNotExist(err) {
				t.Errorf("exists %t: %s: removed %t, want %t", exists, name, os.IsNotExist(err), removed)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A file named as a temporary one, old enough, that a process holds open
// under its lock (a store of the user's so named) is not removed.
func TestBoltRemovesNoLockedFile(t *testing.T) {
	dir := t.TempDir()
	held := filepath.Join(dir, ".checkpoints.db.lowwater-new-2026")
	other, err := OpenBolt(held)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	old := time.Now().Add(-2 * creation.StaleAge)
	if err := os.Chtimes(held, old, old); err != nil {
		t.Fatal(err)
	}
	b, err := OpenBolt(filepath.Join(dir, "checkpoints.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("the store held open was removed: %v", err)
	}
}
