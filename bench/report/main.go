// Command report runs the side-by-side benchmarks of package bench several
// times, takes the median of every metric, and writes one table (metric,
// baseline, lowwater, ratio) with the goals of the performance issue to
// bench/RESULTS.md, stamped with the date, the machine and the Go version.
// It prints the same Markdown on stdout and the raw benchmark output on
// stderr as it comes.
//
// Run it from the module root (make bench does):
//
//	go run ./bench/report -count 5
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// run is one invocation of the test binary: benchmarks matching pattern,
// each with its own iteration count.
type run struct {
	pattern   string
	benchtime string
}

// runs keeps every benchmark bounded in time: fixed iteration counts, so
// that the whole table takes a few minutes on two cores.
var runs = []run{
	{"^BenchmarkUpdate$", "2000000x"},
	{"^BenchmarkUpdateBatch$", "2000000x"},
	{"^BenchmarkSaves$", "300000x"},
	{"^BenchmarkPersistLag$", "300x"},
	{"^BenchmarkScale$", "1x"},
	{"^BenchmarkGroupCommit$/impl=/commit=single", "3x"},
	{"^BenchmarkGroupCommit$/impl=/commit=group", "30x"},
}

// row is one line of the table. bench names the benchmark with "%s" where
// the implementation goes.
type row struct {
	label string
	bench string
	unit  string
}

var rows = []row{
	{"2a ns/update, 1 producer", "BenchmarkUpdate/impl=%s/producers=1", "ns/op"},
	{"2a allocs/update, 1 producer", "BenchmarkUpdate/impl=%s/producers=1", "allocs/op"},
	{"2a ns/update, 8 producers", "BenchmarkUpdate/impl=%s/producers=8", "ns/op"},
	{"2a allocs/update, 8 producers", "BenchmarkUpdate/impl=%s/producers=8", "allocs/op"},
	{"2b ns/update, UpdateBatch of 64 (baseline: 64 calls)", "BenchmarkUpdateBatch/impl=%s/batch=64", "ns/op"},
	{"2b allocs/update, UpdateBatch of 64", "BenchmarkUpdateBatch/impl=%s/batch=64", "allocs/op"},
	{"2c saves per 1M updates, 100 µs catalog (paced 1M/s, each raises the minimum)", "BenchmarkSaves/impl=%s/catalog=100µs", "saves/1M-updates"},
	{"2c saves per 1M updates, 1 ms catalog (paced 1M/s, each raises the minimum)", "BenchmarkSaves/impl=%s/catalog=1ms", "saves/1M-updates"},
	{"2d persist lag p50 (ms), 1 ms catalog, bursts of 100", "BenchmarkPersistLag/impl=%s/catalog=1ms", "lag-p50-ms"},
	{"2d persist lag p99 (ms), 1 ms catalog, bursts of 100", "BenchmarkPersistLag/impl=%s/catalog=1ms", "lag-p99-ms"},
	{"2e idle goroutines, 10,000 pchannels", "BenchmarkScale/impl=%s/pchannels=10000/vchannels=100", "goroutines"},
	{"2e heap bytes per idle pchannel (100 vchannels)", "BenchmarkScale/impl=%s/pchannels=10000/vchannels=100", "heap-bytes/pchannel"},
	{"2e stack bytes per idle pchannel", "BenchmarkScale/impl=%s/pchannels=10000/vchannels=100", "stack-bytes/pchannel"},
	{"2e spawn and recover 10,000 from bbolt (ms)", "BenchmarkScale/impl=%s/pchannels=10000/vchannels=100", "recover-ms"},
	{"2e aggregate updates/s over 10,000 pchannels", "BenchmarkScale/impl=%s/pchannels=10000/vchannels=100", "updates/s"},
	{"2f saves/s, 1,000 pchannels on bbolt, one txn per save", "BenchmarkGroupCommit/impl=%s/commit=single", "saves/s"},
	{"2f saves/s, 1,000 pchannels on bbolt, group commit", "BenchmarkGroupCommit/impl=%s/commit=group", "saves/s"},
}

