//go:build !linux

package bench

import "time"

// sleepThread waits about d on a runtime timer, which is less precise than
// Linux's nanosleep below a millisecond.
func sleepThread(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}
