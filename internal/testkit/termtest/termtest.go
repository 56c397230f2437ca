// Package termtest checks what a command prints against a terminal's
// width: 80 columns is a terminal's default, and what is wider wraps.
package termtest

import "strings"

// Columns is how many columns line takes on a terminal: a rune takes one,
// and a tab goes on to the next multiple of eight, as flag's --help
// indents with tabs.
func Columns(line string) int {
	col := 0
	for _, r := range line {
		if r == '\t' {
			col = col/8*8 + 8
		} else {
			col++
		}
	}
	return col
}

// Wider returns the lines of text that take more than width columns.
func Wider(text string, width int) []string {
	var wide []string
	for _, line := range strings.Split(text, "\n") {
		if Columns(line) > width {
			wide = append(wide, line)
		}
	}
	return wide
}