func main() {
	count := flag.Int("count", 5, "runs of each benchmark; the table shows medians")
	out := flag.String("out", "bench/RESULTS.md", "where to write the table")
	pkg := flag.String("pkg", "./bench/", "the package holding the benchmarks")
	goTool := flag.String("go", "go", "the go command")
	flag.Parse()
	goCmd = *goTool
	if err := report(*count, *out, *pkg); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

// goCmd is the go command the report builds with and asks for its version.
var goCmd = "go"

func report(count int, out, pkg string) error {
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

	// Round after round, each run once, rather than each run count times in
	// a row: the machine's load drifts (it is shared), and interleaving
	// gives both implementations the same share of every phase of it.
	started := time.Now()
	results := results{}
	var commands []string
	for _, r := range runs {
		commands = append(commands, "go test -run='^$' -bench='"+r.pattern+"' -benchtime="+r.benchtime+
			" -count="+strconv.Itoa(count)+" -benchmem "+pkg)
	}
	for round := 1; round <= count; round++ {
		fmt.Fprintf(os.Stderr, "== round %d of %d\n", round, count)
		for _, r := range runs {
			args := []string{"-test.run=^$", "-test.bench=" + r.pattern, "-test.benchtime=" + r.benchtime,
				"-test.count=1", "-test.benchmem"}
			cmd := exec.Command(bin, args...)
			var buf bytes.Buffer
			cmd.Stdout = io.MultiWriter(os.Stderr, &buf)
			cmd.Stderr = os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
			}
			results.parse(&buf)
		}
	}

	md := render(results, count, commands, time.Since(started))
	fmt.Print(md)
	return os.WriteFile(out, []byte(md), 0o644)
}

// results holds every value: benchmark name → unit → one value per run.
type results map[string]map[string][]float64

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func (r results) parse(rd io.Reader) {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			if r[m[1]] == nil {
				r[m[1]] = map[string][]float64{}
			}
			r[m[1]][fields[i+1]] = append(r[m[1]][fields[i+1]], v)
		}
	}
}

