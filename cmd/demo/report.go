package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/wal"
)

// plainWidth is the width, in columns, of the plain view and of the
// summary that follows either view: a terminal's default, which the live
// view leaves the summary to. The plain view is mostly piped, so the demo
// asks no terminal, and it does not read COLUMNS either: shells set it
// without exporting it.
const plainWidth = 80

// lockedWriter serialises the printer's goroutine and the main one.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// printer is the feed's sink that prints one compact entry per event:
// every lifecycle, persist, add, drop and rejection event, but at most one
// MinimumAdvanced per pchannel per sample interval, since the minimum moves
// many times a second. An entry is one line that starts with the time, the
// pchannel and what happened, so that grep finds it; one longer than width
// goes on in continuation lines indented to its details (see wrapHanging).
type printer struct {
	out    io.Writer
	began  time.Time
	sample time.Duration
	width  int
	// lastShown is when each pchannel's last MinimumAdvanced was printed.
	lastShown     map[string]time.Time
	shown, hidden int
}

func newPrinter(out io.Writer, began time.Time, sample time.Duration, width int) *printer {
	return &printer{out: out, began: began, sample: sample, width: width, lastShown: make(map[string]time.Time)}
}

func (p *printer) print(ev messages.Event) {
	h := ev.EventHeader()
	if _, ok := ev.(*messages.MinimumAdvanced); ok {
		if last, ok := p.lastShown[h.PChannel]; ok && h.At.Sub(last) < p.sample {
			p.hidden++
			return
		}
		p.lastShown[h.PChannel] = h.At
		p.shown++
	}
	what, detail := describe(ev)
	who := h.PChannel
	if who == "" {
		who = "-"
	}
	at := h.At.Sub(p.began).Seconds()
	head := fmt.Sprintf("%8.3fs  %-5s %-11s ", at, who, what)
	// A joined error has a line per error: each would start a line that is
	// no entry.
	detail = strings.ReplaceAll(detail, "\n", "; ")
	// Continuation lines start at the details' column, that of a
	// pchannel and a what that fit theirs: a longer one (ADDED BEHIND,
	// RECOVERY FAILED, a long pchannel name) would set its own, off by a
	// few from every other entry's.
	indent := lipgloss.Width(fmt.Sprintf("%8.3fs  %-5s %-11s ", at, "", ""))
	printEntry(p.out, head+detail, indent, p.width)
}

