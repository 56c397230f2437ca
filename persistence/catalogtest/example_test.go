package catalogtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// mapCatalog is a catalog written outside lowwater: a map behind a mutex.
// It uses only public API, and shows the checks a catalog owes its callers.
type mapCatalog struct {
	mu     sync.Mutex
	closed bool
	stored map[string]wal.MessageID
	// lowers, naive, hangs, hangsClosing and ends, when set, break the
	// contract on purpose (see TestRunCatchesABrokenCatalog): naive skips
	// the argument checks, and so panics on a nil ID; hangs never returns
	// from a Save, whatever its context, holding the catalog's lock, and
	// hangsClosing from a Close; ends ends a Load's goroutine
	// (runtime.Goexit) where nothing is stored, rather than return.
	lowers, naive, hangs, hangsClosing, ends bool
	// panicsClosing panics in Close.
	panicsClosing bool
	// typedNil returns a nil *nilError for a save that succeeded.
	typedNil bool
	// twoSteps reads the stored value, lets its lock go for a store's
	// I/O, then writes: another save may land between.
	twoSteps bool
}

// nilError is an error type whose nil pointer a broken Save returns.
type nilError struct{ what string }

func (e *nilError) Error() string { return e.what }

func newMapCatalog() *mapCatalog { return &mapCatalog{stored: map[string]wal.MessageID{}} }

// ready fails calls after Close, and calls whose context is done.
func (c *mapCatalog) ready(ctx context.Context, pchannel string, checkName bool) error {
	if c.closed {
		return persistence.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if checkName && pchannel == "" {
		return fmt.Errorf("%w: empty pchannel name", persistence.ErrInvalidArgument)
	}
	return nil
}

func (c *mapCatalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return nil, err
	}
	if c.ends && c.stored[pchannel] == nil {
		runtime.Goexit()
	}
	return c.stored[pchannel], nil
}

func (c *mapCatalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return err
	}
	if c.hangs {
		select {}
	}
	// The arguments every catalog refuses: a bad name, a typed nil or a
	// foreign ID type (judged by its type, without calling its methods,
	// which might panic), an ID that does not read back or cannot be
	// ordered.
	if err := persistence.CheckSaveArgs(pchannel, checkpoint); err != nil && !c.naive {
		return err
	}
	if c.naive && c.stored[pchannel] != nil && checkpoint.LT(c.stored[pchannel]) {
		return &persistence.StoredAheadError{PChannel: pchannel, Stored: c.stored[pchannel], Attempted: checkpoint}
	}
	name, _ := wal.NameOf(checkpoint)
	old := c.stored[pchannel]
	if c.twoSteps {
		c.mu.Unlock()
		time.Sleep(10 * time.Microsecond)
		c.mu.Lock()
	}
	if old == nil {
		c.stored[pchannel] = checkpoint
		if c.typedNil {
			var none *nilError
			return none
		}
		return nil
	}
	if old.WALName() != name {
		return fmt.Errorf("%w: %q stores a %s checkpoint, got %s: %w", persistence.ErrInvalidArgument, pchannel, old.WALName(), checkpoint, wal.ErrWALMismatch)
	}
	// wal.Compare, not LT: an ID type registered outside package wal may
	// panic comparing some values, and that must fail this save, not the
	// caller.
	order, err := wal.Compare(checkpoint, old)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %q: %w", persistence.ErrInvalidArgument, pchannel, err)
	case order < 0 && !c.lowers:
		return &persistence.StoredAheadError{PChannel: pchannel, Stored: old, Attempted: checkpoint}
	}
	c.stored[pchannel] = checkpoint
	return nil
}

func (c *mapCatalog) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, "", false); err != nil {
		return nil, err
	}
	all := make(map[string]wal.MessageID, len(c.stored))
	for k, v := range c.stored {
		all[k] = v
	}
	return all, nil
}

