package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/internal/testkit/cmdtest"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/internal/testkit/syncbuf"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// asNode makes the test binary a node process: TestFailover runs it again
// with this variable set, instead of building the program.
const asNode = "LOWWATER_FAILOVER_NODE"

// asProgram makes the test binary the program itself, main and its
// signals included; its nodes are the test binary again, as the program's
// are the program (self), and run as such from their --node.
const asProgram = "LOWWATER_FAILOVER_MAIN"

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(asProgram) == "1":
		main()
	case os.Getenv(asNode) == "1":
		os.Exit(run(context.Background(), nil, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil))
	}
	goleak.VerifyTestMain(m)
}

// testBinary runs the test binary as a node.
func testBinary(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asNode+"=1")
	return cmd
}

// TestFailover runs the demo in a short form: embedded etcd, two node
// processes, a SIGKILL, the takeover and the checks.
func TestFailover(t *testing.T) {
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	began := time.Now()
	// A TTL of 3 s, not 2: once, under make test's load, node B did not
	// take over within the 20 s wait, and said nothing of why. A session
	// lost to keep-alives starved of the CPU would explain it; a wait that
	// runs out now names what the nodes reported failing.
	code := run(t.Context(), nil, []string{"--run=1500ms", "--after=500ms", "--ttl=3s"}, nil, &out, &stderr, testBinary)
	text := out.String()
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, text, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		// A word longer than a line (a long TMPDIR) has one of its own.
		if len(line) > outWidth && len(strings.Fields(line)) > 1 {
			t.Errorf("a line of %d columns, over %d:\n%s", len(line), outWidth, line)
		}
	}
	// Matched whole: a line's continuations back on it.
	text = regexp.MustCompile(`\n {11,}`).ReplaceAllString(text, " ")
	for _, want := range []string{"SIGKILL node A", "node B owns p0", "node B owns p1", "PASS: "} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the output:\n%s", want, text)
		}
	}
	for _, name := range []string{"p0", "p1", "p2", "p3"} {
		if !regexp.MustCompile(`\s` + name + ` ok: `).MatchString(text) {
			t.Errorf("%s not verified:\n%s", name, text)
		}
	}
	m := regexp.MustCompile(`takeover: node A's pchannels saving again on node B (\S+) after`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no takeover line:\n%s", text)
	}
	took, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// The dead node's lease lasts the TTL at most (keep-alives refresh it
	// every TTL/3); etcd checks expiries every 500 ms.
	if took > 5*time.Second {
		t.Errorf("takeover took %v", took)
	}
	t.Logf("takeover in %v; whole run %v", took, time.Since(began).Round(time.Millisecond))
}

func TestHelp(t *testing.T) { cmdtest.Help(t, runIt(t), nodeFlags) }

// An etcd that is not there is said at once, with why, not after the
// wait for an answer (--timeout) as a bare deadline.
func TestAnEtcdThatIsNotThereIsSaidAtOnce(t *testing.T) {
	cmdtest.EtcdNotThere(t, runIt(t), func(addr string) []string { return []string{"--endpoints", "http://" + addr} })
}

// runIt runs the command in this process, as cmdtest calls it.
func runIt(t *testing.T) cmdtest.Run {
	return func(args []string, stdout, stderr io.Writer) int {
		return run(t.Context(), nil, args, nil, stdout, stderr, testBinary)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--pchannels=1"},
		{"--ttl=100ms"},
		{"--node=A"}, // no endpoints, prefix or pchannels
		{"extra"},
		{"--no-such-flag"},
	} {
		var out, stderr bytes.Buffer
		if code := run(t.Context(), nil, args, nil, &out, &stderr, testBinary); code != exitSetup {
			t.Errorf("%q: exit %d, want %d; stderr: %s", args, code, exitSetup, stderr.String())
		}
	}
}

// An interrupt exits 130, with one line, and is not a setup error.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // as SIGINT does, through signal.NotifyContext
	var out, stderr bytes.Buffer
	const want = "failover: interrupted: the nodes are stopped, nothing is checked\n"
	if code := run(ctx, nil, nil, nil, &out, &stderr, testBinary); code != exitStopped || stderr.String() != want {
		t.Errorf("exit %d, want %d; stderr %q, want %q", code, exitStopped, stderr.String(), want)
	}
}

