//go:build linux

package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// lockHolder names the process that holds a flock of the file at path,
// as /proc/locks tells it: " (pid 4242, lowwater-demo)", or "" when it
// tells none. An operator told only that "another process" holds the
// file had to look for it.
func lockHolder(path string) string {
	info, err := os.Stat(path)
	if err != nil {
		return ""
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	// "1: FLOCK  ADVISORY  WRITE 4242 08:01:131074 0 EOF"; a waiter's
	// line has "->" after its number.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	self := strconv.Itoa(os.Getpid())
	for line := range strings.Lines(string(locks)) {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != file || f[4] == self {
			continue
		}
		name, err := os.ReadFile("/proc/" + f[4] + "/comm")
		if err != nil {
			return fmt.Sprintf(" (pid %s)", f[4])
		}
		return fmt.Sprintf(" (pid %s, %s)", f[4], shownText(strings.TrimSpace(string(name))))
	}
	return ""
}
