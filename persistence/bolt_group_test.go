package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
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
		s = b.group.spares[0]
		if s == nil {
			s = b.group.spares[1]
		}
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
	if b.group.spares[0] != nil || b.group.spares[1] != nil {
		t.Fatal("a batch that a Save waited on was recycled")
	}
}

// TestGroupCommitKeepsTheLargerSpares: of the batches told, the two
// largest are kept, and a new batch takes the largest, so that under a
// load of a thousand saves a round a batch is no allocation, whatever
// the order the batches are told in.
func TestGroupCommitKeepsTheLargerSpares(t *testing.T) {
	g := &groupCommit{}
	for _, n := range []int{1000, 8, 16} {
		g.recycle(make([]batchedSave, 3, n))
	}
	caps := []int{cap(g.spares[0]), cap(g.spares[1])}
	slices.Sort(caps)
	if !slices.Equal(caps, []int{16, 1000}) {
		t.Fatalf("spares of capacity %v, want [16 1000]", caps)
	}
	for _, want := range []int{1000, 16, 8} {
		g.last = 8
		if got := cap(g.newBatch().saves); got != want {
			t.Fatalf("new batch of capacity %d, want %d", got, want)
		}
	}
}

// With a delay, a batch is ready once full or once its delay has passed,
// whichever comes first, and its timer, which may fire after it filled
// (a stopped timer whose function has started runs all the same), does
// not make it ready twice. The committer takes the ready batches in
// order, and only they: an open batch waits out its delay.
func TestGroupCommitWithADelayCommitsReadyBatchesOnce(t *testing.T) {
	g := &groupCommit{delay: time.Hour}
	var full *batch
	for i := range maxGroupSaves {
		bt, _, start := g.join(&batchedSave{pchannel: "p", checkpoint: wal.KafkaID(i), done: func(error) {}})
		if start != (i == maxGroupSaves-1) {
			t.Fatalf("save %d: start = %v: a committer is started by the save that fills the batch, and by no other", i, start)
		}
		full = bt
	}
	if g.expire(full) {
		t.Fatal("the timer of a full batch started a second committer")
	}
	if got := g.next(); got != full {
		t.Fatal("the committer did not take the full batch")
	}
	if got := g.next(); got != nil {
		t.Fatal("the full batch was taken twice")
	}

	open, _, start := g.join(&batchedSave{pchannel: "p", checkpoint: wal.KafkaID(1), done: func(error) {}})
	if start || open == full {
		t.Fatalf("a save after a full batch: start = %v, same batch = %v; want a new batch waiting for its delay", start, open == full)
	}
	if !g.expire(open) {
		t.Fatal("a batch whose delay passed started no committer")
	}
	if g.expire(open) {
		t.Fatal("a batch was made ready twice")
	}
	if got := g.next(); got != open {
		t.Fatal("the committer did not take the batch whose delay passed")
	}
	if got := g.next(); got != nil || g.committing {
		t.Fatal("the committer went on with nothing ready")
	}
}

// Without a delay, the committer takes the open batch whenever it is
// free: the saves that came while it committed, up to a full batch at a
// time, in order.
func TestGroupCommitWithoutADelayTakesWhatCameDuringACommit(t *testing.T) {
	g := &groupCommit{}
	join := func(n int) (starts int) {
		for i := range n {
			if _, _, start := g.join(&batchedSave{pchannel: "p", checkpoint: wal.KafkaID(i), done: func(error) {}}); start {
				starts++
			}
		}
		return starts
	}
	sizes := func() (got []int) {
		for bt := g.next(); bt != nil; bt = g.next() {
			got = append(got, len(bt.saves))
		}
		return got
	}
	if starts := join(1); starts != 1 {
		t.Fatalf("a lone save started %d committers, want 1", starts)
	}
	if got := sizes(); !slices.Equal(got, []int{1}) {
		t.Fatalf("a lone save: batches %v, want [1]", got)
	}

	if starts := join(1); starts != 1 {
		t.Fatalf("a save after the committer ended started %d committers, want 1", starts)
	}
	first := g.next()
	if starts := join(maxGroupSaves + 5); starts != 0 {
		t.Fatalf("saves during a commit started %d committers, want 0", starts)
	}
	if len(first.saves) != 1 {
		t.Fatalf("the batch taken grew to %d saves after it was taken", len(first.saves))
	}
	if got := sizes(); !slices.Equal(got, []int{maxGroupSaves, 5}) {
		t.Fatalf("saves during a commit: batches %v, want [%d 5]", got, maxGroupSaves)
	}
	if g.committing || g.open != nil || len(g.ready) != 0 {
		t.Fatal("the committer ended with something left")
	}
}

