package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lowwater/lowwater/examples/kafka"
	"github.com/lowwater/lowwater/internal/testkit/cmdtest"
	"github.com/lowwater/lowwater/internal/testkit/etcdtest"
	"github.com/lowwater/lowwater/internal/testkit/syncbuf"
)

// asNode makes the test binary a node process: TestDemo runs it again with
// this variable set, instead of building the program.
const asNode = "LOWWATER_KAFKADEMO_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(asNode) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, nil))
	}
	goleak.VerifyTestMain(m)
}

func testBinary(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asNode+"=1")
	return cmd
}

// shortDemo is the demo in a short form: a few SIGKILL rounds over a few
// thousand records.
func shortDemo(catalog string) config {
	return config{
		records: 3000, rounds: 3, seed: 7, partitions: 2, vchannels: 8,
		produceFor: 4500 * time.Millisecond, killMin: 700 * time.Millisecond, killMax: 1200 * time.Millisecond,
		autocommit: 300 * time.Millisecond, timeout: 20 * time.Second, catalog: catalog,
	}
}

// TestDemo: lowwater must lose nothing and replay within the bound at
// every kill; the naive node's figures are reported.
func TestDemo(t *testing.T) { checkDemo(t, shortDemo(catalogBolt)) }

// TestDemoWithFewRecords: a partition that gets no record has an end of
// 0, where the demo indexed past its list of what was produced. The
// catalog is a file named on the command line, which a second run finds
// holding the first one's checkpoints, and refuses.
func TestDemoWithFewRecords(t *testing.T) {
	spec, err := parseCatalog("bolt:" + filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := shortDemo(spec)
	cfg.records, cfg.rounds, cfg.partitions, cfg.produceFor = 1, 1, 4, 100*time.Millisecond
	checkDemo(t, cfg)
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	_, err = runDemo(t.Context(), cfg, testBinary, &out, &stderr)
	if err == nil || !strings.Contains(err.Error(), "holds checkpoints of an earlier run, or of one running now") {
		t.Fatalf("a second run on the same catalog: %v", err)
	}
}

func TestParseCatalog(t *testing.T) {
	for spec, want := range map[string]string{
		"bolt":                  "bolt",
		"bolt:/x/c.db":          "bolt:/x/c.db",
		"etcd://127.0.0.1:2379": "etcd://127.0.0.1:2379/" + etcdPrefix,
		"etcd://h:1,h:2/mine":   "etcd://h:1,h:2/mine",
	} {
		if got, err := parseCatalog(spec); err != nil || got != want {
			t.Errorf("parseCatalog(%q) = %q, %v; want %q", spec, got, err, want)
		}
	}
	if got, err := parseCatalog("bolt:c.db"); err != nil || !filepath.IsAbs(strings.TrimPrefix(got, "bolt:")) {
		t.Errorf("parseCatalog(bolt:c.db) = %q, %v; want an absolute path", got, err)
	}
}

// TestDemoEtcd: the same with the checkpoints in etcd (embedded in the
// test, as the demo's users bring their own).
func TestDemoEtcd(t *testing.T) {
	endpoints := etcdtest.Start(t)
	cfg := shortDemo(etcdScheme + strings.TrimPrefix(endpoints[0], "http://") + "/kafkademo-test")
	cfg.rounds, cfg.records, cfg.produceFor = 2, 2000, 3*time.Second
	checkDemo(t, cfg)
}

func checkDemo(t *testing.T, cfg config) {
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	sum, err := runDemo(t.Context(), cfg, testBinary, &out, &stderr)
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.String(), stderr.String())
	}
	t.Logf("\n%s", out.String())
	if len(sum.rounds) != cfg.rounds || sum.records != cfg.records {
		t.Fatalf("%d rounds over %d records, want %d over %d", len(sum.rounds), sum.records, cfg.rounds, cfg.records)
	}
	for i, r := range sum.rounds {
		lw := r.byKind[approachLowwater]
		if lw.lost != 0 || lw.replay > lw.bound {
			t.Errorf("round %d: lowwater lost %d, replayed %d over a bound of %d", i+1, lw.lost, lw.replay, lw.bound)
		}
	}
	lw, nv := sum.byKind[approachLowwater], sum.byKind[approachNaive]
	if !lw.finished || lw.lostEnd != 0 || lw.duplicates > lw.bound {
		t.Errorf("lowwater: finished %v, lost %d, duplicates %d, bound %d", lw.finished, lw.lostEnd, lw.duplicates, lw.bound)
	}
	if !sum.ok() {
		t.Errorf("problems: %q", sum.problems)
	}
	if !strings.Contains(out.String(), "PASS") {
		t.Errorf("no PASS in the output")
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if len(line) > 80 {
			t.Errorf("line of %d columns: %q", len(line), line)
		}
	}
	t.Logf("naive: lost %d, duplicates %d; lowwater: duplicates %d, bound %d", nv.lostEnd, nv.duplicates, lw.duplicates, lw.bound)
}

