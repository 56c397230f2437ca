package catalogtest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

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
	// lowers, when set, breaks the contract on purpose (see
	// TestRunCatchesABrokenCatalog).
	lowers bool
}

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
	return c.stored[pchannel], nil
}

func (c *mapCatalog) Save(ctx context.Context, pchannel string, checkpoint wal.MessageID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ready(ctx, pchannel, true); err != nil {
		return err
	}
	// The arguments every catalog refuses: a bad name, a typed nil or a
	// foreign ID type (judged by its type, without calling its methods,
	// which might panic), an ID that does not read back or cannot be
	// ordered.
	if err := persistence.CheckSaveArgs(pchannel, checkpoint); err != nil {
		return err
	}
	name, _ := wal.NameOf(checkpoint)
	old := c.stored[pchannel]
	if old == nil {
		c.stored[pchannel] = checkpoint
		return nil
	}
	if old.WALName() != name {
		return fmt.Errorf("%w: %q stores a %s checkpoint, got %s", persistence.ErrInvalidArgument, pchannel, old.WALName(), checkpoint)
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

// TestRunCatchesABrokenCatalog runs the suite on a catalog that lets a save
// lower the stored checkpoint, in a child process (a failing subtest would
// fail this test too), and expects the suite to fail it and say why.
func TestRunCatchesABrokenCatalog(t *testing.T) {
	if os.Getenv("CATALOGTEST_BROKEN") == "1" {
		catalogtest.Run(t, func(*testing.T) persistence.Catalog {
			c := newMapCatalog()
			c.lowers = true
			return c
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesABrokenCatalog$", "-test.v")
	cmd.Env = append(os.Environ(), "CATALOGTEST_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a catalog that lowers checkpoints:\n%s", out)
	}
	for _, want := range []string{
		"--- FAIL: TestRunCatchesABrokenCatalog/SaveLowerIsRefused",
		"--- PASS: TestRunCatchesABrokenCatalog/SaveThenLoadEveryWAL",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}
