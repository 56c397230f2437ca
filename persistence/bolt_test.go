package persistence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/wal"
)

const defaultBucket = "lowwater-checkpoints"

func openBolt(t *testing.T, path string, opts ...persistence.BoltOption) *persistence.Bolt {
	t.Helper()
	b, err := persistence.OpenBolt(path, opts...)
	if err != nil {
		t.Fatalf("OpenBolt(%s) = %v", path, err)
	}
	return b
}

func TestBoltContract(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"))
	})
}

func TestBoltSingleCommitContract(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(false))
	})
}

func TestBoltGroupCommitDelayContract(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) persistence.Catalog {
		return openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"),
			persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(time.Millisecond))
	})
}

// TestBoltGroupCommitRefusalSparesTheBatch sends refused saves (a value
// below the stored one, over a corrupt record) together with good ones, so
// that they share a batch: each caller gets its own answer, and a refusal
// undoes nobody's write.
func TestBoltGroupCommitRefusalSparesTheBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ahead, err := persistence.EncodeRecord("ahead", persistence.Record{Checkpoint: wal.KafkaID(100)})
	if err != nil {
		t.Fatal(err)
	}
	plant(t, path, defaultBucket, map[string][]byte{"ahead": ahead, "bad": damagedRecord(t, "bad")})
	// A delay long enough for every call below to join the first batch.
	b := openBolt(t, path, persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(200*time.Millisecond))
	defer b.Close()
	ctx := context.Background()

	const good = 20
	errs := make([]error, good+3)
	var wg sync.WaitGroup
	save := func(i int, pchannel string, v wal.MessageID) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = b.Save(ctx, pchannel, v) }()
	}
	for i := range good {
		save(i, fmt.Sprintf("p%d", i), wal.KafkaID(i+1))
	}
	save(good, "ahead", wal.KafkaID(50))
	save(good+1, "bad", wal.KafkaID(12))
	save(good+2, "ahead", wal.KafkaID(100))
	wg.Wait()

	for i := range good {
		if errs[i] != nil {
			t.Fatalf("Save(p%d) = %v", i, errs[i])
		}
		if got, err := b.Load(ctx, fmt.Sprintf("p%d", i)); err != nil || got != wal.KafkaID(i+1) {
			t.Fatalf("Load(p%d) = (%v, %v)", i, got, err)
		}
	}
	var storedAhead *persistence.StoredAheadError
	if !errors.As(errs[good], &storedAhead) || storedAhead.Stored != wal.KafkaID(100) {
		t.Fatalf("Save(ahead, 50) = %v, want a StoredAheadError naming kafka:100", errs[good])
	}
	wantCorrupt(t, "Save", errs[good+1], "bad")
	if errs[good+2] != nil {
		t.Fatalf("Save(ahead, 100) = %v, want nil (equal)", errs[good+2])
	}
	if got, err := b.Load(ctx, "ahead"); err != nil || got != wal.KafkaID(100) {
		t.Fatalf("Load(ahead) = (%v, %v), want kafka:100", got, err)
	}
}

// TestBoltGroupCommitFullBatchGoesAtOnce fills a batch with the longest
// delay: the thousandth save commits it on the spot.
func TestBoltGroupCommitFullBatchGoesAtOnce(t *testing.T) {
	const full = 1000 // a full batch: bbolt's default MaxBatchSize
	b := openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"),
		persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(persistence.MaxGroupCommitDelay))
	ctx := context.Background()
	errs := make(chan error, full)
	for i := range full {
		go func() { errs <- b.Save(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(i+1)) }()
	}
	deadline := time.After(persistence.MaxGroupCommitDelay / 2)
	for range full {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatalf("a full batch did not commit within %v, half its delay", persistence.MaxGroupCommitDelay/2)
		}
	}
	for _, i := range []int{0, full - 1} {
		if got, err := b.Load(ctx, fmt.Sprintf("p%d", i)); err != nil || got != wal.KafkaID(i+1) {
			t.Fatalf("Load(p%d) = (%v, %v), want kafka:%d", i, got, err, i+1)
		}
	}

}

func TestBoltSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	first := openBolt(t, path)
	const timeout = 100 * time.Millisecond

	start := time.Now()
	second, err := persistence.OpenBolt(path, persistence.WithOpenTimeout(timeout))
	elapsed := time.Since(start)
	if !errors.Is(err, persistence.ErrLocked) || !errors.Is(err, bolterrors.ErrTimeout) || second != nil {
		t.Fatalf("second OpenBolt = (%v, %v), want ErrLocked wrapping bbolt's timeout", second, err)
	}
	// bbolt polls the lock every 50 ms and gives up one poll before the
	// timeout would pass, so it waits at least timeout-50ms.
	if elapsed < timeout-50*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("second OpenBolt returned after %v, want about %v", elapsed, timeout)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := openBolt(t, path, persistence.WithOpenTimeout(timeout))
	if err := third.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBoltReopenSeesData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	ctx := context.Background()
	want := map[string]wal.MessageID{
		"a": wal.KafkaID(7),
		"b": wal.PulsarID{LedgerID: 1, EntryID: 2, BatchIndex: 3, Partition: 4},
		"c": wal.WoodpeckerID{SegmentID: 5, EntryID: 6},
	}
	b := openBolt(t, path)
	for pchannel, id := range want {
		if err := b.Save(ctx, pchannel, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b = openBolt(t, path)
	defer b.Close()
	got, err := b.LoadAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("LoadAll after reopen = %v, want %v", got, want)
	}
	for pchannel, id := range want {
		if got[pchannel] != id {
			t.Fatalf("LoadAll[%q] after reopen = %#v, want %#v", pchannel, got[pchannel], id)
		}
	}
	// The floor survives the restart too.
	if err := b.Save(ctx, "a", wal.KafkaID(6)); !errors.Is(err, persistence.ErrStoredAhead) {
		t.Fatalf("Save below the reopened value = %v, want ErrStoredAhead", err)
	}
}

