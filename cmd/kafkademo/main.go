// Command kafkademo proves lowwater behind a real Kafka wire protocol, and
// measures the usual alternative beside it.
//
// The parent process runs an in-process Kafka cluster (kfake, speaking the
// real protocol on 127.0.0.1) and a producer writing keyed records to it.
// Two consumer nodes run as child processes (this program again, with
// --node), each with the same workers flushing to a bbolt sink at their
// own pace (package examples/kafka):
//
//	lowwater  keeps each partition's low-water mark in a bbolt catalog
//	          (or, with --catalog etcd://host:port, in etcd)
//	naive     commits its polled offsets every second (kgo's autocommit)
//
// Each round SIGKILLs both at one random (seeded) moment, reads what each
// left behind (sink, catalog, group offsets) and restarts them; a last run
// reads to the end of the topic. Then it prints a table per round: for
// lowwater, the bound on the replay (records in the sink at or above the
// stored checkpoint at the kill), the replay measured (records written to
// the sink again after the restart) and the records lost; for naive, its
// replay and its losses. It exits 1 if lowwater lost a record or replayed
// more than the bound, or if its final checkpoints are not the topic's
// end; naive's losses are only reported.
//
//	go run ./cmd/kafkademo [--records 20000] [--rounds 6] [--seed 1]
//	  [--partitions 4] [--vchannels 16]
//	  [--produce-for 8s] [--kill-after 500ms-2s]
//	  [--autocommit 1s] [--verbose]
//	  [--catalog bolt|bolt:PATH|etcd://host:port[,host:port][/prefix]]
//
// Exit status: 0 when every check passed, 1 when one failed, 2 on a usage
// or setup error, 3 when the catalog is damaged, 130 when interrupted
// (SIGINT, SIGTERM), with nothing checked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lowwater/lowwater/examples/kafka"
	"github.com/lowwater/lowwater/internal/catalogurl"
	"github.com/lowwater/lowwater/internal/cmdhelp"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/persistence/etcdcatalog"
)

// Exit codes.
const (
	exitOK       = 0
	exitViolated = 1
	exitSetup    = 2
	exitDamaged  = 3   // the catalog is damaged (persistence.ErrCorruptStore, ErrCorruptRecord)
	exitStopped  = 130 // interrupted (SIGINT, SIGTERM): nothing checked
)

// The topic, and the naive node's consumer group.
const (
	topic      = "events"
	naiveGroup = "naive"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, self)
	stop()
	os.Exit(code)
}

// command builds the command line of a node process: this program again,
// or, in its test, the test binary.
type command func(args []string) *exec.Cmd

func self(args []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.Command(exe, args...)
}

// config is the command line.
type config struct {
	records    int
	rounds     int
	seed       uint64
	partitions int
	vchannels  int
	produceFor time.Duration
	killMin    time.Duration
	killMax    time.Duration
	autocommit time.Duration
	timeout    time.Duration
	catalog    string
	verbose    bool
}

// usageHead begins --help: what the program does, within 80 columns.
const usageHead = `kafkademo: lowwater behind a real Kafka wire protocol (kfake, in this
process), beside kgo's autocommit. Two consumer nodes, child processes
flushing keyed records to a bbolt sink at their workers' own pace, are
SIGKILLed at one seeded moment each round and restarted:
  lowwater  keeps each partition's low-water mark in its catalog
  naive     commits its polled offsets every --autocommit
A table per round: for lowwater, the bound on the replay (records in the
sink at or above the stored checkpoint at the kill), the replay measured,
the records lost; for naive, its replay and its losses.

usage: kafkademo [flags]

exit status:
  0  every check passed
  1  lowwater lost a record, replayed over its bound, or ended short of
     the topic's end (naive's losses are only reported)
  2  a bad flag, or a setup error (etcd not there, say)
  3  the catalog is damaged: a bbolt file truncated or with damaged pages,
     or a record in it (the lowwater tool's verify names it)
  130  interrupted (Ctrl-C, SIGTERM): the nodes are stopped, nothing is
       checked

flags:
`

