// Command failover shows pchannels changing hands on etcd. It starts an
// embedded etcd on 127.0.0.1 (or uses --endpoints), then two node processes
// (this program again, with --node) that share the pchannels through
// ownership: each owns half of them and waits, blocked in Own, for the
// others. Each owned pchannel gets an actor with WithOwnership and a
// simulated consumer; every checkpoint a node's catalog acknowledges is
// printed to the parent. The parent then kills node A with SIGKILL: once
// A's session lease expires, node B's blocked Owns return, and B recovers
// A's pchannels from their stored checkpoints and goes on saving. The
// parent prints the takeover and how long it took, then checks, against
// etcd's history of each checkpoint key, that no stored checkpoint went
// backward and none acknowledged was lost.
//
//	go run ./cmd/failover [--endpoints host:port,...] [--pchannels 4]
//	                      [--ttl 2s] [--run 4s] [--after 3s] [--verbose]
//
// Exit status: 0 when every check passed, 1 when one failed, 2 on a usage
// or setup error, 130 when interrupted (SIGINT, SIGTERM), with nothing
// checked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lowwater/lowwater/internal/cmdhelp"
)

// Exit codes.
const (
	exitOK       = 0
	exitViolated = 1
	exitSetup    = 2
	exitStopped  = 130 // interrupted (SIGINT, SIGTERM): nothing checked
)

// main stops the run on the first Ctrl-C (SIGINT, SIGTERM): the parent
// has its nodes stop gracefully, and a node flushes and releases its
// pchannels. A second one has the parent kill the nodes at once.
func main() {
	ctx, stop := context.WithCancel(context.Background())
	kill := make(chan struct{})
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		stop()
		<-signals
		close(kill)
	}()
	code := run(ctx, kill, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, self)
	signal.Stop(signals)
	stop()
	os.Exit(code)
}

// self runs this program again as a node.
func self(args []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}

// usageHead begins --help: what the program does, within 80 columns.
const usageHead = `failover: pchannels changing hands on etcd. An embedded etcd (or the
one at --endpoints), two node processes sharing the pchannels through
ownership, then a SIGKILL of node A: node B takes A's pchannels over once
A's session lease expires, and goes on saving from their stored
checkpoints. The checks, against etcd's history of each checkpoint key:
no stored checkpoint went backward, and none acknowledged was lost.

usage: failover [flags]

exit status:
  0  every check passed
  1  a check failed
  2  a bad flag, or a setup error (etcd not there, say)
  130  interrupted (Ctrl-C, SIGTERM): the nodes are stopped, nothing is
       checked; a second Ctrl-C kills them at once

flags:
`

// nodeFlags are the flags the parent passes its nodes: not the user's.
var nodeFlags = []string{"node", "prefer", "share"}

// run is the whole program: the parent, or a node when --node is given.
// ctx ends the run gracefully; kill, once closed, has the parent kill its
// nodes (nil: never).
func run(ctx context.Context, kill <-chan struct{}, args []string, stdin io.Reader, stdout, stderr io.Writer, cmd command) int {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	// The flag package prints its errors and the whole list itself:
	// --help prints the user's flags, and an error is one line.
	fs.SetOutput(io.Discard)
	var (
		endpoints = fs.String("endpoints", "", "etcd client URLs, plain http, comma-separated (default: start\nan embedded etcd)")
		prefix    = fs.String("prefix", "", "etcd key prefix (default: one of its own per run)")
		pchannels = fs.Int("pchannels", 4, "pchannels shared by the two nodes")
		ttl       = fs.Duration("ttl", 2*time.Second, "session TTL (whole seconds): how long a dead node\nkeeps its pchannels")
		runFor    = fs.Duration("run", 4*time.Second, "how long both nodes run before node A is killed")
		after     = fs.Duration("after", 3*time.Second, "how long node B runs after the takeover")
		tick      = fs.Duration("tick", 20*time.Millisecond, "interval between two rounds of vchannel progress")
		timeout   = fs.Duration("timeout", 20*time.Second, "bound on each wait for the nodes")
		verbose   = fs.Bool("verbose", false, "copy every line of the nodes to standard error")
		nodeName  = fs.String("node", "", "run as the node of this name (the parent passes it)")
		prefer    = fs.String("prefer", "", "node: pchannels to own first, comma-separated")
		share     = fs.String("share", "", "node: every pchannel the nodes share, comma-separated")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			cmdhelp.PrintFlags(stdout, fs, nodeFlags...)
			return exitOK
		}
		fmt.Fprintf(stderr, "failover: %v (--help lists the flags)\n", err)
		return exitSetup
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "failover: unexpected arguments %q\n", fs.Args())
		return exitSetup
	}
	if *tick <= 0 || *timeout <= 0 || *runFor < 0 || *after < 0 {
		fmt.Fprintln(stderr, "failover: --tick and --timeout must be positive; --run and --after not negative")
		return exitSetup
	}
	if err := checkTTL(*ttl); err != nil {
		fmt.Fprintln(stderr, "failover:", err)
		return exitSetup
	}
	eps := splitList(*endpoints)
	for i, ep := range eps {
		var err error
		if eps[i], err = endpointURL(ep); err != nil {
			fmt.Fprintln(stderr, "failover:", err)
			return exitSetup
		}
	}

	if *nodeName != "" {
		cfg := nodeConfig{
			name:      *nodeName,
			endpoints: eps,
			prefix:    *prefix,
			ttl:       int(*ttl / time.Second),
			pchannels: splitList(*share),
			prefer:    splitList(*prefer),
			tick:      *tick,
		}
		if len(cfg.endpoints) == 0 || cfg.prefix == "" || len(cfg.pchannels) == 0 {
			fmt.Fprintln(stderr, "failover: a node needs --endpoints, --prefix and --share")
			return exitSetup
		}
		err := runNode(ctx, cfg, stdin, stdout)
		switch {
		case err == nil:
			return exitOK
		case ctx.Err() != nil:
			return exitStopped // the parent, interrupted too, says so
		}
		fmt.Fprintf(stderr, "failover: node %s: %v\n", cfg.name, err)
		return exitSetup
	}

	if err := checkTTLFits(*ttl, *timeout); err != nil {
		fmt.Fprintln(stderr, "failover:", err)
		return exitSetup
	}
	if *pchannels < 2 || *pchannels > maxPChannels {
		fmt.Fprintf(stderr, "failover: --pchannels %d: must be from 2 to %d\n", *pchannels, maxPChannels)
		return exitSetup
	}
	if *prefix == "" {
		*prefix = "lowwater-failover-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return runParent(ctx, parentConfig{
		endpoints: eps,
		prefix:    *prefix,
		pchannels: *pchannels,
		ttl:       *ttl,
		run:       *runFor,
		after:     *after,
		tick:      *tick,
		timeout:   *timeout,
		verbose:   *verbose,
		kill:      kill,
	}, cmd, stdout, stderr)
}