func (c *mapCatalog) Delete(ctx context.Context, pchannel string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return err
	}
	delete(c.stored, pchannel)
	return nil
}

func (c *mapCatalog) Close() error {
	if c.hangsClosing {
		select {}
	}
	if c.panicsClosing {
		panic("mapCatalog: Close on fire")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return persistence.ErrClosed
	}
	c.closed = true
	return nil
}

// TestThirdPartyCatalog is how a catalog written outside lowwater proves
// itself: one call of catalogtest.Run, with a function that makes a new,
// empty catalog for each check.
func TestThirdPartyCatalog(t *testing.T) {
	catalogtest.Run(t, func(*testing.T) persistence.Catalog { return newMapCatalog() })
}

// TestRunCatchesABrokenCatalog runs the suite, in a child process (a
// failing subtest would fail this test too), on catalogs that break the
// contract, and expects it to fail each and say why: one whose save
// lowers the stored checkpoint; one that skips the argument checks and
// panics on a nil ID, where the check that gives it one fails, saying
// so, and the checks after it still run; one whose save never returns,
// whatever its context, which fails the check it hung in within the
// bounds of a call, and every check after it at once, rather than hang
// the run until go test's timeout, and one whose Close never returns,
// alike; one whose Load ends its goroutine; one whose Save returns a nil
// pointer as its error.
func TestRunCatchesABrokenCatalog(t *testing.T) {
	if mode := os.Getenv("CATALOGTEST_BROKEN"); mode != "" {
		defer catalogtest.SetCallWithin(200*time.Millisecond, 100*time.Millisecond)()
		catalogtest.Run(t, func(*testing.T) persistence.Catalog {
			c := newMapCatalog()
			c.lowers, c.naive, c.hangs = mode == "lowers", mode == "naive", mode == "hangs"
			c.hangsClosing, c.ends, c.panicsClosing = mode == "hangs-closing", mode == "ends", mode == "panics-closing"
			c.typedNil, c.twoSteps = mode == "typed-nil", mode == "two-steps"
			return c
		})
		return
	}
	for mode, want := range map[string][]string{
		"lowers": {
			"--- FAIL: TestRunCatchesABrokenCatalog/SaveLowerIsRefused",
			"--- PASS: TestRunCatchesABrokenCatalog/SaveThenLoadEveryWAL",
		},
		"naive": {
			"--- FAIL: TestRunCatchesABrokenCatalog/InvalidArguments",
			`Save("p", *wal.KafkaID) = the catalog panicked in Save("p", *wal.KafkaID): `,
			// After the panic, the cases after it are still told.
			`Save("p", kafka:-2) = `,
			"--- PASS: TestRunCatchesABrokenCatalog/LoadAllManyPChannels",
			"--- PASS: TestRunCatchesABrokenCatalog/CallsAfterClose",
		},
		// Every check's catalog is closed: the first Close hangs, and
		// the run ends all the same, each check after it failing at once.
		"hangs-closing": {
			"--- FAIL: TestRunCatchesABrokenCatalog/LoadAbsent",
			"Close has not returned 300ms after it began: a catalog's Close must return",
			"--- FAIL: TestRunCatchesABrokenCatalog/CallsAfterClose",
			"a call earlier ran past its deadline (see the first check that failed)",
		},
		// It passed: the call's goroutine ended, and the suite took its
		// nothing for (nil, nil). The actors take it for a failed Load,
		// and no new pchannel ever starts on it.
		"ends": {
			"--- FAIL: TestRunCatchesABrokenCatalog/LoadAbsent",
			`the catalog ended the goroutine of Load("absent") (runtime.Goexit, as t.FailNow does): it returned nothing`,
		},
		// Each check's Close panics, at its end, after its own recover:
		// it crashed the test binary.
		"panics-closing": {
			"--- FAIL: TestRunCatchesABrokenCatalog/LoadAbsent",
			"the catalog panicked in Close: mapCatalog: Close on fire",
			"--- FAIL: TestRunCatchesABrokenCatalog/CallsAfterClose",
		},
		// A nil *nilError is a failure to its caller: the check said
		// "Save(...) = <nil>, want nil".
		"typed-nil": {
			"--- FAIL: TestRunCatchesABrokenCatalog/SaveThenLoadEveryWAL",
			`Save("pch-kafka", kafka:10) = a nil *catalogtest_test.nilError returned as an error: not nil to its caller (return a plain nil), want nil`,
		},
		// A compare and a write in two steps, with I/O between: caught
		// in one run in three before a read was held to every save
		// acknowledged before it; in every run since on a quiet machine,
		// but a loaded one (CI's, the packages' tests in parallel)
		// missed it once, so it is given five runs, as the
		// suite's doc asks before a pass is trusted.
		"two-steps": {
			"--- PASS: TestRunCatchesABrokenCatalog/SaveLowerIsRefused",
			"--- FAIL: TestRunCatchesABrokenCatalog/ConcurrentSavesNeverGoBack",
			", acknowledged before the read began",
		},
		"hangs": {
			"--- PASS: TestRunCatchesABrokenCatalog/LoadAbsent",
			"--- FAIL: TestRunCatchesABrokenCatalog/SaveThenLoadEveryWAL",
			`Save("pch-kafka", kafka:10) still runs 100ms past its context's deadline: a catalog must end each call when its context ends`,
			"--- FAIL: TestRunCatchesABrokenCatalog/CallsAfterClose",
			"a call earlier ran past its deadline (see the first check that failed)",
		},
	} {
		runs := 1
		if mode == "two-steps" {
			runs = 5 // a race: see above
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesABrokenCatalog$", "-test.v", fmt.Sprintf("-test.count=%d", runs))
		cmd.Env = append(os.Environ(), "CATALOGTEST_BROKEN="+mode)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%s: the suite passed it:\n%s", mode, out)
		}
		if strings.Contains(string(out), "\npanic: ") {
			t.Errorf("%s: the run crashed:\n%s", mode, out)
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: child output lacks %q:\n%s", mode, w, out)
			}
		}
	}
}

