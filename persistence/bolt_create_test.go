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
// the store is made whole where the link points, through a chain of links
// or a relative one too, and the link stays. With WithExistingBucket, as
// the operator's tool opens a catalog, the link to nothing is a new store
// as a missing path is: it used to be taken for a file that exists, and
// bbolt laid out an empty store at the target, without the bucket, which
// every later open then refused.
func TestBoltCreatedThroughALink(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []persistence.BoltOption
		link func(t *testing.T, dir, target string) string
	}{
		{"absolute", nil, func(t *testing.T, dir, target string) string {
			return symlink(t, target, filepath.Join(dir, "link.db"))
		}},
		{"relative, existing bucket", []persistence.BoltOption{persistence.WithExistingBucket(true)},
			func(t *testing.T, dir, _ string) string {
				return symlink(t, filepath.Join("data", "checkpoints.db"), filepath.Join(dir, "link.db"))
			}},
		{"a chain, existing bucket", []persistence.BoltOption{persistence.WithExistingBucket(true)},
			func(t *testing.T, dir, target string) string {
				middle := symlink(t, target, filepath.Join(dir, "data", "middle.db"))
				return symlink(t, middle, filepath.Join(dir, "link.db"))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "data", "checkpoints.db")
			if err := os.Mkdir(filepath.Dir(target), 0o700); err != nil {
				t.Fatal(err)
			}
			link := c.link(t, dir, target)
			for i := range 2 { // made, then opened again
				b, err := persistence.OpenBolt(link, c.opts...)
				if err != nil {
					t.Fatalf("open %d: %v", i, err)
				}
				if err := b.Save(context.Background(), "p", wal.KafkaID(int64(7+i))); err != nil {
					t.Fatal(err)
				}
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if info, err := os.Lstat(target); err != nil || !info.Mode().IsRegular() {
				t.Fatalf("the link's target: %v, %v", info, err)
			}
			if info, err := os.Lstat(link); err != nil || info.Mode()&fs.ModeSymlink == 0 {
				t.Fatalf("the link: %v, %v; want it to stay a link", info, err)
			}
			b := openBolt(t, target)
			defer b.Close()
			if got, err := b.Load(context.Background(), "p"); err != nil || !got.EQ(wal.KafkaID(8)) {
				t.Fatalf("Load through the target = (%v, %v), want kafka:8", got, err)
			}
		})
	}
}

// A relative link is read from the directory it is in, as the kernel
// reads it, also when the path reaches that directory through another
// link: its ".." is then not the one the path's text names. The store was
// made beside the wrong parent, and the open then failed.
func TestBoltCreatedThroughARelativeLinkInALinkedDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"phys/deep/conf", "phys/deep/data", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	symlink(t, filepath.Join(dir, "phys", "deep", "conf"), filepath.Join(dir, "conf"))
	symlink(t, filepath.Join("..", "data", "cat.db"), filepath.Join(dir, "phys", "deep", "conf", "cat.db"))
	b, err := persistence.OpenBolt(filepath.Join(dir, "conf", "cat.db"), persistence.WithExistingBucket(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Lstat(filepath.Join(dir, "phys", "deep", "data", "cat.db")); err != nil || !info.Mode().IsRegular() {
		t.Fatalf("the link's target: %v, %v", info, err)
	}
	if entries, err := os.ReadDir(filepath.Join(dir, "data")); err != nil || len(entries) != 0 {
		t.Fatalf("the directory the path's text names: %v (%v), want it untouched", entries, err)
	}
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	return link
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
	if strings.Contains(err.Error(), ".lowwater-new-") {
		t.Fatalf("the error names the temporary file: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the directory was made: %v", err)
	}
}
