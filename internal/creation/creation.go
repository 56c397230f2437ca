// Package creation names where a new bbolt store for a path is made, and
// the temporary names it is built under before it is placed there: the
// catalog's own creation and the operator tool's restore into a new file
// share them, so that what a killed one leaves is known to both.
package creation

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Path is where a new store for path is made: path itself when
// nothing is there, or the target of a symbolic link to nothing yet (a
// catalog kept on another disk, linked in before its first start), after
// as many links as the kernel follows. Made at the link instead, the
// store would never be placed there, and bbolt would lay out an empty
// one at the target, without the bucket a later open asks for. ok is
// false when a file is there, or the links cannot be followed: path is
// then opened as bbolt would.
func Path(path string) (at string, ok bool) {
	at = path
	for range 40 { // Linux's bound on the links a lookup follows
		info, err := os.Lstat(at)
		if errors.Is(err, fs.ErrNotExist) {
			return at, true
		}
		if err != nil || info.Mode()&fs.ModeSymlink == 0 {
			return "", false
		}
		target, err := os.Readlink(at)
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(target) {
			// From the directory the link is in, as the kernel reads it:
			// reached through another link, its ".." is not the one the
			// path's text names.
			dir, err := filepath.EvalSymlinks(filepath.Dir(at))
			if err != nil {
				return "", false
			}
			target = filepath.Join(dir, target)
		}
		at = target
	}
	return "", false
}

// TempPrefix begins the names of the temporary files a new store for
// path is made under, beside it, before it is linked into place:
// one that no file of the user's beside it bears (a backup named
// ".cp.db.new-20261204" was taken for one).
func TempPrefix(path string) string { return "." + filepath.Base(path) + ".lowwater-new-" }

// StaleAge is how old a temporary file must be for RemoveStale to take it
// for one a killed creation left: a creation takes milliseconds, and a
// restore that builds a file for minutes holds its lock.
const StaleAge = time.Minute

// RemoveStale removes beside path what creations of a store for it that
// were killed before they ended left: a file never placed, a second name
// of the one placed, and, of a restore's file built aside, the temporary
// name its own creation was made under. A file younger than StaleAge, or
// one a process holds locked (a store open under such a name, a
// restore still writing), is kept, unless it is a second name of path's
// own file, which goes whoever holds it.
func RemoveStale(path string) {
	dir, prefix := filepath.Dir(path), TempPrefix(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !tempOf(e.Name(), prefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) <= StaleAge {
			continue
		}
		name := filepath.Join(dir, e.Name())
		if placed, err := os.Stat(path); err == nil && os.SameFile(placed, info) {
			_ = os.Remove(name)
			continue
		}
		removeUnlocked(name)
	}
}

// tempOf reports whether name is one os.CreateTemp gave for prefix
// (prefix and digits), or one it gave for such a name in turn.
func tempOf(name, prefix string) bool {
	nested, ok := strings.CutPrefix(name, "."+prefix)
	if ok {
		digits, rest, found := strings.Cut(nested, ".lowwater-new-")
		return found && allDigits(digits) && allDigits(rest)
	}
	suffix, ok := strings.CutPrefix(name, prefix)
	return ok && allDigits(suffix)
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// removeUnlocked removes the file at path unless a process holds its lock.
// A try, not a wait.
func removeUnlocked(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	if unlocked(f) {
		_ = os.Remove(path)
	}
}
