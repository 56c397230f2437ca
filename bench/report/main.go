// Command report runs the benchmarks of package bench in interleaved
// rounds, keeps their raw `go test -bench` output, and writes
// bench/RESULTS.md: the machine and its load, the commands, the tables
// benchstat makes of the raw output (medians with 95 % confidence
// intervals, one column per implementation, -col /impl), and the goals of
// the performance work judged on medians read with golang.org/x/perf's
// benchfmt and benchmath.
//
// Each run's raw output is also kept in bench/runs, headed by the commit
// it measured and the load it began under, and bench/HISTORY.md judges
// every goal over all the runs kept there: on a shared machine a figure
// is quoted with its spread over runs, not from one.
//
// Run it from the module root (make bench does):
//
//	go run ./bench/report -count 6
//	go run ./bench/report -history-only   # HISTORY.md from bench/runs alone
//	go run ./bench/report -history-only -since 2026-12-02-0429 \
//	  -until 2026-12-06-1746 -history /tmp/h.md
//	# the README's table of figures:
//	go run ./bench/report -figures bench/runs/A.txt bench/runs/B.txt
//
// Any table can be made again from the raw output alone:
//
//	go tool benchstat -col '/impl@(mutex sender lowwater)' \
//	  -filter .name:Update bench/raw.txt
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// run is one invocation of the test binary: benchmarks matching pattern,
// each with its own iteration count, so that a round is bounded in time.
type run struct {
	pattern   string
	benchtime string
	args      []string // the benchmarks' own flags
}

var runs = []run{
	{"^BenchmarkUpdate$", "2000000x", nil},
	{"^BenchmarkUpdateBatch$", "2000000x", nil},
	{"^BenchmarkUpdateRising$", "200000x", nil},
	{"^BenchmarkSaves$", "300000x", nil},
	{"^BenchmarkPersistLag$", "300x", nil},
	{"^BenchmarkScale$", "1x", nil},
	// The same at a load both keep up with: lag against lag at one load.
	{"^BenchmarkScale$/impl=(baseline|lowwater)/", "1x", []string{"-scale-rate=500000"}},
	{"^BenchmarkGroupCommit$/impl=(baseline|lowwater)/commit=single", "3x", nil},
	{"^BenchmarkGroupCommit$/impl=/commit=group", "30x", nil},
	{"^BenchmarkGroupCommit$/impl=/commit=none", "300x", nil},
	{"^BenchmarkGroupCommitFew$", "100x", nil},
	{"^BenchmarkEtcdSaves$/impl=serial", "1x", nil},
	{"^BenchmarkEtcdSaves$/impl=(concurrent|lowwater)", "5x", nil},
}

// table is one benchstat invocation over the raw output.
type table struct {
	title string
	args  []string
}

var tables = []table{
	{"lowwater against the mutex/cond baseline, every benchmark", []string{"-filter", "-.name:EtcdSaves", "-col", "/impl@(baseline lowwater)"}},
	{"One update at a time: the mutex design, the Sender, raw Send, the baseline (goal 1, goal 2)",
		[]string{"-filter", ".name:Update", "-col", "/impl@(mutex sender lowwater baseline)"}},
	{"One update at a time against the hand-off floor (goal 2)",
		[]string{"-filter", ".name:Update", "-col", "/impl@(floor lowwater)"}},
	{"Updates that each raise the minimum, one at a time and in a burst before a 1 ms save: the baseline, raw Send, the Sender",
		[]string{"-filter", ".name:(UpdateRising OR PersistLag)", "-col", "/impl@(baseline lowwater sender)"}},
	{"10,000 pchannels: the baseline, raw Send, and a Sender per pchannel in its worst case (goal 4)",
		[]string{"-filter", ".name:Scale", "-col", "/impl@(baseline lowwater sender)"}},
	{"Group commit on bbolt against raw db.Batch with 1,000 writers (goal 3)",
		[]string{"-filter", ".name:GroupCommit /commit:group", "-col", "/impl@(bboltbatch baseline lowwater)"}},
	{"The same with 100 pchannels, where a batch never fills",
		[]string{"-filter", ".name:GroupCommitFew", "-col", "/impl@(bboltbatch baseline lowwater)"}},
	{"1,000 pchannels saving on a 3-member etcd cluster (goal 5)",
		[]string{"-filter", ".name:EtcdSaves", "-col", "/impl@(serial concurrent lowwater)"}},
}

