package shorten

import "testing"

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
		{forty + "x", `"` + forty + `…"`},
		{forty[:39] + "é", `"` + forty[:39] + `…"`}, // é would straddle byte 40
		{"a\x00b", `"a\x00b"`},
	} {
		if got := Quoted(tc.name); got != tc.want {
			t.Errorf("Quoted(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
}
