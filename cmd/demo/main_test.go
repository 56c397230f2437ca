package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/testkit/cmdtest"
	"github.com/lowwater/lowwater/persistence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the demo twice on one directory: the second run starts from
// the checkpoints the first left. Each must pass its own checks, and the
// recovered start IDs must equal the last persisted ones, as printed in
// the events and as stored in the file.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	for i, args := range [][]string{
		{"--duration=1s", "--data=" + dir, "--seed=7"},
		{"--duration=1s", "--data=" + dir, "--seed=8", "--pchannels=2", "--fail-rate=0.5"},
	} {
		var out, stderr bytes.Buffer
		code := run(context.Background(), args, &out, &stderr)
		if code != exitOK {
			t.Fatalf("run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, code, out.String(), stderr.String())
		}
		text := out.String()
		if !strings.Contains(text, "\nPASS in ") {
			t.Fatalf("run %d: no PASS line:\n%s", i+1, text)
		}
		// The plain view, and the summary that follows either view, fit
		// 80 columns: a terminal's default.
		for _, line := range strings.Split(text, "\n") {
			if len([]rune(line)) > 80 {
				t.Errorf("run %d: line over 80 columns: %q", i+1, line)
			}
		}
		running, restart, _ := strings.Cut(text, "\n== restart")
		if i == 1 && !strings.Contains(running, "from catalog") {
			t.Errorf("run 2 did not start from the first run's checkpoints:\n%s", text)
		}
		last := lastPersisted(running)
		starts := recoveredStarts(t, restart)
		stored := readFile(t, filepath.Join(dir, "lowwater.db"))
		for name, start := range starts {
			if start != last[name] {
				t.Errorf("run %d: %s recovered start %s, last persisted event %s", i+1, name, start, last[name])
			}
			if start != stored[name] {
				t.Errorf("run %d: %s recovered start %s, file holds %s", i+1, name, start, stored[name])
			}
		}
		if want := 3 - i; len(starts) != want {
			t.Errorf("run %d: %d recovered pchannels, want %d:\n%s", i+1, len(starts), want, text)
		}
	}
}

func TestRunUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--pchannels=0"}, exitSetup},
		{[]string{"--fail-rate=1.5"}, exitSetup},
		{[]string{"--duration=-1s"}, exitSetup},
		{[]string{"--no-such-flag"}, exitSetup},
		{[]string{"extra"}, exitSetup},
		{[]string{"-h"}, exitOK},
	} {
		var out, stderr bytes.Buffer
		if got := run(context.Background(), tc.args, &out, &stderr); got != tc.want {
			t.Errorf("run(%q) = %d, want %d\nstderr:\n%s", tc.args, got, tc.want, stderr.String())
		}
		if help := tc.args[0] == "-h"; (out.Len() != 0) != help {
			t.Errorf("run(%q) wrote %d bytes to stdout (only help goes there):\n%s", tc.args, out.Len(), out.String())
		}
	}
}

var persistedLine = regexp.MustCompile(`(?m)^\s+\S+s\s+(p\d+)\s+persisted\s+(kafka:\d+)`)

// lastPersisted returns the last CheckpointPersisted value printed per
// pchannel.
func lastPersisted(text string) map[string]string {
	last := make(map[string]string)
	for _, m := range persistedLine.FindAllStringSubmatch(text, -1) {
		last[m[1]] = m[2]
	}
	return last
}

var restartRow = regexp.MustCompile(`(?m)^(p\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(catalog|vchannels)\s+(yes|NO)$`)

// recoveredStarts reads the restart table: pchannel -> recovered start.
func recoveredStarts(t *testing.T, text string) map[string]string {
	t.Helper()
	starts := make(map[string]string)
	for _, m := range restartRow.FindAllStringSubmatch(text, -1) {
		if m[6] != "yes" || m[2] != m[4] {
			t.Errorf("restart row %q: recovered start differs from last persisted", m[0])
		}
		starts[m[1]] = m[4]
	}
	return starts
}

// readFile returns what the bbolt file holds, formatted as the demo prints.
func readFile(t *testing.T, path string) map[string]string {
	t.Helper()
	store, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	all, err := store.LoadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	stored := make(map[string]string, len(all))
	for name, id := range all {
		stored[name] = id.String()
	}
	return stored
}

// TestRunStall runs the demo with one vchannel frozen for a while: the
// plain output names it in a STALLED line, and the stall check passes
// (it takes a stall that lasted to the thaw, which a chance stall of the
// slow laggard hardly does: without the freeze, this fails).
func TestRunStall(t *testing.T) {
	var out, stderr bytes.Buffer
	args := []string{"--duration=2500ms", "--catalog=memory", "--view=plain", "--seed=5", "--outage=none",
		"--stall=p1-v002@300ms+1500ms", "--stall-after=300ms"}
	code := run(context.Background(), args, &out, &stderr)
	text := out.String()
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, text, stderr.String())
	}
	if !regexp.MustCompile(`p1 +STALLED +minimum kafka:\d+ has not risen for [0-9.]+m?s: p1-v002 holds it back`).MatchString(unwrapped(text)) {
		t.Errorf("no STALLED line naming p1-v002:\n%s", text)
	}
	flat := strings.Join(strings.Fields(text), " ") // check lines wrap at 80 columns
	if !strings.Contains(flat, "check stall ok p1-v002 froze at 300ms: MinimumStalled named it") {
		t.Errorf("the stall check did not pass:\n%s", text)
	}
	if !strings.Contains(text, "faults: 20% of saves fail, no outage, stall p1-v002@300ms+1.5s") {
		t.Errorf("the fault profile does not name the stall:\n%s", text)
	}
}

// The directory of a run killed with SIGKILL, found free of its run's
// lock, is removed by the next run, which says so; its own goes at its
// end. A live run's, still locked, is kept.
func TestADirectoryOfAKilledRunIsRemoved(t *testing.T) {
	tmp := cmdtest.KilledRun(t, "lowwater-demo-", "lowwater.db")
	var out, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--duration=300ms", "--seed=3", "--view=plain"}, &out, &stderr); code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "demo: removed the directory of an earlier run that was killed\n") {
		t.Errorf("stderr does not say it removed the killed run's directory:\n%s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "lowwater-demo-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}
