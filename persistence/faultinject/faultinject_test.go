package faultinject_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/catalogtest"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func wrap(t *testing.T, opts ...faultinject.Option) (*faultinject.Catalog, *persistence.Memory) {
	t.Helper()
	m := persistence.NewMemory()
	c := faultinject.Wrap(m, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c, m
}

func wantHistory(t *testing.T, m *persistence.Memory, pchannel string, want ...wal.MessageID) {
	t.Helper()
	got := m.History(pchannel)
	if len(got) != len(want) {
		t.Fatalf("History(%q) = %v, want %v", pchannel, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("History(%q) = %v, want %v", pchannel, got, want)
		}
	}
}

func wantCounts(t *testing.T, c *faultinject.Catalog, op faultinject.Op, calls, failures int) {
	t.Helper()
	if got := c.Calls(op); got != calls {
		t.Errorf("Calls(%s) = %d, want %d", op, got, calls)
	}
	if got := c.Failures(op); got != failures {
		t.Errorf("Failures(%s) = %d, want %d", op, got, failures)
	}
}

func wantInjected(t *testing.T, err error, op faultinject.Op, pchannel, reason string) {
	t.Helper()
	var injected *faultinject.InjectedError
	if !errors.Is(err, faultinject.ErrInjected) || !errors.As(err, &injected) {
		t.Fatalf("err = %v, want an *InjectedError", err)
	}
	want := faultinject.InjectedError{Op: op, PChannel: pchannel, Reason: reason}
	if *injected != want {
		t.Fatalf("InjectedError = %+v, want %+v", *injected, want)
	}
}

func TestContractWithoutFaults(t *testing.T) {
	catalogtest.Run(t, func(*testing.T) persistence.Catalog {
		return faultinject.Wrap(persistence.NewMemory())
	})
}

func TestContractWithLatency(t *testing.T) {
	catalogtest.Run(t, func(*testing.T) persistence.Catalog {
		return faultinject.Wrap(persistence.NewMemory(), faultinject.WithLatency(50*time.Microsecond))
	})
}

func TestScriptedError(t *testing.T) {
	c, m := wrap(t)
	ctx := context.Background()
	c.Script(faultinject.OpSave, faultinject.Error())
	wantInjected(t, c.Save(ctx, "p", wal.KafkaID(1)), faultinject.OpSave, "p", "scripted")
	wantHistory(t, m, "p")
	if err := c.Save(ctx, "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save after the script ran out = %v", err)
	}
	wantHistory(t, m, "p", wal.KafkaID(1))
	wantCounts(t, c, faultinject.OpSave, 2, 1)
	wantCounts(t, c, faultinject.OpLoad, 0, 0)
}

func TestScriptsArePerOpAndPassSpacesThem(t *testing.T) {
	c, _ := wrap(t)
	ctx := context.Background()
	c.Script(faultinject.OpLoad, faultinject.Pass(), faultinject.Error())
	c.Script(faultinject.OpLoadAll, faultinject.Error())
	if err := c.Save(ctx, "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save = %v", err)
	}
	if id, err := c.Load(ctx, "p"); err != nil || id != wal.KafkaID(1) {
		t.Fatalf("first Load = (%v, %v), want kafka:1", id, err)
	}
	id, err := c.Load(ctx, "p")
	wantInjected(t, err, faultinject.OpLoad, "p", "scripted")
	if id != nil {
		t.Fatalf("failed Load returned %v", id)
	}
	all, err := c.LoadAll(ctx)
	wantInjected(t, err, faultinject.OpLoadAll, "", "scripted")
	if all != nil {
		t.Fatalf("failed LoadAll returned %v", all)
	}
	if id, err := c.Load(ctx, "p"); err != nil || id != wal.KafkaID(1) {
		t.Fatalf("third Load = (%v, %v), want kafka:1", id, err)
	}
	wantCounts(t, c, faultinject.OpSave, 1, 0)
	wantCounts(t, c, faultinject.OpLoad, 3, 1)
	wantCounts(t, c, faultinject.OpLoadAll, 1, 1)
}

func TestLostReply(t *testing.T) {
	c, m := wrap(t)
	ctx := context.Background()
	c.Script(faultinject.OpSave, faultinject.LostReply())
	wantInjected(t, c.Save(ctx, "p", wal.KafkaID(5)), faultinject.OpSave, "p", "lost reply")
	wantHistory(t, m, "p", wal.KafkaID(5))
	// The retry of a save that did commit must succeed.
	if err := c.Save(ctx, "p", wal.KafkaID(5)); err != nil {
		t.Fatalf("retry = %v", err)
	}
	wantHistory(t, m, "p", wal.KafkaID(5), wal.KafkaID(5))
}

