package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/lowwater/lowwater/wal"
)

// joinedBy waits until n searches wait on the next round, the turn held.
func joinedBy(t *testing.T, b *Bolt, n int) *searchRound {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.searches.mu.Lock()
		r := b.searches.next
		joined := 0
		if r != nil {
			joined = r.joined
		}
		b.searches.mu.Unlock()
		if joined == n {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d searches joined the round within 10 s", joined, n)
		}
		runtime.Gosched()
	}
}

// searchThenAnswer is what Load does once it found nothing.
func searchThenAnswer(ctx context.Context, b *Bolt, pchannel string) error {
	if err := b.searchMisplaced(ctx); err != nil {
		return err
	}
	return b.notStored(pchannel)
}

// The Loads that find nothing together share one search for misplaced
// records, begun after each found nothing: here a record moved under
// another name while the file was open, which every one of them reports.
// Each made a search of its own, in the file's turn, and a node that
// started a thousand new pchannels beside 10,000 records held every save
// of the file for seconds.
func TestLoadsThatFindNothingShareOneSearch(t *testing.T) {
	ctx := context.Background()
	b, err := OpenBolt(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Save(ctx, "x", wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	if err := b.takeTurn(ctx); err != nil {
		t.Fatal(err)
	}
	// Damage done since the open: x's record moves under y.
	if err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.bucket)
		if err := bk.Put([]byte("y"), bytes.Clone(bk.Get([]byte("x")))); err != nil {
			return err
		}
		return bk.Delete([]byte("x"))
	}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- searchThenAnswer(ctx, b, fmt.Sprintf("new-%d", i)) }()
	}
	joinedBy(t, b, n)
	b.releaseTurn()
	for range n {
		if err := <-errs; !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("Load of a pchannel never saved = %v, want ErrCorruptRecord while y holds x's record", err)
		}
	}
	if got := b.searchesRun.Load(); got != 1 {
		t.Errorf("%d searches for %d Loads that found nothing together, want 1", got, n)
	}
}

// cutAfter is a context whose Err says canceled from its first call, and
// whose Done never closes: the Load that runs a round, ended part way
// through its pass.
type cutAfter struct{ context.Context }

func (cutAfter) Err() error { return context.Canceled }

// A round cut short by the end of its runner's context answers no other
// Load: they wait for a round of their own, and get its answer.
func TestASearchCutShortAnswersNoOtherLoad(t *testing.T) {
	ctx := context.Background()
	b, err := OpenBolt(filepath.Join(t.TempDir(), "c.db"), WithGroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Enough records that the pass looks at its context (every 4096).
	saveMany(t, b, 5000, "p%05d")
	if err := b.takeTurn(ctx); err != nil {
		t.Fatal(err)
	}
	other := make(chan error, 1)
	go func() { other <- searchThenAnswer(ctx, b, "new") }()
	r := joinedBy(t, b, 1)
	b.runSearch(cutAfter{ctx}, r) // in the turn, as its runner would
	if r.err != errSearchCut {
		t.Fatalf("a round whose runner's context ended in its pass: %v, want errSearchCut", r.err)
	}
	joinedBy(t, b, 1) // the other Load, in a round of its own
	b.releaseTurn()
	if err := <-other; err != nil {
		t.Fatalf("the other Load = %v, want nil: nothing is misplaced", err)
	}
	if got := b.searchesRun.Load(); got != 2 {
		t.Errorf("%d passes, want 2: the one cut short, and the other Load's", got)
	}
}

// The check of a file's pages before a search gives up as the Load's
// context ends: a walk of 300,000 records outlasted a deadline by up to
// 100 ms. Given up, it is no damage.
func TestAPageCheckEndsWithItsContext(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	b, err := OpenBolt(path, WithGroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	saveMany(t, b, 3000, "%0300d")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	asked, errStop := 0, errors.New("stop")
	stop := func() error {
		if asked++; asked == 2 {
			return errStop
		}
		return nil
	}
	if err := checkPagesUntil(data, stop); !errors.Is(err, errStop) || asked != 2 {
		t.Fatalf("checkPagesUntil = %v after %d asks, want the stop's error at the second (every 256 pages of %d)", err, asked, len(data)/4096)
	}
	if err := checkPagesUntil(data, func() error { return nil }); err != nil {
		t.Fatalf("checkPagesUntil of an intact file = %v", err)
	}
	ended, end := context.WithCancel(ctx)
	end()
	if err := b.checkPages(ended); !errors.Is(err, context.Canceled) || errors.Is(err, ErrCorruptStore) {
		t.Fatalf("checkPages with its context ended = %v, want context.Canceled, not damage", err)
	}
	if _, err := b.Load(ctx, "never-saved"); err != nil {
		t.Fatalf("Load after a check given up = %v, want nil: the file is intact", err)
	}
}

// saveMany saves n pchannels, named by format from their number, at once
// (a group-committed Bolt commits them together).
func saveMany(tb testing.TB, b *Bolt, n int, format string) {
	tb.Helper()
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- b.Save(context.Background(), fmt.Sprintf(format, i), wal.KafkaID(1)) }()
	}
	for range n {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
}

// BenchmarkLoadNothingStored is the Load of a pchannel never saved,
// beside 10,000 records, made by 100 Loads at once per core: a node
// starting new pchannels next to its old ones. A Load that finds nothing
// searches the file for a record under a damaged name, and Loads that
// find nothing together share one search.
func BenchmarkLoadNothingStored(b *testing.B) {
	ctx := context.Background()
	c, err := OpenBolt(filepath.Join(b.TempDir(), "c.db"), WithGroupCommit(true))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	saveMany(b, c, 10_000, "old-%05d")
	var next atomic.Int64
	b.SetParallelism(100)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id, err := c.Load(ctx, fmt.Sprintf("new-%d", next.Add(1)))
			if err != nil || id != nil {
				b.Errorf("Load of a pchannel never saved = %v, %v; want nil, nil", id, err)
				return
			}
		}
	})
}

