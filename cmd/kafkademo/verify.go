package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lowwater/lowwater/examples/kafka"
)

// figures are one node's figures for one round, over all partitions.
type figures struct {
	// bound counts the records in the sink at the kill at or above the
	// resume offset: the most a restart from there can write again. lag is
	// its part below the slowest vchannel's checkpoint.
	bound, lag int
	// replay counts the writes, after the restart, of records that were in
	// the sink at the kill.
	replay int
	// lost counts the records below the resume offset not in the sink at
	// the kill, and not counted at an earlier kill: nothing will read them
	// again.
	lost int
}

type round struct {
	killAfter time.Duration
	byKind    map[string]figures
}

// totals are one node's figures over the whole run.
type totals struct {
	figures
	// lostEnd counts the records never written to the sink; duplicates the
	// writes beyond the first, over the whole run.
	lostEnd, duplicates int
	finished            bool
}

type summary struct {
	records  int
	rounds   []round
	byKind   map[string]*totals
	problems []string
}

func (s *summary) ok() bool { return len(s.problems) == 0 }

// evaluate computes every round's figures from the snapshots and checks
// lowwater's: per round nothing lost and a replay within the bound, stored
// checkpoints never lower than at the previous kill; at the end nothing
// lost, every duplicate explained by a restart, and the stored checkpoints
// at the topic's end.
func evaluate(prod produced, snaps []snapshot, final snapshot, ends []int64, finished map[string]bool) *summary {
	s := &summary{byKind: make(map[string]*totals)}
	for _, part := range prod {
		for _, v := range part {
			if v >= 0 {
				s.records++
			}
		}
	}
	bad := func(format string, args ...any) { s.problems = append(s.problems, fmt.Sprintf(format, args...)) }
	lost := make(map[string]map[kafka.RecordID]bool)
	for _, kind := range approaches {
		s.byKind[kind] = &totals{finished: finished[kind]}
		lost[kind] = make(map[kafka.RecordID]bool)
	}
	for j, snap := range snaps {
		next := final
		if j+1 < len(snaps) {
			next = snaps[j+1]
		}
		r := round{killAfter: snap.killAfter, byKind: make(map[string]figures)}
		for _, kind := range approaches {
			resume := snap.stored
			if kind == approachNaive {
				resume = snap.committed
			}
			f := roundFigures(prod, snap.sinks[kind], next.sinks[kind], resume, lost[kind])
			r.byKind[kind] = f
			t := s.byKind[kind]
			t.bound, t.lag, t.replay, t.lost = t.bound+f.bound, t.lag+f.lag, t.replay+f.replay, t.lost+f.lost
		}
		lw := r.byKind[approachLowwater]
		if lw.lost > 0 {
			bad("round %d: lowwater's stored checkpoint is above %d records not in the sink", j+1, lw.lost)
		}
		if lw.replay > lw.bound {
			bad("round %d: lowwater replayed %d records, over the bound %d", j+1, lw.replay, lw.bound)
		}
		if j > 0 {
			for p, c := range snap.stored {
				if c < snaps[j-1].stored[p] {
					bad("round %d: partition %d's stored checkpoint went down from %d to %d", j+1, p, snaps[j-1].stored[p], c)
				}
			}
		}
		s.rounds = append(s.rounds, r)
	}
	for _, kind := range approaches {
		t := s.byKind[kind]
		t.lostEnd, t.duplicates = endFigures(prod, final.sinks[kind])
	}
	lw := s.byKind[approachLowwater]
	switch {
	case !lw.finished:
		bad("lowwater's last run did not read to the end of the topic within --timeout")
	case lw.lostEnd > 0:
		bad("lowwater lost %d records", lw.lostEnd)
	}
	if lw.duplicates != lw.replay {
		bad("lowwater wrote %d duplicates, %d of them after a restart", lw.duplicates, lw.replay)
	}
	for p, end := range ends {
		if lw.finished && final.stored[p] != end {
			bad("partition %d: lowwater's stored checkpoint is %d at the end, the topic ends at %d", p, final.stored[p], end)
		}
	}
	return s
}