// nodeFlags are the flags the parent passes its nodes: not the user's.
var nodeFlags = []string{"node", "brokers", "dir", "until"}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, cmd command) int {
	fs := flag.NewFlagSet("kafkademo", flag.ContinueOnError)
	// The flag package prints its errors and the whole list itself:
	// --help prints the user's flags, and an error is one line.
	fs.SetOutput(io.Discard)
	var cfg config
	fs.IntVar(&cfg.records, "records", 20000, "keyed records the producer writes")
	fs.IntVar(&cfg.rounds, "rounds", 6, "SIGKILL rounds before the last run")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the kill moments, the keys and the workers' pace")
	fs.IntVar(&cfg.partitions, "partitions", 4, "partitions of the topic (pchannels)")
	fs.IntVar(&cfg.vchannels, "vchannels", 16, "vchannels (workers) per partition")
	fs.DurationVar(&cfg.produceFor, "produce-for", 8*time.Second, "how long the producer takes to write the records")
	kill := fs.String("kill-after", "500ms-2s", "time from both nodes ready to the SIGKILL, a range")
	fs.DurationVar(&cfg.autocommit, "autocommit", time.Second, "naive node: interval of kgo's autocommit")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "bound on each wait for a node")
	fs.StringVar(&cfg.catalog, "catalog", catalogBolt, "lowwater's catalog: bolt (a file in the run's directory),\nbolt:PATH, or etcd://host:port[,host:port][/prefix]\n(prefix "+etcdPrefix+" if none)")
	fs.BoolVar(&cfg.verbose, "verbose", false, "copy the nodes' logs to standard error")
	var node nodeArgs
	fs.StringVar(&node.kind, "node", "", "run as a node: lowwater or naive (the parent passes it)")
	fs.StringVar(&node.brokers, "brokers", "", "node: the cluster's address")
	fs.StringVar(&node.dir, "dir", "", "node: the directory of the sink and catalog files")
	fs.StringVar(&node.until, "until", "", "node: end offsets, comma-separated by partition; stop there")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageHead)
			cmdhelp.PrintFlags(stdout, fs, nodeFlags...)
			return exitOK
		}
		fmt.Fprintf(stderr, "kafkademo: %v (--help lists the flags)\n", err)
		return exitSetup
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kafkademo: unexpected arguments %q\n", fs.Args())
		return exitSetup
	}
	var err error
	if cfg.killMin, cfg.killMax, err = parseRange(*kill); err != nil {
		fmt.Fprintf(stderr, "kafkademo: --kill-after %v\n", err)
		return exitSetup
	}
	if cfg.catalog, err = parseCatalog(cfg.catalog); err != nil {
		fmt.Fprintf(stderr, "kafkademo: %v\n", err)
		return exitSetup
	}
	if cfg.vchannels > math.MaxInt16 {
		// The parent keeps each record's vchannel in 16 bits.
		fmt.Fprintf(stderr, "kafkademo: --vchannels is at most %d\n", math.MaxInt16)
		return exitSetup
	}
	if cfg.records < 1 || cfg.rounds < 0 || cfg.partitions < 1 || cfg.vchannels < 1 ||
		cfg.produceFor < 0 || cfg.autocommit <= 0 || cfg.timeout <= 0 {
		fmt.Fprintln(stderr, "kafkademo: --records, --partitions, --vchannels, --autocommit and --timeout must be positive; --rounds and --produce-for not negative")
		return exitSetup
	}
	if node.kind != "" {
		err := runNode(ctx, cfg, node, stdin, stdout, stderr)
		switch {
		case err == nil:
			return exitOK
		case ctx.Err() != nil:
			return exitStopped // the parent, interrupted too, says so
		}
		fmt.Fprintf(stderr, "kafkademo: %s node: %v\n", node.kind, err)
		return exitSetup
	}
	sum, err := runDemo(ctx, cfg, cmd, stdout, stderr)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "kafkademo: interrupted: the nodes are stopped, nothing is checked")
		return exitStopped
	case errors.Is(err, persistence.ErrCorruptStore), errors.Is(err, persistence.ErrCorruptRecord):
		fmt.Fprintln(stderr, "kafkademo:", err)
		return exitDamaged
	default:
		fmt.Fprintln(stderr, "kafkademo:", err)
		return exitSetup
	}
	if !sum.ok() {
		return exitViolated
	}
	return exitOK
}