func TestHelp(t *testing.T) { cmdtest.Help(t, runIt(t), nodeFlags) }

// An etcd that is not there is said at once, with why, not after the
// wait for an answer (--timeout) as a bare deadline.
func TestAnEtcdThatIsNotThereIsSaidAtOnce(t *testing.T) {
	cmdtest.EtcdNotThere(t, runIt(t), func(addr string) []string { return []string{"--catalog", "etcd://" + addr + "/x"} })
}

// runIt runs the command in this process, as cmdtest calls it.
func runIt(t *testing.T) cmdtest.Run {
	return func(args []string, stdout, stderr io.Writer) int {
		return run(t.Context(), args, nil, stdout, stderr, testBinary)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--records=0"},
		{"--catalog=zk"},
		{"--catalog=bbolt"},
		{"--catalog=memory"},
		{"--catalog=etcd://"},
		{"--kill-after=1s"},
		{"--kill-after=2s-1s"},
		{"--autocommit=0s"},
		{"extra"},
		{"--no-such-flag"},
		{"--node=lowwater"}, // no brokers or dir
		{"--vchannels=40000"},
	} {
		var out, stderr bytes.Buffer
		if code := run(t.Context(), args, nil, &out, &stderr, testBinary); code != exitSetup {
			t.Errorf("%q: exit %d, want %d; stderr: %s", args, code, exitSetup, stderr.String())
		}
	}
}

// A damaged catalog exits 3, as the demo's does; an interrupt exits 130,
// with one line, and is not a setup error.
func TestDamagedAndInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "damaged.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xa5}, 32<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, stderr bytes.Buffer
	if code := run(t.Context(), []string{"--catalog=bolt:" + path}, nil, &out, &stderr, testBinary); code != exitDamaged ||
		!strings.Contains(stderr.String(), "checkpoint store is damaged") {
		t.Errorf("damaged catalog: exit %d, want %d; stderr: %s", code, exitDamaged, stderr.String())
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // as SIGINT does, through signal.NotifyContext
	out.Reset()
	stderr.Reset()
	const want = "kafkademo: interrupted: the nodes are stopped, nothing is checked\n"
	if code := run(ctx, nil, nil, &out, &stderr, testBinary); code != exitStopped || stderr.String() != want {
		t.Errorf("interrupted: exit %d, want %d; stderr %q, want %q", code, exitStopped, stderr.String(), want)
	}
}

