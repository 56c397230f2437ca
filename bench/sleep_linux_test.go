package bench

import (
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// sleepThread blocks the calling thread for about d in nanosleep, as a
// blocking system call (an fsync, say) does. The thread's timer slack is
// set to 1 ns first, so that the kernel does not add its default 50 µs.
func sleepThread(d time.Duration) {
	_, _, _ = syscall.Syscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}
