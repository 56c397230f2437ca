package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/status"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/rundir"
)

// runDirPrefix names the directories of the runs' embedded etcd, in the
// system's temporary directory (package rundir).
const runDirPrefix = "lowwater-failover-"

// parentConfig is the demo's command line.
type parentConfig struct {
	endpoints []string
	prefix    string
	pchannels int
	ttl       time.Duration
	run       time.Duration // both nodes running, before the kill
	after     time.Duration // the survivor running, after the takeover
	tick      time.Duration
	timeout   time.Duration // bounds each wait for the nodes
	verbose   bool
	// kill, once closed, has the nodes killed at once (a second Ctrl-C).
	kill <-chan struct{}
}

// command builds the command line of a node process: this program again,
// or, in its test, the test binary.
type command func(args []string) *exec.Cmd

// proc is one node process.
type proc struct {
	name   string
	prefer []string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	eof    chan struct{} // closed when its output ended
	exited bool
}

// parent runs the demo: etcd, two nodes, the kill, the checks.
type parent struct {
	cfg    parentConfig
	cmd    command
	out    io.Writer
	stderr io.Writer
	began  time.Time
	lines  *collector
	killed bool // a node was killed on cfg.kill
}

func runParent(ctx context.Context, cfg parentConfig, cmd command, stdout, stderr io.Writer) int {
	p := &parent{cfg: cfg, cmd: cmd, out: stdout, stderr: stderr, began: time.Now(), lines: newCollector()}
	code, err := p.run(ctx)
	switch {
	case err != nil && ctx.Err() != nil && p.killed:
		fmt.Fprintln(stderr, "failover: interrupted twice: the nodes were killed, nothing is checked")
		return exitStopped
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(stderr, "failover: interrupted: the nodes are stopped, nothing is checked")
		return exitStopped
	case err != nil:
		fmt.Fprintln(stderr, "failover:", err)
	}
	return code
}

// outWidth is the width of the output in columns: a terminal's default.
const outWidth = 80

// printf prints a line after the time since the start, broken at spaces
// into lines of outWidth columns at most, each after the first indented
// two columns deeper than the line's text.
func (p *parent) printf(format string, args ...any) {
	stamp := fmt.Sprintf("%6.2fs  ", time.Since(p.began).Seconds())
	msg := fmt.Sprintf(format, args...)
	text := strings.TrimLeft(msg, " ")
	lead := stamp + msg[:len(msg)-len(text)]
	var b strings.Builder
	line := lead
	for i, word := range strings.Fields(text) {
		if i > 0 && len(line)+1+len(word) > outWidth {
			b.WriteString(line + "\n")
			line = strings.Repeat(" ", len(lead)+2) + word
			continue
		}
		if i > 0 {
			line += " "
		}
		line += word
	}
	b.WriteString(line + "\n")
	_, _ = io.WriteString(p.out, b.String())
}