// starterCatalog is mapCatalog with a StartSave that breaks the contract
// in the way its mode names (see TestRunCatchesABrokenSaveStarter).
type starterCatalog struct {
	*mapCatalog
	mode string
}

// toldAgain is, in mode "twice-late", the done of the last save of the
// catalog closed last: the next catalog's first save calls it again, once
// the check that started it has ended.
var toldAgain struct {
	sync.Mutex
	last, closed func(error)
}

func (c *starterCatalog) StartSave(ctx context.Context, pchannel string, checkpoint wal.MessageID, done func(error)) error {
	switch c.mode {
	case "within":
		done(c.Save(ctx, pchannel, checkpoint))
	case "within-deep":
		deep(100, func() { done(c.Save(ctx, pchannel, checkpoint)) })
	case "twice-late":
		toldAgain.Lock()
		again := toldAgain.closed
		toldAgain.closed, toldAgain.last = nil, done
		toldAgain.Unlock()
		if again != nil {
			told := make(chan struct{})
			go func() { again(nil); close(told) }()
			<-told
		}
		go done(c.Save(ctx, pchannel, checkpoint))
	case "never":
	case "fails-and-tells":
		go done(nil) // before or after StartSave returns: told either way
		return errors.New("mystore: refused")
	}
	return nil
}

// deep calls f n frames down.
func deep(n int, f func()) {
	if n == 0 {
		f()
		return
	}
	deep(n-1, f)
}

func (c *starterCatalog) Close() error {
	toldAgain.Lock()
	toldAgain.closed, toldAgain.last = toldAgain.last, nil
	toldAgain.Unlock()
	return c.mapCatalog.Close()
}

