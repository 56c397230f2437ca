package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// A simulator whose floor is at or near the last Kafka offset sends only
// real offsets (none negative), and each update of a vchannel is above the
// one before: the actor has nothing to reject that the simulator did not
// mean it to. Its vchannels stop at the last offset.
func TestSimulatorStopsAtLastOffset(t *testing.T) {
	cfg := config{vchannels: 20, rate: 50, churn: 0.5} // no bad commands
	for _, base := range []wal.KafkaID{lastOffset - 7, lastOffset} {
		s := newSimulator("p0", cfg, base, 1)
		sent := make(map[string]wal.KafkaID)
		for name, cp := range s.checkpoints() {
			sent[name] = cp.(wal.KafkaID)
			if sent[name] < base {
				t.Errorf("base %d: %s starts at %d, below the floor", base, name, sent[name])
			}
		}
		for round := range 500 {
			for _, cmd := range s.round() {
				switch c := cmd.(type) {
				case *messages.UpdateBatch:
					for _, u := range c.Updates {
						cp := u.Checkpoint.(wal.KafkaID)
						if cp < 0 || cp <= sent[u.VChannel] {
							t.Fatalf("base %d, round %d: %s updated from %d to %d", base, round, u.VChannel, sent[u.VChannel], cp)
						}
						sent[u.VChannel] = cp
					}
				case *messages.AddVChannel:
					if cp := c.Checkpoint.(wal.KafkaID); cp < 0 {
						t.Fatalf("base %d, round %d: %s added at %d", base, round, c.VChannel, cp)
					}
					sent[c.VChannel] = c.Checkpoint.(wal.KafkaID)
				case *messages.DropVChannel:
					delete(sent, c.VChannel)
				}
			}
		}
		if _, ok := s.minima[lastOffset]; !ok {
			t.Errorf("base %d: the minimum never reached the last offset in 500 rounds", base)
		}
	}
}

func TestAdvance(t *testing.T) {
	for _, tc := range []struct {
		cp   wal.KafkaID
		n    int
		want wal.KafkaID
	}{
		{0, 5, 5},
		{-10, 3, -7},
		{lastOffset - 5, 5, lastOffset},
		{lastOffset - 5, 6, lastOffset},
		{lastOffset - 5, 4, lastOffset - 1},
		{lastOffset, 1, lastOffset},
		{lastOffset, 0, lastOffset},
	} {
		if got := advance(tc.cp, tc.n); got != tc.want {
			t.Errorf("advance(%d, %d) = %d, want %d", tc.cp, tc.n, got, tc.want)
		}
	}
}

// TestRunNearLastOffset runs the demo on a catalog that holds checkpoints
// at and just below the last Kafka offset: it passes, and ends with them
// no lower. It used to report a violation that was none (here "1 bad
// commands sent, 6 rejected"): the rest were updates that had wrapped
// round to negative offsets.
func TestRunNearLastOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lowwater.db")
	floor := map[string]wal.KafkaID{"p0": lastOffset - 7, "p1": lastOffset}
	seedBolt(t, path, floor)
	var out, stderr bytes.Buffer
	code := run(context.Background(), []string{"--duration=1s", "--seed=1", "--pchannels=2", "--catalog=bolt:" + path}, &out, &stderr)
	if code != exitOK || !strings.Contains(out.String(), "\nPASS in ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), stderr.String())
	}
	b, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	stored, err := b.LoadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range floor {
		if got, ok := stored[name].(wal.KafkaID); !ok || got < id {
			t.Errorf("%s: the file ends at %v, below the floor %s", name, stored[name], id)
		}
	}
}

// TestRunReachesLastOffset runs the demo with stall detection on, p0 from
// a checkpoint 7 below the last Kafka offset and p1 from none, with one of
// p1's vchannels frozen: p0's minimum stands at the last offset, which the
// report says ("at end") and does not call a stall, in the lines, the
// check's count or the chart, while p1's real stall is still STALLED. They
// called p0 STALLED, holder and all, and counted it among the stalls.
func TestRunReachesLastOffset(t *testing.T) {
	dir := t.TempDir()
	path, chart := filepath.Join(dir, "lowwater.db"), filepath.Join(dir, "c.svg")
	seedBolt(t, path, map[string]wal.KafkaID{"p0": lastOffset - 7})
	var out, stderr bytes.Buffer
	args := []string{"--duration=2500ms", "--seed=5", "--pchannels=2", "--outage=none", "--view=plain",
		"--stall=p1-v002@300ms+1500ms", "--stall-after=300ms", "--chart=" + chart, "--catalog=bolt:" + path}
	code := run(context.Background(), args, &out, &stderr)
	text := out.String()
	if code != exitOK || !strings.Contains(text, "\nPASS in ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, text, stderr.String())
	}
	runPart, _, _ := strings.Cut(unwrapped(text), "\n== restart")
	if !regexp.MustCompile(`\n +[0-9.]+s  p0 +at end +minimum at the last offset: none can pass it`).MatchString(runPart) {
		t.Errorf("no line says p0 is at the end:\n%s", text)
	}
	if m := regexp.MustCompile(`p0 +(STALLED|resumed) .*`).FindString(text); m != "" {
		t.Errorf("p0 at the end is reported as a stall: %q\n%s", m, text)
	}
	if !regexp.MustCompile(`p1 +STALLED +minimum kafka:\d+ has not risen for [0-9.]+m?s: p1-v002 holds it back`).MatchString(runPart) {
		t.Errorf("no STALLED line naming p1-v002:\n%s", text)
	}
	// The check counts the stalls of the run: those the lines show.
	counted := regexp.MustCompile(`check stall +ok +p1-v002 froze at 300ms: .*; (\d+) stall\(s\) in all`).FindStringSubmatch(strings.Join(strings.Fields(text), " "))
	if counted == nil {
		t.Fatalf("the stall check did not pass:\n%s", text)
	}
	if shown := strconv.Itoa(strings.Count(runPart, " STALLED ")); counted[1] != shown {
		t.Errorf("the stall check counts %s stall(s), the run printed %s STALLED lines:\n%s", counted[1], shown, text)
	}
	svg, err := os.ReadFile(chart)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), ">p1-v002<") {
		t.Error("the chart does not name p1-v002 over its stall")
	}
	if m := regexp.MustCompile(`>p0-v\d+<`).Find(svg); m != nil {
		t.Errorf("the chart shades p0 at the end as a stall, held by %s", m)
	}
}

// seedBolt makes the bbolt catalog at path, holding floor.
func seedBolt(t *testing.T, path string, floor map[string]wal.KafkaID) {
	t.Helper()
	b, err := persistence.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, id := range floor {
		if err := b.Save(context.Background(), name, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