func TestLatency(t *testing.T) {
	const d = 30 * time.Millisecond
	c, m := wrap(t)
	ctx := context.Background()
	c.Script(faultinject.OpSave, faultinject.Latency(d))
	start := time.Now()
	if err := c.Save(ctx, "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("delayed Save = %v", err)
	}
	if elapsed := time.Since(start); elapsed < d {
		t.Fatalf("delayed Save took %v, want at least %v", elapsed, d)
	}
	wantHistory(t, m, "p", wal.KafkaID(1))

	c.Script(faultinject.OpSave, faultinject.Latency(time.Hour))
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := c.Save(short, "p", wal.KafkaID(2)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Save delayed past its deadline = %v, want DeadlineExceeded", err)
	}
	wantHistory(t, m, "p", wal.KafkaID(1))
	wantCounts(t, c, faultinject.OpSave, 2, 1)
}

func TestWithLatency(t *testing.T) {
	const d = 20 * time.Millisecond
	c, _ := wrap(t, faultinject.WithLatency(d))
	start := time.Now()
	if _, err := c.LoadAll(context.Background()); err != nil {
		t.Fatalf("LoadAll = %v", err)
	}
	if elapsed := time.Since(start); elapsed < d {
		t.Fatalf("LoadAll took %v, want at least %v", elapsed, d)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Load(cancelled, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with a cancelled context = %v, want Canceled", err)
	}
}

func TestHangEndsWithContext(t *testing.T) {
	c, m := wrap(t)
	c.Script(faultinject.OpSave, faultinject.Hang())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := c.Save(ctx, "p", wal.KafkaID(1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung Save = %v, want DeadlineExceeded", err)
	}
	wantHistory(t, m, "p")
	wantCounts(t, c, faultinject.OpSave, 1, 1)
}

func TestHangEndsWithClose(t *testing.T) {
	c, _ := wrap(t)
	c.Script(faultinject.OpLoad, faultinject.Hang())
	result := make(chan error, 1)
	go func() {
		_, err := c.Load(context.Background(), "p")
		result <- err
	}()
	if err := c.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	select {
	case err := <-result:
		if !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("hung Load after Close = %v, want ErrClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not end the hang")
	}
}

func TestPanic(t *testing.T) {
	c, m := wrap(t)
	c.Script(faultinject.OpSave, faultinject.Panic())
	got := func() (r any) {
		defer func() { r = recover() }()
		_ = c.Save(context.Background(), "p", wal.KafkaID(1))
		return nil
	}()
	want := faultinject.InjectedPanic{Op: faultinject.OpSave, PChannel: "p"}
	if got != want {
		t.Fatalf("recovered %#v, want %#v", got, want)
	}
	wantHistory(t, m, "p")
	wantCounts(t, c, faultinject.OpSave, 1, 1)
	if err := c.Save(context.Background(), "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save after the panic = %v", err)
	}
}

func TestStoredAhead(t *testing.T) {
	c, m := wrap(t)
	c.Script(faultinject.OpSave, faultinject.StoredAhead(wal.KafkaID(9)))
	err := c.Save(context.Background(), "p", wal.KafkaID(3))
	var ahead *persistence.StoredAheadError
	if !errors.Is(err, persistence.ErrStoredAhead) || !errors.As(err, &ahead) {
		t.Fatalf("Save = %v, want a *StoredAheadError", err)
	}
	want := persistence.StoredAheadError{PChannel: "p", Stored: wal.KafkaID(9), Attempted: wal.KafkaID(3)}
	if *ahead != want {
		t.Fatalf("StoredAheadError = %+v, want %+v", *ahead, want)
	}
	wantHistory(t, m, "p")
}

func TestInnerFailuresAreCounted(t *testing.T) {
	c, _ := wrap(t)
	ctx := context.Background()
	if err := c.Save(ctx, "p", wal.KafkaID(5)); err != nil {
		t.Fatal(err)
	}
	if err := c.Save(ctx, "p", wal.KafkaID(4)); !errors.Is(err, persistence.ErrStoredAhead) {
		t.Fatalf("lower Save = %v, want ErrStoredAhead", err)
	}
	wantCounts(t, c, faultinject.OpSave, 2, 1)
}

func TestSetDown(t *testing.T) {
	c, m := wrap(t)
	ctx := context.Background()
	c.Script(faultinject.OpSave, faultinject.StoredAhead(wal.KafkaID(100)))
	c.SetDown(true)
	wantInjected(t, c.Save(ctx, "p", wal.KafkaID(1)), faultinject.OpSave, "p", "down")
	_, err := c.Load(ctx, "p")
	wantInjected(t, err, faultinject.OpLoad, "p", "down")
	_, err = c.LoadAll(ctx)
	wantInjected(t, err, faultinject.OpLoadAll, "", "down")
	wantHistory(t, m, "p")

	c.SetDown(false)
	// The script waited for the outage to end.
	if err := c.Save(ctx, "p", wal.KafkaID(1)); !errors.Is(err, persistence.ErrStoredAhead) {
		t.Fatalf("first Save after the outage = %v, want the scripted ErrStoredAhead", err)
	}
	if err := c.Save(ctx, "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("second Save after the outage = %v", err)
	}
	wantCounts(t, c, faultinject.OpSave, 3, 2)
}

// outcomes records which of n saves failed.
func outcomes(t *testing.T, c *faultinject.Catalog, n int) []bool {
	t.Helper()
	failed := make([]bool, n)
	for i := range failed {
		err := c.Save(context.Background(), "p", wal.KafkaID(i))
		if err != nil && !errors.Is(err, faultinject.ErrInjected) {
			t.Fatalf("Save = %v", err)
		}
		failed[i] = err != nil
	}
	return failed
}

func count(failed []bool) int {
	n := 0
	for _, f := range failed {
		if f {
			n++
		}
	}
	return n
}

func TestSaveFailureRate(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		rate     float64
		min, max int
	}{
		{0, 0, 0},
		{-1, 0, 0},
		{math.NaN(), 0, 0},
		{1, n, n},
		{2, n, n},
		{0.5, 400, 600},
	} {
		c, _ := wrap(t, faultinject.WithSeed(7), faultinject.WithSaveFailureRate(tc.rate))
		got := count(outcomes(t, c, n))
		if got < tc.min || got > tc.max {
			t.Errorf("rate %v: %d of %d saves failed, want %d..%d", tc.rate, got, n, tc.min, tc.max)
		}
		wantCounts(t, c, faultinject.OpSave, n, got)
	}
}