// goal is one target, judged on the ratio of two medians, or on the
// measured median alone where its bound is absolute.
type goal struct {
	key         string // names the goal in HISTORY.md's tables
	text        string
	bench, unit string // bench names the benchmark with %s for the impl
	num, den    string // ratio = num impl / den impl
	most, least float64
	// atLeast judges ratio >= least instead of ratio <= most.
	atLeast bool
	// absolute judges the measured median itself <= most (CPU per save,
	// in µs): the reference is there only to compare with.
	absolute bool
}

var goals = []goal{
	{key: "1a", text: "one update through the Sender ≤ 1.0× the mutex design, 1 producer", bench: "Update/impl=%s/producers=1", unit: "sec/op", num: "sender", den: "mutex", most: 1.0},
	{key: "1b", text: "one update through the Sender ≤ 1.0× the mutex design, 8 producers", bench: "Update/impl=%s/producers=8", unit: "sec/op", num: "sender", den: "mutex", most: 1.0},
	{key: "2a", text: "one raw Send update ≤ 1.2× the hand-off floor, 1 producer", bench: "Update/impl=%s/producers=1", unit: "sec/op", num: "lowwater", den: "floor", most: 1.2},
	{key: "2b", text: "one raw Send update ≤ 1.5× the baseline, 8 producers", bench: "Update/impl=%s/producers=8", unit: "sec/op", num: "lowwater", den: "baseline", most: 1.5},
	{key: "3a", text: "group commit saves/s ≥ 1.0× the baseline on the same catalog", bench: "GroupCommit/impl=%s/commit=group", unit: "saves/s", num: "lowwater", den: "baseline", least: 1.0, atLeast: true},
	{key: "3b", text: "group commit saves/s ≥ 0.5× raw bbolt db.Batch", bench: "GroupCommit/impl=%s/commit=group", unit: "saves/s", num: "lowwater", den: "bboltbatch", least: 0.5, atLeast: true},
	{key: "3c", text: "CPU per save ≤ 6 µs (ratio to the baseline's)", bench: "GroupCommit/impl=%s/commit=group", unit: "cpu-µs/save", num: "lowwater", den: "baseline", most: 6, absolute: true},
	{key: "4a", text: "aggregate updates/s over 10,000 pchannels ≥ 1.0× the baseline", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "updates/s", num: "lowwater", den: "baseline", least: 1.0, atLeast: true},
	{key: "4b", text: "persist lag p99 over 10,000 pchannels ≤ 1.0× the baseline's", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "lag-p99-ms", num: "lowwater", den: "baseline", most: 1.0},
	{key: "4c", text: "at equal load (a finding, not the goal): persist lag p99 with 500,000 updates/s offered ≤ 1.0× the baseline's", bench: "Scale/impl=%s/pchannels=10000/vchannels=100/rate=500000", unit: "lag-p99-ms", num: "lowwater", den: "baseline", most: 1.0},
	{key: "5", text: "etcd saves/s, 1,000 pchannels, 3 members ≥ 5× one txn per save at a time", bench: "EtcdSaves/impl=%s/pchannels=1000/members=3", unit: "saves/s", num: "lowwater", den: "serial", least: 5, atLeast: true},
}

