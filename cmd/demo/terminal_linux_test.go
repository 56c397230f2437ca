//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal: the keys, its master side, and the
// terminal a program runs on. Neither becomes the test's own.
func openPTY(t *testing.T) (keys, tty *os.File) {
	t.Helper()
	keys, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	require.NoError(t, unix.IoctlSetPointerInt(int(keys.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(keys.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	return keys, tty
}

// The plain view and the summary wrap within a terminal narrower than
// their 80 columns, where the terminal broke them mid-word again; below
// 40 columns, and off a terminal, they keep 80.
func TestTheSummaryWrapsWithinTheTerminal(t *testing.T) {
	keys, tty := openPTY(t)
	defer keys.Close()
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

// demoRole runs this test binary as one of the processes of
// TestTheDemoInTheBackgroundOfItsTerminalPrintsThePlainView.
const demoRole = "LOWWATER_DEMO_TEST_ROLE"

// The demo in the background of its terminal, as `timeout` runs it (a
// process group of its own in the terminal's session), prints the plain
// view: the live view's set-up of the terminal stopped it there
// (SIGTTOU), silent, and past the timeout's own kill.
func TestTheDemoInTheBackgroundOfItsTerminalPrintsThePlainView(t *testing.T) {
	switch os.Getenv(demoRole) {
	case "session":
		// The session's leader, in the terminal's foreground: it runs the
		// demo in a process group of its own, and exits as the demo did.
		demo := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
		demo.Env = append(os.Environ(), demoRole+"=demo")
		demo.Stdin, demo.Stdout, demo.Stderr = os.Stdin, os.Stdout, os.Stderr
		// Killed with the session's leader: a demo that hung, rather than
		// stopped, would outlive the test in a session of its own.
		demo.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := demo.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "demo":
		fmt.Fprintf(os.Stderr, "in the foreground: %v\n", inForeground(os.Stdout))
		os.Exit(runWith(context.Background(), &interrupter{exit: os.Exit, stderr: os.Stderr},
			[]string{"--duration=300ms", "--seed=3"}, os.Stdin, os.Stdout, os.Stderr))
	}

	keys, tty := openPTY(t)
	defer keys.Close()
	require.NoError(t, unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 80}))

	session := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$")
	session.Env = append(os.Environ(), demoRole+"=session", "TERM=xterm-256color")
	session.Stdin, session.Stdout, session.Stderr = tty, tty, tty
	session.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := session.Start(); errors.Is(err, syscall.EPERM) {
		t.Skipf("no session of its own on a terminal here: %v", err)
	} else {
		require.NoError(t, err)
	}
	tty.Close()
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&screen, keys) // until the terminal's last user exits (EIO)
	}()
	exited := make(chan error, 1)
	go func() { exited <- session.Wait() }()
	select {
	case err := <-exited:
		<-read
		require.NoError(t, err, "the terminal showed:\n%s", screen.String())
	case <-time.After(time.Minute):
		// The session's end orphans the demo's process group, and the
		// kernel ends it, stopped, with SIGHUP.
		require.NoError(t, session.Process.Kill())
		<-exited
		keys.Close() // the demo, if it still runs, holds the terminal
		<-read
		t.Fatalf("the demo did not end within a minute; the terminal showed:\n%s", screen.String())
	}
	text := screen.String()
	require.Contains(t, text, "in the foreground: false")
	require.Contains(t, text, "PASS in ")
	require.Contains(t, text, "\n== run\r\n", "no plain view")
	require.NotContains(t, text, "\x1b[", "the live view's escape sequences")
}
