// Package shorten cuts text for messages: a name that is bad input
// because of its length must not make the error about it as long, nor a
// log line or a table row; and text a third party wrote (an ID's String,
// a codec's error, a panic's value) must neither flood a log nor act on
// the terminal that shows it.
package shorten

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// quotedHead is how much of a name Quoted keeps.
const quotedHead = 40

// TextLen is how much of a third party's text Text keeps: a log line's
// or a terminal's width and a half, enough to tell two values apart.
const TextLen = 128

// Head is s's first n bytes, or fewer, not to split a rune: it looks no
// further back than a rune's length for one's start, so bytes that are no
// UTF-8 are cut where they fall.
func Head(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for i := 1; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); i++ {
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

// Text is text a third party wrote, made fit for an error, a log line or
// a terminal: cut to TextLen bytes, the rest counted ("…(+5000 bytes)"),
// and Go-quoted when it holds a character strconv.IsPrint refuses (a
// control character, invalid UTF-8).
func Text(s string) string {
	head := Head(s, TextLen)
	cut := ""
	if len(head) < len(s) {
		cut = fmt.Sprintf("…(+%d bytes)", len(s)-len(head))
	}
	if !utf8.ValidString(head) || strings.ContainsFunc(head, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(head) + cut
	}
	return head + cut
}

// QuotedText is Text always quoted: for text given as input, which the
// message names as such.
func QuotedText(s string) string {
	head := Head(s, TextLen)
	if len(head) < len(s) {
		return strconv.Quote(head) + fmt.Sprintf("…(+%d bytes)", len(s)-len(head))
	}
	return strconv.Quote(s)
}

// Value is Text of a value a third party handed over: a panic's. fmt
// recovers a panicking Error or String method, and names the panic.
func Value(v any) string { return Text(fmt.Sprint(v)) }
