//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// inForeground is foreground_linux.go's. The process group is read into
// an int, of which the kernel writes 32 bits: the low ones on the
// little-endian machines these systems run on, but for openbsd/ppc64,
// where it matches no group and the demo prints the plain view.
func inForeground(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return true
	}
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err != nil || pgrp == unix.Getpgrp()
}