// parseRange reads "500ms-2s": two durations, the least first, neither
// negative. A minus sign is no part of either: it parts them.
func parseRange(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if ok {
		lo, err = time.ParseDuration(a)
		if err == nil {
			hi, err = time.ParseDuration(b)
		}
	}
	if !ok || err != nil || lo < 0 || hi < lo {
		return 0, 0, &rangeError{s}
	}
	return lo, hi, nil
}

// rangeError is a range that parseRange cannot read.
type rangeError struct{ spec string }

func (e *rangeError) Error() string {
	return fmt.Sprintf("%q: want MIN-MAX, two durations with 0 <= MIN <= MAX, as 500ms-2s", e.spec)
}

// nodeArgs are a node process's own flags.
type nodeArgs struct {
	kind, brokers, dir, until string
}

// Lines a node prints for the parent.
const (
	lineReady = "ready"
	lineDone  = "done"
)

// runNode is a child process: one consumer node until the parent kills it,
// or, with --until, until it reached the end of the topic. It also stops
// (gracefully) when its standard input ends: the parent holds it open, so
// a parent that died leaves no node behind.
func runNode(ctx context.Context, cfg config, a nodeArgs, stdin io.Reader, stdout, stderr io.Writer) error {
	if a.brokers == "" || a.dir == "" {
		return errors.New("a node needs --brokers and --dir")
	}
	ctx, orphaned := context.WithCancel(ctx)
	defer orphaned()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		orphaned()
	}()
	logger := zap.NewNop()
	if cfg.verbose {
		zc := zap.NewDevelopmentConfig()
		zc.OutputPaths = []string{"stderr"}
		l, err := zc.Build(zap.Fields(zap.String("node", a.kind)))
		if err != nil {
			return err
		}
		logger = l
	}
	nc := kafka.Config{
		Brokers:            []string{a.brokers},
		Topic:              topic,
		Partitions:         int32(cfg.partitions),
		VChannels:          cfg.vchannels,
		SinkPath:           sinkPath(a.dir, a.kind),
		CatalogPath:        catalogPath(a.dir),
		Pace:               pace(cfg.seed, cfg.vchannels),
		Ready:              func() { fmt.Fprintln(stdout, lineReady) },
		Logger:             logger,
		Group:              naiveGroup,
		AutoCommitInterval: cfg.autocommit,
	}
	if a.until != "" {
		for _, s := range strings.Split(a.until, ",") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("--until: %w", err)
			}
			nc.Until = append(nc.Until, n)
		}
	}
	var err error
	switch a.kind {
	case approachLowwater:
		cat, cerr := openCatalog(cfg.catalog, a.dir)
		if cerr != nil {
			return cerr
		}
		defer cat.Close()
		nc.Catalog = cat
		err = kafka.Run(ctx, nc)
	case approachNaive:
		err = kafka.RunNaive(ctx, nc)
	default:
		err = fmt.Errorf("unknown node kind %q", a.kind)
	}
	if err == nil {
		fmt.Fprintln(stdout, lineDone)
	}
	return err
}

// The catalog the demo places itself: a bbolt file in the run's
// directory.
const (
	catalogBolt = catalogurl.Bolt
	etcdScheme  = "etcd://"
	// etcdPrefix is the prefix of an etcd catalog given none: the demo's
	// own, not lowwater's default, which a real deployment may use.
	etcdPrefix = "kafkademo"
)

