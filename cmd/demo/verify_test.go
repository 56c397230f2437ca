package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// evidenceOf builds the evidence of one pchannel "p0" over one run and one
// restart phase, as the events and the simulator would give it. The
// simulator's minima were 10, 20 (an add pulled it to 15), 30.
func evidenceOf(run, restart []wal.MessageID) *evidence {
	names := []string{"p0"}
	sim := &simulator{pchannel: "p0", initialMinimum: wal.KafkaID(10), minima: map[wal.MessageID]struct{}{
		wal.KafkaID(10): {}, wal.KafkaID(20): {}, wal.KafkaID(15): {}, wal.KafkaID(30): {},
	}}
	rec := newRecord(names)
	for _, e := range []messages.Event{
		&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, From: wal.KafkaID(10), To: wal.KafkaID(20)},
		&messages.VChannelAdded{Header: messages.Header{PChannel: "p0", At: time.Now()}, VChannel: "late", Checkpoint: wal.KafkaID(15)},
		&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, From: wal.KafkaID(15), To: wal.KafkaID(30)},
		&messages.MinimumAdvanced{Header: messages.Header{PChannel: "p0", At: time.Now()}, From: wal.KafkaID(30), To: wal.KafkaID(31)},
	} {
		rec.observe(e)
	}
	for _, v := range run {
		rec.observe(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p0", At: time.Now()}, Value: v})
	}
	rec.observe(&messages.Stopped{Header: messages.Header{PChannel: "p0", At: time.Now()}, Graceful: true, LastPersisted: rec.pchannels["p0"].lastPersisted(nil), Flushed: true})
	sim2 := &simulator{pchannel: "p0", initialMinimum: wal.KafkaID(30), minima: map[wal.MessageID]struct{}{wal.KafkaID(30): {}}}
	rec2 := newRecord(names)
	for _, v := range restart {
		rec2.observe(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p0", At: time.Now()}, Value: v})
	}
	rec2.observe(&messages.Stopped{Header: messages.Header{PChannel: "p0", At: time.Now()}, Graceful: true, Flushed: true})
	last := rec.pchannels["p0"].lastPersisted(nil)
	final := rec2.pchannels["p0"].lastPersisted(last)
	return &evidence{
		names:  names,
		floor:  map[string]wal.MessageID{},
		phases: []phase{{name: "run", sims: map[string]*simulator{"p0": sim}, rec: rec}, {name: "restart", sims: map[string]*simulator{"p0": sim2}, rec: rec2}},
		restart: map[string]restartView{"p0": {
			want: last, storedNow: last, start: last, fromCatalog: last != nil, recovered: true,
			stopped: rec.pchannels["p0"].stopped,
		}},
		final: map[string]wal.MessageID{"p0": final},
	}
}

func ids(vs ...int64) []wal.MessageID {
	out := make([]wal.MessageID, len(vs))
	for i, v := range vs {
		out[i] = wal.KafkaID(v)
	}
	return out
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name         string
		run, restart []wal.MessageID
		tamper       func(*evidence)
		failing      string // the one check that must fail, "" for none
	}{
		{name: "good", run: ids(10, 20, 30), restart: nil},
		{name: "good: the lowered minimum of an add", run: ids(10, 15, 30)},
		{name: "good: saved after the restart", run: ids(10, 20), restart: ids(30)},
		{name: "I1: never a minimum of the simulator", run: ids(10, 31), failing: "I1 safe"},
		{name: "I1: never published", run: ids(10, 25),
			tamper: func(ev *evidence) { ev.phases[0].sims["p0"].minima[wal.KafkaID(25)] = struct{}{} }, failing: "I1 safe"},
		{name: "I2: not increasing", run: ids(20, 15), failing: "I2 monotonic"},
		{name: "I2: equal is not increasing", run: ids(20, 20), failing: "I2 monotonic"},
		{name: "I2: the restart went back", run: ids(10, 20), restart: ids(10), failing: "I2 monotonic",
			tamper: func(ev *evidence) {
				ev.phases[1].sims["p0"].initialMinimum = wal.KafkaID(10)
				ev.phases[1].sims["p0"].minima[wal.KafkaID(10)] = struct{}{}
			}},
		{name: "I2: below the stored floor", run: ids(10, 20),
			tamper: func(ev *evidence) { ev.floor["p0"] = wal.KafkaID(10) }, failing: "I2 monotonic"},
		{name: "restart: wrong start", run: ids(10, 20),
			tamper: func(ev *evidence) { r := ev.restart["p0"]; r.start = wal.KafkaID(10); ev.restart["p0"] = r }, failing: "restart"},
		{name: "restart: the file lost the last save", run: ids(10, 20),
			tamper: func(ev *evidence) { r := ev.restart["p0"]; r.storedNow = wal.KafkaID(10); ev.restart["p0"] = r }, failing: "restart"},
		{name: "rejections: one missing", run: ids(10),
			tamper: func(ev *evidence) { ev.phases[0].sims["p0"].badSent = 1 }, failing: "rejections"},
		{name: "stopped: no event", run: ids(10),
			tamper: func(ev *evidence) { ev.phases[1].rec.pchannels["p0"].stopped = nil }, failing: "stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := evidenceOf(tc.run, tc.restart)
			if tc.tamper != nil {
				tc.tamper(ev)
			}
			for _, c := range verify(ev) {
				if want := c.name == tc.failing; c.ok() == want {
					t.Errorf("check %s: ok=%t, want %t; problems %q", c.name, c.ok(), !want, c.problems)
				}
			}
		})
	}
}