// By default a lone save is committed at once, waiting for no timer: in
// a bubble, where time moves only while every goroutine waits, the save
// is durable before the clock has moved. With a delay it waits out the
// delay, bbolt's DB.Batch policy.
func TestGroupCommitOfALoneSaveWaitsForNoTimer(t *testing.T) {
	for _, delay := range []time.Duration{0, 10 * time.Millisecond} {
		t.Run(fmt.Sprintf("delay=%v", delay), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"), WithGroupCommit(true), WithGroupCommitDelay(delay))
				require.NoError(t, err)
				defer b.Close()
				start := time.Now()
				require.NoError(t, b.Save(context.Background(), "p", wal.KafkaID(1)))
				done := make(chan error, 1)
				require.NoError(t, b.StartSave(context.Background(), "p", wal.KafkaID(2), func(err error) { done <- err }))
				require.NoError(t, <-done)
				if waited := time.Since(start); waited != 2*delay {
					t.Fatalf("two saves one after the other waited %v, want %v", waited, 2*delay)
				}
				got, err := b.Load(context.Background(), "p")
				require.NoError(t, err)
				require.Equal(t, wal.KafkaID(2), got)
			})
		})
	}
}

// The saves that come while a commit runs share the next one: with the
// file's turn held, a first save's commit waits for it, and the ten that
// follow make one batch, committed once the first is.
func TestGroupCommitSharesTheNextCommitAmongTheSavesThatCameDuringOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"), WithGroupCommit(true))
		require.NoError(t, err)
		defer b.Close()
		var sizes []int
		commit := b.group.commit
		b.group.commit = func(bt *batch) {
			sizes = append(sizes, len(bt.saves)) // one committer at a time
			commit(bt)
		}
		ctx := context.Background()
		results := make(chan error, 11)
		told := func(err error) { results <- err }

		require.NoError(t, b.takeTurn(ctx))
		require.NoError(t, b.StartSave(ctx, "p0", wal.KafkaID(1), told))
		synctest.Wait() // the committer took p0's batch and waits for the turn
		for i := 1; i <= 10; i++ {
			require.NoError(t, b.StartSave(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(1), told))
		}
		synctest.Wait()
		b.releaseTurn()
		for range 11 {
			require.NoError(t, <-results)
		}
		synctest.Wait() // the committer has ended
		if !slices.Equal(sizes, []int{1, 10}) {
			t.Fatalf("commits of %v saves, want [1 10]", sizes)
		}
		all, err := b.LoadAll(ctx)
		require.NoError(t, err)
		require.Len(t, all, 11)
	})
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

// A done may save to its own Bolt again: the committer hands its role on
// before it tells a batch, so the save joins the next batch and another
// committer takes it. Told by the committer itself, the save waited for
// the committer, busy waiting for the done, until its context ended.
func TestGroupCommitDoneMaySaveAgain(t *testing.T) {
	for _, delay := range []time.Duration{0, 5 * time.Millisecond} {
		t.Run(fmt.Sprintf("delay=%v", delay), func(t *testing.T) {
			b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"), WithGroupCommit(true), WithGroupCommitDelay(delay))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			again := make(chan error, 2)
			require.NoError(t, b.StartSave(ctx, "p", wal.KafkaID(1), func(err error) {
				again <- err
				again <- b.Save(ctx, "q", wal.KafkaID(2))
			}))
			require.NoError(t, within(t, again, "p's outcome"))
			require.NoError(t, within(t, again, "the save made by p's done"))
			require.NoError(t, b.Close())
			b, err = OpenBolt(b.path)
			require.NoError(t, err)
			defer b.Close()
			all, err := b.LoadAll(ctx)
			require.NoError(t, err)
			require.Equal(t, map[string]wal.MessageID{"p": wal.KafkaID(1), "q": wal.KafkaID(2)}, all)
		})
	}
}

// A done that ends its goroutine (runtime.Goexit, as t.FailNow does in a
// test's callback) is taken as told, as one that panics is: the saves
// after it in its batch are told all the same, later saves commit, and
// Close returns. Before, the rest of the batch was never told, and Close
// waited for it for ever.
func TestGroupCommitDoneThatEndsItsGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"), WithGroupCommit(true))
		require.NoError(t, err)
		ctx := context.Background()
		told := make(chan string, 3)
		require.NoError(t, b.takeTurn(ctx))
		require.NoError(t, b.StartSave(ctx, "a", wal.KafkaID(1), func(error) { told <- "a" }))
		synctest.Wait() // the committer took a's batch and waits for the turn
		require.NoError(t, b.StartSave(ctx, "b", wal.KafkaID(1), func(error) { runtime.Goexit() }))
		require.NoError(t, b.StartSave(ctx, "c", wal.KafkaID(1), func(err error) {
			if err == nil {
				told <- "c"
			}
		}))
		b.releaseTurn()
		synctest.Wait()
		// The two batches are told on goroutines of their own, in either
		// order.
		require.ElementsMatch(t, []string{"a", "c"}, []string{<-told, <-told},
			"c: the save after the done that ended its goroutine")
		require.NoError(t, b.Save(ctx, "d", wal.KafkaID(1)))
		require.NoError(t, b.Close())
	})
}