// TestRunCatchesABrokenSaveStarter runs the suite, in a child process, on
// catalogs whose StartSave calls done from within itself, calls it again
// after the check that started it ended, or never calls it. Each is failed
// with its reason, and none crashes the run: testing panics when a
// goroutine reports to a test that has ended.
func TestRunCatchesABrokenSaveStarter(t *testing.T) {
	if mode := os.Getenv("CATALOGTEST_STARTER"); mode != "" {
		defer catalogtest.SetToldWithin(100 * time.Millisecond)()
		catalogtest.Run(t, func(*testing.T) persistence.Catalog { return &starterCatalog{mapCatalog: newMapCatalog(), mode: mode} })
		return
	}
	for mode, want := range map[string][]string{
		"within": {
			"--- FAIL: TestRunCatchesABrokenSaveStarter/StartSave/SaveThenLoadEveryWAL",
			`StartSave("pch-kafka", kafka:10) called done from within StartSave`,
		},
		"within-deep": {
			`StartSave("pch-kafka", kafka:10) called done from within StartSave`,
		},
		"twice-late": {
			"--- FAIL: TestRunCatchesABrokenSaveStarter/StartSave ",
			"after TestRunCatchesABrokenSaveStarter/StartSave/SaveThenLoadEveryWAL ended:",
			"--- PASS: TestRunCatchesABrokenSaveStarter/StartSave/SaveThenLoadEveryWAL",
		},
		"fails-and-tells": {
			"--- FAIL: TestRunCatchesABrokenSaveStarter/StartSave/SaveThenLoadEveryWAL",
			`StartSave("pch-kafka", kafka:10) returned mystore: refused, and called done`,
			"a StartSave that fails never calls done",
		},
		"never": {
			"--- FAIL: TestRunCatchesABrokenSaveStarter/StartSave/SaveThenLoadEveryWAL",
			"started, and was not told within 100ms",
			"--- FAIL: TestRunCatchesABrokenSaveStarter/StartSave/ConcurrentSavesNeverGoBack",
			"a save started earlier was never told (see the first check that failed): no more are started",
		},
	} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesABrokenSaveStarter$", "-test.v")
			cmd.Env = append(os.Environ(), "CATALOGTEST_STARTER="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a StartSave that breaks the contract:\n%s", out)
			}
			if strings.Contains(string(out), "panic:") {
				t.Errorf("the run crashed:\n%s", out)
			}
			for _, w := range want {
				if !strings.Contains(string(out), w) {
					t.Errorf("child output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// sharedStore is what instances of instanceCatalog share, as processes
// share a directory: each read and each write is atomic, alone.
type sharedStore struct {
	mu     sync.Mutex
	stored map[string]wal.MessageID
}

func (s *sharedStore) get(pchannel string) wal.MessageID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stored[pchannel]
}

func (s *sharedStore) put(pchannel string, id wal.MessageID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == nil {
		delete(s.stored, pchannel)
		return
	}
	s.stored[pchannel] = id
}

// instanceCatalog is one instance of a store that several share, each
// making a save's compare and its write one step under a mutex of its
// own (its mapCatalog's, whose map it leaves empty): it passes Run, whose
// checks have one instance, and not RunShared. With caches set, it also
// reads back what it saved itself, from memory.
type instanceCatalog struct {
	*mapCatalog
	store  *sharedStore
	caches bool
	cache  map[string]wal.MessageID // guarded by mu
}

func (c *instanceCatalog) Load(ctx context.Context, pchannel string) (wal.MessageID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return nil, err
	}
	if id, ok := c.cache[pchannel]; ok && c.caches {
		return id, nil
	}
	return c.store.get(pchannel), nil
}

func (c *instanceCatalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return err
	}
	if err := persistence.CheckSaveArgs(pchannel, checkpoint); err != nil {
		return err
	}
	old := c.store.get(pchannel)
	time.Sleep(10 * time.Microsecond) // a store's I/O: another instance's save may land here
	if old != nil {
		if old.WALName() != checkpoint.WALName() {
			return fmt.Errorf("%w: %q stores a %s checkpoint, got %s: %w", persistence.ErrInvalidArgument, pchannel, old.WALName(), checkpoint, wal.ErrWALMismatch)
		}
		switch order, err := wal.Compare(checkpoint, old); {
		case err != nil:
			return fmt.Errorf("%w: %q: %w", persistence.ErrInvalidArgument, pchannel, err)
		case order < 0:
			return &persistence.StoredAheadError{PChannel: pchannel, Stored: old, Attempted: checkpoint}
		}
	}
	c.store.put(pchannel, checkpoint)
	c.cache[pchannel] = checkpoint
	return nil
}

func (c *instanceCatalog) LoadAll(ctx context.Context) (map[string]wal.MessageID, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, "", false); err != nil {
		return nil, err
	}
	c.store.mu.Lock()
	defer c.store.mu.Unlock()
	all := make(map[string]wal.MessageID, len(c.store.stored))
	for k, v := range c.store.stored {
		all[k] = v
	}
	return all, nil
}

