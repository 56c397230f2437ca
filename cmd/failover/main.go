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
// or setup error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, self)
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
       checked

flags:
`

// nodeFlags are the flags the parent passes its nodes: not the user's.
var nodeFlags = []string{"node", "prefer", "share"}

// run is the whole program: the parent, or a node when --node is given.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, cmd command) int {
	fs := flag.NewFlagSet("failover", flag.ContinueOnError)
	// The flag package prints its errors and the whole list itself:
	// --help prints the user's flags, and an error is one line.
	fs.SetOutput(io.Discard)
	var (
		endpoints = fs.String("endpoints", "", "etcd client URLs, comma-separated (default: start an embedded etcd)")
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
	if *ttl < time.Second || *tick <= 0 || *timeout <= 0 || *runFor < 0 || *after < 0 {
		fmt.Fprintln(stderr, "failover: --ttl must be at least 1s; --tick and --timeout positive; --run and --after not negative")
		return exitSetup
	}
	eps := splitList(*endpoints)
	for i, ep := range eps {
		if !strings.Contains(ep, "://") {
			eps[i] = "http://" + ep
		}
	}

	if *nodeName != "" {
		cfg := nodeConfig{
			name:      *nodeName,
			endpoints: eps,
			prefix:    *prefix,
			ttl:       int((*ttl + time.Second - 1) / time.Second),
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

	if *pchannels < 2 {
		fmt.Fprintln(stderr, "failover: --pchannels must be at least 2")
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
	}, cmd, stdout, stderr)
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
