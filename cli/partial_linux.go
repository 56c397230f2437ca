package cli

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// createPartial makes the file a dump to path is written into, in its
// directory, with no name at all (O_TMPFILE) until it is whole: a dump
// killed part way, even by SIGKILL or the OOM killer, leaves nothing
// behind. A file system without O_TMPFILE, or no /proc to name the file
// through, gets a named one (createNamedPartial). Errors name it path.
func createPartial(path string) (*partial, error) {
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return createNamedPartial(path)
	}
	// linkat with AT_EMPTY_PATH needs a privilege; through /proc it
	// needs none.
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if _, err := os.Stat(proc); err != nil {
		_ = unix.Close(fd)
		return createNamedPartial(path)
	}
	return &partial{
		File: os.NewFile(uintptr(fd), path),
		name: func(to string) error {
			if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, to, unix.AT_SYMLINK_FOLLOW); err != nil {
				return &os.LinkError{Op: "link", Old: proc, New: to, Err: err}
			}
			return nil
		},
		remove: func() {},
	}, nil
}
