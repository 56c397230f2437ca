//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"encoding/binary"
	"io"
	"os"
	"strconv"

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

// leadingInt32 is the 32-bit integer at the start of v's memory, of a
// machine of byte order order (binary.NativeEndian), where an ioctl that
// writes a C int into a Go int puts it: v's low half on a little-endian
// machine, its high half on a big-endian one (openbsd/ppc64).
func leadingInt32(v int, order binary.ByteOrder) int {
	if strconv.IntSize == 32 {
		return v
	}
	var b [8]byte
	order.PutUint64(b[:], uint64(v))
	return int(int32(order.Uint32(b[:4])))
}
