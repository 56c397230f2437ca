package persistence_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Processes that create the same new file at once each get a whole store,
// one after the other: none finds the file empty, which OpenBolt calls
// damaged. Before the store was made whole under another name first, one
// of two racers was told the file was damaged in a few runs in a hundred.
func TestBoltCreatedAtOnceIsNeverEmpty(t *testing.T) {
	const rounds, racers = 40, 3
	for r := range rounds {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		var wg sync.WaitGroup
		errs := make(chan error, racers)
		for i := range racers {
			wg.Go(func() {
				b, err := persistence.OpenBolt(path, persistence.WithOpenTimeout(10*time.Second))
				if err != nil {
					errs <- fmt.Errorf("round %d, racer %d: %w", r, i, err)
					return
				}
				if err := b.Save(context.Background(), fmt.Sprint("p", i), wal.KafkaID(int64(i+1))); err != nil {
					errs <- err
				}
				if err := b.Close(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		b := openBolt(t, path)
		got, err := b.LoadAll(context.Background())
		if err != nil || len(got) != racers {
			t.Fatalf("round %d: LoadAll = (%v, %v), want the %d racers' saves", r, got, err, racers)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(filepath.Dir(path))
		if err != nil || len(entries) != 1 {
			t.Fatalf("round %d: the directory holds %v (%v), want the store alone", r, entries, err)
		}
	}
}

// A symbolic link to a file not made yet is followed, as bbolt follows it:
// the store is made where the link points.
func TestBoltCreatedThroughALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data", "checkpoints.db")
	if err := os.Mkdir(filepath.Dir(target), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	b := openBolt(t, link)
	if err := b.Save(context.Background(), "p", wal.KafkaID(7)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(target); err != nil || info.Size() == 0 {
		t.Fatalf("the link's target: %v, %v", info, err)
	}
}

// A directory that is there but takes no file, as Linux's /proc answers a
// create with ENOENT, is not said to be missing.
func TestBoltInADirectoryThatTakesNoFile(t *testing.T) {
	if _, err := os.Stat("/proc/self"); runtime.GOOS != "linux" || err != nil {
		t.Skip("needs Linux's /proc")
	}
	_, err := persistence.OpenBolt("/proc/checkpoints.db")
	if err == nil || strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("OpenBolt in /proc: %v, want an error that does not call /proc missing", err)
	}
}

// A file in a directory that does not exist: the error names the file
// asked for and the missing directory, not the temporary name the file
// would have been made under, and still matches fs.ErrNotExist.
func TestBoltInAMissingDirectory(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("on Windows bbolt creates the file itself, and names it")
	}
	dir := filepath.Join(t.TempDir(), "missing")
	path := filepath.Join(dir, "checkpoints.db")
	_, err := persistence.OpenBolt(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenBolt in a missing directory: %v, want fs.ErrNotExist", err)
	}
	for _, want := range []string{"persistence: open bolt file " + path + ": create " + path + ": ",
		": the directory " + dir + " does not exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("OpenBolt in a missing directory: %v, want it to say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), ".new-") {
		t.Fatalf("the error names the temporary file: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the directory was made: %v", err)
	}
}
