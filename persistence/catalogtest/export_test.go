package catalogtest

import "time"

// SetToldWithin shortens the wait for a started save, so that the suite's
// own tests of a catalog that never tells are quick; it returns the undo.
func SetToldWithin(d time.Duration) (undo func()) {
	old := toldWithin
	toldWithin = d
	return func() { toldWithin = old }
}

// SetCallWithin shortens the bounds of every call (see Run), so that the
// suite's own tests of a catalog that hangs are quick; it returns the
// undo.
func SetCallWithin(d, grace time.Duration) (undo func()) {
	old, oldGrace := callWithin, callGrace
	callWithin, callGrace = d, grace
	return func() { callWithin, callGrace = old, oldGrace }
}