// TestEvaluate feeds the checks what a broken node would leave behind: one
// partition of ten records, a kill, then the end.
func TestEvaluate(t *testing.T) {
	prod := produced{{0, 1, 0, 1, 0, 1, 0, 1, 0, 1}}
	sink := func(pairs ...int) map[kafka.RecordID]uint32 {
		m := make(map[kafka.RecordID]uint32)
		for i := 0; i < len(pairs); i += 2 {
			m[kafka.RecordID{Offset: int64(pairs[i])}] = uint32(pairs[i+1])
		}
		return m
	}
	all := func(n int, extra ...int) []int {
		var pairs []int
		for off := range 10 {
			pairs = append(pairs, off, n)
		}
		for i := 0; i < len(extra); i += 2 {
			pairs[2*extra[i]+1] = extra[i+1]
		}
		return pairs
	}
	snap := func(stored int64, lw map[kafka.RecordID]uint32) snapshot {
		return snapshot{stored: []int64{stored}, committed: []int64{0},
			sinks: map[string]map[kafka.RecordID]uint32{approachLowwater: lw, approachNaive: sink()}}
	}
	finished := map[string]bool{approachLowwater: true}
	for _, tc := range []struct {
		name  string
		kill  snapshot
		final snapshot
		want  string // a fragment of the one problem expected, "" for none
	}{
		// At the kill 0-4 and 6 are in the sink, stored 4: the restart
		// writes 4 and 6 again. Bound 2 (4 and 6); lag 1 (4: below 5, the
		// first record missing).
		{"ok", snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 6, 1)), snap(10, sink(all(1, 4, 2, 6, 2)...)), ""},
		{"stored past a missing record", snap(6, sink(0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 6, 1)),
			snap(10, sink(all(1)...)), "stored checkpoint is above 1 records"},
		{"replay over the bound", snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1, 4, 1, 6, 1)),
			snap(10, sink(all(1, 2, 2, 4, 2, 6, 2)...)), "over the bound 2"},
		{"lost at the end", snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1)),
			snap(10, sink(all(1, 9, 0)...)), "lowwater lost 1 records"},
		{"duplicate without a restart", snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1)),
			snap(10, sink(all(1, 8, 2)...)), "1 duplicates, 0 of them after a restart"},
		{"not at the end", snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1)),
			snap(9, sink(all(1)...)), "stored checkpoint is 9 at the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum := evaluate(prod, []snapshot{tc.kill}, tc.final, []int64{10}, finished)
			switch {
			case tc.want == "" && !sum.ok():
				t.Errorf("problems %q", sum.problems)
			case tc.want != "" && (len(sum.problems) != 1 || !strings.Contains(sum.problems[0], tc.want)):
				t.Errorf("problems %q, want one with %q", sum.problems, tc.want)
			}
			if tc.name == "ok" {
				lw := sum.rounds[0].byKind[approachLowwater]
				if lw != (figures{bound: 2, lag: 1, replay: 2}) {
					t.Errorf("figures %+v, want bound 2, lag 1, replay 2", lw)
				}
				if nv := sum.byKind[approachNaive]; nv.lostEnd != 10 {
					t.Errorf("naive lost %d, want 10", nv.lostEnd)
				}
			}
		})
	}
	// A last run cut by --timeout: what it did not read is not lost.
	sum := evaluate(prod, []snapshot{snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1))}, snap(4, sink(all(1, 8, 0, 9, 0)...)), []int64{10},
		map[string]bool{approachNaive: true})
	var out bytes.Buffer
	sum.print(&out, config{})
	if want := "lowwater's last run did not read to the end of the topic within --timeout"; len(sum.problems) != 1 ||
		sum.problems[0] != want || !strings.Contains(out.String(), "lowwater: lost 0 at the kills, 2 more of 10 unread, unfinished; duplicates") {
		t.Errorf("an unfinished last run: problems %q, want only %q; summary:\n%s", sum.problems, want, out.String())
	}

	// A stored checkpoint lower than at the previous kill.
	k1 := snap(4, sink(0, 1, 1, 1, 2, 1, 3, 1))
	k2 := snap(3, sink(0, 1, 1, 1, 2, 1, 3, 1))
	sum = evaluate(prod, []snapshot{k1, k2}, snap(10, sink(all(1)...)), []int64{10}, finished)
	if len(sum.problems) != 1 || !strings.Contains(sum.problems[0], "went down from 4 to 3") {
		t.Errorf("problems %q, want the regression", sum.problems)
	}
}