// catalogForms are the forms of --catalog the demo takes, for its errors.
const catalogForms = "bolt, bolt:PATH or etcd://HOST:PORT[,HOST:PORT][/PREFIX]"

// parseCatalog reads --catalog as the demo and the lowwater tool do
// (catalogurl), and gives it whole: a bbolt file's path made absolute and
// etcd's prefix said, so that the nodes, run elsewhere, read it alike.
func parseCatalog(spec string) (string, error) {
	switch kind, _, hasRest := strings.Cut(spec, ":"); {
	case kind == catalogurl.Bolt || kind == catalogurl.Memory || kind == catalogurl.Etcd:
	case !hasRest && strings.ContainsAny(spec, `/\.`):
		// No kind at all, and it looks like a path: the usual slip.
		return "", fmt.Errorf("--catalog %q: no kind; for a bbolt file, give bolt:%s", catalogurl.Redacted(spec), catalogurl.Redacted(spec))
	default:
		// catalogurl would offer memory too, which the demo refuses.
		return "", fmt.Errorf("--catalog %q: unknown kind %q: want %s", catalogurl.Redacted(spec), catalogurl.Redacted(kind), catalogForms)
	}
	if rest, ok := strings.CutPrefix(spec, etcdScheme); ok && !strings.Contains(rest, "/") {
		spec += "/" + etcdPrefix
	}
	u, err := catalogurl.Parse(spec)
	if errors.Is(err, catalogurl.ErrCredentials) {
		return "", fmt.Errorf("--catalog: %w; the demo does not log in to etcd: give it one without authentication", err)
	}
	if err != nil {
		return "", fmt.Errorf("--catalog: %w", err)
	}
	switch u.Kind {
	case catalogurl.Memory:
		return "", fmt.Errorf("--catalog %q: the nodes are processes of their own, killed each round; give %s", spec, catalogForms)
	case catalogurl.Bolt:
		if u.Path == "" {
			return catalogBolt, nil
		}
		abs, err := filepath.Abs(u.Path)
		if err != nil {
			return "", fmt.Errorf("--catalog %q: %w", spec, err)
		}
		return catalogBolt + ":" + abs, nil
	}
	return spec, nil
}

// openCatalog opens lowwater's catalog, given by parseCatalog, as a node
// and the parent both do: a bbolt file (in dir unless one is named), or
// etcd.
func openCatalog(spec, dir string) (persistence.Catalog, error) {
	u, err := catalogurl.Parse(spec)
	if err != nil {
		return nil, err
	}
	if u.Kind == catalogurl.Etcd {
		return etcdcatalog.Open(clientv3.Config{Endpoints: u.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
			etcdcatalog.WithPrefix(u.Prefix))
	}
	if u.Path == "" {
		return persistence.OpenBolt(catalogPath(dir))
	}
	return persistence.OpenBolt(u.Path)
}

// isBolt reports whether a catalog given by parseCatalog is a bbolt file.
func isBolt(spec string) bool { return strings.HasPrefix(spec, catalogBolt) }

// pace gives each vchannel its flush interval, from the seed: in every
// partition two vchannels are slow (300-600 ms), the others quick
// (10-60 ms). Both nodes get the same.
func pace(seed uint64, vchannels int) func(int32, int) time.Duration {
	return func(p int32, v int) time.Duration {
		rng := rand.New(rand.NewPCG(seed, uint64(p)<<32|uint64(v)))
		slow := rand.New(rand.NewPCG(seed, uint64(p))).Perm(vchannels)[:min(2, vchannels)]
		for _, s := range slow {
			if s == v {
				return 300*time.Millisecond + time.Duration(rng.Int64N(int64(300*time.Millisecond)))
			}
		}
		return 10*time.Millisecond + time.Duration(rng.Int64N(int64(50*time.Millisecond)))
	}
}
