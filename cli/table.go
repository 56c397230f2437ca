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

func (t *table) writeTo(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], columns(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r[:len(r)-1] {
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-columns(c)+2))
		}
		b.WriteString(r[len(r)-1])
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
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
