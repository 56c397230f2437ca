package main

import (
	"bytes"
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/wal"
)

// At 50 rounds a second, a freeze at 2s comes after at most 100 rounds: the
// frozen vchannel is then at most 200 + 100 + 1 above the floor, and that
// must stay below the largest offset.
func TestStallCheckRoom(t *testing.T) {
	spec := &stallSpec{vchannel: "p0-v003", pchannel: "p0", index: 3, start: 2 * time.Second}
	tick := 20 * time.Millisecond
	for _, tc := range []struct {
		floor wal.KafkaID
		ok    bool
	}{
		{0, true},
		{math.MinInt64, true},
		{-1, true},
		{lastOffset - 302, true},
		{lastOffset - 301, false},
		{lastOffset - 7, false},
		{lastOffset, false},
	} {
		if err := spec.checkRoom(tc.floor, tick); (err == nil) != tc.ok {
			t.Errorf("checkRoom(%d): %v, want ok=%t", tc.floor, err, tc.ok)
		}
	}
}

// TestRunStallNearLastOffset: a --stall on a pchannel whose stored
// checkpoint is 7 below the largest offset is refused before the run
// (exit 2), in one line: its vchannels reach the end, where the frozen one
// cannot be passed, and the stall check failed or passed by chance.
func TestRunStallNearLastOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lowwater.db")
	seedBolt(t, path, map[string]wal.KafkaID{"p0": lastOffset - 7})
	var out, stderr bytes.Buffer
	args := []string{"--duration=4s", "--seed=2", "--stall=p0-v003@2s", "--catalog=bolt:" + path}
	code := run(context.Background(), args, &out, &stderr)
	if code != exitSetup {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitSetup, out.String(), stderr.String())
	}
	want := "demo: --stall p0-v003@2s: p0's stored kafka:9223372036854775800 is 7 below the largest Kafka offset, " +
		"and p0-v003 may be 301 above it when it freezes"
	if msg := stderr.String(); strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, want) {
		t.Errorf("stderr = %q, want one line starting %q", msg, want)
	}
	if out.Len() != 0 {
		t.Errorf("the run started:\n%s", out.String())
	}
}