// TestCheckTakeover feeds the takeover check what a broken failover would
// print and store.
func TestCheckTakeover(t *testing.T) {
	at := func(d time.Duration) int64 { return time.Unix(100, 0).Add(d).UnixNano() }
	killAt := time.Unix(100, 0).Add(5 * time.Second)
	v := func(n int64) *int64 { return &n }
	stored := func(rev int64, n int64, term uint64) write {
		return write{rev: rev, rec: persistence.Record{Checkpoint: wal.KafkaID(n), Term: term}}
	}
	base := []line{
		{Ev: evOwned, Node: "A", PCh: "p0", Term: 3, At: at(0)},
		{Ev: evPersisted, Node: "A", PCh: "p0", Value: v(10), At: at(time.Second)},
		{Ev: evPersisted, Node: "A", PCh: "p0", Value: v(20), At: at(2 * time.Second)},
	}
	for _, tc := range []struct {
		name    string
		lines   []line
		history []write
		want    string // a fragment of the one problem expected, "" for none
	}{
		{"ok", []line{
			{Ev: evOwned, Node: "B", PCh: "p0", Term: 40, At: at(7 * time.Second)},
			{Ev: evRecovered, Node: "B", PCh: "p0", Value: v(20), FromCatalog: true, At: at(7 * time.Second)},
		}, []write{stored(5, 10, 3), stored(6, 20, 3), stored(41, 25, 40)}, ""},
		{"started below the acknowledged", []line{
			{Ev: evOwned, Node: "B", PCh: "p0", Term: 40, At: at(7 * time.Second)},
			{Ev: evRecovered, Node: "B", PCh: "p0", Value: v(10), FromCatalog: true, At: at(7 * time.Second)},
		}, []write{stored(5, 10, 3), stored(41, 25, 40)}, "below kafka:20 that node A acknowledged"},
		{"not from the last stored", []line{
			{Ev: evOwned, Node: "B", PCh: "p0", Term: 40, At: at(7 * time.Second)},
			{Ev: evRecovered, Node: "B", PCh: "p0", Value: v(20), FromCatalog: true, At: at(7 * time.Second)},
		}, []write{stored(5, 10, 3), stored(6, 20, 3), stored(7, 22, 3), stored(41, 25, 40)}, "node A stored kafka:22 last"},
		{"stale write", []line{
			{Ev: evOwned, Node: "B", PCh: "p0", Term: 40, At: at(7 * time.Second)},
			{Ev: evRecovered, Node: "B", PCh: "p0", Value: v(20), FromCatalog: true, At: at(7 * time.Second)},
		}, []write{stored(5, 10, 3), stored(44, 20, 3)}, "after node B owned"},
		{"owned before the kill", []line{
			{Ev: evOwned, Node: "B", PCh: "p0", Term: 40, At: at(4 * time.Second)},
			{Ev: evRecovered, Node: "B", PCh: "p0", Value: v(20), FromCatalog: true, At: at(4 * time.Second)},
		}, []write{stored(5, 10, 3), stored(6, 20, 3)}, "before node A died"},
		{"never taken over", nil, []write{stored(5, 10, 3), stored(6, 20, 3)}, "never took it over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			bad := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
			var p parent
			p.checkTakeover(append(append([]line(nil), base...), tc.lines...), "p0", tc.history, false, killAt, bad)
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("problems %q", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("problems %q, want one with %q", got, tc.want)
			}
		})
	}
}

// A wait that runs out names what the nodes reported failing: a node that
// could not take a pchannel says so only in its lines.
func TestFailuresNamesWhatTheNodesSaid(t *testing.T) {
	if got := failures([]line{{Ev: evOwned, Node: "A", PCh: "p0"}}); got != "no node reported a failure" {
		t.Errorf("failures of none = %q", got)
	}
	got := failures([]line{{Ev: evOwned, Node: "A", PCh: "p0"}, {Ev: evFailed, Node: "B", PCh: "p1", Err: "own: session done"},
		{Ev: evLost, Node: "B", PCh: "p2", Err: "fenced"}})
	if want := "node B: p1 failed: own: session done; node B: p2 lost: fenced"; got != want {
		t.Errorf("failures = %q, want %q", got, want)
	}
}