// onSaveCaller reports whether the goroutine that calls it runs a Save
// (a frame of it, not the Save that created the goroutine).
func onSaveCaller() bool {
	buf := make([]byte, 64<<10)
	buf = buf[:runtime.Stack(buf, false)]
	for _, line := range bytes.Split(buf, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("github.com/lowwater/lowwater/persistence.(*Bolt).Save(")) {
			return true
		}
	}
	return false
}

// A Save that finds no commit running and the file free commits its
// batch itself, sparing a lone save the hand-off to a committer and
// back. With the file held by another call it leaves the commit to a
// committer, and returns when its context ends, its write left in the
// batch; a StartSave's caller never commits.
func TestGroupCommitALoneSaveCommitsOnItsCaller(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoints.db")
	b, err := OpenBolt(path)
	require.NoError(t, err)
	onCaller := make(chan bool, 1)
	commit := b.group.commit
	b.group.commit = func(bt *batch) {
		onCaller <- onSaveCaller()
		commit(bt)
	}
	ctx := context.Background()

	require.NoError(t, b.Save(ctx, "p", wal.KafkaID(1)))
	require.True(t, within(t, onCaller, "the lone save's commit"), "a lone save on a free file was committed by another goroutine")

	told := make(chan error, 1)
	require.NoError(t, b.StartSave(ctx, "p", wal.KafkaID(2), func(err error) { told <- err }))
	require.False(t, within(t, onCaller, "the started save's commit"), "a started save was committed on its caller")
	require.NoError(t, within(t, told, "the started save"))

	require.NoError(t, b.takeTurn(ctx))
	cut, cancel := context.WithCancel(ctx)
	saved := make(chan error, 1)
	go func() { saved <- b.Save(cut, "p", wal.KafkaID(3)) }()
	require.False(t, within(t, onCaller, "the save's commit, the file held"), "a save committed on its caller with the file held")
	cancel()
	require.ErrorIs(t, within(t, saved, "the save whose context ended"), context.Canceled)
	b.releaseTurn()
	require.NoError(t, b.Close())
	require.Equal(t, wal.KafkaID(3), loadReopened(t, path, "p"), "the write left in its batch")
}

// A Save that commits its batch itself leaves the batch's started saves
// to be told on another goroutine: a done that blocks delays no Save.
func TestGroupCommitOnASaveCallerTellsElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A delay longer than the test: the batch commits once full,
		// on the caller of the Save that filled it.
		b, err := OpenBolt(filepath.Join(t.TempDir(), "checkpoints.db"), WithGroupCommitDelay(MaxGroupCommitDelay))
		require.NoError(t, err)
		defer b.Close()
		ctx := context.Background()
		release := make(chan struct{})
		told := make(chan error, 1)
		require.NoError(t, b.StartSave(ctx, "started", wal.KafkaID(1), func(err error) {
			<-release
			told <- err
		}))
		saved := make(chan error, maxGroupSaves-1)
		for i := range maxGroupSaves - 1 {
			go func() { saved <- b.Save(ctx, fmt.Sprintf("p%d", i), wal.KafkaID(1)) }()
		}
		for range maxGroupSaves - 1 {
			require.NoError(t, <-saved) // the done still blocks
		}
		close(release)
		require.NoError(t, <-told)
	})
}

// BenchmarkBoltLoneSave is one Save at a time, each durable before the
// next: the latency of a save nobody shares a commit with, under group
// commit and with a transaction per save.
func BenchmarkBoltLoneSave(b *testing.B) {
	for _, group := range []bool{false, true} {
		name := map[bool]string{false: "commit=single", true: "commit=group"}[group]
		b.Run(name, func(b *testing.B) {
			c, err := OpenBolt(filepath.Join(b.TempDir(), "checkpoints.db"), WithGroupCommit(group))
			require.NoError(b, err)
			defer c.Close()
			ctx := context.Background()
			var offset int64
			for b.Loop() {
				offset++
				if err := c.Save(ctx, "p", wal.KafkaID(offset)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
