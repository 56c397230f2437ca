//go:build unix

package persistence

import (
	"os"
	"syscall"
)

// unlockFile drops bbolt's flock on f. Closing f alone does not: the
// mapping bbolt made of the file keeps the open file, and so its lock,
// alive until it is unmapped, which a panic inside bolt.Open never does.
func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
