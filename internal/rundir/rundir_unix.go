//go:build unix

package rundir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Sweeps is whether New removes the directories of killed runs: here it
// does, by their locks.
const Sweeps = true

// New makes the directory of this run, named prefix and a random suffix,
// locked, and first removes those of earlier runs of the same prefix that
// were killed before they could (Dir.Swept says how many).
func New(prefix string) (*Dir, error) {
	swept := sweep(os.TempDir(), prefix)
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	// Locked under another name, then renamed: a sweep that finds the
	// lock file finds it held.
	f, err := os.CreateTemp(dir, LockName+".*")
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, LockName))
		}
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return &Dir{Path: dir, Swept: swept, release: func() { _ = f.Close() }}, nil
}

// sweep removes the directories in tmp named prefix and a suffix whose
// run is gone (see LockName), and returns how many. One with no lock file
// is left alone: its run may be making it now, or it is of a version of
// the command that took no lock.
func sweep(tmp, prefix string) int {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	swept := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if gone(filepath.Join(dir, LockName)) && os.RemoveAll(dir) == nil {
			swept++
		}
	}
	return swept
}

// gone reports whether the lock file at path exists and no process holds
// it. The lock taken to find out is let go with the file.
func gone(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
