//go:build unix

package creation

import (
	"os"
	"syscall"
)

// unlocked reports whether f's lock, bbolt's flock, was free: it takes
// it, and lets it go with f.
func unlocked(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}