func (p *parent) run(ctx context.Context) (int, error) {
	cfg := p.cfg
	endpoints := cfg.endpoints
	if len(endpoints) == 0 {
		dir, err := rundir.New(runDirPrefix)
		if err != nil {
			return exitSetup, err
		}
		defer dir.Remove()
		if note := dir.SweptNote(); note != "" {
			fmt.Fprintln(p.stderr, "failover:", note)
		}
		e, url, err := startEtcd(dir.Path)
		if err != nil {
			return exitSetup, err
		}
		defer e.Close()
		endpoints = []string{url}
		p.printf("etcd: embedded at %s, data in %s", url, dir.Path)
	} else {
		p.printf("etcd: %s", strings.Join(endpoints, ","))
		// An etcd that is not there is said at once, and why; the
		// client would retry until --timeout, then say only that.
		if err := etcdaccess.AnyListens(ctx, hostPorts(endpoints)); err != nil {
			return exitSetup, fmt.Errorf("etcd: %w", err)
		}
	}
	cli, err := clientv3.New(clientConfig(endpoints))
	if err != nil {
		return exitSetup, fmt.Errorf("etcd client: %w", err)
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	resp, err := cli.Get(rctx, "\x00")
	cancel()
	if err != nil {
		return exitSetup, firstRequestError(ctx, endpoints, cfg.timeout, err)
	}
	startRev := resp.Header.Revision + 1

	names := pchannelNames(cfg.pchannels)
	ttl := int(cfg.ttl / time.Second) // whole seconds: checkTTL
	p.printf("prefix %q, %d pchannels, session TTL %ds, two nodes", cfg.prefix, len(names), ttl)
	half := (len(names) + 1) / 2
	a, b := &proc{name: "A", prefer: names[:half]}, &proc{name: "B", prefer: names[half:]}
	defer func() {
		// Every wait of the run ends with ctx: this is said as soon as
		// it ends, while the nodes stop.
		if ctx.Err() != nil && (a.running() || b.running()) {
			fmt.Fprintf(p.stderr, "failover: interrupted: the nodes flush and release their pchannels, for up to\n"+
				"  about %v with etcd silent; Ctrl-C again kills them at once\n", nodeStopBound(cfg.ttl))
		}
		p.reap(a, b)
	}()
	for _, n := range []*proc{a, b} {
		args := []string{"--node", n.name, "--endpoints", strings.Join(endpoints, ","), "--prefix", cfg.prefix,
			"--ttl", (time.Duration(ttl) * time.Second).String(), "--share", strings.Join(names, ","), "--prefer", strings.Join(n.prefer, ","),
			"--tick", cfg.tick.String()}
		if err := p.start(n, args); err != nil {
			return exitSetup, err
		}
	}

	// Each node owns its half, then stands by for the other half.
	if err := p.await(ctx, "both nodes ready", func(ls []line) bool {
		return has(ls, func(l line) bool { return l.Ev == evReady && l.Node == "A" }) &&
			has(ls, func(l line) bool { return l.Ev == evReady && l.Node == "B" })
	}, a, b); err != nil {
		return exitSetup, err
	}
	for _, n := range []*proc{a, b} {
		var owned []string
		for _, l := range p.lines.all() {
			if l.Node == n.name && l.Ev == evOwned {
				owned = append(owned, fmt.Sprintf("%s (term %d)", l.PCh, l.Term))
			}
		}
		ready := first(p.lines.all(), func(l line) bool { return l.Ev == evReady && l.Node == n.name })
		p.printf("node %s (pid %d) owns %s; stands by for the others", n.name, ready.PID, strings.Join(owned, ", "))
		if _, err := io.WriteString(n.stdin, cmdStandby+"\n"); err != nil {
			return exitSetup, fmt.Errorf("node %s: %w", n.name, err)
		}
	}
	p.printf("running for %v", cfg.run)
	if err := pause(ctx, cfg.run); err != nil {
		return exitSetup, err
	}
	p.progress("A", "B")

	// The kill: no flush, no release; A's owner keys stay until its
	// session's lease expires.
	killAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return exitSetup, fmt.Errorf("kill node A: %w", err)
	}
	p.reap(a)
	deadAcks := lastAcks(p.lines.all(), "A")
	var acked []string
	for _, name := range a.prefer {
		acked = append(acked, name+" "+valueString(deadAcks[name]))
	}
	p.printf("SIGKILL node A; the last checkpoints it acknowledged: %s", strings.Join(acked, ", "))

	// B's Owns return once A's lease expires; each taken-over pchannel
	// recovers and saves again.
	savingAgain := func(ls []line, pch string) (line, bool) {
		for _, l := range ls {
			if l.Node == "B" && l.PCh == pch && l.Ev == evPersisted && l.time().After(killAt) {
				return l, true
			}
		}
		return line{}, false
	}
	if err := p.await(ctx, "node B saving node A's pchannels", func(ls []line) bool {
		for _, name := range a.prefer {
			if _, ok := savingAgain(ls, name); !ok {
				return false
			}
		}
		return true
	}, b); err != nil {
		return failedWait(endpoints, err)
	}
	ls := p.lines.all()
	var takeover time.Duration
	var each []string
	for _, name := range a.prefer {
		owned := first(ls, func(l line) bool { return l.Node == "B" && l.PCh == name && l.Ev == evOwned })
		rec := first(ls, func(l line) bool { return l.Node == "B" && l.PCh == name && l.Ev == evRecovered })
		saved, _ := savingAgain(ls, name)
		p.printf("node B owns %s (term %d) %v after the kill; recovered %s (A acknowledged %s); saving again %v after the kill (%s)",
			name, owned.Term, ms(owned.time().Sub(killAt)), valueString(rec.Value), valueString(deadAcks[name]),
			ms(saved.time().Sub(killAt)), valueString(saved.Value))
		d := saved.time().Sub(killAt)
		takeover = max(takeover, d)
		each = append(each, name+" "+ms(d).String())
	}
	p.printf("takeover: node A's pchannels saving again on node B %v after node A's death (%s)", ms(takeover), strings.Join(each, ", "))
	p.printf("         (node A's lease outlived it by up to the %ds TTL, or etcd's minimum TTL if larger, 2s with its default election timeout: keep-alives renew it every TTL/3, and etcd revokes expired leases every 500ms)", ttl)

	p.printf("running for %v more", cfg.after)
	if err := pause(ctx, cfg.after); err != nil {
		return exitSetup, err
	}
	if _, err := io.WriteString(b.stdin, cmdStop+"\n"); err != nil {
		return exitSetup, fmt.Errorf("node B: %w", err)
	}
	if err := p.await(ctx, "node B to stop", func(ls []line) bool {
		return has(ls, func(l line) bool { return l.Node == "B" && l.Ev == evBye })
	}, b); err != nil {
		return failedWait(endpoints, err)
	}
	if err := p.reap(b); err != nil {
		return exitViolated, fmt.Errorf("node B: %w", err)
	}
	p.progress("B")
	var flushed []string
	for _, l := range p.lines.all() {
		if l.Node == "B" && l.Ev == evStopped {
			flushed = append(flushed, l.PCh+" "+valueString(l.Value))
		}
	}
	p.printf("node B stopped gracefully, its pchannels flushed and released: %s", strings.Join(flushed, ", "))

	ok, err := p.verify(ctx, cli, names, a, b, startRev, killAt)
	if err != nil {
		return exitSetup, err
	}
	if !ok {
		p.printf("FAIL")
		return exitViolated, nil
	}
	p.printf("PASS: no stored checkpoint went backward, none acknowledged was lost; takeover in %v", ms(takeover))
	return exitOK, nil
}

