// Package cmdtest checks what the demos' commands share: a --help that
// says what the program does, and an etcd that is not there, or silent,
// said at once.
package cmdtest

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lowwater/lowwater/internal/rundir"
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

// SilentListener accepts connections on 127.0.0.1 and never answers, as a
// stopped etcd, or one without a quorum, would; it returns its address.
// It is closed, its connections too, when the test ends.
func SilentListener(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

// KilledRun makes the system's temporary directory a new one of the
// test's (TMPDIR), and in it the directory a run named prefix leaves when
// it is killed: its lock file, held by no process, and file, empty. It
// returns the temporary directory. Where no run sweeps (rundir.Sweeps),
// it skips the test.
func KilledRun(t *testing.T, prefix string, file string) string {
	t.Helper()
	if !rundir.Sweeps {
		t.Skip("the directories of killed runs are found by flock, which this system lacks")
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	killed := filepath.Join(tmp, prefix+"killed")
	if err := os.Mkdir(killed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{rundir.LockName, file} {
		if err := os.WriteFile(filepath.Join(killed, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}
