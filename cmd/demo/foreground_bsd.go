//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import "golang.org/x/sys/unix"

// terminalPgrp is the foreground process group of the terminal fd, read
// into an int of which the kernel writes 32 bits: the low ones on the
// little-endian machines these systems run on, but for openbsd/ppc64,
// where it matches no group and the demo prints the plain view.
func terminalPgrp(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCGPGRP) }