// maxPChannels bounds --pchannels. The names reach each node on its
// command line, all in one argument (--share), and Linux refuses to start
// a process with an argument over 128 KiB (MAX_ARG_STRLEN), which the
// names pass beyond some 20000 pchannels. 1000 (5.9 KB) is far within
// it, and already more than two nodes on one etcd get ready within the
// default --timeout: the run shows a takeover, it is no load test.
const maxPChannels = 1000

// pchannelNames are the names of n pchannels, as the nodes get them.
func pchannelNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "p" + strconv.Itoa(i)
	}
	return names
}

// start starts a node process and the reader of its output.
func (p *parent) start(n *proc, args []string) error {
	n.cmd = p.cmd(args)
	n.cmd.Stderr = p.stderr
	stdout, err := n.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if n.stdin, err = n.cmd.StdinPipe(); err != nil {
		return err
	}
	if err := n.cmd.Start(); err != nil {
		return fmt.Errorf("start node %s: %w", n.name, err)
	}
	n.eof = make(chan struct{})
	go func() {
		defer close(n.eof)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Node != n.name {
				fmt.Fprintf(p.stderr, "node %s: %s\n", n.name, sc.Text())
				continue
			}
			if p.cfg.verbose {
				fmt.Fprintf(p.stderr, "node %s: %s\n", n.name, sc.Text())
			}
			p.lines.add(l)
		}
	}()
	return nil
}

