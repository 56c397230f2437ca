// Command demo runs lowwater end to end on an embedded bbolt catalog that
// fails a share of its saves: pchannels whose vchannels advance at random
// rates, with adds, drops and a few bad commands. It prints the events as
// they happen and a table per pchannel, stops gracefully, reopens the same
// file, respawns the pchannels and checks that they restart from the last
// persisted checkpoints. It checks invariants I1 (safe) and I2 (monotonic)
// of DESIGN.md on everything it saw.
//
//	go run ./cmd/demo [--duration 8s] [--pchannels 3] [--vchannels 20]
//	                  [--fail-rate 0.2] [--seed N] [--data DIR] [--verbose]
//
// Exit status: 0 when every check passed, 1 when one failed, 2 on a usage
// or setup error.
//
// This file holds flags and wiring only: the phases are in demo.go, the
// simulated vchannels in sim.go, the event feed in feed.go, the checks in
// verify.go and the printing in report.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Exit codes.
const (
	exitOK       = 0
	exitViolated = 1
	exitSetup    = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the demo's command line.
type config struct {
	dataDir         string
	pchannels       int
	vchannels       int
	duration        time.Duration
	failRate        float64
	seed            int64
	verbose         bool
	sample          time.Duration
	minSaveInterval time.Duration
	tick            time.Duration
}

// run is the whole demo; main only adds signals and os.Exit. Cancelling
// ctx ends the simulation early; the demo still stops, restarts and checks.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitSetup
	}
	logger := newLogger(stderr, cfg.verbose)
	defer func() { _ = logger.Sync() }()

	dir, cleanup, err := dataDir(cfg.dataDir)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return exitSetup
	}
	defer cleanup()

	d := &demo{
		cfg:    cfg,
		logger: logger,
		out:    &lockedWriter{w: stdout},
		path:   filepath.Join(dir, "lowwater.db"),
	}
	code, err := d.run(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
	}
	return code
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dataDir, "data", "", "directory of the bbolt file (default: a temporary directory, removed at exit)")
	fs.IntVar(&c.pchannels, "pchannels", 3, "number of pchannels")
	fs.IntVar(&c.vchannels, "vchannels", 20, "vchannels per pchannel at start")
	fs.DurationVar(&c.duration, "duration", 8*time.Second, "how long the vchannels advance")
	fs.Float64Var(&c.failRate, "fail-rate", 0.2, "share of catalog saves that fail, in [0, 1]")
	fs.Int64Var(&c.seed, "seed", 0, "random seed of the simulation and the faults (0: pick one and print it)")
	fs.BoolVar(&c.verbose, "verbose", false, "log at info level (default: warn) to stderr")
	fs.DurationVar(&c.sample, "sample", 500*time.Millisecond, "print at most one MinimumAdvanced per pchannel per interval (0: print all)")
	fs.DurationVar(&c.minSaveInterval, "min-save-interval", 250*time.Millisecond, "minimum interval between successful saves of a pchannel (0: save as soon as possible)")
	fs.DurationVar(&c.tick, "tick", 20*time.Millisecond, "interval between two rounds of vchannel updates")
	if err := fs.Parse(args); err != nil {
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
	if c.duration <= 0 {
		errs = append(errs, fmt.Errorf("--duration %v: want > 0", c.duration))
	}
	if c.failRate < 0 || c.failRate > 1 {
		errs = append(errs, fmt.Errorf("--fail-rate %v: want 0..1", c.failRate))
	}
	if c.sample < 0 || c.minSaveInterval < 0 {
		errs = append(errs, errors.New("--sample and --min-save-interval must not be negative"))
	}
	if c.tick <= 0 {
		errs = append(errs, fmt.Errorf("--tick %v: want > 0", c.tick))
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()
	}
	if err := errors.Join(errs...); err != nil {
		fs.Usage()
		return c, err
	}
	return c, nil
}

// newLogger is zap's production setup (JSON, sampled) writing to stderr, at
// warn level, or info with --verbose. The actors log every rejected command
// and failed save at warn.
func newLogger(stderr io.Writer, verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.InfoLevel
	}
	core := zapcore.NewCore(
		zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(zapcore.AddSync(stderr)),
		level,
	)
	core = zapcore.NewSamplerWithOptions(core, time.Second, 100, 100)
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zapcore.ErrorLevel)).Named("demo")
}

// dataDir returns the directory of the bbolt file, creating a temporary one
// when none is given; cleanup removes only what dataDir created.
func dataDir(dir string) (string, func(), error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", nil, err
		}
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "lowwater-demo-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}
