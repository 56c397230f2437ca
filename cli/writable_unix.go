//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// writable checks, for a dry run, what the real write would meet first:
// the file (or, for one to be created, its directory) must be writable by
// this user, on a file system mounted read-write. The dry run itself opens
// the file read-only, beside other readers, so its open cannot tell.
func writable(path string) error {
	target := path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		target = filepath.Dir(path)
	}
	if err := unix.Access(target, unix.W_OK); err != nil {
		return fmt.Errorf("%s could not be written: %w", target, err)
	}
	return nil
}
