package catalogtest

import "time"

// SetToldWithin shortens the wait for a started save, so that the suite's
// own tests of a catalog that never tells are quick; it returns the undo.
func SetToldWithin(d time.Duration) (undo func()) {
	old := toldWithin
	toldWithin = d
	return func() { toldWithin = old }
}