// median of the values of bench and unit; NaN when there are none.
func (r results) median(bench, unit string) float64 {
	vs := slices.Clone(r[bench][unit])
	if len(vs) == 0 {
		return math.NaN()
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

func (r results) get(row row, impl string) float64 {
	return r.median(fmt.Sprintf(row.bench, impl), row.unit)
}

func find(label string) row {
	for _, r := range rows {
		if strings.HasPrefix(r.label, label) {
			return r
		}
	}
	panic("no row " + label)
}

// goal is one target of the issue, judged on the medians.
type goal struct {
	text string
	// judge returns the figure to quote and whether the goal is met.
	judge func(r results) (string, bool)
}

func ratioGoal(text, label string, most float64) goal {
	return goal{text, func(r results) (string, bool) {
		row := find(label)
		b, l := r.get(row, "baseline"), r.get(row, "lowwater")
		q := l / b
		return fmt.Sprintf("%s / %s = %.2f×", num(l), num(b), q), q <= most
	}}
}

var goals = []goal{
	ratioGoal("one update ≤ 3× the baseline's ns (1 producer)", "2a ns/update, 1 producer", 3),
	ratioGoal("one update ≤ 3× the baseline's ns (8 producers)", "2a ns/update, 8 producers", 3),
	ratioGoal("a batch of 64 ≤ 1× the baseline's ns per update", "2b ns/update", 1),
	ratioGoal("saves per million ≤ the baseline's (100 µs catalog)", "2c saves per 1M updates, 100 µs", 1),
	ratioGoal("saves per million ≤ the baseline's (1 ms catalog)", "2c saves per 1M updates, 1 ms", 1),
	{"persist lag p99 ≤ catalog latency + 2 ms (3 ms)", func(r results) (string, bool) {
		v := r.get(find("2d persist lag p99"), "lowwater")
		return num(v) + " ms", v <= 3
	}},
	{"idle goroutines O(1) (baseline: one per pchannel)", func(r results) (string, bool) {
		row := find("2e idle goroutines")
		l := r.get(row, "lowwater")
		return fmt.Sprintf("%s for 10,000 pchannels (baseline %s)", num(l), num(r.get(row, "baseline"))), l < 100
	}},
	ratioGoal("heap per pchannel ≤ the baseline's", "2e heap bytes", 1),
	{"10,000 pchannels recovered from bbolt in ≤ 1 s", func(r results) (string, bool) {
		v := r.get(find("2e spawn and recover"), "lowwater")
		return num(v) + " ms", v <= 1000
	}},
	{"group commit ≥ 10× the single-put save rate", func(r results) (string, bool) {
		g := r.get(find("2f saves/s, 1,000 pchannels on bbolt, group"), "lowwater")
		s := r.get(find("2f saves/s, 1,000 pchannels on bbolt, one txn"), "lowwater")
		return fmt.Sprintf("%s / %s = %.1f×", num(g), num(s), g/s), g/s >= 10
	}},
}

func render(r results, count int, commands []string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lowwater against the mutex/cond baseline\n\n")
	fmt.Fprintf(&b, "Generated by `make bench` (`go run ./bench/report -count %d`) on %s.\n\n",
		count, time.Now().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %s, %d cores (GOMAXPROCS %d), %s/%s\n", cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- Go: %s\n", goVersion())
	fmt.Fprintf(&b, "- medians of %d runs each, interleaved (every benchmark once per round); ratio = lowwater / baseline; the whole run took %s\n\n", count, took.Round(time.Second))

	fmt.Fprintf(&b, "| metric | baseline | lowwater | ratio |\n| --- | ---: | ---: | ---: |\n")
	for _, row := range rows {
		bl, lw := r.get(row, "baseline"), r.get(row, "lowwater")
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", row.label, num(bl), num(lw), ratio(lw, bl))
	}
	heap, stack := find("2e heap bytes"), find("2e stack bytes")
	hb, hl := r.get(heap, "baseline")+r.get(stack, "baseline"), r.get(heap, "lowwater")+r.get(stack, "lowwater")
	fmt.Fprintf(&b, "| 2e heap + stack bytes per idle pchannel | %s | %s | %s |\n", num(hb), num(hl), ratio(hl, hb))
	g := r.get(find("2f saves/s, 1,000 pchannels on bbolt, group"), "baseline") / r.get(find("2f saves/s, 1,000 pchannels on bbolt, one txn"), "baseline")
	l := r.get(find("2f saves/s, 1,000 pchannels on bbolt, group"), "lowwater") / r.get(find("2f saves/s, 1,000 pchannels on bbolt, one txn"), "lowwater")
	fmt.Fprintf(&b, "| 2f group commit speed-up (group / one txn per save) | %.1f× | %.1f× | |\n\n", g, l)

	fmt.Fprintf(&b, "## Goals (issue 5)\n\n| goal | lowwater | met |\n| --- | --- | --- |\n")
	for _, goal := range goals {
		v, ok := goal.judge(r)
		mark := "yes"
		if !ok {
			mark = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", goal.text, v, mark)
	}
	fmt.Fprintf(&b, "\nWhat each benchmark does is documented in `bench/doc.go` and above each benchmark.\n")
	fmt.Fprintf(&b, "The runs, as `go test` lines (the report builds the test binary once, then runs each line with -count=1, %d rounds):\n\n```\n", count)
	for _, c := range commands {
		fmt.Fprintln(&b, c)
	}
	fmt.Fprintf(&b, "```\n")
	return b.String()
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case math.Abs(v) >= 1000:
		return insertCommas(strconv.FormatFloat(math.Round(v), 'f', 0, 64))
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func insertCommas(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func ratio(l, b float64) string {
	if math.IsNaN(l) || math.IsNaN(b) || b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", l/b)
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH + " CPU"
	}
	for l := range strings.SplitSeq(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH + " CPU"
}

func goVersion() string {
	out, err := exec.Command(goCmd, "env", "GOVERSION").Output()
	if err != nil {
		return runtime.Version()
	}
	return strings.TrimSpace(string(out))
}
