package cli

import (
	"io"
	"os"
	"strings"

	"github.com/mattn/go-runewidth"
	"golang.org/x/term"
)

// wrapIndent begins each continuation of a wrapped line: what follows it
// belongs to the line above.
const wrapIndent = "  "

// minWrapWidth is the narrowest terminal the tool wraps for; below it,
// lines are left to the terminal.
const minWrapWidth = 40

// forTerminal returns stderr as the tool writes to it: on a terminal,
// wrapped at its width; anything else, a pipe or a file, as it is, every
// message on one line for grep and for logs.
func forTerminal(stderr io.Writer) io.Writer {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return stderr
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width < minWrapWidth {
		return stderr
	}
	// One column short of the edge: a terminal that wraps as soon as a
	// line fills its last column would leave a blank line after it.
	return &wrapper{w: stderr, width: width - 1}
}

// wrapper breaks what is written through it at spaces, so that no line
// is wider than width: a terminal breaks a long warning wherever its
// width falls, inside a word or a name. A word wider than a line on its
// own is left whole. Writes need not end lines: the column carries over,
// and spaces wait for the word after them, which decides whether they
// are a space or a break.
type wrapper struct {
	w       io.Writer
	width   int
	col     int // display columns written since the last newline
	pending int // spaces read and not yet written
}

func (w *wrapper) Write(p []byte) (int, error) {
	var b strings.Builder
	for i, line := range strings.Split(string(p), "\n") {
		if i > 0 {
			b.WriteByte('\n')
			w.col, w.pending = 0, 0 // a line's trailing spaces show nothing
		}
		w.wrapLine(&b, line)
	}
	if _, err := io.WriteString(w.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wrapLine writes line, which holds no newline, from the current column.
func (w *wrapper) wrapLine(b *strings.Builder, line string) {
	for i, word := range strings.Split(line, " ") {
		if i > 0 {
			w.pending++
		}
		if word == "" {
			continue
		}
		n := runewidth.StringWidth(word)
		// A word that would cross the edge after a space goes to a line
		// of its own, unless the line holds nothing but the indent yet.
		if w.pending > 0 && w.col+w.pending+n > w.width && w.col > len(wrapIndent) {
			b.WriteString("\n" + wrapIndent)
			w.col = len(wrapIndent)
		} else {
			b.WriteString(strings.Repeat(" ", w.pending))
			w.col += w.pending
		}
		w.pending = 0
		b.WriteString(word)
		w.col += n
	}
}
