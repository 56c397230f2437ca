package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/messages"
	"github.com/lowwater/lowwater/persistence/faultinject"
	"github.com/lowwater/lowwater/wal"
)

// printerBegan is when the printer tests' demo began.
var printerBegan = time.Unix(1_700_000_000, 0)

// printed feeds events to a printer width columns wide and returns what
// it printed.
func printed(width int, events ...messages.Event) string {
	var out bytes.Buffer
	p := newPrinter(&out, printerBegan, 0, width)
	for _, ev := range events {
		p.print(ev)
	}
	return out.String()
}

func eventAt(pchannel string, since time.Duration) messages.Header {
	return messages.Header{PChannel: pchannel, At: printerBegan.Add(since)}
}

// plainEvents are events whose entries are longer than 80 columns, as the
// demo prints them, and a short one.
func plainEvents() []messages.Event {
	return []messages.Event{
		&messages.PersistFailed{Header: eventAt("p0", 11*time.Millisecond), Value: wal.KafkaID(4), Attempt: 1, NextRetry: 103 * time.Millisecond,
			Err: &faultinject.InjectedError{Op: faultinject.OpSave, PChannel: "p0", Reason: "rate"}},
		&messages.CheckpointPersisted{Header: eventAt("p1", 15*time.Millisecond), Value: wal.KafkaID(6), Attempts: 1, Latency: 960 * time.Microsecond},
		&messages.CommandRejected{Header: eventAt("p1", 515*time.Millisecond),
			Command: &messages.UpdateCheckpoint{VChannel: "p1-v002", Checkpoint: wal.KafkaID(32)},
			Err:     fmt.Errorf(`%w: vchannel "p1-v002" from kafka:33 to kafka:32`, messages.ErrCheckpointRollback)},
		&messages.RecoveryFailed{Header: eventAt("p2", 1234*time.Millisecond), Attempt: 2, NextRetry: 200 * time.Millisecond,
			Err: errors.Join(errors.New("read p2: connection refused"), errors.New("record p2: not a kafka ID"))},
	}
}

// In 80 columns the long entries go on in continuation lines indented to
// the details' column, the same for a what longer than it; each entry
// still starts with its time, pchannel and what, and the short one is as
// it was.
func TestPrinterWrapsAt80(t *testing.T) {
	want := "" +
		`   0.011s  p0    save failed kafka:4: faultinject: injected failure (rate) of` + "\n" +
		`                             Save "p0"; attempt 1, retry in 103ms` + "\n" +
		`   0.015s  p1    persisted   kafka:6  attempts 1  960µs` + "\n" +
		`   0.515s  p1    rejected    update p1-v002 to kafka:32: checkpoint rollback:` + "\n" +
		`                             vchannel "p1-v002" from kafka:33 to kafka:32` + "\n" +
		`   1.234s  p2    RECOVERY FAILED read p2: connection refused; record p2: not a` + "\n" +
		`                             kafka ID; attempt 2, retry in 200ms` + "\n"
	got := printed(80, plainEvents()...)
	assert.Equal(t, want, got)
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 80, line)
	}
}

// In 200 columns nothing is wrapped: one line per event, in the format
// the plain view always had (a joined error's lines joined by "; ").
func TestPrinterDoesNotWrapWhatFits(t *testing.T) {
	want := "" +
		`   0.011s  p0    save failed kafka:4: faultinject: injected failure (rate) of Save "p0"; attempt 1, retry in 103ms` + "\n" +
		`   0.015s  p1    persisted   kafka:6  attempts 1  960µs` + "\n" +
		`   0.515s  p1    rejected    update p1-v002 to kafka:32: checkpoint rollback: vchannel "p1-v002" from kafka:33 to kafka:32` + "\n" +
		`   1.234s  p2    RECOVERY FAILED read p2: connection refused; record p2: not a kafka ID; attempt 2, retry in 200ms` + "\n"
	assert.Equal(t, want, printed(200, plainEvents()...))
}

// unwrapped undoes the wrapping of the plain output: a line indented by
// five spaces or more, deeper than any entry starts, continues the one
// before.
func unwrapped(text string) string {
	return regexp.MustCompile(`\n {5,}`).ReplaceAllString(text, " ")
}

func TestUnwrapped(t *testing.T) {
	assert.Equal(t, printed(200, plainEvents()...), unwrapped(printed(80, plainEvents()...)))
}

