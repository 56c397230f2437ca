package cli

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/lowwater/lowwater/internal/shorten"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// The tool prints text it does not control: pchannel names from a catalog
// or a dump, WAL names from records, the String of a registered WAL's IDs,
// and the errors of its codecs. A pchannel name persistence.ValidatePChannel
// takes may hold a newline, which printed raw forges a row of list, an
// escape sequence, which the operator's terminal would run, or a tab, which
// shifts list's columns. So such text is shown escaped, and plain text, the
// common case, as it is.

// shown is a name or an ID's text as the tool prints it: unchanged when it
// is one plain, printable word, and quoted as Go's %q does otherwise (also
// for a space, which would shift list's columns as a tab does, and for a
// leading quote, so that a shown name in quotes is always an escaped one).
func shown(s string) string {
	if s == "" || s[0] == '"' || !printable(s, false) {
		return strconv.Quote(s)
	}
	return s
}

// typed is a pchannel name as a command takes it back: as shown, or, for
// a name no node can use (which shown prints plain when it is printable:
// 513 letters), Go-quoted, for --quoted.
func typed(pchannel string) string {
	if persistence.ValidatePChannel(pchannel) != nil {
		return strconv.Quote(pchannel)
	}
	return shown(pchannel)
}

// shownID is an ID's text as the tool prints it for a person: as shown
// escapes it, whole if that takes 128 bytes at most, else cut to what
// does, with its length, as list cuts a long name; dump and list --json
// keep it whole. It goes through wal.Text, since a registered WAL's
// String may panic (wal.String's own cut would be quoted again).
func shownID(id wal.MessageID) string {
	return shorten.Cut(wal.Text(id), shorten.TextLen, shown)
}

// shownText is a message from elsewhere (why a record does not decode, why
// an ID does not parse) as the tool prints it: unchanged when it is
// printable text, spaces included, and quoted as Go's %q does otherwise.
func shownText(s string) string {
	if !printable(s, true) {
		return strconv.Quote(s)
	}
	return s
}

// printable reports whether s is valid UTF-8 whose every rune
// strconv.IsPrint accepts, save for the ASCII space unless spaces.
func printable(s string, spaces bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !strconv.IsPrint(r) || r == ' ' && !spaces {
			return false
		}
	}
	return true
}

// safeLines is what fail prints of an error's text: each line that holds
// anything but printable text quoted, as shownText does, and cut to what
// shows in 1 KiB. It is the last guard for text from below (a catalog's
// error, say) and for the operator's own arguments (a path of 100 KB),
// which no command shows through shown; the lines the tool means stay
// apart.
func safeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = shorten.Cut(l, 1<<10, shownText)
	}
	return strings.Join(lines, "\n")
}

// escapeJSON rewrites, in JSON that encoding/json wrote, the runes it leaves
// raw and a terminal may act on: DEL, the C1 controls (U+009B opens an
// escape sequence in some terminals), and the format and other characters
// strconv.IsPrint refuses (U+202E reverses the text that follows). They
// become \u escapes, which any JSON reader takes back as the same rune. The
// encoder has escaped the ASCII controls already, and writes nothing but
// ASCII outside strings, so the rewrite can only touch string contents.
func escapeJSON(b []byte) []byte {
	var out []byte // nil while b needs no change
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		invalid := r == utf8.RuneError && n == 1 // never written by encoding/json
		if r < 0x7f || strconv.IsPrint(r) && !invalid {
			if out != nil {
				out = append(out, b[i:i+n]...)
			}
			i += n
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(b)+64), b[:i]...)
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	if out == nil {
		return b
	}
	return out
}

// shortQuoted is s Go-quoted, cut after its first 64 bytes, with its
// length, when it is longer than 128: a name in an error, which a
// damaged or hostile dump may make as long as it likes.
func shortQuoted(s string) string {
	const head = 64
	if len(s) <= 2*head {
		return strconv.Quote(s)
	}
	return shorten.Mark(strconv.Quote(shorten.Head(s, head)), len(s))
}

// tableID is an ID in list's table: as shownID gives it, or, if that
// takes over 40 bytes, cut to what shows in 32 with an ellipsis, so that
// one long ID does not widen every row past a terminal's 80 columns
// (list --json gives it whole; get gives 128 bytes of it, and its length).
func tableID(id wal.MessageID) (cell string, cut bool) {
	text := wal.Text(id)
	cell, rest := shorten.Fit(text, 40, shown)
	if rest == 0 {
		return cell, false
	}
	cell, _ = shorten.Fit(text, 32, shown)
	return cell + "…", true
}

// tableName is a pchannel name in list's table: as typed takes it, or,
// longer than 64 bytes, quoted and cut after 40 with its length, so that
// one long name does not widen every row (list --json gives it whole).
func tableName(name string) (shown string, cut bool) {
	if len(name) <= 64 {
		return typed(name), false
	}
	return shorten.Mark(strconv.Quote(shorten.Head(name, 40)), len(name)), true
}

// shownKey is a stray key as verify shows it: whole, or, past a line's
// worth, its head and its length. No command takes a stray key back, and
// the operator who looks for what wrote it needs no more.
func shownKey(k string) string {
	const head = 64
	if len(k) <= 2*head {
		return shown(k)
	}
	return shorten.Mark(shown(shorten.Head(k, head)), len(k))
}