// plant writes raw records straight into the bbolt file, bypassing Bolt.
func plant(t *testing.T, path, bucket string, records map[string][]byte) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists([]byte(bucket))
		if err != nil {
			return err
		}
		for k, v := range records {
			if err := bk.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rawRecord reads a record straight from the bbolt file; nil when absent.
func rawRecord(t *testing.T, path, bucket, key string) []byte {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var raw []byte
	err = db.View(func(tx *bolt.Tx) error {
		if bk := tx.Bucket([]byte(bucket)); bk != nil {
			raw = bytes.Clone(bk.Get([]byte(key)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestBoltCorruptRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	good, err := persistence.EncodeRecord("good", persistence.Record{Checkpoint: wal.RocksMQID(11)})
	if err != nil {
		t.Fatal(err)
	}
	garbage := append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^0xff)
	plant(t, path, defaultBucket, map[string][]byte{"good": good, "bad": garbage})

	b := openBolt(t, path)
	ctx := context.Background()
	if got, err := b.Load(ctx, "good"); err != nil || got != wal.RocksMQID(11) {
		t.Fatalf("Load(good) = (%v, %v), want rocksmq:11", got, err)
	}
	_, err = b.Load(ctx, "bad")
	wantCorrupt(t, "Load", err, "bad")
	all, err := b.LoadAll(ctx)
	wantCorrupt(t, "LoadAll", err, "bad")
	if all != nil {
		t.Fatalf("LoadAll returned %v with its error", all)
	}
	wantCorrupt(t, "Save", b.Save(ctx, "bad", wal.RocksMQID(12)), "bad")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if raw := rawRecord(t, path, defaultBucket, "bad"); !bytes.Equal(raw, garbage) {
		t.Fatalf("corrupt record was overwritten: %x", raw)
	}
}

func TestBoltWithBucket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b := openBolt(t, path, persistence.WithBucket("mine"))
	if err := b.Save(context.Background(), "p", wal.KafkaID(3)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawRecord(t, path, "mine", "p")
	if r, err := persistence.DecodeRecord("p", raw); err != nil || r.Checkpoint != wal.KafkaID(3) {
		t.Fatalf("record in bucket mine = (%+v, %v), want kafka:3", r, err)
	}
	if raw := rawRecord(t, path, defaultBucket, "p"); raw != nil {
		t.Fatalf("default bucket holds %x, want nothing", raw)
	}
}

// TestBoltExistingBucket: a file whose catalog is under another bucket
// is found, not taken for no catalog (the error names the buckets it
// has), and a writer that asks for an existing bucket does not add an
// empty one beside it.
func TestBoltExistingBucket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoints.db")
	b := openBolt(t, path, persistence.WithBucket("mine"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string][]persistence.BoltOption{
		"read-only":       {persistence.WithReadOnly(true)},
		"existing bucket": {persistence.WithExistingBucket(true)},
	} {
		_, err := persistence.OpenBolt(path, opts...)
		if !errors.Is(err, persistence.ErrNoBucket) || !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("%s open without the bucket = %v, want ErrNoBucket, an ErrInvalidArgument", name, err)
		}
		want := `has no bucket "lowwater-checkpoints", only "mine": not a lowwater catalog under that bucket name`
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s open: %q does not say %q", name, err, want)
		}
	}
	if raw := rawRecord(t, path, defaultBucket, "p"); raw != nil {
		t.Fatalf("default bucket holds %x", raw)
	}
	b = openBolt(t, path, persistence.WithBucket("mine"), persistence.WithExistingBucket(true))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A file that does not exist is still created, bucket and all.
	fresh := filepath.Join(dir, "new.db")
	b = openBolt(t, fresh, persistence.WithExistingBucket(true))
	if err := b.Save(context.Background(), "p", wal.KafkaID(1)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A file of no catalog at all says so.
	_, err := persistence.OpenBolt(emptyBoltFile(t, dir), persistence.WithReadOnly(true))
	if !errors.Is(err, persistence.ErrInvalidArgument) || !strings.Contains(err.Error(), "nor any other: not a lowwater catalog") {
		t.Fatalf("read-only open of a bbolt file with no bucket = %v", err)
	}
}

// emptyBoltFile is a bbolt file with no bucket, made by bbolt itself.
func emptyBoltFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "bare.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBoltNoSync(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"), persistence.WithNoSync(true))
	defer b.Close()
	ctx := context.Background()
	if err := b.Save(ctx, "p", wal.KafkaID(3)); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Load(ctx, "p"); err != nil || got != wal.KafkaID(3) {
		t.Fatalf("Load = (%v, %v), want kafka:3", got, err)
	}
}

func TestBoltOptionsAreValidated(t *testing.T) {
	for name, opt := range map[string]persistence.BoltOption{
		"empty bucket":               persistence.WithBucket(""),
		"zero timeout":               persistence.WithOpenTimeout(0),
		"negative timeout":           persistence.WithOpenTimeout(-time.Second),
		"negative group delay":       persistence.WithGroupCommitDelay(-time.Millisecond),
		"group delay over the bound": persistence.WithGroupCommitDelay(persistence.MaxGroupCommitDelay + 1),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints.db")
			b, err := persistence.OpenBolt(path, opt)
			if !errors.Is(err, persistence.ErrInvalidArgument) || b != nil {
				t.Fatalf("OpenBolt = (%v, %v), want ErrInvalidArgument", b, err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a rejected OpenBolt touched the file: %v", err)
			}
		})
	}
}

// An empty path is a caller's bug, said so: bbolt's own error named no
// path at all ("open bolt file : open : no such file or directory").
func TestBoltEmptyPathIsRefused(t *testing.T) {
	b, err := persistence.OpenBolt("")
	if !errors.Is(err, persistence.ErrInvalidArgument) || b != nil || !strings.Contains(err.Error(), "empty bolt file path") {
		t.Fatalf("OpenBolt(\"\") = (%v, %v), want ErrInvalidArgument naming the empty path", b, err)
	}
}