// TestNaiveLossCountedOnce: a record the naive node lost stays lost at
// every later kill, and counts in the round it was lost only.
func TestNaiveLossCountedOnce(t *testing.T) {
	prod := produced{{0, 1, 0, 1}}
	naive := map[string]map[kafka.RecordID]uint32{
		approachLowwater: {{Offset: 0}: 1, {Offset: 1}: 1, {Offset: 2}: 1, {Offset: 3}: 1},
		approachNaive:    {{Offset: 0}: 1, {Offset: 2}: 1},
	}
	kill := snapshot{stored: []int64{4}, committed: []int64{3}, sinks: naive}
	final := snapshot{stored: []int64{4}, committed: []int64{4}, sinks: map[string]map[kafka.RecordID]uint32{
		approachLowwater: naive[approachLowwater],
		approachNaive:    {{Offset: 0}: 1, {Offset: 2}: 1, {Offset: 3}: 1},
	}}
	sum := evaluate(prod, []snapshot{kill, kill}, final, []int64{4}, map[string]bool{approachLowwater: true})
	if !sum.ok() {
		t.Fatalf("problems %q", sum.problems)
	}
	got := []int{sum.rounds[0].byKind[approachNaive].lost, sum.rounds[1].byKind[approachNaive].lost}
	if nv := sum.byKind[approachNaive]; got[0] != 1 || got[1] != 0 || nv.lost != 1 || nv.lostEnd != 1 {
		t.Errorf("naive lost %v by round, %d in all, %d at the end; want [1 0], 1, 1", got, nv.lost, nv.lostEnd)
	}
}

// TestAwaitLastLine: a node that prints its line and exits at once is
// heard, though its output ends at the same moment.
func TestAwaitLastLine(t *testing.T) {
	d := &demo{cfg: config{timeout: 10 * time.Second}, stderr: &bytes.Buffer{},
		cmd: func([]string) *exec.Cmd { return exec.Command("sh", "-c", "echo "+lineDone) }}
	for i := range 20 {
		p, err := d.start(approachNaive, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-p.eof // the line and the end of output are both waiting
		if err := p.await(t.Context(), lineDone, d.cfg.timeout); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if err := p.exit(); err != nil {
			t.Fatal(err)
		}
	}
}

// A bad flag is refused with one line that names it and what it wants.
func TestUsageSaysWhy(t *testing.T) {
	const forms = "bolt, bolt:PATH or etcd://HOST:PORT[,HOST:PORT][/PREFIX]"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kill-after=-1s-2s"}, `kafkademo: --kill-after "-1s-2s": want MIN-MAX, two durations with 0 <= MIN <= MAX, as 500ms-2s` + "\n"},
		{[]string{"--kill-after=2s-1s"}, `kafkademo: --kill-after "2s-1s": want MIN-MAX, two durations with 0 <= MIN <= MAX, as 500ms-2s` + "\n"},
		{[]string{"--kill-after=1s"}, `kafkademo: --kill-after "1s": want MIN-MAX, two durations with 0 <= MIN <= MAX, as 500ms-2s` + "\n"},
		// Only what the demo takes: not memory.
		{[]string{"--catalog=foo"}, `kafkademo: --catalog "foo": unknown kind "foo": want ` + forms + "\n"},
		{[]string{"--catalog=memory"}, `kafkademo: --catalog "memory": the nodes are processes of their own, killed each round; give ` + forms + "\n"},
		{[]string{"--catalog=c.db"}, `kafkademo: --catalog "c.db": no kind; for a bbolt file, give bolt:c.db` + "\n"},
		// Credentials: refused, and the password never quoted.
		{[]string{"--catalog=etcd://u:s3/cr@t@127.0.0.1:2379/p"}, `kafkademo: --catalog: invalid catalog URL: a user and password do not go ` +
			`in the URL, where every user of the machine sees them: "etcd://…@127.0.0.1:2379/p"; the demo does not log in to etcd: ` +
			`give it one without authentication` + "\n"},
		{[]string{"--catalog=ETCD://u:s3cr@t@h:1"}, `kafkademo: --catalog "ETCD://…@h:1": unknown kind "ETCD": want ` + forms + "\n"},
	} {
		var out, stderr bytes.Buffer
		if code := run(t.Context(), tc.args, nil, &out, &stderr, testBinary); code != exitSetup || stderr.String() != tc.want {
			t.Errorf("%q: exit %d, stderr %q; want %d, %q", tc.args, code, stderr.String(), exitSetup, tc.want)
		}
	}
}