// Flags the run cannot use are refused up front (exit 2), each with one
// line that says why: a TTL that is not whole seconds, or too long for a
// takeover within --timeout; more pchannels than the nodes' command lines
// carry; an endpoint of another scheme than http.
func TestUsageSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--ttl=100000h"}, "failover: --ttl 100000h0m0s is over 10s, the most within half of --timeout 20s: " +
			"the takeover waits up to the TTL for node A's lease to expire, and must end within --timeout\n"},
		{[]string{"--ttl=11s"}, "failover: --ttl 11s is over 10s, the most within half of --timeout 20s: " +
			"the takeover waits up to the TTL for node A's lease to expire, and must end within --timeout\n"},
		{[]string{"--ttl=2s", "--timeout=3999ms"}, "failover: --ttl 2s is over 1s, the most within half of --timeout 3.999s: " +
			"the takeover waits up to the TTL for node A's lease to expire, and must end within --timeout\n"},
		{[]string{"--ttl=1s", "--timeout=1999ms"}, "failover: --timeout 1.999s leaves no --ttl: a TTL takes at most half " +
			"of it, in whole seconds, and at least 1s, so --timeout must be 2s at least\n"},
		{[]string{"--ttl=1500ms"}, "failover: --ttl 1.5s is not whole seconds (etcd's lease TTLs are): give 1s or 2s\n"},
		{[]string{"--ttl=100ms"}, "failover: --ttl 100ms: must be at least 1s\n"},
		{[]string{"--pchannels=1000000"}, "failover: --pchannels 1000000: must be from 2 to 1000\n"},
		{[]string{"--pchannels=1"}, "failover: --pchannels 1: must be from 2 to 1000\n"},
		{[]string{"--endpoints=127.0.0.1:2379,https://127.0.0.1:2379"}, "failover: --endpoints https://127.0.0.1:2379: " +
			"the demo speaks plain http to etcd, with no TLS settings: give http://host:port or host:port\n"},
		// A node is given no --timeout: the TTL's bound is the parent's.
		{[]string{"--node=A", "--ttl=30s"}, "failover: a node needs --endpoints, --prefix and --share\n"},
	} {
		var out, stderr bytes.Buffer
		if code := run(t.Context(), nil, tc.args, nil, &out, &stderr, testBinary); code != exitSetup || stderr.String() != tc.want {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", tc.args, code, stderr.String(), exitSetup, tc.want)
		}
	}
}

// An --endpoints entry is http://host:port however given, or refused.
func TestEndpointURL(t *testing.T) {
	for ep, want := range map[string]string{
		"127.0.0.1:2379":          "http://127.0.0.1:2379",
		"http://127.0.0.1:2379":   "http://127.0.0.1:2379",
		"HTTP://127.0.0.1:2379/":  "http://127.0.0.1:2379",
		"http://[::1]:2379":       "http://[::1]:2379",
		"localhost:2379":          "http://localhost:2379",
		"http://":                 "",
		"http://127.0.0.1":        "",
		"127.0.0.1:2379/v3":       "",
		"http://u:p@h:1":          "",
		"unix:///run/etcd.sock":   "",
		"https://127.0.0.1:2379":  "",
		"unixs://127.0.0.1:2379":  "",
		"http://127.0.0.1:2379?x": "",
	} {
		got, err := endpointURL(ep)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("endpointURL(%q) = %q, %v; want %q", ep, got, err, want)
		}
	}
}

// maxPChannels keeps the names a node gets in one argument (--share)
// within what Linux takes of one argument (MAX_ARG_STRLEN, 32 pages of
// 4 KiB, its terminating NUL included).
func TestPChannelNamesFitOneArgument(t *testing.T) {
	const maxArgStrLen = 32 * 4096
	if n := len(strings.Join(pchannelNames(maxPChannels), ",")) + 1; n > maxArgStrLen {
		t.Errorf("--share of %d pchannels is %d bytes, over %d", maxPChannels, n, maxArgStrLen)
	}
}