func TestBoltOpenMissingDirectory(t *testing.T) {
	b, err := persistence.OpenBolt(filepath.Join(t.TempDir(), "missing", "checkpoints.db"))
	if err == nil || errors.Is(err, persistence.ErrLocked) || b != nil {
		t.Fatalf("OpenBolt in a missing directory = (%v, %v), want an open error", b, err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenBolt error %v does not wrap the cause", err)
	}
}

// A device is not a catalog: /dev/null reads as an empty file, and was
// called a damaged store ("the file is empty"), sending an operator to
// look for a backup of a file that never held one.
func TestBoltOpenDevice(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no /dev/null")
	}
	for name, opts := range map[string][]persistence.BoltOption{
		"read-write": nil,
		"read-only":  {persistence.WithReadOnly(true)},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := persistence.OpenBolt(os.DevNull, opts...)
			if b != nil || !errors.Is(err, fs.ErrInvalid) || errors.Is(err, persistence.ErrCorruptStore) {
				t.Fatalf("OpenBolt(%s) = (%v, %v), want fs.ErrInvalid, not ErrCorruptStore", os.DevNull, b, err)
			}
			if want := "persistence: open bolt file " + os.DevNull + ": not a regular file: invalid argument"; err.Error() != want {
				t.Fatalf("OpenBolt(%s) = %q, want %q", os.DevNull, err, want)
			}
		})
	}
}

// TestBoltOpenDirectory opens a directory, in both modes: each says it is a
// directory, as the open of a file does (errors.Is syscall.EISDIR), and
// neither calls it a damaged store, which would send an operator to restore
// a backup over a mistyped path. Read-only once said "invalid database".
func TestBoltOpenDirectory(t *testing.T) {
	dir := t.TempDir()
	want := fmt.Sprintf("persistence: open bolt file %s: open %s: is a directory", dir, dir)
	for name, opts := range map[string][]persistence.BoltOption{
		"read-write": nil,
		"read-only":  {persistence.WithReadOnly(true)},
	} {
		t.Run(name, func(t *testing.T) {
			b, err := persistence.OpenBolt(dir, opts...)
			if b != nil || !errors.Is(err, syscall.EISDIR) || errors.Is(err, persistence.ErrCorruptStore) {
				t.Fatalf("OpenBolt(directory) = (%v, %v), want a directory error, not ErrCorruptStore", b, err)
			}
			var pathErr *fs.PathError
			if !errors.As(err, &pathErr) || pathErr.Op != "open" || pathErr.Path != dir {
				t.Fatalf("OpenBolt(directory) = %v, want an *fs.PathError of open %s", err, dir)
			}
			if err.Error() != want {
				t.Fatalf("OpenBolt(directory) = %q, want %q", err, want)
			}
		})
	}
}

// TestBoltCloseDuringCalls checks, under -race, that Close never meets a
// call halfway: every call either completes or fails with ErrClosed.
func TestBoltCloseDuringCalls(t *testing.T) {
	b := openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"))
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 1; ; i++ {
				err := b.Save(ctx, "p", wal.KafkaID(i*4+w))
				if errors.Is(err, persistence.ErrClosed) {
					return
				}
				if err != nil && !errors.Is(err, persistence.ErrStoredAhead) {
					t.Errorf("Save = %v", err)
					return
				}
				if _, err := b.Load(ctx, "p"); err != nil && !errors.Is(err, persistence.ErrClosed) {
					t.Errorf("Load = %v", err)
					return
				}
			}
		}()
	}
	close(start)
	// Let the writers commit at least once before closing, without sleeping.
	for {
		if id, err := b.Load(ctx, "p"); err != nil {
			t.Fatal(err)
		} else if id != nil {
			break
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("callers did not stop after Close")
	}
}