// An etcd that takes connections and never answers runs out of
// --timeout, and the error says what a probe of it finds, as the lowwater
// tool's and the demo's do.
func TestASilentEtcdIsExplained(t *testing.T) {
	addr := cmdtest.SilentListener(t)
	var out bytes.Buffer
	var stderr syncbuf.Buffer
	code := run(t.Context(), []string{"--catalog", "etcd://" + addr + "/x", "--timeout", "1s"}, nil, &out, &stderr, testBinary)
	want := "kafkademo: catalog: no answer within --timeout 1s: etcdcatalog: load all: context deadline exceeded; " + addr +
		" takes connections but answers no request within 1s: is etcd stopped, or without a quorum?\n"
	if code != exitSetup || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitSetup, want)
	}
}

// An etcd that stops answering mid-run ends the reads of each round
// within --timeout, explained: they had no deadline, and the demo ran on,
// silent, past every bound, until a Ctrl-C.
func TestACatalogReadMidRunIsBounded(t *testing.T) {
	addr := cmdtest.SilentListener(t)
	d := &demo{cfg: config{catalog: "etcd://" + addr + "/x", timeout: time.Second, partitions: 1}, dir: t.TempDir()}
	read := make(chan error, 1)
	go func() {
		_, err := d.stored(t.Context()) // the run's context: no deadline
		read <- err
	}()
	select {
	case err := <-read:
		want := "no answer within --timeout 1s: etcdcatalog: load all: context deadline exceeded; " + addr +
			" takes connections but answers no request within 1s: is etcd stopped, or without a quorum?"
		if err == nil || err.Error() != want {
			t.Errorf("stored = %v; want %q", err, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the read of a silent etcd has not returned in 20 s, with --timeout 1s")
	}
}

// An interrupt while the nodes run to the end is the caller's to say,
// once: finish prints nothing of it.
func TestFinishInterruptedSaysNothing(t *testing.T) {
	var stderr bytes.Buffer
	// Nodes that never print their line: only the interrupt ends the wait.
	d := &demo{cfg: config{timeout: time.Minute}, stderr: &stderr,
		cmd: func([]string) *exec.Cmd { return exec.Command("cat") }}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := d.finish(ctx, []int64{1})
	if !errors.Is(err, context.Canceled) || stderr.Len() != 0 {
		t.Errorf("finish = %v, stderr %q; want context.Canceled and nothing printed", err, stderr.String())
	}
}

// A run killed with SIGKILL leaves its directory; the next run removes
// it, says so, and removes its own.
func TestTheDirectoryOfAKilledRunIsRemoved(t *testing.T) {
	tmp := cmdtest.KilledRun(t, runDirPrefix, "node-a.db")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, stderr bytes.Buffer
	const want = "kafkademo: removed the directory of an earlier run that was killed\n" +
		"kafkademo: interrupted: the nodes are stopped, nothing is checked\n"
	if code := run(ctx, nil, nil, &out, &stderr, testBinary); code != exitStopped || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), exitStopped, want)
	}
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("left in the temporary directory: %v, %v", left, err)
	}
}
