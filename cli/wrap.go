package cli

import (
	"io"
	"os"
	"strings"
	"sync"

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
func forTerminal(stderr io.Writer) io.Writer { return wrappedFor(stderr, stderr) }

// wrappedFor returns w wrapped at the width of the terminal out is, or w
// as it is when out is no terminal. w writes to out, through a writer of
// its own (stdout's keeps its first error).
func wrappedFor(out, w io.Writer) io.Writer {
	width := terminalWidth(out)
	if width == 0 {
		return w
	}
	return &wrapper{w: w, width: width}
}

// terminalWidth is how many columns a line written to out may take: one
// short of the terminal's width, since a terminal that wraps as soon as
// a line fills its last column would leave a blank line after it. It is 0
// when out is no terminal, or one narrower than minWrapWidth, where lines
// are left to whatever reads them.
func terminalWidth(out io.Writer) int {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width < minWrapWidth {
		return 0
	}
	return width - 1
}

// wrapper breaks what is written through it at spaces, so that no line
// is wider than width: a terminal breaks a long warning wherever its
// width falls, inside a word or a name. A continuation is indented two
// columns past its line's own indent, so that a message laid out over
// lines keeps its layout. A space inside quotes is no break: a quoted
// name or command is copied as one. A word wider than a line on its own
// is left whole. Writes need not end lines: the column carries over, and
// spaces wait for the word after them, which decides whether they are a
// space or a break.
type wrapper struct {
	w     io.Writer
	width int
	// mu keeps a write whole, as the file under it does: what is written
	// from two goroutines interleaves by writes, never inside one.
	mu      sync.Mutex
	col     int  // display columns written since the last newline
	pending int  // spaces read and not yet written
	started bool // a word was written since the last newline
	indent  int  // where the current line's continuations begin
}

func (w *wrapper) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b strings.Builder
	for i, line := range strings.Split(string(p), "\n") {
		if i > 0 {
			b.WriteByte('\n')
			// A line's trailing spaces show nothing.
			w.col, w.pending, w.started = 0, 0, false
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
	for i, word := range splitUnquoted(line) {
		if i > 0 {
			w.pending++
		}
		if word == "" {
			continue
		}
		n := runewidth.StringWidth(word)
		// A word that would cross the edge after a space goes to a line
		// of its own, unless the line holds no word yet.
		first := !w.started
		if first {
			w.started, w.indent = true, w.col+w.pending+len(wrapIndent)
		}
		if !first && w.pending > 0 && w.col+w.pending+n > w.width {
			b.WriteString("\n" + strings.Repeat(" ", w.indent))
			w.col = w.indent
		} else {
			b.WriteString(strings.Repeat(" ", w.pending))
			w.col += w.pending
		}
		w.pending = 0
		b.WriteString(word)
		w.col += n
	}
}

// splitUnquoted splits line at its spaces, as strings.Split does, but
// not at those inside quotes that open a word (or follow its opening
// parenthesis) and close: a Go-quoted name
// ("a  b", escapes and all), or a command quoted in single quotes
// ('delete --quoted "x y"'). A quote that does not close on the line is
// a character like any other: a name printed as it is may hold one.
func splitUnquoted(line string) []string {
	var words []string
	start := 0
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == ' ':
			words = append(words, line[start:i])
			start = i + 1
		case (c == '"' || c == '\'') && (i == 0 || line[i-1] == ' ' || line[i-1] == '('):
			if end := closing(line, i); end > 0 {
				i = end
			}
		}
	}
	return append(words, line[start:])
}

// closing returns where the quote at open closes, or -1 if it does not
// on this line. A double quote closes at the next one not escaped. A
// single quote closes at the next one that ends a word (before a space,
// a punctuation mark or the end), a Go-quoted name inside it skipped
// whole, quotes and all.
func closing(line string, open int) int {
	q := line[open]
	for i := open + 1; i < len(line); i++ {
		c := line[i]
		switch {
		case q == '"' && c == '\\':
			i++
		case q == '"' && c == '"':
			return i
		case q == '\'' && c == '"' && (line[i-1] == ' ' || i == open+1):
			if end := closing(line, i); end > 0 {
				i = end
			}
		case q == '\'' && c == '\'' && (i+1 == len(line) || strings.ContainsRune(" ,.;:)", rune(line[i+1]))):
			return i
		}
	}
	return -1
}
