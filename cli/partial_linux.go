package cli

import (
	"errors"
	"fmt"
	"io"
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
func createPartial(path string) (*partial, error) { return createUnnamed(path, linkProc) }

// linkProc gives the unnamed file open as proc the name to. linkat with
// AT_EMPTY_PATH needs a privilege; through /proc it needs none.
func linkProc(proc, to string) error {
	if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, to, unix.AT_SYMLINK_FOLLOW); err != nil {
		return &os.LinkError{Op: "link", Old: proc, New: to, Err: err}
	}
	return nil
}

// createUnnamed is createPartial with the unnamed file named by link.
func createUnnamed(path string, link func(proc, to string) error) (*partial, error) {
	// Readable too: should the link be refused, the dump is copied.
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL):
		return createNamedPartial(path) // no O_TMPFILE here (EISDIR: a kernel before it)
	case err != nil:
		// A read-only or full file system, a directory not writable:
		// named as the file it would have been, not a made-up one.
		return nil, &os.PathError{Op: "create", Path: path, Err: err}
	}
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	if _, err := os.Stat(proc); err != nil {
		_ = unix.Close(fd)
		return createNamedPartial(path)
	}
	f := os.NewFile(uintptr(fd), path)
	return &partial{
		File: f,
		name: func(to string) error {
			err := link(proc, to)
			if err == nil || errors.Is(err, os.ErrExist) {
				return err
			}
			if cerr := copyNamed(f, to); cerr != nil {
				return fmt.Errorf("%w; copying it instead: %w", err, cerr)
			}
			return nil
		},
		remove: func() {},
	}, nil
}

// copyNamed gives what the unnamed file f holds the name to, through a
// named copy: a policy (a security module, a /proc mounted apart) can
// refuse the link after the whole dump is written, and failing the dump
// there would throw that work away.
func copyNamed(f *os.File, to string) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	named, err := createNamedPartial(to)
	if err != nil {
		return err
	}
	defer named.remove()
	defer named.Close()
	if _, err := io.Copy(named.File, f); err != nil {
		return err
	}
	if err := named.Sync(); err != nil {
		return err
	}
	return named.name(to)
}