func TestWrapHanging(t *testing.T) {
	for _, tc := range []struct {
		line          string
		indent, width int
		want          []string
	}{
		{"a  b   c", 2, 8, []string{"a  b   c"}},            // fits: its spaces kept
		{"a  b   c", 2, 0, []string{"a  b   c"}},            // no width, no wrapping
		{"  ab cd ef", 4, 8, []string{"  ab cd", "    ef"}}, // its own indentation kept
		{"key: aaa bbb   ", 5, 10, []string{"key: aaa", "     bbb"}},
		{"x abcdefghij", 2, 6, []string{"x", "  abcd", "  efgh", "  ij"}}, // a word too long is broken, not cut
		{"x abc", 9, 4, []string{"x", "  ab", "  c"}},                     // the indent leaves half the width
		{"x 日本語", 1, 5, []string{"x", " 日本", " 語"}},                       // wide characters take two columns
	} {
		assert.Equal(t, tc.want, wrapHanging(tc.line, tc.indent, tc.width), "%q in %d, indent %d", tc.line, tc.width, tc.indent)
	}
}

// runPlain runs the demo in the plain view with its output width columns
// wide, and returns its standard output.
func runPlain(t *testing.T, width int, args ...string) string {
	t.Helper()
	cfg, err := parseFlags(append([]string{"--view=plain"}, args...), io.Discard)
	require.NoError(t, err)
	require.Equal(t, plainWidth, cfg.width, "the demo's own width")
	cfg.width = width
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, stderr bytes.Buffer
	code := runConfig(ctx, &interrupter{graceful: cancel, stderr: &stderr}, cfg, nil, &out, &stderr)
	require.Equal(t, exitOK, code, "stdout:\n%s\nstderr:\n%s", out.String(), &stderr)
	return out.String()
}

// plainArgs make a run whose header and sampling lines are longer than 80
// columns (a long seed), with many failed saves, whose entries are too.
var plainArgs = []string{"--duration=1s", "--catalog=memory", "--seed=1796134958068316047", "--fail-rate=0.5", "--outage=none"}

var (
	eventLine        = regexp.MustCompile(`^ {0,4}\d+\.\d{3}s  (p\d+|-) +\S`)
	continuationLine = regexp.MustCompile(`^ {29}\S`)
)

// The plain view in 80 columns: no line is longer, and what is wrapped
// reads as one entry: continuation lines are indented under its details,
// and every other line in the run is an event's first.
func TestPlainOutputFits80(t *testing.T) {
	text := runPlain(t, 80, plainArgs...)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, line := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 80, line)
	}
	assert.Equal(t, []string{
		"lowwater demo: 3 pchannels x 20 kafka vchannels, 1s, 50 rounds/s,",
		"               seed 1796134958068316047",
		"faults: 50% of saves fail, no outage",
		"catalog: in memory (gone when the demo exits)",
		"events: all but MinimumAdvanced, which is sampled (at most one per pchannel per",
		"        500ms)",
		"",
		"== run",
	}, lines[:8])
	_, run, _ := strings.Cut(text, "\n== run\n")
	run, _, _ = strings.Cut(run, "\n\n==")
	wrapped := 0
	for _, line := range strings.Split(run, "\n") {
		switch {
		case continuationLine.MatchString(line):
			wrapped++
		case !eventLine.MatchString(line):
			t.Errorf("in the run, neither an event nor its continuation: %q", line)
		}
	}
	assert.Positive(t, wrapped, "failed saves wrap in 80 columns:\n%s", run)
	assert.Regexp(t, `(?m)^ +\S+s  p\d +save failed kafka:\d+: faultinject: injected failure \(rate\) of\n {29}Save "p\d"; attempt \d+, retry in \S+$`, run)
}

// The plain view in 200 columns: nothing is wrapped that fits, so no line
// continues another, and the header is one line each.
func TestPlainOutputWider(t *testing.T) {
	text := runPlain(t, 200, plainArgs...)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	assert.Equal(t, []string{
		"lowwater demo: 3 pchannels x 20 kafka vchannels, 1s, 50 rounds/s, seed 1796134958068316047",
		"faults: 50% of saves fail, no outage",
		"catalog: in memory (gone when the demo exits)",
		"events: all but MinimumAdvanced, which is sampled (at most one per pchannel per 500ms)",
		"",
		"== run",
	}, lines[:6])
	for _, line := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(line), 200, line)
		assert.NotRegexp(t, `^ {5}`, line, "a continuation line in 200 columns")
	}
	assert.Regexp(t, `(?m)^ +\S+s  p\d +save failed kafka:\d+: faultinject: injected failure \(rate\) of Save "p\d"; attempt \d+, retry in \S+$`, text)
}