// TestRejectionsSkippedWhenNoneSent: a short run may send no bad command;
// the check then says it had nothing to judge, not "ok".
func TestRejectionsSkippedWhenNoneSent(t *testing.T) {
	ev := evidenceOf(ids(10), nil)
	c := checkRejections(ev)
	if !c.ok() || !c.skipped {
		t.Fatalf("no bad command sent: ok=%t skipped=%t, want both", c.ok(), c.skipped)
	}
	var out strings.Builder
	printChecks(&out, []check{c}, 80)
	if !strings.Contains(out.String(), "check rejections    skipped  no bad command was sent") {
		t.Fatalf("printed %q", out.String())
	}
	ev.phases[0].sims["p0"].badSent = 1
	ev.phases[0].rec.pchannels["p0"].rejected = 1
	if c := checkRejections(ev); c.skipped || !c.ok() {
		t.Fatalf("one sent and rejected: ok=%t skipped=%t", c.ok(), c.skipped)
	}
}

func TestFileAgrees(t *testing.T) {
	unflushed := &messages.Stopped{Flushed: false, Dropped: wal.KafkaID(30)}
	flushed := &messages.Stopped{Flushed: true}
	for _, tc := range []struct {
		last, storedNow wal.MessageID
		stopped         *messages.Stopped
		want            bool
	}{
		{wal.KafkaID(20), wal.KafkaID(20), flushed, true},
		{nil, nil, flushed, true},
		{wal.KafkaID(20), wal.KafkaID(25), flushed, false},
		{wal.KafkaID(20), wal.KafkaID(25), unflushed, true}, // a save committed as the stop timed out
		{wal.KafkaID(20), wal.KafkaID(31), unflushed, false},
		{wal.KafkaID(20), wal.KafkaID(10), unflushed, false},
		{nil, wal.KafkaID(10), unflushed, true},
		{wal.KafkaID(20), nil, unflushed, false},
	} {
		if got := storedAgrees(tc.last, tc.storedNow, tc.stopped); got != tc.want {
			t.Errorf("storedAgrees(%v, %v, flushed=%t) = %t, want %t", tc.last, tc.storedNow, tc.stopped.Flushed, got, tc.want)
		}
	}
}

// The stall check passes only on a MinimumStalled naming the frozen
// vchannel on its pchannel after the freeze began; Ctrl-C waives it.
func TestCheckStall(t *testing.T) {
	began := time.Now()
	spec := &stallSpec{vchannel: "p0-v003", pchannel: "p0", index: 3, start: time.Second}
	stalled := func(pchannel, holder string, at time.Duration) *messages.MinimumStalled {
		return &messages.MinimumStalled{Header: messages.Header{PChannel: pchannel, At: began.Add(at)}, Holder: holder,
			Checkpoint: wal.KafkaID(7), Since: began.Add(at - time.Second), For: time.Second}
	}
	for _, tc := range []struct {
		name        string
		events      []*messages.MinimumStalled
		interrupted bool
		ok          bool
		resumedAt   time.Duration // of p0-v003's stall, 0 for never
		until       time.Duration // the freeze's end, 0 for the end of the run
	}{
		{"resumed at the thaw", []*messages.MinimumStalled{stalled("p0", "p0-v003", 2*time.Second)}, false, true, 3 * time.Second, 3 * time.Second},
		{"resumed before the thaw: not frozen", []*messages.MinimumStalled{stalled("p0", "p0-v003", 2*time.Second)}, false, false, 2500 * time.Millisecond, 3 * time.Second},
		{"resumed while frozen to the end", []*messages.MinimumStalled{stalled("p0", "p0-v003", 2*time.Second)}, false, false, 2500 * time.Millisecond, 0},
		{"after the thaw", []*messages.MinimumStalled{stalled("p0", "p0-v003", 3500*time.Millisecond)}, false, false, 4 * time.Second, 3 * time.Second},
		{"too short a part of the freeze", []*messages.MinimumStalled{stalled("p0", "p0-v003", 4*time.Second)}, false, false, 0, 0},
		{"named", []*messages.MinimumStalled{stalled("p0", "p0-v001", 1500*time.Millisecond), stalled("p0", "p0-v003", 2*time.Second)}, false, true, 0, 0},
		{"none", nil, false, false, 0, 0},
		{"another holder", []*messages.MinimumStalled{stalled("p0", "p0-v001", 2*time.Second)}, false, false, 0, 0},
		{"another pchannel", []*messages.MinimumStalled{stalled("p1", "p0-v003", 2*time.Second)}, false, false, 0, 0},
		{"before the freeze", []*messages.MinimumStalled{stalled("p0", "p0-v003", 900*time.Millisecond)}, false, false, 0, 0},
		{"interrupted", nil, true, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecord([]string{"p0", "p1"})
			for _, e := range tc.events {
				rec.observe(e)
			}
			if tc.resumedAt > 0 {
				rec.observe(&messages.MinimumResumed{Header: messages.Header{PChannel: "p0", At: began.Add(tc.resumedAt)}, Holder: "p0-v003"})
			}
			ev := &evidence{names: []string{"p0", "p1"}, phases: []phase{{name: "run", rec: rec}},
				stall: spec, stallFrom: began.Add(spec.start), interrupted: tc.interrupted}
			ev.stallAfter, ev.stallUntil = time.Second, began.Add(5*time.Second)
			if tc.until > 0 {
				ev.stallUntil = began.Add(tc.until)
			}
			c := checkStall(ev)
			assert.Equal(t, tc.ok, c.ok(), "%s: %v", c.summary, c.problems)
			assert.NotEmpty(t, c.summary)
			names := []string{}
			for _, c := range verify(&evidence{names: nil, phases: []phase{{rec: rec}}, stall: spec}) {
				names = append(names, c.name)
			}
			assert.Contains(t, names, "stall", "verify runs it with --stall")
		})
	}
	for _, c := range verify(&evidence{phases: []phase{{rec: newRecord(nil)}}}) {
		assert.NotEqual(t, "stall", c.name, "and not without")
	}
}