// roundFigures compares one node's sink at a kill (counts) with the next
// snapshot's, given where the node resumed; lost holds the records found
// lost at earlier kills, and gets this one's.
func roundFigures(prod produced, counts, next map[kafka.RecordID]uint32, resume []int64, lost map[kafka.RecordID]bool) figures {
	var f figures
	for p, part := range prod {
		slowest := slowestCheckpoint(part, int32(p), counts)
		for off, v := range part {
			if v < 0 {
				continue
			}
			id := kafka.RecordID{Partition: int32(p), Offset: int64(off)}
			c := counts[id]
			switch {
			case c > 0 && int64(off) >= resume[p]:
				f.bound++
				if int64(off) < slowest {
					f.lag++
				}
			case c == 0 && int64(off) < resume[p] && !lost[id]:
				lost[id] = true
				f.lost++
			}
			if c > 0 {
				f.replay += int(next[id] - c)
			}
		}
	}
	return f
}

// slowestCheckpoint is the checkpoint of the partition's slowest vchannel:
// the offset of the first record not in the sink, or the end when none.
func slowestCheckpoint(part []int16, p int32, counts map[kafka.RecordID]uint32) int64 {
	for off, v := range part {
		if v >= 0 && counts[kafka.RecordID{Partition: p, Offset: int64(off)}] == 0 {
			return int64(off)
		}
	}
	return int64(len(part))
}

func endFigures(prod produced, counts map[kafka.RecordID]uint32) (lost, duplicates int) {
	for p, part := range prod {
		for off, v := range part {
			if v < 0 {
				continue
			}
			switch c := counts[kafka.RecordID{Partition: int32(p), Offset: int64(off)}]; c {
			case 0:
				lost++
			default:
				duplicates += int(c - 1)
			}
		}
	}
	return lost, duplicates
}

// print writes the table, at most 80 columns wide.
func (s *summary) print(w io.Writer, cfg config) {
	where := "a bbolt catalog"
	if !isBolt(cfg.catalog) {
		where = "etcd"
	}
	fmt.Fprintf(w, "  lowwater: each partition's low-water mark, saved to %s\n", where)
	fmt.Fprintf(w, "  naive:    kgo autocommit of polled offsets every %v\n\n", cfg.autocommit)
	fmt.Fprintln(w, "               |          lowwater            |      naive")
	fmt.Fprintln(w, "round   killed |  bound   (lag)  replay  lost |  replay   lost")
	fmt.Fprintln(w, strings.Repeat("-", 63))
	row := func(label string, lw, nv figures) {
		fmt.Fprintf(w, "%-14s | %6d %7s %7d %5d | %7d %6d\n", label, lw.bound, fmt.Sprintf("(%d)", lw.lag), lw.replay, lw.lost, nv.replay, nv.lost)
	}
	for i, r := range s.rounds {
		row(fmt.Sprintf("%5d %7.2fs", i+1, r.killAfter.Seconds()), r.byKind[approachLowwater], r.byKind[approachNaive])
	}
	lw, nv := s.byKind[approachLowwater], s.byKind[approachNaive]
	fmt.Fprintln(w, strings.Repeat("-", 63))
	row("total", lw.figures, nv.figures)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "killed: after both nodes were ready. bound: records in the sink at the kill")
	fmt.Fprintln(w, "at or above the stored checkpoint (lag: of them, below the slowest vchannel's")
	fmt.Fprintln(w, "first unflushed record); replay: of them, written again after the restart;")
	fmt.Fprintln(w, "lost: below where the node resumed, never in the sink.")
	fmt.Fprintln(w)
	pct := func(n int) string { return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(max(s.records, 1))) }
	verdict := "PASS"
	if !s.ok() {
		verdict = "FAIL"
	}
	// A node stopped before the end of the topic has lost what it skipped
	// at the kills, not what it did not read yet.
	lost := func(t *totals) string {
		if !t.finished {
			return fmt.Sprintf("lost %d at the kills, %d more of %d unread, unfinished", t.lost, t.lostEnd-t.lost, s.records)
		}
		return fmt.Sprintf("lost %d of %d", t.lostEnd, s.records)
	}
	fmt.Fprintf(w, "lowwater: %s; duplicates %d (%s), bound %d: %s\n",
		lost(lw), lw.duplicates, pct(lw.duplicates), lw.bound, verdict)
	fmt.Fprintf(w, "naive:    %s (%s); duplicates %d (%s)\n",
		lost(nv), pct(nv.lostEnd), nv.duplicates, pct(nv.duplicates))
	for _, p := range s.problems {
		fmt.Fprintln(w, "FAIL:", p)
	}
}
