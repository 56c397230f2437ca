package cli

import (
	"io"
	"strings"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// table lays rows out in columns two spaces apart, as text/tabwriter does,
// but by the columns a cell takes on a terminal: tabwriter counts runes,
// so a name in CJK (two columns a rune) or with a combining accent (none)
// shifted every column after it. The last cell of a row is not padded.
type table struct{ rows [][]string }

func (t *table) row(cells ...string) { t.rows = append(t.rows, cells) }

// writeTo writes the table to w, whose lines may take width columns (0:
// any). A table wider than that has each row's first cell, a name, on a
// line of its own and the rest beneath it, indented, in columns of their
// own; narrower still, each row is laid out a cell a line, under the
// first row's names for them: a terminal breaks a line too long for it
// wherever its width falls, and a table whose every row runs onto the
// next is unreadable. Names are not cut further for it; they are what an
// operator copies into the next command.
func (t *table) writeTo(w io.Writer, width int) error {
	var b strings.Builder
	if width <= 0 || t.width() <= width {
		widths := t.widths()
		for i := range t.rows {
			t.layRow(&b, i, widths)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	rest := table{rows: make([][]string, len(t.rows))}
	for i, r := range t.rows {
		rest.rows[i] = r[1:]
	}
	if widths := rest.widths(); len(wrapIndent)+rest.width() <= width {
		for i, r := range t.rows {
			b.WriteString(r[0])
			b.WriteString("\n" + wrapIndent)
			rest.layRow(&b, i, widths)
		}
	} else {
		// Narrower still: each record as get shows one, a field a line
		// under its column's name, the first row's.
		pad := 0
		for _, n := range t.rows[0] {
			pad = max(pad, columns(n))
		}
		for i, r := range t.rows[1:] {
			if i > 0 {
				b.WriteByte('\n')
			}
			for j, c := range r {
				b.WriteString(t.rows[0][j])
				b.WriteString(strings.Repeat(" ", pad-columns(t.rows[0][j])+2))
				b.WriteString(c)
				b.WriteByte('\n')
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// widths is the width of each column but the last, which is not padded.
func (t *table) widths() []int {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], columns(c))
		}
	}
	return widths
}

// width is the columns the widest row takes.
func (t *table) width() int {
	widths := t.widths()
	most := 0
	for _, r := range t.rows {
		n := columns(r[len(r)-1])
		for i := range r[:len(r)-1] {
			n += widths[i] + 2
		}
		most = max(most, n)
	}
	return most
}

// layRow writes row i, its cells padded to widths, and a newline.
func (t *table) layRow(b *strings.Builder, i int, widths []int) {
	r := t.rows[i]
	for j, c := range r[:len(r)-1] {
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", widths[j]-columns(c)+2))
	}
	b.WriteString(r[len(r)-1])
	b.WriteByte('\n')
}

// columns is how many columns s takes on a terminal. Most names are
// ASCII, one column a byte (the tool shows no control character raw), and
// measuring them as graphemes made list of a million pchannels take twice
// as long.
func columns(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return runewidth.StringWidth(s)
		}
	}
	return len(s)
}