// TestBoltStartSave starts saves that share a batch with Save's: each
// done is told once, after StartSave returned, with Save's answer; a save
// that cannot start says so at once and is never told; Close waits for
// the started ones.
func TestBoltStartSave(t *testing.T) {
	ctx := context.Background()
	t.Run("without group commit", func(t *testing.T) {
		b := openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(false))
		defer b.Close()
		err := b.StartSave(ctx, "p", wal.KafkaID(1), func(error) { t.Error("done called for a save that did not start") })
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("StartSave = %v, want errors.ErrUnsupported", err)
		}
	})

	t.Run("answers", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		ahead, err := persistence.EncodeRecord("ahead", persistence.Record{Checkpoint: wal.KafkaID(100)})
		if err != nil {
			t.Fatal(err)
		}
		plant(t, path, defaultBucket, map[string][]byte{"ahead": ahead})
		b := openBolt(t, path, persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(50*time.Millisecond))
		defer b.Close()

		type answer struct {
			i   int
			err error
		}
		answers := make(chan answer, 10)
		var returned [3]atomic.Bool
		start := func(i int, pchannel string, v wal.MessageID) {
			t.Helper()
			err := b.StartSave(ctx, pchannel, v, func(err error) {
				if !returned[i].Load() {
					t.Errorf("save %d: done called before StartSave returned", i)
				}
				answers <- answer{i, err}
			})
			returned[i].Store(true)
			if err != nil {
				t.Fatalf("StartSave(%s) = %v", pchannel, err)
			}
		}
		start(0, "p", wal.KafkaID(7))
		start(1, "ahead", wal.KafkaID(50))
		start(2, "q", wal.KafkaID(8))
		if err := b.Save(ctx, "r", wal.KafkaID(9)); err != nil { // the same batch
			t.Fatalf("Save beside started saves = %v", err)
		}
		got := make(map[int]error)
		for range 3 {
			select {
			case a := <-answers:
				if _, twice := got[a.i]; twice {
					t.Fatalf("save %d told twice", a.i)
				}
				got[a.i] = a.err
			case <-time.After(10 * time.Second):
				t.Fatalf("%d of 3 started saves told within 10 s", len(got))
			}
		}
		if got[0] != nil || got[2] != nil {
			t.Fatalf("done of good saves = %v, %v, want nil", got[0], got[2])
		}
		var stored *persistence.StoredAheadError
		if !errors.As(got[1], &stored) || stored.Stored != wal.KafkaID(100) {
			t.Fatalf("done of a save below the stored value = %v, want a StoredAheadError naming kafka:100", got[1])
		}
		for pchannel, want := range map[string]wal.MessageID{"p": wal.KafkaID(7), "q": wal.KafkaID(8), "r": wal.KafkaID(9), "ahead": wal.KafkaID(100)} {
			if v, err := b.Load(ctx, pchannel); err != nil || v != want {
				t.Fatalf("Load(%s) = (%v, %v), want %v", pchannel, v, err, want)
			}
		}
	})

	t.Run("refused before it starts", func(t *testing.T) {
		b := openBolt(t, filepath.Join(t.TempDir(), "checkpoints.db"), persistence.WithGroupCommit(true))
		never := func(error) { t.Error("done called for a save that did not start") }
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.StartSave(canceled, "p", wal.KafkaID(1), never); !errors.Is(err, context.Canceled) {
			t.Fatalf("StartSave with an ended context = %v, want context.Canceled", err)
		}
		if err := b.StartSave(ctx, "", wal.KafkaID(1), never); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("StartSave of an empty name = %v, want ErrInvalidArgument", err)
		}
		if err := b.StartSave(ctx, "p", nil, never); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("StartSave of nil = %v, want ErrInvalidArgument", err)
		}
		if err := b.StartSave(ctx, "p", wal.KafkaID(1), nil); !errors.Is(err, persistence.ErrInvalidArgument) {
			t.Fatalf("StartSave with a nil done = %v, want ErrInvalidArgument", err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.StartSave(ctx, "p", wal.KafkaID(1), never); !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("StartSave after Close = %v, want ErrClosed", err)
		}
	})

	t.Run("Close waits for started saves", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "checkpoints.db")
		const delay = 200 * time.Millisecond
		b := openBolt(t, path, persistence.WithGroupCommit(true), persistence.WithGroupCommitDelay(delay))
		var told atomic.Int32
		started := time.Now()
		if err := b.StartSave(ctx, "p", wal.KafkaID(5), func(err error) {
			if err != nil {
				t.Errorf("done = %v, want nil", err)
			}
			told.Add(1)
		}); err != nil {
			t.Fatal(err)
		}
		// A done that panics goes no further, and the saves after it in the
		// batch are still told.
		if err := b.StartSave(ctx, "q", wal.KafkaID(6), func(error) { panic("a caller's bug") }); err != nil {
			t.Fatal(err)
		}
		if err := b.StartSave(ctx, "r", wal.KafkaID(7), func(error) { told.Add(1) }); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatalf("Close = %v", err)
		}
		if n := told.Load(); n != 2 {
			t.Fatalf("Close returned with %d of 2 started saves told", n)
		}
		if elapsed := time.Since(started); elapsed < delay {
			t.Fatalf("the batch committed after %v, before its delay of %v", elapsed, delay)
		}
		b = openBolt(t, path)
		defer b.Close()
		for pchannel, want := range map[string]wal.MessageID{"p": wal.KafkaID(5), "q": wal.KafkaID(6), "r": wal.KafkaID(7)} {
			if v, err := b.Load(ctx, pchannel); err != nil || v != want {
				t.Fatalf("Load(%s) after reopening = (%v, %v), want %v", pchannel, v, err, want)
			}
		}
	})
}

