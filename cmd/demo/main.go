package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/lowwater/lowwater/actors"
	"github.com/lowwater/lowwater/internal/etcdaccess"
	"github.com/lowwater/lowwater/internal/rundir"
	"github.com/lowwater/lowwater/persistence"
	"github.com/lowwater/lowwater/wal"
)

// Exit codes, as --help lists them.
const (
	exitOK          = 0
	exitViolated    = 1   // a check failed: an invariant was violated
	exitSetup       = 2   // a usage error (checked before the run) or a setup error
	exitDamaged     = 3   // the checkpoint store or a record is damaged (persistence.ErrCorruptStore, ErrCorruptRecord)
	exitInterrupted = 130 // Ctrl-C: the checks passed on a run cut short, or, a second, nothing checked
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	intr := &interrupter{graceful: cancel, exit: os.Exit, stderr: os.Stderr}
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		for range signals {
			intr.interrupt()
		}
	}()
	code := runWith(ctx, intr, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(signals)
	cancel()
	os.Exit(code)
}

// interrupter turns Ctrl-C (a signal, or a key in the live view) into the
// demo's two stops: the first ends the run early and lets the demo stop
// gracefully, flush, restart and check; the second exits at once.
type interrupter struct {
	presses  atomic.Int32
	graceful func()
	exit     func(int) // nil in tests
	stderr   io.Writer

	mu sync.Mutex
	// onFirst tells the live view; beforeExit restores the terminal;
	// cleanup removes the run's temporary directory, which the exit
	// would otherwise leave behind.
	onFirst, beforeExit, cleanup func()
}

func (i *interrupter) interrupt() {
	switch i.presses.Add(1) {
	case 1:
		i.graceful()
		i.mu.Lock()
		f := i.onFirst
		i.mu.Unlock()
		if f != nil {
			f()
		}
	case 2:
		go i.hard()
	}
}

func (i *interrupter) hard() {
	i.mu.Lock()
	f, cleanup := i.beforeExit, i.cleanup
	i.mu.Unlock()
	if f != nil {
		f()
	}
	if cleanup != nil {
		cleanup()
	}
	fmt.Fprintln(i.stderr, "demo: interrupted twice: exiting at once, without flushing or checking")
	if i.exit != nil {
		i.exit(exitInterrupted)
	}
}

// cleanUpAtExit has a second Ctrl-C run cleanup before it exits.
func (i *interrupter) cleanUpAtExit(cleanup func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.cleanup = cleanup
}

func (i *interrupter) setHooks(onFirst, beforeExit func()) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.onFirst, i.beforeExit = onFirst, beforeExit
}

// config is the demo's command line.
type config struct {
	pchannels int
	vchannels int
	duration  time.Duration
	// rate is the rounds of updates per second per pchannel; churn the adds
	// per second per pchannel (and as many drops); badRate the commands per
	// second per pchannel that must be rejected.
	rate, churn, badRate float64

	catalog  string
	etcd     etcdaccess.Access
	dataDir  string
	failRate float64
	latency  time.Duration
	outages  []window
	seed     int64

	chart        string
	metricsAddr  string
	metricsLabel bool
	view         string
	logPath      string
	verbose      bool

	sample          time.Duration
	minSaveInterval time.Duration

	// stall, when set, freezes one vchannel (--stall); stallAfter is
	// actors.WithStallAfter, 0 for off (--stall-after).
	stall      *stallSpec
	stallAfter time.Duration

	// width is the columns of the plain view and the summary: plainWidth,
	// not a flag; a test sets it to see what depends on it.
	width int
}

// tick is the interval between two rounds of updates.
// maxDuration is the longest --duration taken.
const maxDuration = 24 * time.Hour

func (c config) tick() time.Duration { return time.Duration(float64(time.Second) / c.rate) }

// run is the demo as the tests call it: no standard input, and Ctrl-C is
// the cancellation of ctx.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return runWith(ctx, &interrupter{graceful: cancel, stderr: stderr}, args, nil, stdout, stderr)
}

// runWith is the whole demo; main only adds signals and os.Exit.
// Cancelling ctx ends the simulation early; the demo still stops,
// restarts and checks.
func runWith(ctx context.Context, intr *interrupter, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "demo: %s (see --help)\n", oneLine(err))
		return exitSetup
	}
	return runConfig(ctx, intr, cfg, stdin, stdout, stderr)
}

