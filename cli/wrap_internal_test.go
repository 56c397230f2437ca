package cli

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mattn/go-runewidth"

	"github.com/lowwater/lowwater/persistence"
)

// On a terminal of 80 columns (a wrapper of 79) a warning is broken at spaces, its
// continuations indented, and no line is wider than the terminal; a word
// wider than a line is left whole, and what a pipe would get is the same
// text once the breaks are taken out.
func TestWrapperBreaksAtSpaces(t *testing.T) {
	const msg = "warning: by-dev-rootcoord-dml_0 is owned by a running node, lowwater-cli set, pid 5123 on ops-1 (term 7); " +
		"writing anyway (--force): the node's next save writes over it if the node's checkpoint is higher: stop the node for a change that lasts"
	var out strings.Builder
	w := &wrapper{w: &out, width: 79}
	fmt.Fprintln(w, msg)
	fmt.Fprintln(w, "short line")
	fmt.Fprint(w, "a write that does not end its line, ")
	fmt.Fprintln(w, strings.Repeat("x", 90)+" then more")
	got := out.String()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	for _, l := range lines {
		if n := runewidth.StringWidth(l); n > 79 && !strings.Contains(l, strings.Repeat("x", 90)) {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
	want := []string{
		"warning: by-dev-rootcoord-dml_0 is owned by a running node, lowwater-cli set,",
		"  pid 5123 on ops-1 (term 7); writing anyway (--force): the node's next save",
		"  writes over it if the node's checkpoint is higher: stop the node for a change",
		"  that lasts",
		"short line",
		"a write that does not end its line,",
		"  " + strings.Repeat("x", 90),
		"  then more",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("wrapped as\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	unwrapped := strings.ReplaceAll(got, "\n"+wrapIndent, " ")
	if !strings.HasPrefix(unwrapped, msg+"\nshort line\n") {
		t.Fatalf("the words changed: %q", unwrapped)
	}
}

// Wide characters count for two columns, as a terminal shows them.
func TestWrapperCountsDisplayColumns(t *testing.T) {
	var out strings.Builder
	w := &wrapper{w: &out, width: 40}
	fmt.Fprintln(w, "warning: 通道通道通道通道通道 is owned by a running node (term 7)")
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if n := runewidth.StringWidth(l); n > 40 {
			t.Errorf("a line of %d columns: %q", n, l)
		}
	}
}

// A quoted name or command is never broken, its spaces kept as they are,
// and a line laid out with an indent of its own continues past it.
func TestWrapperKeepsQuotesAndLayout(t *testing.T) {
	var out strings.Builder
	w := &wrapper{w: &out, width: 39}
	fmt.Fprintln(w, `warning: "ops  team   channel    with     spaces": replay: consumers restart at kafka:100`)
	fmt.Fprintln(w, "lowwater: 5 unreadable records\n  CORRUPT: repair with 'set --force PCHANNEL ID' or 'delete PCHANNEL'\n    NAME quoted as shown here, the node's own")
	want := strings.Join([]string{
		`warning:`,
		`  "ops  team   channel    with     spaces":`,
		`  replay: consumers restart at`,
		`  kafka:100`,
		`lowwater: 5 unreadable records`,
		`  CORRUPT: repair with`,
		`    'set --force PCHANNEL ID' or`,
		`    'delete PCHANNEL'`,
		`    NAME quoted as shown here, the`,
		`      node's own`,
	}, "\n") + "\n"
	if out.String() != want {
		t.Fatalf("wrapped as\n%s\nwant\n%s", out.String(), want)
	}
}

func TestSplitUnquoted(t *testing.T) {
	for line, want := range map[string][]string{
		`a  b`:                    {"a", "", "b"},
		`"x \" y" z`:              {`"x \" y"`, "z"},
		`the node's next save`:    {"the", "node's", "next", "save"},
		`run 'lowwater --help' x`: {"run", "'lowwater --help'", "x"},
		// A quote that does not close is no quote: a name printed as it
		// is may hold one.
		`open "quote runs on`:   {"open", `"quote`, "runs", "on"},
		`q"uote and 'leading x`: {`q"uote`, "and", "'leading", "x"},
		// A command quoted whole, with a Go-quoted name inside it that
		// holds a single quote, shell-quoted or not.
		`run 'delete "x' y"' now`:                       {"run", `'delete "x' y"'`, "now"},
		`until release --quoted '"a'\'' b"' removes it`: {"until", "release", "--quoted", `'"a'\'' b"'`, "removes", "it"},
		// In parentheses too: the refusals give their command so.
		`first ('set --force p kafka:1', see verify)`: {"first", "('set --force p kafka:1',", "see", "verify)"},
	} {
		if got := splitUnquoted(line); !slices.Equal(got, want) {
			t.Errorf("splitUnquoted(%q) = %q, want %q", line, got, want)
		}
	}
}

// A line that begins with a short word breaks after it all the same.
func TestWrapperBreaksAfterAShortFirstWord(t *testing.T) {
	var out strings.Builder
	w := &wrapper{w: &out, width: 39}
	fmt.Fprintln(w, "ab "+strings.Repeat("w", 37))
	if want := "ab\n  " + strings.Repeat("w", 37) + "\n"; out.String() != want {
		t.Fatalf("wrapped as %q, want %q", out.String(), want)
	}
}

// verify's advice is one line per kind of finding, for grep; on a
// terminal, however narrow, the wrapper lays it out under its kind,
// every line within the width and no break but its own.
func TestVerifyHintsWrapUnderTheirKind(t *testing.T) {
	for _, meta := range []*persistence.MetaDamage{nil, {Known: true}} {
		for _, h := range append(verifyHints(meta, true), verifyHints(meta, false)...) {
			line := fmt.Sprintf("  %s: %s", h.kind, h.hint)
			if strings.Contains(h.hint, "\n") {
				t.Errorf("%s: the hint breaks its own lines: %q", h.kind, h.hint)
			}
			for _, width := range []int{79, 49} {
				var out strings.Builder
				fmt.Fprintln(&wrapper{w: &out, width: width}, line)
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				for i, l := range lines {
					if n := runewidth.StringWidth(l); n > width {
						t.Errorf("%s at %d columns: a line of %d: %q", h.kind, width, n, l)
					}
					if i > 0 && (!strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "     ")) {
						t.Errorf("%s at %d columns: continuation %q not indented 4", h.kind, width, l)
					}
				}
				if got := strings.ReplaceAll(out.String(), "\n    ", " "); got != line+"\n" {
					t.Errorf("%s at %d columns: the words changed: %q", h.kind, width, got)
				}
			}
		}
	}
}
