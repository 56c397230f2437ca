//go:build !unix

package persistence

import "os"

// unlockFile has nothing to do where bbolt does not lock with flock.
func unlockFile(*os.File) {}