// runConfig is the demo once its flags are read.
func runConfig(ctx context.Context, intr *interrupter, cfg config, stdin io.Reader, stdout, stderr io.Writer) int {
	live := cfg.view == "live" || (cfg.view == "auto" && isTerminal(stdout) && redraws(os.Getenv("TERM")) && inForeground(stdout))
	if w := terminalWidth(stdout); w > 0 {
		// The plain view and the summary wrap within a narrower
		// terminal, which broke their lines mid-word again.
		cfg.width = min(cfg.width, w)
	}

	dir, cleanup, err := dataDir(cfg.dataDir, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitSetup
	}
	defer cleanup()
	intr.cleanUpAtExit(cleanup)
	cfg.dataDir = dir

	logOut, closeLog, err := logDestination(cfg.logPath, live, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitSetup
	}
	defer closeLog()
	logger := newLogger(logOut, cfg.verbose)
	defer func() { _ = logger.Sync() }()

	st, err := openStore(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitSetup
	}
	d := &demo{
		cfg:    cfg,
		logger: logger,
		out:    &lockedWriter{w: stdout},
		stdout: stdout,
		stdin:  stdin,
		store:  st,
		live:   live,
		intr:   intr,
	}
	code, err := d.run(ctx)
	err = errors.Join(err, st.close())
	switch {
	case errors.Is(err, persistence.ErrCorruptStore):
		fmt.Fprintf(stderr, "demo: %s: restore it from a backup, or move it aside to start from nothing\n", oneLine(err))
		return exitDamaged
	case errors.Is(err, wal.ErrUnknownWAL):
		// Whole, of a WAL another build registered (package wal's
		// Register): no repair is due, and deleting it loses it.
		fmt.Fprintf(stderr, "demo: %s: a store of another build's WAL; read it with a lowwater tool built with that WAL (package cli), and give the demo another store\n", oneLine(err))
		return exitDamaged
	case errors.Is(err, persistence.ErrCorruptRecord):
		advice := "the lowwater tool shows it (verify) and repairs it (set --force, or delete), or move the store aside"
		if strings.Contains(err.Error(), "lowwater verify") {
			advice = "or move the store aside" // the store's error names the tool
		}
		fmt.Fprintf(stderr, "demo: %s; %s\n", oneLine(err), advice)
		return exitDamaged
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", oneLine(err))
		if code == exitOK {
			code = exitViolated
		}
	}
	return code
}

// oneLine keeps an error to one line of standard error, however many
// errors it joins.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

const usageHead = `lowwater demo: pchannels whose vchannels advance at random rates, saved to a
catalog that fails; it stops gracefully, restarts from the catalog and checks
invariants I1 (safe), I2 (monotonic) and I3 (live) on everything it saw.

usage: bin/demo [flags]          (make demo builds it; go run ./cmd/demo too)

Shows a live view when standard output is a terminal, log lines otherwise.
Ctrl-C stops gracefully (flushes, restarts, checks); a second Ctrl-C exits at
once. Every flag is checked before the run starts.

exit status:
  0    every check passed
  1    a check failed: an invariant was violated
  2    usage error (a bad flag, reported in one line) or setup error
  3    the checkpoint store is damaged (a bbolt file truncated, emptied or
       with damaged pages): restore it from a backup, or move it aside;
       or a record in it is (the lowwater tool's verify names it)
  130  interrupted: once, the checks passed on the run cut short (they
       fail as above); twice, it exited at once, nothing checked

flags:
`

