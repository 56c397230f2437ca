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
