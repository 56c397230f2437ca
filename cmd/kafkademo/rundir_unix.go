//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// runLock is the file in a run's directory that the run holds a flock on
// while it lives: the kernel lets go of it when the process ends, however
// it ends, so a lock that can be taken is a run that is gone. A PID would
// not say so from another PID namespace sharing the directory.
const runLock = "run.lock"

// makeRunDir makes the directory of this run, locked, and first removes
// those of earlier runs that were killed before they could (kill -9): it
// returns how many. release unlocks the directory; the caller removes it.
func makeRunDir() (dir string, release func(), swept int, err error) {
	swept = sweepRunDirs(os.TempDir())
	if dir, err = os.MkdirTemp("", runDirPrefix); err != nil {
		return "", nil, swept, err
	}
	// Locked under another name, then renamed: a sweep that finds the
	// lock file finds it held.
	f, err := os.CreateTemp(dir, runLock+".*")
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			err = os.Rename(f.Name(), filepath.Join(dir, runLock))
		}
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, swept, err
	}
	return dir, func() { _ = f.Close() }, swept, nil
}

// sweepRunDirs removes the run directories in tmp whose run is gone (see
// runLock), and returns how many. One with no lock file is left alone:
// its run may be making it now.
func sweepRunDirs(tmp string) int {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	swept := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runDirPrefix) {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if gone(filepath.Join(dir, runLock)) && os.RemoveAll(dir) == nil {
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