// askedCtx counts the asks of Err, and says canceled from the ask number
// cancelAt on (0: never).
type askedCtx struct {
	context.Context
	asked    atomic.Int64
	cancelAt int64
}

func (c *askedCtx) Err() error {
	if n := c.asked.Add(1); c.cancelAt > 0 && n >= c.cancelAt {
		return context.Canceled
	}
	return nil
}

// Reading every record (the tool's list, dump and verify) ends with its
// context: a catalog of 339,469 records kept the tool 1.5–6 s past its
// --timeout.
func TestInspectEndsWithItsContext(t *testing.T) {
	b, err := OpenBolt(filepath.Join(t.TempDir(), "c.db"), WithGroupCommit(true))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	saveMany(t, b, 10_000, "p%05d")
	whole := &askedCtx{Context: context.Background()}
	entries, err := b.Inspect(whole)
	if err != nil || len(entries) != 10_000 {
		t.Fatalf("Inspect = %d entries, %v; want 10000, nil", len(entries), err)
	}
	asks := whole.asked.Load()
	if asks < 2 {
		t.Fatalf("Inspect of 10,000 records asked its context %d times, want it asked as it reads", asks)
	}
	// Ended at its last ask, which comes while it reads.
	if entries, err := b.Inspect(&askedCtx{Context: context.Background(), cancelAt: asks}); !errors.Is(err, context.Canceled) || entries != nil {
		t.Fatalf("Inspect with its context ended as it reads = %d entries, %v; want nil, context.Canceled", len(entries), err)
	}
}

// The file is read for the page check 4 MiB at a time, each read after
// a look at the context: read in one call, a file of 300,000 records kept
// a Load with a 1 ms deadline up to 276 ms.
func TestTheFileIsReadWithinItsContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	whole := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16+3) // 10 MiB and a bit
	if err := os.WriteFile(path, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	read := &askedCtx{Context: context.Background()}
	data, err := readUntil(read, path, nil)
	if err != nil || !bytes.Equal(data, whole) {
		t.Fatalf("readUntil = %d bytes, %v; want the file's %d", len(data), err, len(whole))
	}
	if asks := read.asked.Load(); asks < 3 {
		t.Fatalf("readUntil of 10 MiB asked its context %d times, want one per 4 MiB read", asks)
	}
	// Given up, it keeps the buffer it read into, emptied, for the next.
	if data, err := readUntil(&askedCtx{Context: context.Background(), cancelAt: 2}, path, data); !errors.Is(err, context.Canceled) || len(data) != 0 || cap(data) < len(whole) {
		t.Fatalf("readUntil with its context ended after the first read = %d bytes of %d, %v; want none of the file's %d, context.Canceled", len(data), cap(data), err, len(whole))
	}
}

// The buffer a page check reads the file into is kept for the next
// check, and let go once none has used it for pagesKept, and at Close:
// kept for the Bolt's life, one new pchannel's Load held the file's size
// for as long as the process ran.
func TestThePageBufferIsLetGoWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, err := OpenBolt(filepath.Join(t.TempDir(), "c.db"))
		if err != nil {
			t.Fatal(err)
		}
		saveMany(t, b, 100, "p%d")
		kept := func() int {
			b.pagesMu.Lock()
			defer b.pagesMu.Unlock()
			return cap(b.pages)
		}
		loadNothing := func() {
			t.Helper()
			if id, err := b.Load(ctx, "absent"); id != nil || err != nil {
				t.Fatalf("Load of a name not stored = %v, %v; want nothing, no error", id, err)
			}
		}
		info, err := os.Stat(b.path)
		if err != nil {
			t.Fatal(err)
		}
		loadNothing()
		if kept() < int(info.Size()) {
			t.Fatalf("after a page check the buffer holds %d bytes, want the file's %d", kept(), info.Size())
		}
		time.Sleep(pagesKept - time.Second)
		loadNothing() // used again: kept for pagesKept from now
		time.Sleep(pagesKept - time.Second)
		synctest.Wait()
		if kept() == 0 {
			t.Fatalf("the buffer was let go %v after its last use, want %v", pagesKept-time.Second, pagesKept)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if kept() != 0 {
			t.Fatalf("the buffer holds %d bytes %v after its last use, want none", kept(), pagesKept+time.Second)
		}
		loadNothing()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if kept() != 0 {
			t.Fatalf("the buffer holds %d bytes after Close, want none", kept())
		}
	})
}