func (c *instanceCatalog) Delete(ctx context.Context, pchannel string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return err
	}
	c.store.put(pchannel, nil)
	delete(c.cache, pchannel)
	return nil
}

// A store whose instances each lock their own saves passes Run, and
// RunShared catches it: two instances' saves interleave between compare
// and write, and the stored value goes back. One whose instances read
// back what they saved from memory is caught at the first read.
func TestRunSharedCatchesWhatRunCannot(t *testing.T) {
	if mode := os.Getenv("CATALOGTEST_SHARED"); mode != "" {
		open := func(store *sharedStore) *instanceCatalog {
			return &instanceCatalog{mapCatalog: newMapCatalog(), store: store, caches: mode == "caches", cache: map[string]wal.MessageID{}}
		}
		newStore := func() *sharedStore { return &sharedStore{stored: map[string]wal.MessageID{}} }
		t.Run("one", func(t *testing.T) {
			catalogtest.Run(t, func(*testing.T) persistence.Catalog { return open(newStore()) })
		})
		t.Run("two", func(t *testing.T) {
			catalogtest.RunShared(t, func(*testing.T) (persistence.Catalog, persistence.Catalog) {
				s := newStore()
				return open(s), open(s)
			})
		})
		return
	}
	const name = "TestRunSharedCatchesWhatRunCannot"
	for mode, want := range map[string][]string{
		"lock-per-instance": {
			"--- PASS: " + name + "/one/ConcurrentSavesNeverGoBack",
			"--- PASS: " + name + "/two/SavedThroughOneIsReadThroughTheOther",
			"--- FAIL: " + name + "/two/ConcurrentSavesThroughBothNeverGoBack",
			"the step must be the store's, a transaction or a conditional write, not a lock of one instance's",
		},
		"caches": {
			"--- PASS: " + name + "/one/SaveThenLoadEveryWAL",
			"--- FAIL: " + name + "/two/SavedThroughOneIsReadThroughTheOther",
			`Load("pch-kafka") = kafka:10 (10), want kafka:20 (20), stored through the other instance`,
		},
	} {
		t.Run(mode, func(t *testing.T) {
			child := func(run string, count int) string {
				cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$/^"+run+"$", "-test.v", fmt.Sprintf("-test.count=%d", count))
				cmd.Env = append(os.Environ(), "CATALOGTEST_SHARED="+mode)
				out, _ := cmd.CombinedOutput()
				return string(out)
			}
			one := child("one", 1)
			if !strings.Contains(one, "--- PASS: "+name+"/one") {
				t.Errorf("Run failed it, where only RunShared can:\n%s", one)
			}
			// The race was caught in one run of six, when a read was
			// held to the read before it alone; in every run since.
			out := one + child("two", 5)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("child output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