// A pchannel stopped after a panic says what it panicked on.
func TestPrinterTellsAStopAfterAPanic(t *testing.T) {
	got := printed(200, &messages.Stopped{Header: eventAt("p3", 2*time.Second), LastPersisted: wal.KafkaID(7), Flushed: true,
		Failure: &actors.PChannelPanicError{Command: "*messages.UpdateCheckpoint", Value: "boom"}})
	assert.Equal(t, "   2.000s  p3    stopped     graceful=false persisted kafka:7, after pchannel panicked handling *messages.UpdateCheckpoint: boom\n", got)
}

// Every event lowwater publishes is told in words, not by its Go type's
// name: the plain output and the live view print what describe returns.
// The events are found in the messages package's source, so that one
// added there and not here fails.
func TestEveryEventIsDescribed(t *testing.T) {
	at := eventAt("p0", time.Second)
	cases := map[string]messages.Event{
		"Recovered":           &messages.Recovered{Header: at, StartMessageID: wal.KafkaID(5)},
		"RecoveryFailed":      &messages.RecoveryFailed{Header: at, Err: errors.New("refused")},
		"VChannelAdded":       &messages.VChannelAdded{Header: at, VChannel: "v1", Checkpoint: wal.KafkaID(3)},
		"AddedBehind":         &messages.AddedBehind{Header: at, VChannels: []string{"v1", "v2"}, Persisted: wal.KafkaID(9), Minimum: wal.KafkaID(4)},
		"VChannelDropped":     &messages.VChannelDropped{Header: at, VChannel: "v1"},
		"CommandRejected":     &messages.CommandRejected{Header: at, Command: &messages.DropVChannel{VChannel: "v9"}, Err: messages.ErrVChannelNotFound},
		"MinimumAdvanced":     &messages.MinimumAdvanced{Header: at, From: wal.KafkaID(3), To: wal.KafkaID(4)},
		"MinimumStalled":      &messages.MinimumStalled{Header: at, Checkpoint: wal.KafkaID(4), Holder: "v1"},
		"MinimumResumed":      &messages.MinimumResumed{Header: at, Holder: "v1"},
		"CheckpointPersisted": &messages.CheckpointPersisted{Header: at, Value: wal.KafkaID(4), Attempts: 1},
		"PersistFailed":       &messages.PersistFailed{Header: at, Value: wal.KafkaID(4), Err: errors.New("refused")},
		"PersisterRestarted":  &messages.PersisterRestarted{Header: at, Restarts: 1, Reason: "panic"},
		"OwnershipLost":       &messages.OwnershipLost{Header: at, Cause: errors.New("session ended")},
		"Stopped":             &messages.Stopped{Header: at, Graceful: true, Flushed: true, LastPersisted: wal.KafkaID(4)},
	}
	names := eventTypes(t)
	assert.Len(t, names, len(cases), "the events found in the messages package: %v", names)
	for _, name := range names {
		ev, ok := cases[name]
		if !ok {
			t.Errorf("messages.%s is an event this test does not describe: add it", name)
			continue
		}
		what, detail := describe(ev)
		if strings.Contains(what, "messages.") || what == "" || detail == "" {
			t.Errorf("messages.%s is described as %q %q", name, what, detail)
		}
	}
	what, detail := describe(cases["AddedBehind"])
	assert.Equal(t, "ADDED BEHIND", what)
	assert.Equal(t, "v1 v2 below persisted kafka:9 (minimum kafka:4): a restart now skips their records", detail)
	_, detail = describe(&messages.AddedBehind{VChannels: []string{"v1"}, Persisted: wal.KafkaID(9), Minimum: wal.KafkaID(4)})
	assert.Equal(t, "v1 below persisted kafka:9 (minimum kafka:4): a restart now skips its records", detail)
}

// eventTypes are the names of the messages package's structs that embed
// Header: its events.
func eventTypes(t *testing.T) []string {
	t.Helper()
	dir := filepath.Join("..", "..", "messages")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := spec.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					if id, ok := field.Type.(*ast.Ident); ok && len(field.Names) == 0 && id.Name == "Header" {
						names = append(names, spec.Name.Name)
					}
				}
			}
			return false
		})
	}
	require.NotEmpty(t, names, "no event found in the messages package")
	return names
}
