//go:build !unix

package persistence

import (
	"os"
	"time"
)

// unlockFile has nothing to do where bbolt does not lock with flock.
func unlockFile(*os.File) {}

// lockFile cannot take bbolt's lock where bbolt does not lock with flock.
func lockFile(*os.File, bool, time.Duration) error { return nil }

// lockedFiles reports whether lockFile locks files here: where it does
// not, the file is checked only once bbolt has opened it.
const lockedFiles = false

// unlinked cannot tell a file deleted from one renamed here.
func unlinked(*os.File) bool { return false }
