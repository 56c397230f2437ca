package shorten

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestHead(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abc", 3, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"aé", 2, "a"}, // é is two bytes: not split
		{"aé", 3, "aé"},
		{"€uro", 2, ""}, // € is three bytes
		{"€uro", 3, "€"},
	} {
		if got := Head(tc.s, tc.n); got != tc.want {
			t.Errorf("Head(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestQuoted(t *testing.T) {
	forty := "0123456789012345678901234567890123456789"
	for _, tc := range []struct{ name, want string }{
		{"p", `"p"`},
		{forty, `"` + forty + `"`},
		{forty + "x", `"` + forty + `"… (41 bytes)`},
		{forty[:39] + "é", `"` + forty[:39] + `"… (41 bytes)`}, // é would straddle byte 40
		{"a\x00b", `"a\x00b"`},
	} {
		if got := Quoted(tc.name); got != tc.want {
			t.Errorf("Quoted(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	long := strings.Repeat("7", 200)
	for _, tc := range []struct{ s, want string }{
		{"kafka:1 2", "kafka:1 2"},
		{long[:128], long[:128]},
		{long, long[:128] + "… (200 bytes)"},
		{"a\x1b[2J", `"a\x1b[2J"`},
		{"a\xff", `"a\xff"`},
		{"a\ufffd", "a\ufffd"}, // the replacement character itself is printable
		// A cut in a character keeps it out whole.
		{strings.Repeat("x", 127) + "é" + "yy", strings.Repeat("x", 127) + "… (131 bytes)"},
		// Quoted, a byte that is no UTF-8 takes four: cut to what shows
		// in 128 bytes.
		{strings.Repeat("\x80", 200), strconv.Quote(strings.Repeat("\x80", 31)) + "… (200 bytes)"},
		{strings.Repeat("\x01", 40), strconv.Quote(strings.Repeat("\x01", 31)) + "… (40 bytes)"},
	} {
		if got := Text(tc.s); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestQuotedText(t *testing.T) {
	long := strings.Repeat("7", 200)
	for _, tc := range []struct{ s, want string }{
		{"42", `"42"`},
		{long, `"` + long[:126] + `"… (200 bytes)`},
		{"\x1b" + long, strconv.Quote("\x1b"+long[:122]) + "… (201 bytes)"},
	} {
		if got := QuotedText(tc.s); got != tc.want {
			t.Errorf("QuotedText(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// loud is a value whose String panics with a megabyte of escapes.
type loud struct{}

func (loud) String() string { panic(strings.Repeat("\x1b", 1<<20)) }

func TestValue(t *testing.T) {
	got := Value(loud{})
	if !strings.HasPrefix(got, `"%!v(PANIC=String method: \x1b\x1b`) || !strings.HasSuffix(got, `"… (1048602 bytes)`) ||
		len(got) > TextLen+len("… (1048602 bytes)") {
		t.Errorf("Value of a value whose String panics = %.200q…", got)
	}
	if got := Value(errors.New("disk on fire")); got != "disk on fire" {
		t.Errorf("Value(error) = %q", got)
	}
}

// Cut cuts on the form show gives, and marks a cut with the whole's
// length, as every cut in lowwater's errors and the tool's output is.
func TestCut(t *testing.T) {
	upper := strings.ToUpper
	for s, want := range map[string]string{
		"":       "",
		"abc":    "ABC",
		"abcdef": "ABC… (6 bytes)",
		"aé":     "AÉ",
		"abé":    "AB… (4 bytes)", // É takes two bytes: ABÉ would take four
	} {
		if got := Cut(s, 3, upper); got != want {
			t.Errorf("Cut(%q, 3, ToUpper) = %q, want %q", s, got, want)
		}
	}
}
