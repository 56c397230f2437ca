//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// inForeground reports whether the demo runs in the foreground of w, a
// terminal: in its foreground process group, or on a terminal that is
// not the demo's own, where job control does not apply. The live view
// sets the terminal up, which stops a process in the background (SIGTTOU):
// `timeout 60 make demo` at a prompt put the demo in a process group of
// its own, where it stopped silently and outlived the timeout's kill.
func inForeground(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return true
	}
	pgrp, err := terminalPgrp(int(f.Fd()))
	return err != nil || pgrp == unix.Getpgrp()
}