// A bucket inside the catalog's own bucket is damage or another writer's,
// and refused; one inside another program's bucket in the same file is
// that program's business: the store opens. Any nested bucket refused the
// whole file before, sending the operator to a backup of a healthy one.
func TestBoltNestedBucketsOnlyInItsOwnBucketAreRefused(t *testing.T) {
	nest := func(t *testing.T, path, outer string) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *bolt.Tx) error {
			o, err := tx.CreateBucketIfNotExists([]byte(outer))
			if err != nil {
				return err
			}
			inner, err := o.CreateBucket([]byte("sub"))
			if err != nil {
				return err
			}
			return inner.Put([]byte("k"), []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	good, err := persistence.EncodeRecord("p", persistence.Record{Checkpoint: wal.KafkaID(4)})
	if err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(t.TempDir(), "shared.db")
	plant(t, path, defaultBucket, map[string][]byte{"p": good})
	nest(t, path, "app")
	b := openBolt(t, path)
	if got, err := b.Load(context.Background(), "p"); err != nil || got != wal.KafkaID(4) {
		t.Fatalf("Load(p) = (%v, %v), want kafka:4", got, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = persistence.OpenBolt(path, persistence.WithBucket("app"))
	if !errors.Is(err, persistence.ErrCorruptStore) || !strings.Contains(err.Error(), `bucket "app" holds a bucket at key "sub"`) {
		t.Fatalf("OpenBolt(WithBucket(app)) = %v, want the nested bucket refused", err)
	}

	path = filepath.Join(t.TempDir(), "own.db")
	plant(t, path, defaultBucket, map[string][]byte{"p": good})
	nest(t, path, defaultBucket)
	_, err = persistence.OpenBolt(path)
	if !errors.Is(err, persistence.ErrCorruptStore) {
		t.Fatalf("OpenBolt = %v, want ErrCorruptStore", err)
	}
}

// bbolt takes any page size a meta page fits in: a file made with small
// or large pages (Options.PageSize) opens, where one outside 512 B–1 MiB
// was called damaged ("no valid meta page").
func TestBoltOpensAnyPageSize(t *testing.T) {
	for _, size := range []int{256, 384, 2 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "pages.db")
			db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: size, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				bk, err := tx.CreateBucket([]byte(defaultBucket))
				if err != nil {
					return err
				}
				for i := range 300 {
					p := fmt.Sprintf("pchannel-%03d", i)
					rec, err := persistence.EncodeRecord(p, persistence.Record{Checkpoint: wal.KafkaID(int64(i))})
					if err != nil {
						return err
					}
					if err := bk.Put([]byte(p), rec); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			b := openBolt(t, path)
			defer b.Close()
			all, err := b.LoadAll(context.Background())
			if err != nil || len(all) != 300 || all["pchannel-299"] != wal.KafkaID(299) {
				t.Fatalf("LoadAll = %d records, %v", len(all), err)
			}
		})
	}
}