// running reports whether the node's process was started and not reaped.
func (n *proc) running() bool { return !n.exited && n.cmd != nil && n.cmd.Process != nil }

// nodeStopBound is how long a node takes at most to stop gracefully with
// etcd silent: its actors' flushes, side by side, then its releases,
// side by side, within the session's TTL (node.shutdown).
func nodeStopBound(ttl time.Duration) time.Duration { return actors.DefaultStopFlushTimeout + ttl }

// reap has node processes stop and waits for them to exit: it closes their
// input, which has each stop gracefully, then waits for them together,
// killing those that still run at the deadline or on cfg.kill. Each one's
// output is read to the end before.
func (p *parent) reap(nodes ...*proc) error {
	var running []*proc
	for _, n := range nodes {
		if n.running() {
			n.exited = true
			_ = n.stdin.Close()
			running = append(running, n)
		}
	}
	timer := time.NewTimer(p.cfg.timeout)
	defer timer.Stop()
	var errs []error
	for _, n := range running {
		select {
		case <-n.eof:
		case <-timer.C:
			p.killAll(running)
		case <-p.cfg.kill:
			p.killed = true
			p.killAll(running)
		}
		<-n.eof
		errs = append(errs, n.cmd.Wait())
	}
	return errors.Join(errs...)
}

// killAll kills the node processes with SIGKILL.
func (p *parent) killAll(nodes []*proc) {
	for _, n := range nodes {
		_ = n.cmd.Process.Kill()
	}
}

// failures says what the nodes reported failing or losing, for the error
// of a wait that ran out: a node that could not take a pchannel, or lost
// one, says so only in its lines.
func failures(ls []line) string {
	var out []string
	for _, l := range ls {
		if l.Ev == evFailed || l.Ev == evLost {
			out = append(out, fmt.Sprintf("node %s: %s %s: %s", l.Node, l.PCh, l.Ev, l.Err))
		}
	}
	if len(out) == 0 {
		return "no node reported a failure"
	}
	return strings.Join(out, "; ")
}

