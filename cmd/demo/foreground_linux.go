package main

import "golang.org/x/sys/unix"

// terminalPgrp is the foreground process group of the terminal fd: a
// pid_t, 32 bits.
func terminalPgrp(fd int) (int, error) {
	pgrp, err := unix.IoctlGetUint32(fd, unix.TIOCGPGRP)
	return int(pgrp), err
}