// parseFlags reads the flags; --help prints the usage to help.
func parseFlags(args []string, help io.Writer) (config, error) {
	c := config{width: plainWidth}
	var outages outageFlag
	var stall stallFlag
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	// The flag package prints its errors and the whole usage itself; the
	// demo prints the usage for --help only, and its errors in one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// The simulation.
	fs.IntVar(&c.pchannels, "pchannels", 3, "number of pchannels")
	fs.IntVar(&c.vchannels, "vchannels", 20, "vchannels per pchannel at start")
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "how long the vchannels advance (at most 24h)")
	fs.Float64Var(&c.rate, "rate", 50, "update rounds per second per pchannel; each round sends one UpdateBatch of the vchannels that moved")
	fs.Float64Var(&c.churn, "churn", 0.5, "vchannels added per second per pchannel, and as many dropped (up to 30 % of the adds below the minimum)")
	fs.Float64Var(&c.badRate, "bad-rate", 0.4, "commands per second per pchannel that must be rejected (rollback, unknown or duplicate vchannel)")
	// The catalog and its faults.
	fs.StringVar(&c.catalog, "catalog", "bolt", "where checkpoints are kept: bolt (lowwater.db in --data), bolt:PATH, memory, or etcd://host:port[,host:port]/prefix")
	c.etcd = etcdaccess.FromEnv(os.Getenv)
	c.etcd.Register(fs)
	fs.StringVar(&c.dataDir, "data", "", "directory of the bbolt file (default: a temporary directory, removed at exit, or by the next run if this one is killed)")
	fs.Float64Var(&c.failRate, "fail-rate", 0.2, "share of catalog saves that fail, in [0, 1]")
	fs.DurationVar(&c.latency, "latency", 0, "delay added to every catalog call")
	fs.Var(&outages, "outage", "catalog outage `START+LENGTH` since the demo started, e.g. 3s+2s; repeatable; none for no outage (default: one from 40% to 60% of --duration)")
	fs.Var(&stall, "stall", "freeze one vchannel so that its pchannel's minimum stalls: `VCHANNEL@START[+LENGTH]`, e.g. p0-v003@2s; VCHANNEL is one the run starts with, pP-vNNN (P < --pchannels, NNN < --vchannels); it is never dropped, starts at the minimum and moves as slowly as the slowest vchannel, then stands still from START (since the demo started) for LENGTH, or to the end of the run; the freeze must last --stall-after + 1s within the run; turns on --stall-after, and a check then requires a MinimumStalled naming it (exit 1 if none)")
	fs.DurationVar(&c.stallAfter, "stall-after", 0, fmt.Sprintf("report a pchannel whose minimum has not risen for this long (actors.WithStallAfter), or that it is \"at end\" when the minimum is the largest Kafka offset, which none can pass; 0: off (default: off; %v with --stall)", defaultStallAfter))
	fs.Int64Var(&c.seed, "seed", 0, "random seed of the simulation and the faults (0: pick one and print it)")
	// What to show.
	fs.StringVar(&c.chart, "chart", "", "write a chart of the minimum and persisted checkpoint of each pchannel over the run to this .svg or .png file")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (host:port) at /metrics while the demo runs")
	fs.BoolVar(&c.metricsLabel, "metrics-pchannel-label", true, "label the metrics by pchannel (fine for the demo's few pchannels)")
	fs.StringVar(&c.view, "view", "auto", "auto (live when standard output is a terminal that is not TERM=dumb, and the demo runs in its foreground), live or plain")
	fs.StringVar(&c.logPath, "log", "", "file for the JSON logs (default: standard error in the plain view, none in the live view)")
	fs.BoolVar(&c.verbose, "verbose", false, "log at info level (default: warn)")
	fs.DurationVar(&c.sample, "sample", 500*time.Millisecond, "plain view: print at most one MinimumAdvanced per pchannel per interval (0: all)")
	fs.DurationVar(&c.minSaveInterval, "min-save-interval", 250*time.Millisecond, "minimum interval between successful saves of a pchannel (0: save as soon as possible)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(help, usageHead)
			printFlags(help, fs, plainWidth)
		}
		return c, err
	}

	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if c.pchannels < 1 || c.pchannels > 100 {
		errs = append(errs, fmt.Errorf("--pchannels %d: want 1..100", c.pchannels))
	}
	if c.vchannels < 1 || c.vchannels > 10000 {
		errs = append(errs, fmt.Errorf("--vchannels %d: want 1..10000", c.vchannels))
	}
	// A demo runs for minutes at most; a day bounds it far from where the
	// run's arithmetic on durations would overflow.
	if c.duration <= 0 || c.duration > maxDuration {
		errs = append(errs, fmt.Errorf("--duration %v: want > 0 and at most %v", c.duration, maxDuration))
	}
	// Each range is checked as what it takes, so that NaN, which every
	// comparison fails, is refused too.
	if !(c.rate > 0 && c.rate <= 1000) {
		errs = append(errs, fmt.Errorf("--rate %v: want (0, 1000]", c.rate))
	}
	if !(c.churn >= 0 && c.badRate >= 0) || (c.rate > 0 && !(c.churn <= c.rate && c.badRate <= c.rate)) {
		errs = append(errs, fmt.Errorf("--churn %v and --bad-rate %v: want 0..--rate", c.churn, c.badRate))
	}
	if !(c.failRate >= 0 && c.failRate <= 1) {
		errs = append(errs, fmt.Errorf("--fail-rate %v: want 0..1", c.failRate))
	}
	if c.latency < 0 {
		errs = append(errs, fmt.Errorf("--latency %v: want >= 0", c.latency))
	}
	if c.sample < 0 || c.minSaveInterval < 0 {
		errs = append(errs, errors.New("--sample and --min-save-interval must not be negative"))
	}
	stallAfterSet := false
	fs.Visit(func(f *flag.Flag) { stallAfterSet = stallAfterSet || f.Name == "stall-after" })
	if !stallAfterSet && stall.spec != nil {
		c.stallAfter = defaultStallAfter
	}
	if c.stallAfter != 0 && c.stallAfter < actors.MinStallAfter {
		errs = append(errs, fmt.Errorf("--stall-after %v: want 0 (off) or at least %v", c.stallAfter, actors.MinStallAfter))
	}
	if stall.spec != nil {
		c.stall = stall.spec
		if c.stallAfter == 0 {
			errs = append(errs, errors.New("--stall needs --stall-after > 0: a stall must be detected to be checked"))
		} else if c.duration > 0 {
			errs = append(errs, c.stall.check(c.pchannels, c.vchannels, c.duration, c.stallAfter))
		}
	}
	c.outages = outages.windows
	if !outages.set && c.duration > 0 {
		c.outages = defaultOutage(c.duration)
	}
	if c.duration > 0 {
		errs = append(errs, checkWindows(c.outages, c.duration))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	errs = append(errs, checkCatalog(c.catalog, c.etcd, given))
	if c.chart != "" {
		if _, err := chartFormat(c.chart); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, checkWritable("--chart", c.chart))
		}
	}
	if c.logPath != "" {
		errs = append(errs, checkWritable("--log", c.logPath))
	}
	if c.metricsAddr != "" {
		errs = append(errs, checkHostPort("--metrics-addr", c.metricsAddr))
	}
	switch c.view {
	case "auto", "live", "plain":
	default:
		errs = append(errs, fmt.Errorf("--view %q: want auto, live or plain", c.view))
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	return c, errors.Join(errs...)
}

