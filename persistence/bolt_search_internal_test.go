package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
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
	// Half of them load x, whose record y holds, the others pchannels
	// never saved, which y's record, whole and named for x, holds not.
	const n = 20
	errs := make([]chan error, n)
	for i := range n {
		errs[i] = make(chan error, 1)
		name := "x"
		if i%2 == 1 {
			name = fmt.Sprintf("new-%d", i)
		}
		go func() { errs[i] <- searchThenAnswer(ctx, b, name) }()
	}
	joinedBy(t, b, n)
	b.releaseTurn()
	for i := range n {
		err := <-errs[i]
		if i%2 == 0 && !errors.Is(err, ErrCorruptRecord) {
			t.Errorf("Load of x = %v, want ErrCorruptRecord while y holds its record", err)
		}
		if i%2 == 1 && err != nil {
			t.Errorf("Load of a pchannel never saved = %v, want nothing stored: y holds x's record", err)
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
	// Enough records that the pass looks at its context (every 4096).
	b := filledBolt(t, 5000, "p%05d")
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
	b := filledBolt(t, 3000, "%0300d")
	data, err := os.ReadFile(b.path)
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
		t.Fatalf("checkPagesUntil = %v after %d asks, want the stop's error at the second (every %d pages of %d)", err, asked, stopEvery, len(data)/4096)
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

// filledBolt is a group-committed Bolt in a file of its own, closed when
// the test ends, holding n records saved at once (see saveMany).
func filledBolt(tb testing.TB, n int, format string) *Bolt {
	tb.Helper()
	b, err := OpenBolt(filepath.Join(tb.TempDir(), "c.db"), WithGroupCommit(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	saveMany(tb, b, n, format)
	return b
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
	c := filledBolt(b, 10_000, "old-%05d")
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
	b := filledBolt(t, 10_000, "p%05d")
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

// truncatingCtx truncates the file at path to size the first time its
// Err is asked: a page check asks every stopEvery pages, and reads on.
type truncatingCtx struct {
	context.Context
	t    *testing.T
	path string
	size int64
	once atomic.Bool
}

func (c *truncatingCtx) Err() error {
	if c.once.CompareAndSwap(false, true) {
		if err := os.Truncate(c.path, c.size); err != nil {
			c.t.Error(err)
		}
	}
	return nil
}

// A page check reads the file where it lies, mapped, rather than a copy
// of it on the heap: a file truncated while it is read (by a program that
// ignores the lock) faults there, which is the store's damage, not the
// end of the process.
func TestAPageCheckOfAFileTruncatedMeanwhileIsDamage(t *testing.T) {
	b := filledBolt(t, 3000, "%0300d")
	err := b.checkPages(&truncatingCtx{Context: context.Background(), t: t, path: b.path, size: 16 << 10})
	if !errors.Is(err, ErrCorruptStore) || !strings.Contains(err.Error(), "truncated while open?") {
		t.Fatalf("checkPages of a file truncated as it is read = %v, want ErrCorruptStore saying so", err)
	}
}