// describe says what an event is, in two short parts: a word or two, then
// the details.
func describe(ev messages.Event) (what, detail string) {
	switch e := ev.(type) {
	case *messages.MinimumAdvanced:
		return "minimum", fmt.Sprintf("%s -> %s", wal.String(e.From), e.To)
	case *messages.Recovered:
		from := "vchannels' minimum"
		if e.FromCatalog {
			from = "catalog"
		}
		return "recovered", fmt.Sprintf("start %s from %s, %d read(s)", wal.String(e.StartMessageID), from, e.Attempts)
	case *messages.RecoveryFailed:
		// The cause first: a narrow live view cuts the end of a line.
		return "RECOVERY FAILED", fmt.Sprintf("%v; attempt %d, retry in %v", e.Err, e.Attempt, e.NextRetry.Round(time.Millisecond))
	case *messages.CheckpointPersisted:
		return "persisted", fmt.Sprintf("%s  attempts %d  %v", e.Value, e.Attempts, e.Latency.Round(10*time.Microsecond))
	case *messages.PersistFailed:
		return "save failed", fmt.Sprintf("%s: %s; attempt %d, retry in %v", e.Value, shortErr(e.Err), e.Attempt, e.NextRetry.Round(time.Millisecond))
	case *messages.VChannelAdded:
		return "added", fmt.Sprintf("%s at %s", e.VChannel, e.Checkpoint)
	case *messages.AddedBehind:
		// Upper case, as a warning: a restart now would skip their records.
		whose := "their"
		if len(e.VChannels) == 1 {
			whose = "its"
		}
		return "ADDED BEHIND", fmt.Sprintf("%s below persisted %s (minimum %s): a restart now skips %s records",
			strings.Join(e.VChannels, " "), wal.String(e.Persisted), wal.String(e.Minimum), whose)
	case *messages.VChannelDropped:
		return "dropped", e.VChannel
	case *messages.CommandRejected:
		return "rejected", fmt.Sprintf("%s: %s", commandName(e.Command), shortErr(e.Err))
	case *messages.MinimumStalled:
		return "STALLED", fmt.Sprintf("minimum %s has not risen for %v: %s holds it back", e.Checkpoint, e.For.Round(time.Millisecond), e.Holder)
	case *atEnd:
		return "at end", "minimum at the last offset: none can pass it" // the minimum column gives it
	case *messages.MinimumResumed:
		return "resumed", fmt.Sprintf("the minimum rises again: %s held it %v", e.Holder, e.StalledFor.Round(time.Millisecond))
	case *messages.PersisterRestarted:
		return "PERSISTER RESTARTED", fmt.Sprintf("#%d: %v", e.Restarts, e.Reason)
	case *messages.OwnershipLost:
		return "OWNERSHIP LOST", shortErr(e.Cause)
	case *messages.Stopped:
		detail = fmt.Sprintf("graceful=%t persisted %s", e.Graceful, wal.String(e.LastPersisted))
		if !e.Flushed {
			detail += fmt.Sprintf(", left unsaved %s", wal.String(e.Dropped))
		}
		if e.Failure != nil {
			detail += ", after " + shortErr(e.Failure)
		}
		return "stopped", detail
	case *catalogOutage:
		if e.down {
			return "CATALOG DOWN", fmt.Sprintf("outage %d for %v: every call fails", e.index, e.length)
		}
		return "catalog up", fmt.Sprintf("outage %d over", e.index)
	default:
		return fmt.Sprintf("%T", ev), ""
	}
}

// shortErr drops lowwater's prefix: the lines stay short.
func shortErr(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "lowwater: ")
}

func commandName(cmd messages.Command) string {
	switch c := cmd.(type) {
	case *messages.AddVChannel:
		return fmt.Sprintf("add %s at %s", c.VChannel, wal.String(c.Checkpoint))
	case *messages.UpdateCheckpoint:
		return fmt.Sprintf("update %s to %s", c.VChannel, wal.String(c.Checkpoint))
	case *messages.DropVChannel:
		return "drop " + c.VChannel
	case *messages.UpdateBatch:
		return fmt.Sprintf("batch of %d", len(c.Updates))
	default:
		return fmt.Sprintf("%T", cmd)
	}
}

func section(out io.Writer, title string) {
	fmt.Fprintf(out, "\n== %s\n", title)
}

// printTable is the table after the run: one row per pchannel.
func printTable(out io.Writer, states []*messages.State, rec *record) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PCHANNEL\tVCH\tMINIMUM\tPERSISTED\tSAVES\tFAILS\tADDED\tDROPPED\tREJECTED")
	for _, st := range states {
		p := rec.pchannels[st.PChannel]
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", st.PChannel, st.VChannels,
			wal.String(st.Minimum), wal.String(st.Persisted), len(p.persisted), p.failures, p.adds, p.drops, p.rejected)
	}
	_ = tw.Flush()
}

// printRestart is the table after the restart.
func printRestart(out io.Writer, names []string, restart map[string]restartView) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PCHANNEL\tLAST PERSISTED\tSTORED\tRECOVERED START\tFROM\tMATCH")
	for _, name := range names {
		r := restart[name]
		from := "vchannels"
		if r.fromCatalog {
			from = "catalog"
		}
		want := r.want
		if want == nil {
			want = r.spawnMin
		}
		match := "yes"
		if !r.recovered || !sameID(r.start, want) {
			match = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, wal.String(r.want), wal.String(r.storedNow), wal.String(r.start), from, match)
	}
	_ = tw.Flush()
}