// endpointURL is an --endpoints entry as etcd's client and the probes
// take it: http://host:port, given so (the scheme in any case, a
// trailing slash) or as host:port. Anything else fails at once, where
// etcd's client would try it until --timeout and then say only that the
// deadline passed: the demo has no TLS settings for https, and a path,
// a socket or a missing port are no etcd endpoint.
func endpointURL(ep string) (string, error) {
	given := ep
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return "", fmt.Errorf("--endpoints %s: %w", given, err)
	case !strings.EqualFold(u.Scheme, "http"):
		return "", fmt.Errorf("--endpoints %s: the demo speaks plain http to etcd, with no TLS settings: "+
			"give http://host:port or host:port", given)
	case u.Hostname() == "" || u.Port() == "" || u.Path != "" && u.Path != "/" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("--endpoints %s: want host:port, or http://host:port", given)
	}
	return "http://" + u.Host, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// ttlError is a --ttl that the run cannot use.
type ttlError struct {
	ttl time.Duration
	// timeout is --timeout, when the TTL is over maxTTL of it.
	timeout time.Duration
}

func (e *ttlError) Error() string {
	switch {
	case e.timeout != 0 && maxTTL(e.timeout) < time.Second:
		return fmt.Sprintf("--timeout %v leaves no --ttl: a TTL takes at most half of it, in whole seconds, and at "+
			"least 1s, so --timeout must be 2s at least", e.timeout)
	case e.timeout != 0:
		return fmt.Sprintf("--ttl %v is over %v, the most within half of --timeout %v: the takeover waits up to the "+
			"TTL for node A's lease to expire, and must end within --timeout", e.ttl, maxTTL(e.timeout), e.timeout)
	case e.ttl < time.Second:
		return fmt.Sprintf("--ttl %v: must be at least 1s", e.ttl)
	}
	lo := e.ttl.Truncate(time.Second)
	return fmt.Sprintf("--ttl %v is not whole seconds (etcd's lease TTLs are): give %v or %v", e.ttl, lo, lo+time.Second)
}

// checkTTL refuses a session TTL under a second, or not whole seconds:
// etcd grants a lease in seconds, and a node would have to round it.
func checkTTL(ttl time.Duration) error {
	if ttl < time.Second || ttl%time.Second != 0 {
		return &ttlError{ttl: ttl}
	}
	return nil
}

// checkTTLFits refuses, in the parent, a session TTL over maxTTL(timeout).
func checkTTLFits(ttl, timeout time.Duration) error {
	if ttl > maxTTL(timeout) {
		return &ttlError{ttl: ttl, timeout: timeout}
	}
	return nil
}

// maxTTL is the longest session TTL a run with --timeout timeout can show
// a takeover with. After the kill, the parent waits --timeout for node B
// to save node A's pchannels again; that waits on A's lease to expire, up
// to the TTL after the kill, then on etcd's expiry check (every 500ms),
// B's Owns, the recoveries and a first save each. Half of --timeout for
// the lease leaves the other half to those, on a loaded machine too.
// etcd itself refuses a lease over lease.MaxLeaseTTL (9e9 s); half the
// longest --timeout a time.Duration holds is below that, so this bound
// is the one that applies.
func maxTTL(timeout time.Duration) time.Duration { return (timeout / 2).Truncate(time.Second) }