// I2 near the largest Kafka offset, where the simulator's vchannels now
// stop: the checker still fails a save below the floor or below the one
// before, and passes saves that rise to the end.
func TestCheckMonotonicNearLastOffset(t *testing.T) {
	evidenceAt := func(floor wal.KafkaID, run, restart []wal.KafkaID) *evidence {
		ev := &evidence{names: []string{"p0"}, floor: map[string]wal.MessageID{"p0": floor}}
		last := wal.MessageID(floor)
		for i, values := range [][]wal.KafkaID{run, restart} {
			rec := newRecord(ev.names)
			for _, v := range values {
				rec.observe(&messages.CheckpointPersisted{Header: messages.Header{PChannel: "p0", At: time.Now()}, Value: v})
				last = v
			}
			rec.observe(&messages.Stopped{Header: messages.Header{PChannel: "p0", At: time.Now()}, Graceful: true, Flushed: true})
			ev.phases = append(ev.phases, phase{name: []string{"run", "restart"}[i], rec: rec})
		}
		ev.final = map[string]wal.MessageID{"p0": last}
		return ev
	}
	for _, tc := range []struct {
		name         string
		run, restart []wal.KafkaID
		problems     []string
	}{
		{name: "rises to the end", run: []wal.KafkaID{lastOffset - 3, lastOffset}},
		{name: "below the floor", run: []wal.KafkaID{lastOffset - 8},
			problems: []string{"p0: run save #1 persisted kafka:9223372036854775799, not above kafka:9223372036854775800 (stored before the demo)"}},
		{name: "the end twice", run: []wal.KafkaID{lastOffset}, restart: []wal.KafkaID{lastOffset},
			problems: []string{"p0: restart save #1 persisted kafka:9223372036854775807, not above kafka:9223372036854775807 (run save #1)"}},
		{name: "lowered after the restart", run: []wal.KafkaID{lastOffset}, restart: []wal.KafkaID{lastOffset - 1},
			problems: []string{"p0: restart save #1 persisted kafka:9223372036854775806, not above kafka:9223372036854775807 (run save #1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := checkMonotonic(evidenceAt(lastOffset-7, tc.run, tc.restart))
			assert.Equal(t, tc.problems, c.problems)
		})
	}
}

// On a terminal too narrow to hang a check's summary past its head (more
// than half the width), the summary goes beneath it, as the problems do:
// hung at half the width, its lines started four columns left of its
// first.
func TestChecksOnANarrowTerminal(t *testing.T) {
	c := check{name: "I1 safe", summary: "23 saves, each a minimum of the simulator's view and of the events"}
	c.failf("p0: persisted kafka:9 was never published as a minimum")
	var out strings.Builder
	printChecks(&out, []check{c}, 50)
	want := "check I1 safe       VIOLATED\n" +
		"    23 saves, each a minimum of the simulator's\n" +
		"      view and of the events\n" +
		"    p0: persisted kafka:9 was never published as a\n" +
		"      minimum\n"
	if out.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	printChecks(&out, []check{{name: "I1 safe", summary: "23 saves"}}, 50)
	if want := "check I1 safe       ok       23 saves\n"; out.String() != want {
		t.Fatalf("printed %q, want %q", out.String(), want)
	}
}