// printChecks prints one entry per check, and each violation under it,
// within width columns.
func printChecks(out io.Writer, checks []check, width int) {
	for _, c := range checks {
		verdict := "ok"
		switch {
		case !c.ok():
			verdict = "VIOLATED"
		case c.skipped:
			verdict = "skipped"
		}
		head := fmt.Sprintf("check %-13s %-8s ", c.name, verdict)
		if width > 0 && len(head) > width/2 && lipgloss.Width(head+c.summary) > width {
			// Too narrow to hang the summary past the head, where its
			// lines would start left of its first: beneath it, as the
			// problems are.
			lines := append([]string{strings.TrimRight(head, " ")}, wrapHanging("    "+c.summary, 6, width)...)
			_, _ = io.WriteString(out, strings.Join(lines, "\n")+"\n")
		} else {
			printEntry(out, head+c.summary, len(head), width)
		}
		for i, p := range c.problems {
			if i == 10 {
				fmt.Fprintf(out, "    ... and %d more\n", len(c.problems)-i)
				break
			}
			printEntry(out, "    "+p, 6, width)
		}
	}
}

// printEntry writes line within width columns (see wrapHanging), in one
// Write: the printer's goroutine and the main one share out, and neither
// may land a line inside the other's entry.
func printEntry(out io.Writer, line string, indent, width int) {
	_, _ = io.WriteString(out, strings.Join(wrapHanging(line, indent, width), "\n")+"\n")
}

// printLabelled writes a "label: text" line within width columns, its
// continuation lines indented past the label.
func printLabelled(out io.Writer, line string, width int) {
	indent := 2
	if i := strings.Index(line, ": "); i >= 0 {
		indent = lipgloss.Width(line[:i+2])
	}
	printEntry(out, line, indent, width)
}

// wrapHanging breaks line at spaces into lines of at most width columns
// (none when width <= 0) that read as one entry: the first keeps the
// line's start, the others are indented by indent columns (at most half
// the width, so that they have room), deeper than the entries they follow
// start. Spaces within a line are kept, since the event lines align their
// fields with them; those at a break are dropped. Nothing is cut off: a
// word too long for a line of its own is broken where the line ends.
// Columns are display columns (lipgloss.Width): a wide character takes
// two. A no-break space (keep) joins two words that mean nothing apart,
// such as "seed" and its number: it never breaks, and prints as a space.
func wrapHanging(line string, indent, width int) []string {
	if width <= 0 || lipgloss.Width(line) <= width {
		return []string{strings.ReplaceAll(line, keep, " ")}
	}
	pad := strings.Repeat(" ", min(indent, width/2))
	var lines []string
	cur, empty := "", true // empty: no word on cur yet
	for rest := line; ; {
		word := strings.TrimLeft(rest, " ")
		gap := rest[:len(rest)-len(word)]
		if word == "" {
			break // trailing spaces go at the break
		}
		end := strings.IndexByte(word, ' ')
		if end < 0 {
			end = len(word)
		}
		word, rest = word[:end], word[end:]
		w := lipgloss.Width(word)
		if !empty && lipgloss.Width(cur)+lipgloss.Width(gap)+w <= width {
			cur += gap + word
			continue
		}
		if empty {
			cur = gap // the line's own indentation
		} else {
			lines = append(lines, cur)
			cur = pad
		}
		for lipgloss.Width(cur)+lipgloss.Width(word) > width {
			head, tail := cutWidth(word, width-lipgloss.Width(cur))
			lines = append(lines, cur+head)
			cur, word = pad, tail
		}
		cur += word
		empty = false
	}
	if !empty {
		lines = append(lines, cur)
	}
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], keep, " ")
	}
	return lines
}

// keep is the no-break space that wrapHanging never breaks at.
const keep = "\u00a0"

// cutWidth splits s after its longest start of at most n columns, and
// after its first character at least, so that breaking a word moves on.
func cutWidth(s string, n int) (head, tail string) {
	w := 0
	for i, r := range s {
		w += lipgloss.Width(string(r))
		if w > n && i > 0 {
			return s[:i], s[i:]
		}
	}
	return s, ""
}

// count is n and its noun, in the plural unless n is 1.
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