func main() {
	count := flag.Int("count", 6, "interleaved rounds; benchstat needs 6 for a 95 % interval")
	out := flag.String("out", "bench/RESULTS.md", "where to write the tables")
	raw := flag.String("raw", "bench/raw.txt", "where to write the raw benchmark output")
	pkg := flag.String("pkg", "./bench/", "the package holding the benchmarks")
	goTool := flag.String("go", "go", "the go command")
	runsDir := flag.String("runs", "bench/runs", "where to keep a copy of each run's raw output; empty: keep none")
	hist := flag.String("history", "", "where to write the goals over the runs kept in -runs (default: HISTORY.md beside that directory)")
	since := flag.String("since", "", "judge only the runs kept whose names sort at or after this one (2026-12-02-0429)")
	until := flag.String("until", "", "judge only the runs kept up to this one, those of its minute included (2026-12-06-1746)")
	historyOnly := flag.Bool("history-only", false, "run nothing: write -history from the runs kept in -runs")
	figuresOnly := flag.Bool("figures", false, "run nothing: print the README's table of figures from the kept runs named as arguments")
	flag.Parse()
	if *figuresOnly {
		if err := printFigures(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	if *historyOnly && *runsDir == "" {
		fmt.Fprintln(os.Stderr, "report: -history-only needs -runs, the runs to judge")
		os.Exit(2)
	}
	if *hist == "" && *runsDir != "" {
		*hist = filepath.Join(filepath.Dir(filepath.Clean(*runsDir)), "HISTORY.md")
	}
	err := error(nil)
	if !*historyOnly {
		err = report(*goTool, *count, *out, *raw, *pkg, *runsDir)
	}
	if err == nil && *runsDir != "" {
		err = writeHistory(*runsDir, runSpan{*since, *until}, *hist)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func printFigures(paths []string) error {
	if len(paths) == 0 {
		return errors.New("-figures needs the runs to read, as arguments: files of bench/runs")
	}
	runs := make([]keptRun, len(paths))
	for i, p := range paths {
		r, err := readRun(p)
		if err != nil {
			return err
		}
		runs[i] = r
	}
	fmt.Print(figuresTable(runs))
	return nil
}

func writeHistory(runsDir string, s runSpan, path string) error {
	link := runsDir
	from, err1 := filepath.Abs(filepath.Dir(path))
	to, err2 := filepath.Abs(runsDir)
	if rel, err := filepath.Rel(from, to); err1 == nil && err2 == nil && err == nil {
		link = rel
	}
	md, err := history(runsDir, s, filepath.ToSlash(link))
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(md), 0o644)
}

func report(goCmd string, count int, out, raw, pkg, runsDir string) error {
	if count < 1 {
		return errors.New("-count must be at least 1")
	}
	dir, err := os.MkdirTemp("", "lowwater-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command(goCmd, "test", "-c", "-o", bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}

	loadStart := loadAvg()
	started := time.Now()
	var rawOut bytes.Buffer
	// The run's record of itself, as benchfmt configuration: it stays with
	// the raw output wherever it is kept.
	if c := checkout(); c != "" {
		fmt.Fprintf(&rawOut, "%s: %s\n", commitKey, c)
	}
	fmt.Fprintf(&rawOut, "%s: %s\n", loadKey, loadStart)
	var commands []string
	for _, r := range runs {
		line := fmt.Sprintf("go test -run='^$' -bench='%s' -benchtime=%s -count=%d -benchmem %s",
			r.pattern, r.benchtime, count, pkg)
		if len(r.args) > 0 {
			line += " -args " + strings.Join(r.args, " ")
		}
		commands = append(commands, line)
	}
	// Round after round, each run once, rather than each run count times
	// in a row: the machine's load drifts (it is shared), and interleaving
	// gives every implementation the same share of each phase of it.
	for round := 1; round <= count; round++ {
		fmt.Fprintf(os.Stderr, "== round %d of %d\n", round, count)
		for _, r := range runs {
			args := append([]string{"-test.run=^$", "-test.bench=" + r.pattern, "-test.benchtime=" + r.benchtime,
				"-test.count=1", "-test.benchmem"}, r.args...)
			cmd := exec.Command(bin, args...)
			cmd.Stdout = io.MultiWriter(os.Stderr, &rawOut)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
			}
		}
	}
	took := time.Since(started)
	loadEnd := loadAvg()
	if err := os.WriteFile(raw, rawOut.Bytes(), 0o644); err != nil {
		return err
	}
	if runsDir != "" {
		kept, err := keep(runsDir, started, rawOut.Bytes())
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "kept as %s\n", kept)
	}

	var md strings.Builder
	fmt.Fprintf(&md, "# lowwater benchmarks\n\nGenerated by `make bench` (`go run ./bench/report -count %d`) on %s UTC; the whole run took %s.\n\n",
		count, started.UTC().Format("2006-01-02 15:04"), took.Round(time.Second))
	run, err := readRun(raw)
	if err != nil {
		return err
	}
	fmt.Fprintf(&md, "- machine: %s, %d CPUs (nproc), GOMAXPROCS %d, %s/%s, %s\n", machine(run.cpu, cpuModel()), runtime.NumCPU(),
		runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, goVersion(goCmd))
	fmt.Fprintf(&md, "- load average (1, 5, 15 min): %s at the start, %s at the end. The machine is shared: a row whose interval is wide, or that moves more than its interval between runs, is noise, not a figure.\n",
		loadStart, loadEnd)
	fmt.Fprintf(&md, "- raw output: [raw.txt](raw.txt) (%d interleaved rounds; every table below is `go tool benchstat` over it, with the arguments shown)\n\n", count)
	md.WriteString("## Goals\n\nMedians over the rounds, with benchmath's 95 % confidence interval of the median; ratio = the first / the second. Met: yes or no on the medians when the rounds tell the measured figure from the target, even when they do not, with the p-value and the medians' verdict beside it. " +
		"The target is the reference times the bound, the rounds told from it by benchstat's Mann-Whitney U test at α = 0.05; " +
		"for 3c it is the bound itself, 6 µs, the rounds told from it by a sign test at α = 0.05 (with six rounds, all six on one side), and the reference and the ratio are the baseline's, to compare with.\n\n")
	md.WriteString("| goal | measured | reference | ratio | met |\n| --- | ---: | ---: | ---: | --- |\n")
	res := run.res
	for _, g := range goals {
		md.WriteString(judge(res, g))
	}
	for _, t := range tables {
		cmd := exec.Command(goCmd, append(append([]string{"tool", "benchstat"}, t.args...), raw)...)
		var tout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &tout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("benchstat %s: %w", strings.Join(t.args, " "), err)
		}
		fmt.Fprintf(&md, "\n## %s\n\n`go tool benchstat %s bench/raw.txt`\n\n```\n%s```\n", t.title, quoteArgs(t.args), tout.String())
	}
	md.WriteString("\n## Commands\n\nWhat each benchmark does is documented in `bench/doc.go`. The runs, as `go test` lines (the report builds the test binary once, then runs each line with -count=1, round after round):\n\n```\n")
	md.WriteString(strings.Join(commands, "\n"))
	md.WriteString("\n```\n")
	fmt.Print(md.String())
	return os.WriteFile(out, []byte(md.String()), 0o644)
}

// samples maps benchmark name (without the -procs suffix) → unit → values.
type samples map[string]map[string][]float64

var procs = regexp.MustCompile(`-\d+$`)

func (s samples) add(res *benchfmt.Result) {
	name := procs.ReplaceAllString(string(res.Name), "")
	if s[name] == nil {
		s[name] = map[string][]float64{}
	}
	for _, v := range res.Values {
		s[name][v.Unit] = append(s[name][v.Unit], v.Value)
	}
}

// judge compares the numerator with the target: the denominator times
// the bound (or the bound itself, for CPU per save).
func judge(s samples, g goal) string {
	numVals, denVals := s[fmt.Sprintf(g.bench, g.num)][g.unit], s[fmt.Sprintf(g.bench, g.den)][g.unit]
	if len(numVals) == 0 || len(denVals) == 0 {
		return fmt.Sprintf("| %s: %s | n/a | n/a | n/a | not measured |\n", g.key, g.text)
	}
	num, den := summarize(numVals), summarize(denVals)
	ratio := num.Center / den.Center
	ratioText := strconv.FormatFloat(ratio, 'f', 2, 64)
	if !g.absolute { // else the ratio is the baseline's, to compare with
		ratioText = nearBound(ratio, g.bound())
	}
	return fmt.Sprintf("| %s: %s | %s %s (%s) | %s %s (%s) | %s× | %s |\n", g.key, g.text,
		num3(num.Center), g.unit, g.num+" "+interval(num), num3(den.Center), g.unit, g.den+" "+interval(den),
		ratioText, verdict(g, numVals, denVals))
}

// bound is what g's figure is held to: a ratio, or for an absolute goal
// the figure itself.
func (g goal) bound() float64 {
	if g.atLeast {
		return g.least
	}
	return g.most
}

// nearBound gives v to two places, or to as many more (up to four) as it
// takes not to show it at bound when it is not there: a ratio of 0.9987
// is "0.999", not "1.00", against at least 1.0, and 6.004 µs is "6.004"
// against at most 6.
func nearBound(v, bound float64) string {
	text := strconv.FormatFloat(v, 'f', 2, 64)
	for places := 3; places <= 4 && v != bound && text == strconv.FormatFloat(bound, 'f', places-1, 64); places++ {
		text = strconv.FormatFloat(v, 'f', places, 64)
	}
	return text
}

// verdict is judge's last column: yes or no on the medians when the
// rounds tell the numerator from the target (benchstat's own test,
// Mann-Whitney U at α = 0.05; against an absolute bound, a sign test),
// and "even" when they do not: the same
// code then comes out on either side of the target from run to run, and
// the medians' verdict, given beside it, is not a figure to quote.
func verdict(g goal, numVals, denVals []float64) string {
	o := judgeRounds(g, numVals, denVals)
	if o.told {
		return yesNo(o.met)
	}
	return fmt.Sprintf("even (p=%.2f; medians: %s)", o.p, yesNo(o.met))
}

// outcome is a goal judged on one run's rounds.
type outcome struct {
	met  bool    // on the medians
	told bool    // the rounds told the figure from the target
	p    float64 // of the test that told them, or did not
}

func judgeRounds(g goal, numVals, denVals []float64) outcome {
	if g.absolute {
		return judgeAgainstBound(numVals, g.bound())
	}
	target := make([]float64, len(denVals))
	for i, v := range denVals {
		target[i] = v * g.bound()
	}
	num := benchmath.NewSample(numVals, &benchmath.DefaultThresholds)
	tgt := benchmath.NewSample(target, &benchmath.DefaultThresholds)
	numMedian, tgtMedian := summarize(numVals).Center, summarize(target).Center
	met := numMedian <= tgtMedian
	if g.atLeast {
		met = numMedian >= tgtMedian
	}
	c := benchmath.AssumeNothing.Compare(num, tgt)
	return outcome{met: met, told: c.P < c.Alpha, p: c.P}
}

// judgeAgainstBound judges rounds against a bound of their own (at most
// bound) with a two-sided sign test: how many rounds lie on each side of
// it. A bound is no sample: a U test against copies of it, one per
// round of the reference, gave a p that moved with the number of copies
// (five rounds of six under it told "met" against six copies, and
// "even" against three). With six rounds, the sign test tells only when
// all six lie on one side (p = 2/64); a round at the bound counts on
// neither.
func judgeAgainstBound(vals []float64, bound float64) outcome {
	below, above := 0, 0
	for _, v := range vals {
		switch {
		case v < bound:
			below++
		case v > bound:
			above++
		}
	}
	p := signTestP(below, above)
	return outcome{met: summarize(vals).Center <= bound, told: p < benchmath.DefaultThresholds.CompareAlpha, p: p}
}

// signTestP is the two-sided p-value of a sign test with below and above
// rounds on either side: twice the chance of a split at least as uneven,
// at most 1.
func signTestP(below, above int) float64 {
	n := below + above
	if n == 0 {
		return 1
	}
	tail, c := 0.0, 1.0 // c = n choose i
	for i := 0; i <= min(below, above); i++ {
		tail += c
		c = c * float64(n-i) / float64(i+1)
	}
	return min(1, 2*tail/math.Pow(2, float64(n)))
}

func summarize(vs []float64) benchmath.Summary {
	return benchmath.AssumeNothing.Summary(benchmath.NewSample(vs, &benchmath.DefaultThresholds), 0.95)
}

func interval(s benchmath.Summary) string {
	return "[" + num3(s.Lo) + ", " + num3(s.Hi) + "]"
}

func num3(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000 || v <= -1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v < 1e-6 && v > -1e-6:
		return strconv.FormatFloat(v*1e9, 'f', 1, 64) + "n"
	case v < 1e-3 && v > -1e-3:
		return strconv.FormatFloat(v*1e6, 'f', 2, 64) + "µ"
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "**no**"
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " ()") {
			a = "'" + a + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// checkout names the code measured: git's short hash of HEAD, and
// "+dirty" if the tree differs from it; "" outside a git checkout.
func checkout() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		c += "+dirty"
	}
	return c
}

// keep writes a run's raw output into dir, named by when it began (UTC),
// without overwriting a run kept before, and returns its path.
func keep(dir string, began time.Time, raw []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	stem := filepath.Join(dir, began.UTC().Format("2006-01-02-1504"))
	for i := 1; ; i++ {
		path := stem + ".txt"
		if i > 1 {
			path = fmt.Sprintf("%s-%d.txt", stem, i)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(raw)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			// A part of a run is no run (readRun refuses it): none is kept.
			os.Remove(path)
			return "", err
		}
		return path, nil
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// machine names the processor as the benchmarks did (bench, go test's
// cpu line), and as /proc/cpuinfo does (model) where that differs: two
// hosts it names alike gave lowwater figures twice apart.
func machine(bench, model string) string {
	if bench == "" || bench == model {
		return model
	}
	return fmt.Sprintf("%s (/proc/cpuinfo: %s)", bench, model)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func goVersion(goCmd string) string {
	out, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}
