// Package cmdtest checks what the demos' commands share: a --help that
// says what the program does, and an etcd that is not there said at once.
package cmdtest

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/testkit/syncbuf"
	"github.com/lowwater/lowwater/internal/testkit/termtest"
)

// Run runs a command with args, as its main would, and returns its exit
// status.
type Run func(args []string, stdout, stderr io.Writer) int

// Help checks --help: within 80 columns, it says what the program does,
// its exit status and the user's flags (timeout among them), not those
// named in hidden, which a parent passes its nodes; and a bad flag is
// one line, exit 2, not the whole list.
func Help(t *testing.T, run Run, hidden []string) {
	t.Helper()
	var out, stderr bytes.Buffer
	if code := run([]string{"--help"}, &out, &stderr); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	for _, line := range termtest.Wider(out.String()+stderr.String(), 80) {
		t.Errorf("--help line of %d columns: %q", termtest.Columns(line), line)
	}
	for _, want := range []string{"usage: ", "exit status:", "  -timeout duration"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, out.String())
		}
	}
	for _, name := range hidden {
		if strings.Contains(out.String(), "  -"+name+" ") {
			t.Errorf("--help lists the node's flag --%s:\n%s", name, out.String())
		}
	}
	out.Reset()
	stderr.Reset()
	if code := run([]string{"--no-such-flag"}, &out, &stderr); code != 2 ||
		strings.Count(stderr.String(), "\n") != 1 || out.Len() != 0 {
		t.Errorf("a bad flag: exit %d, stdout %q, stderr %q", code, out.String(), stderr.String())
	}
}

// EtcdNotThere checks that the command, given by args an etcd address
// that nothing listens at, says so at once, with why (exit 2), and does
// not wait for an answer until its timeout to say only that it ran out.
func EtcdNotThere(t *testing.T, run Run, args func(hostPort string) []string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	began := time.Now()
	code := run(args(addr), &out, &stderr)
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("said after %v", took)
	}
	if want := "nothing listens at " + addr + " (connection refused)"; code != 2 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, want 2 with %q; stderr: %s", code, want, stderr.String())
	}
}