// checkWritable checks, before the run, that the file a flag names can be
// written at its end: its directory exists and takes a new file, and the
// path is not a directory. It leaves nothing behind.
func checkWritable(flagName, path string) error {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return fmt.Errorf("%s %q: is a directory", flagName, path)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".lowwater-demo-write-check-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %q: cannot write in %s: %w", flagName, path, dir, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// checkHostPort checks that addr is host:port with a port number (empty
// host: every interface; port 0: any free one).
func checkHostPort(flagName, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port: %w", flagName, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s %q: port %q is not a number in 0..65535", flagName, addr, port)
	}
	return nil
}

// describeFaults is the fault profile in one line.
func (c config) describeFaults() string {
	parts := []string{fmt.Sprintf("%.0f%% of saves fail", 100*c.failRate)}
	if c.latency > 0 {
		parts = append(parts, fmt.Sprintf("+%v per call", c.latency))
	}
	if len(c.outages) == 0 {
		parts = append(parts, "no outage")
	} else {
		ws := make([]string, len(c.outages))
		for i, w := range c.outages {
			ws[i] = w.String()
		}
		parts = append(parts, "outages "+strings.Join(ws, ", "))
	}
	if c.stall != nil {
		parts = append(parts, "stall "+c.stall.String())
	}
	return strings.Join(parts, ", ")
}

// logDestination is where the JSON logs go: the --log file, else stderr in
// the plain view and nowhere in the live view, which owns the terminal.
func logDestination(path string, live bool, stderr io.Writer) (io.Writer, func(), error) {
	switch {
	case path != "":
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { _ = f.Close() }, nil
	case live:
		return io.Discard, func() {}, nil
	default:
		return stderr, func() {}, nil
	}
}

// newLogger is zap's production setup (JSON, sampled), at warn level, or
// info with --verbose. The actors log every rejected command and failed
// save at warn.
func newLogger(out io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.InfoLevel
	}
	core := zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(zapcore.AddSync(out)),
		level,
	)
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)).Named("demo")
}

// dataDir returns the directory of the bbolt file, creating a temporary one
// when none is given; cleanup removes only what dataDir created. A
// temporary one is held while the run lives, so that the next run removes
// it if this one is killed, and says so on stderr.
func dataDir(dir string, stderr io.Writer) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		return dir, func() {}, nil
	}
	tmp, err := rundir.New("lowwater-demo-")
	if err != nil {
		return "", nil, err
	}
	if note := tmp.SweptNote(); note != "" {
		fmt.Fprintln(stderr, "demo:", note)
	}
	return tmp.Path, func() { _ = tmp.Remove() }, nil
}

// printFlags is flag.PrintDefaults within width columns: each flag on a
// line of its own, its description wrapped under it.
func printFlags(out io.Writer, fs *flag.FlagSet, width int) {
	const indent = "        "
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(out, line)
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" && f.DefValue != "0s" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		for _, l := range wrap(usage, width-len(indent)) {
			fmt.Fprintln(out, indent+l)
		}
	})
}

// wrap breaks prose into lines of at most width columns, at spaces, each
// space one.
func wrap(text string, width int) []string {
	words := strings.Fields(text)
	if len(words) == 0 {
		return nil
	}
	return wrapHanging(strings.Join(words, " "), 0, width)
}
