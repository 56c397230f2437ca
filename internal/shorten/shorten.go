// Package shorten cuts names for messages: a name that is bad input
// because of its length must not make the error about it as long, nor a
// log line or a table row.
package shorten

import (
	"strconv"
	"unicode/utf8"
)

// quotedHead is how much of a name Quoted keeps.
const quotedHead = 40

// Head is s's first n bytes, or fewer, not to split a rune.
func Head(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Quoted is name quoted as Go quotes it, cut after 40 bytes (at a rune's
// start) with an ellipsis.
func Quoted(name string) string {
	if len(name) > quotedHead {
		return strconv.Quote(Head(name, quotedHead) + "…")
	}
	return strconv.Quote(name)
}