func TestSeedMakesFailuresRepeatable(t *testing.T) {
	run := func(seed int64) []bool {
		c, _ := wrap(t, faultinject.WithSeed(seed), faultinject.WithSaveFailureRate(0.3))
		return outcomes(t, c, 200)
	}
	a, b, other := run(1), run(1), run(2)
	same := func(x, y []bool) bool {
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	if !same(a, b) {
		t.Fatal("the same seed gave different failures")
	}
	if same(a, other) {
		t.Fatal("seeds 1 and 2 gave the same 200 outcomes")
	}
}

func TestLoadFailureRate(t *testing.T) {
	c, _ := wrap(t, faultinject.WithLoadFailureRate(1))
	ctx := context.Background()
	if err := c.Save(ctx, "p", wal.KafkaID(1)); err != nil {
		t.Fatalf("Save = %v, want nil: the load rate must not touch saves", err)
	}
	_, err := c.Load(ctx, "p")
	wantInjected(t, err, faultinject.OpLoad, "p", "rate")
	_, err = c.LoadAll(ctx)
	wantInjected(t, err, faultinject.OpLoadAll, "", "rate")
}

func TestOnSave(t *testing.T) {
	type saved struct {
		pchannel string
		id       wal.MessageID
		injected bool
	}
	var (
		mu  sync.Mutex
		got []saved
	)
	c, _ := wrap(t, faultinject.WithOnSave(func(pchannel string, id wal.MessageID, err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, saved{pchannel, id, errors.Is(err, faultinject.ErrInjected)})
	}))
	ctx := context.Background()
	c.Script(faultinject.OpSave, faultinject.Error())
	_ = c.Save(ctx, "a", wal.KafkaID(1))
	_ = c.Save(ctx, "b", wal.KafkaID(2))
	_, _ = c.Load(ctx, "a")
	want := []saved{{"a", wal.KafkaID(1), true}, {"b", wal.KafkaID(2), false}}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("OnSave saw %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("OnSave saw %v, want %v", got, want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	const goroutines, perGoroutine, scripted = 8, 100, 50
	c, _ := wrap(t, faultinject.WithSeed(3), faultinject.WithSaveFailureRate(0.2), faultinject.WithLoadFailureRate(0.2))
	faults := make([]faultinject.Fault, scripted)
	for i := range faults {
		faults[i] = faultinject.Error()
	}
	c.Script(faultinject.OpSave, faults...)
	var failed atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range perGoroutine {
				err := c.Save(ctx, "p", wal.KafkaID(i*goroutines+g))
				switch {
				case err == nil:
				case errors.Is(err, faultinject.ErrInjected), errors.Is(err, persistence.ErrStoredAhead):
					failed.Add(1)
				default:
					t.Errorf("Save = %v", err)
				}
				_, _ = c.Load(ctx, "p")
				c.SetDown(false)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("concurrent callers did not finish")
	}
	wantCounts(t, c, faultinject.OpSave, goroutines*perGoroutine, int(failed.Load()))
	if c.Failures(faultinject.OpSave) < scripted {
		t.Fatalf("Failures(Save) = %d, fewer than the %d scripted", c.Failures(faultinject.OpSave), scripted)
	}
	if got := c.Calls(faultinject.OpLoad); got != goroutines*perGoroutine {
		t.Fatalf("Calls(Load) = %d, want %d", got, goroutines*perGoroutine)
	}
}

func TestStrings(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{faultinject.OpLoad.String(), "Load"},
		{faultinject.OpSave.String(), "Save"},
		{faultinject.OpLoadAll.String(), "LoadAll"},
		{faultinject.Op(9).String(), "Op(9)"},
		{(&faultinject.InjectedError{Op: faultinject.OpSave, PChannel: "p", Reason: "down"}).Error(),
			`faultinject: injected failure (down) of Save "p"`},
		{faultinject.InjectedPanic{Op: faultinject.OpLoad, PChannel: "q"}.String(),
			`faultinject: injected panic in Load "q"`},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
