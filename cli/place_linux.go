//go:build linux

package cli

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to unless a file is at to (fs.ErrExist),
// in one step: a check before a plain rename would replace a file made in
// between. errNoReplace where the file system cannot.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		return errNoReplace
	}
	return err
}
