// Package shell writes text as a POSIX shell reads it back: the commands
// the tool and the catalog's errors suggest paste into a shell as shown,
// whatever a path or a name holds.
package shell

import "strings"

// Word is s as one shell word: as it is when it holds nothing a shell
// takes apart, else quoted (Quote).
func Word(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-") == "" {
		return s
	}
	return Quote(s)
}

// Quote puts s in single quotes, as a POSIX shell reads it back.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
