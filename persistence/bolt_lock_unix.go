//go:build unix

package persistence

import (
	"errors"
	"os"
	"syscall"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"
)

// unlockFile drops bbolt's flock on f. Closing f alone does not: the
// mapping bbolt made of the file keeps the open file, and so its lock,
// alive until it is unmapped, which a panic inside bolt.Open never does.
func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// lockFile takes the flock bbolt takes on f, exclusive for a writer and
// shared for a reader, trying as bbolt does until timeout (0: for ever),
// and fails with bbolt's ErrTimeout, which OpenBolt reports as ErrLocked.
// bbolt's own flock on the same open file then finds it held already.
func lockFile(f *os.File, exclusive bool, timeout time.Duration) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return err
		}
		if timeout > 0 && time.Now().After(deadline) {
			return bolterrors.ErrTimeout
		}
		time.Sleep(50 * time.Millisecond) // bbolt's own flockRetryTimeout
	}
}

// lockedFiles reports whether lockFile locks files here: where it does
// not, the file is checked only once bbolt has opened it.
const lockedFiles = true

// unlinked reports whether f has no name left in any directory: deleted,
// where a file renamed keeps one.
func unlinked(f *os.File) bool {
	info, err := f.Stat()
	if err != nil {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
