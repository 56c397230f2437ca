//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// terminalPgrp is the foreground process group of the terminal fd: a
// pid_t, 32 bits, which unix.IoctlGetInt reads into the start of an int
// (these systems have no IoctlGetUint32).
func terminalPgrp(fd int) (int, error) {
	v, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	return leadingInt32(v, binary.NativeEndian), err
}
