// Package rundir makes the directory a command's run keeps its files in,
// in the system's temporary directory, and removes those of earlier runs
// that were killed before they could remove their own (kill -9): such a
// run's directory is found on the next run, by its lock (Unix only).
package rundir

import (
	"fmt"
	"os"
)

// LockName is the file in a run's directory that the run holds a flock on
// while it lives: the kernel lets go of it when the process ends, however
// it ends, so a lock that can be taken is a run that is gone. A PID would
// not say so from another PID namespace sharing the directory.
const LockName = "run.lock"

// Dir is the directory of one run. Remove removes it; until then it is
// locked, and no other run's New removes it.
type Dir struct {
	// Path is the directory, in os.TempDir().
	Path string
	// Swept is how many directories of earlier runs New removed.
	Swept int
	// release unlocks the directory.
	release func()
}

// Remove removes the directory and everything in it, then unlocks it:
// removed while locked, no other run's sweep meets it half removed.
func (d *Dir) Remove() error {
	err := os.RemoveAll(d.Path)
	d.release()
	return err
}

// SweptNote says what New removed, for the command to print after its
// name, or "" when it removed nothing.
func (d *Dir) SweptNote() string {
	switch {
	case d.Swept == 1:
		return "removed the directory of an earlier run that was killed"
	case d.Swept > 1:
		return fmt.Sprintf("removed the directories of %d earlier runs that were killed", d.Swept)
	}
	return ""
}