// An endpoint that answers, but over HTTP as something other than etcd,
// is said to have answered, at once: not as a silence after --timeout.
func TestAnEndpointThatIsNotEtcdIsSaidSo(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // gRPC's prior knowledge
	srv.Start()
	defer srv.Close()
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	code := run(t.Context(), nil, []string{"--endpoints", srv.URL}, nil, &out, &stderr, testBinary)
	want := "failover: etcd: " + strings.TrimPrefix(srv.URL, "http://") + " answered, but not as etcd: HTTP 404 (Not Found)\n"
	if code != exitSetup || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitSetup, want)
	}
}

// An HTTP/1 server gives gRPC no answer it can read: the request runs out
// of --timeout, and the probe says what answered. It used to be called a
// stopped etcd.
func TestAnHTTP1EndpointIsSaidSo(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	code := run(t.Context(), nil, []string{"--endpoints", srv.URL, "--timeout", "2s", "--ttl", "1s"}, nil, &out, &stderr, testBinary)
	want := "failover: etcd: no answer within --timeout 2s: context deadline exceeded; " + addr +
		" answers HTTP/1, not etcd's gRPC: is it another server, or etcd's peer or metrics URL?\n"
	if code != exitSetup || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitSetup, want)
	}
}

// An endpoint that takes connections and never answers runs out of
// --timeout, and the error says what a probe of it finds.
func TestASilentEtcdIsExplained(t *testing.T) {
	addr := cmdtest.SilentListener(t)
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	code := run(t.Context(), nil, []string{"--endpoints", addr, "--timeout", "2s", "--ttl", "1s"}, nil, &out, &stderr, testBinary)
	want := "failover: etcd: no answer within --timeout 2s: context deadline exceeded; " + addr +
		" takes connections but answers no request within 1s: is etcd stopped, or without a quorum?\n"
	if code != exitSetup || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitSetup, want)
	}
}

// A wait for the nodes that runs out while etcd has stopped answering is
// the setup's, said so (exit 2): it was exit 1, "a check failed", with
// only the nodes' deadlines to go by. With etcd answering, it is the
// run's finding (exit 1), as it was.
func TestAWaitThatFailsWithEtcdSilentIsExplained(t *testing.T) {
	waited := errors.New("waited 20s for node B saving node A's pchannels")
	silent := cmdtest.SilentListener(t)
	code, err := failedWait([]string{"http://" + silent}, waited)
	want := "waited 20s for node B saving node A's pchannels; etcd: " + silent +
		" takes connections but answers no request within 1s: is etcd stopped, or without a quorum?"
	if code != exitSetup || err == nil || err.Error() != want || !errors.Is(err, waited) {
		t.Errorf("failedWait with etcd silent = %d, %v; want %d, %q", code, err, exitSetup, want)
	}
	code, err = failedWait(etcdtest.Start(t), waited)
	if code != exitViolated || err != waited {
		t.Errorf("failedWait with etcd answering = %d, %v; want %d, %v", code, err, exitViolated, waited)
	}
}

// A run killed with SIGKILL leaves its embedded etcd's directory; the
// next run removes it, says so, and removes its own.
func TestTheDirectoryOfAKilledRunIsRemoved(t *testing.T) {
	tmp := cmdtest.KilledRun(t, runDirPrefix, "etcd.data")
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the run ends as soon as its etcd is up
	var out, stderr bytes.Buffer
	const want = "failover: removed the directory of an earlier run that was killed\n" +
		"failover: interrupted: the nodes are stopped, nothing is checked\n"
	if code := run(ctx, nil, nil, nil, &out, &stderr, testBinary); code != exitStopped || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitStopped, want)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("left in the temporary directory: %v, %v", left, err)
	}
}

