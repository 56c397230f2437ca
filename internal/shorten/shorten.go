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
// start) and marked with its length (Mark).
func Quoted(name string) string {
	if len(name) > quotedHead {
		return Mark(strconv.Quote(Head(name, quotedHead)), len(name))
	}
	return strconv.Quote(name)
}

// Text is text a third party wrote, made fit for an error, a log line or
// a terminal: Go-quoted when it holds a character strconv.IsPrint refuses
// (a control character, invalid UTF-8), and cut to what shows in TextLen
// bytes, with the length of the whole ("… (5000 bytes)"), as the
// lowwater tool shows a long ID.
func Text(s string) string { return Within(s, TextLen) }

// Within is Text cut to what shows in n bytes: for a message of one's
// own that may hold a third party's text, as an error about a file that
// names its contents.
func Within(s string, n int) string { return Cut(s, n, quotedIfNeeded) }

// QuotedText is Text always quoted: for text given as input, which the
// message names as such.
func QuotedText(s string) string { return Cut(s, TextLen, strconv.Quote) }

// Cut is s in the form show gives, whole if that takes n bytes at most,
// else the longest head that does (Fit), marked with the whole's length.
func Cut(s string, n int, show func(string) string) string {
	shown, rest := Fit(s, n, show)
	if rest == 0 {
		return shown
	}
	return Mark(shown, len(s))
}

// Mark marks shown, the head of a text of length bytes, as cut: the one
// form of a cut in lowwater's errors, logs and the tool's output.
func Mark(shown string, length int) string { return fmt.Sprintf("%s… (%d bytes)", shown, length) }

// Fit is the longest head of s, cut at a rune's start, whose form show
// gives is at most n bytes, in that form, with how many bytes of s it
// left out. A form of a head may be several times its length (a control
// character quoted takes four bytes); cut after n bytes of s alone, a
// row of a table was as wide as four. show must give at most n bytes of
// the empty text, and no fewer of a longer one.
func Fit(s string, n int, show func(string) string) (shown string, rest int) {
	head := Head(s, n)
	if shown = show(head); len(shown) > n {
		lo, hi := 0, len(head) // s[:lo] fits, s[:hi] does not
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; len(show(Head(s, mid))) <= n {
				lo = mid
			} else {
				hi = mid
			}
		}
		head = Head(s, lo)
		shown = show(head)
	}
	return shown, len(s) - len(head)
}

func quotedIfNeeded(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// Value is Text of a value a third party handed over: a panic's. fmt
// recovers a panicking Error or String method, and names the panic.
func Value(v any) string { return Text(fmt.Sprint(v)) }
