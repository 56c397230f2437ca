//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The plain view and the summary wrap within a terminal narrower than
// their 80 columns, where the terminal broke them mid-word again; below
// 40 columns, and off a terminal, they keep 80.
func TestTheSummaryWrapsWithinTheTerminal(t *testing.T) {
	keys, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	defer keys.Close()
	require.NoError(t, unix.IoctlSetPointerInt(int(keys.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(keys.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	defer tty.Close()
	for cols, want := range map[uint16]int{50: 50, 120: 120, 30: 0} {
		require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}))
		require.Equal(t, want, terminalWidth(tty), "%d columns", cols)
	}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.Zero(t, terminalWidth(w))
}