// A Ctrl-C while etcd has stopped answering ends within nodeStopBound,
// and says at once how long it may take: the nodes flush their pchannels
// side by side, release them side by side within the TTL, and leave their
// session to expire. One node after the other, each flush and release
// waiting its own bound, it took 15 s and said nothing meanwhile. A second
// Ctrl-C kills the nodes at once. Nodes still starting stop as soon.
func TestACtrlCWithEtcdSilentIsBounded(t *testing.T) {
	eps := etcdtest.Start(t)
	for _, tc := range []struct {
		name  string
		after string // the line after which etcd goes silent
		twice bool
	}{
		{"running", "running for 1m0s", false},
		{"running, twice", "running for 1m0s", true},
		// The nodes start as etcd goes silent: a node waiting for its
		// session's lease waited until the parent's --timeout (20 s).
		{"starting", "two nodes", false},
	} {
		twice := tc.twice
		t.Run(tc.name, func(t *testing.T) {
			front := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
			ctx, interrupt := context.WithCancel(t.Context())
			kill := make(chan struct{})
			var out, stderr syncbuf.Buffer
			exited := make(chan int, 1)
			go func() {
				exited <- run(ctx, kill, []string{"--endpoints", front.Endpoint(), "--run", "1m", "--ttl", "1s"},
					nil, &out, &stderr, testBinary)
			}()
			waitForOutput(t, &out, tc.after, exited)

			front.Freeze()
			began := time.Now()
			interrupt()
			want := "failover: interrupted: the nodes flush and release their pchannels, for up to\n" +
				"  about 4s with etcd silent; Ctrl-C again kills them at once\n"
			waitForOutput(t, &stderr, want, exited)
			if twice {
				close(kill)
			}
			var code int
			select {
			case code = <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("no exit 30 s after the interrupt; stderr:\n%s", stderr.String())
			}
			took := time.Since(began)
			last := "failover: interrupted: the nodes are stopped, nothing is checked\n"
			bound := nodeStopBound(time.Second) + 2*time.Second // the nodes' exits, under -race
			if twice {
				last = "failover: interrupted twice: the nodes were killed, nothing is checked\n"
				bound = 2 * time.Second
			}
			if code != exitStopped || stderr.String() != want+last {
				t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitStopped, want+last)
			}
			if took > bound {
				t.Errorf("the run ended %v after the interrupt, over %v", took, bound)
			}
		})
	}
}

// waitForOutput waits until what the run wrote to buf holds s, failing the
// test if the run exits without writing it or 60 s pass. A run that wrote
// s and exited between two looks passes, its exit code put back for the
// caller: exited is the run's alone, of capacity 1.
func waitForOutput(t *testing.T, buf *syncbuf.Buffer, s string, exited chan int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(buf.String(), s) {
		select {
		case code := <-exited:
			exited <- code
			if strings.Contains(buf.String(), s) {
				return
			}
			t.Fatalf("the run exited %d before writing %q:\n%s", code, s, buf.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q after 60 s:\n%s", s, buf.String())
		}
	}
}

// The program's own signals, as a terminal sends them to its process
// group: the first Ctrl-C stops the run gracefully and says so at once,
// the second kills the nodes, and the program exits 130 with no node left.
func TestTwoCtrlCsAtTheTerminal(t *testing.T) {
	eps := etcdtest.Start(t)
	front := etcdtest.NewFreezer(t, strings.TrimPrefix(eps[0], "http://"))
	cmd := exec.Command(os.Args[0], "--endpoints", front.Endpoint(), "--run", "1m", "--ttl", "1s")
	cmd.Env = append(os.Environ(), asProgram+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out, stderr syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan int, 1)
	go func() {
		_ = cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
	}()
	waitForOutput(t, &out, "running for 1m0s", exited)
	nodes := nodePIDs(t, out.String())

	front.Freeze()
	ctrlC := func() { require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)) }
	ctrlC()
	waitForOutput(t, &stderr, "Ctrl-C again kills them at once\n", exited)
	began := time.Now()
	ctrlC()
	select {
	case code := <-exited:
		require.Equal(t, exitStopped, code, stderr.String())
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("no exit 30 s after the second Ctrl-C; stderr:\n%s", stderr.String())
	}
	require.Less(t, time.Since(began), 2*time.Second, "the second Ctrl-C did not cut the stop short")
	require.True(t, strings.HasSuffix(stderr.String(), "failover: interrupted twice: the nodes were killed, nothing is checked\n"), stderr.String())
	for _, pid := range nodes {
		// Killed and reaped: no such process (a pid reused since would
		// be another's, not in the group this test made).
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "node %d still runs", pid)
	}
}

// nodePIDs are the pids the run printed for its nodes.
func nodePIDs(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, m := range regexp.MustCompile(`node [AB] \(pid (\d+)\)`).FindAllStringSubmatch(out, -1) {
		pid, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		pids = append(pids, pid)
	}
	require.Len(t, pids, 2, out)
	return pids
}