// await waits until cond holds on the lines received, up to the timeout;
// it gives up at once should a node in alive exit.
func (p *parent) await(ctx context.Context, what string, cond func([]line) bool, alive ...*proc) error {
	timer := time.NewTimer(p.cfg.timeout)
	defer timer.Stop()
	exited := make(chan string, len(alive))
	done := make(chan struct{})
	defer close(done)
	for _, n := range alive {
		go func() {
			select {
			case <-n.eof:
				exited <- n.name
			case <-done:
			}
		}()
	}
	for {
		ls, changed := p.lines.snapshot()
		if cond(ls) {
			return nil
		}
		select {
		case name := <-exited:
			if cond(p.lines.all()) {
				return nil
			}
			return fmt.Errorf("node %s exited while waiting for %s", name, what)
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("waited %v for %s (%s)", p.cfg.timeout, what, failures(p.lines.all()))
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// progress prints, per node, how many checkpoints each pchannel saved.
func (p *parent) progress(nodes ...string) {
	ls := p.lines.all()
	for _, node := range nodes {
		count := map[string]int{}
		var order []string
		for _, l := range ls {
			if l.Node == node && l.Ev == evPersisted {
				if count[l.PCh] == 0 {
					order = append(order, l.PCh)
				}
				count[l.PCh]++
			}
		}
		last := lastAcks(ls, node)
		var parts []string
		for _, pch := range order {
			parts = append(parts, fmt.Sprintf("%s %d saves, last %s", pch, count[pch], valueString(last[pch])))
		}
		if len(parts) > 0 {
			p.printf("node %s: %s", node, strings.Join(parts, "; "))
		}
	}
}

// pause waits d unless ctx ends first. It paces the demo; it synchronises
// nothing.
func pause(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// collector keeps the lines of both nodes in the order received.
type collector struct {
	mu      sync.Mutex
	lines   []line
	changed chan struct{} // closed, and replaced, on every line
}

func newCollector() *collector { return &collector{changed: make(chan struct{})} }

func (c *collector) add(l line) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, l)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *collector) snapshot() ([]line, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines[:len(c.lines):len(c.lines)], c.changed
}

func (c *collector) all() []line {
	ls, _ := c.snapshot()
	return ls
}

func has(ls []line, match func(line) bool) bool {
	_, ok := find(ls, match)
	return ok
}

func first(ls []line, match func(line) bool) line {
	l, _ := find(ls, match)
	return l
}

func find(ls []line, match func(line) bool) (line, bool) {
	for _, l := range ls {
		if match(l) {
			return l, true
		}
	}
	return line{}, false
}

// lastAcks returns the last checkpoint node acknowledged per pchannel.
func lastAcks(ls []line, node string) map[string]*int64 {
	last := map[string]*int64{}
	for _, l := range ls {
		if l.Node == node && l.Ev == evPersisted {
			last[l.PCh] = l.Value
		}
	}
	return last
}

func valueString(v *int64) string {
	if v == nil {
		return "none"
	}
	return "kafka:" + strconv.FormatInt(*v, 10)
}

func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// hostPorts are etcd client URLs' host:port, as etcdaccess takes them.
func hostPorts(endpoints []string) []string {
	hosts := make([]string, len(endpoints))
	for i, e := range endpoints {
		hosts[i] = hostPort(e)
	}
	return hosts
}

// hostPort is an etcd client URL's host:port ("http://h:p" or "h:p").
func hostPort(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		return rest
	}
	return endpoint
}

// failedWait is the outcome of a wait for the nodes that failed: a
// finding of the run (exit 1), unless etcd at endpoints has stopped
// answering meanwhile, which is the setup's (exit 2), said with what a
// probe of each endpoint finds. The nodes' own errors say only that
// their deadlines passed.
func failedWait(endpoints []string, err error) (int, error) {
	if why := (etcdaccess.Access{}).Diagnose(hostPorts(endpoints)); why != "" {
		return exitSetup, fmt.Errorf("%w; etcd: %s", err, why)
	}
	return exitViolated, err
}

// firstRequestError says why the parent's first request to etcd at
// endpoints, bounded by timeout, failed with err. The client's own error
// tells neither a silence from an answer nor why etcd was silent: a
// silence gets what a probe of each endpoint finds (etcdaccess), and an
// HTTP answer of something that is not etcd is called one.
func firstRequestError(ctx context.Context, endpoints []string, timeout time.Duration, err error) error {
	hosts := hostPorts(endpoints)
	switch {
	case ctx.Err() != nil:
		return err // interrupted: runParent says so
	case errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("etcd: no answer within --timeout %v: %w", timeout, err)
		if why := (etcdaccess.Access{}).Diagnose(hosts); why != "" {
			err = fmt.Errorf("%w; %s", err, why)
		}
		return err
	}
	if m := httpStatus.FindStringSubmatch(status.Convert(err).Message()); m != nil {
		return &notEtcdError{endpoints: hosts, status: m[1]}
	}
	return fmt.Errorf("etcd: %w", err)
}

// httpStatus finds the HTTP status in gRPC's error for an HTTP answer that
// is not gRPC's (google.golang.org/grpc/internal/transport).
var httpStatus = regexp.MustCompile(`unexpected HTTP status code received from server: (\d+ \([^)]*\))`)

// notEtcdError says that an endpoint answered over HTTP, but not as etcd
// does: something else listens there.
type notEtcdError struct {
	endpoints []string
	status    string // "404 (Not Found)"
}

func (e *notEtcdError) Error() string {
	return fmt.Sprintf("etcd: %s answered, but not as etcd: HTTP %s", strings.Join(e.endpoints, " or "), e.status)
}
