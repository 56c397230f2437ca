package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// A run's own record of itself: benchfmt configuration lines that the
// report writes at the top of the raw output, before any result. Runs
// kept from before the report wrote them have neither.
const (
	commitKey = "lowwater-commit" // the checkout measured: git's short hash, "+dirty" if changed
	loadKey   = "load-at-start"   // the 1, 5 and 15 min load average when the run began
)

// keptRun is one run's raw output kept in the runs directory.
type keptRun struct {
	name         string // the file name without .txt: when it began, UTC
	commit, load string // "" for a run that did not record them
	// cpu is the processor as go test names it (its cpu line): the
	// host, which /proc/cpuinfo may name alike for two that differ.
	cpu string
	res samples
}

// runSpan is which of the runs kept are judged: those named since or later
// and until or earlier, either empty for no bound. until takes the runs
// kept in its minute after it too (its "-2", "-3"): a figure quoted as of
// a run stays what the command gives once more runs are kept.
type runSpan struct{ since, until string }

func (s runSpan) holds(name string) bool {
	return name >= s.since && (s.until == "" || name <= s.until || strings.HasPrefix(name, s.until))
}

// readRuns reads the runs kept in dir that s holds, in the order of their
// names, which begin with when each ran. A run kept in the same minute as
// another is named after it with "-2": names are compared without ".txt",
// which sorts before it.
func readRuns(dir string, s runSpan) ([]keptRun, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("the runs: %w", err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	runs := make([]keptRun, 0, len(paths))
	for _, p := range paths {
		if !s.holds(strings.TrimSuffix(filepath.Base(p), ".txt")) {
			continue
		}
		r, err := readRun(p)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b keptRun) int { return compareNames(a.name, b.name) })
	return runs, nil
}

// compareNames orders run names as they ran: by the minute they began,
// then the runs of one minute by their number (keep names the second
// one "-2"), "-10" after "-2".
func compareNames(a, b string) int {
	const minute = len("2006-01-02-1504")
	if len(a) < minute || len(b) < minute || a[:minute] != b[:minute] {
		return strings.Compare(a, b)
	}
	na, errA := strconv.Atoi(strings.TrimPrefix(a[minute:], "-"))
	nb, errB := strconv.Atoi(strings.TrimPrefix(b[minute:], "-"))
	switch {
	case a[minute:] == "" || b[minute:] == "":
		return len(a) - len(b) // the first of the minute has no number
	case errA == nil && errB == nil:
		return na - nb
	}
	return strings.Compare(a, b)
}

// readRun reads one kept run. A run ends as the test binary ends one that
// passed, with PASS: a file cut short (a disk that filled, a copy that
// stopped) would be judged on the rounds it kept, and is refused instead.
func readRun(path string) (keptRun, error) {
	r := keptRun{name: strings.TrimSuffix(filepath.Base(path), ".txt")}
	raw, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	r.res = samples{}
	br := benchfmt.NewReader(bytes.NewReader(raw), path)
	for br.Scan() {
		res, ok := br.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		if r.commit == "" {
			r.commit = res.GetConfig(commitKey)
			r.load = res.GetConfig(loadKey)
		}
		if r.cpu == "" {
			r.cpu = strings.TrimSpace(res.GetConfig("cpu"))
		}
		r.res.add(res)
	}
	if err := br.Err(); err != nil {
		return r, err
	}
	if len(r.res) == 0 {
		return r, fmt.Errorf("%s: no benchmark result in it: not a run of make bench", path)
	}
	if words := strings.Fields(string(raw)); words[len(words)-1] != "PASS" {
		return r, fmt.Errorf("%s: cut short: it does not end with PASS, as a whole run of make bench does", path)
	}
	return r, nil
}

// ratio is goal g's ratio of medians in a run, and whether the run
// measured it: runs kept from before a benchmark existed did not.
func ratio(s samples, g goal) (float64, bool) {
	num, okNum := medianOf(s, fmt.Sprintf(g.bench, g.num), g.unit)
	den, okDen := medianOf(s, fmt.Sprintf(g.bench, g.den), g.unit)
	if !okNum || !okDen {
		return 0, false
	}
	return num / den, true
}

// medianOf is the median of a benchmark's unit over a run's rounds, and
// whether the run measured it.
func medianOf(s samples, bench, unit string) (float64, bool) {
	vs := s[bench][unit]
	if len(vs) == 0 {
		return 0, false
	}
	return summarize(vs).Center, true
}

// history writes, for every goal, what the runs kept in dir that s holds
// measured of it: how many met it, the spread of its ratio, and each
// run's ratio. A single run is one state of a shared machine; the spread
// over many is what a figure can be quoted with. link is dir as the
// written file reaches it.
func history(dir string, s runSpan, link string) (string, error) {
	runs, err := readRuns(dir, s)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("no run kept in %s from %q until %q", dir, s.since, s.until)
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# lowwater benchmarks over time\n\nGenerated by `make bench` and `make bench-history` (`go run ./bench/report`) from %s kept in [%s](%s), %s to %s. ",
		plural(len(runs), "run"), filepath.Base(dir), link, runs[0].name, runs[len(runs)-1].name)
	md.WriteString("Each is one `make bench` (its raw `go test -bench` output, named by when it began, UTC), on a shared machine whose load moves the figures; " +
		"the runs span changes to the code as well as to the machine, and a run made since the report records them names the commit it measured and the load it began under.\n\n")
	md.WriteString("## Each goal over the runs\n\nratio = lowwater (or the Sender) over the reference, on the medians of each run's rounds, as in RESULTS.md. " +
		"Met on medians: the runs whose medians met the goal. Told: the runs whose rounds told the figure from its target (benchstat's test), those that met it / those that missed it; the others came out even.\n\n")
	md.WriteString("| goal | runs | ratio: min / median / max | met on medians | told: met / missed |\n| --- | ---: | ---: | ---: | ---: |\n")
	for _, g := range goals {
		var rs, cpu []float64 // cpu: lowwater's CPU per save, the goal's own unit
		var onMedians, toldMet, toldMissed int
		for _, r := range runs {
			v, ok := ratio(r.res, g)
			if !ok {
				continue
			}
			rs = append(rs, v)
			if g.absolute {
				v, _ := medianOf(r.res, fmt.Sprintf(g.bench, g.num), g.unit) // measured: ratio said so
				cpu = append(cpu, v)
			}
			o := judgeRun(r.res, g)
			switch {
			case o.met:
				onMedians++
				if o.told {
					toldMet++
				}
			case o.told:
				toldMissed++
			}
		}
		if len(rs) == 0 {
			fmt.Fprintf(&md, "| %s: %s | 0 | | | |\n", g.key, g.text)
			continue
		}
		slices.Sort(rs)
		spread := fmt.Sprintf("%.2f× / %.2f× / %.2f×", rs[0], median(rs), rs[len(rs)-1])
		if len(cpu) > 0 {
			slices.Sort(cpu)
			spread += fmt.Sprintf(" (%.2f / %.2f / %.2f µs)", cpu[0], median(cpu), cpu[len(cpu)-1])
		}
		fmt.Fprintf(&md, "| %s: %s | %d | %s | %d | %d / %d |\n", g.key, g.text, len(rs),
			spread, onMedians, toldMet, toldMissed)
	}
	md.WriteString("\n## Each run\n\nThe ratio of each goal, named as above, in bold where the run's medians missed it; – where the run did not measure it. " +
		"3c gives lowwater's CPU per save in µs instead, the figure its bound is on. " +
		"The cpu is as the benchmarks named it: the host, whose figures another host's need not match.\n\n| run | commit | cpu | load at start |")
	for _, g := range goals {
		fmt.Fprintf(&md, " %s |", g.key)
	}
	md.WriteString("\n| --- | --- | --- | --- |" + strings.Repeat(" ---: |", len(goals)) + "\n")
	for _, r := range runs {
		fmt.Fprintf(&md, "| %s | %s | %s | %s |", r.name, orDash(r.commit), orDash(r.cpu), orDash(r.load))
		for _, g := range goals {
			if v, ok := ratio(r.res, g); ok {
				if g.absolute {
					v, _ = medianOf(r.res, fmt.Sprintf(g.bench, g.num), g.unit)
				}
				// A miss in bold, and to three places where two would
				// show it at its bound (0.999 against at least 1.0).
				text := nearBound(v, g.bound())
				if !judgeRun(r.res, g).met {
					text = "**" + text + "**"
				}
				fmt.Fprintf(&md, " %s |", text)
			} else {
				md.WriteString(" – |")
			}
		}
		md.WriteString("\n")
	}
	return md.String(), nil
}

// judgeRun judges goal g on the rounds of a run that measured it.
func judgeRun(s samples, g goal) outcome {
	return judgeRounds(g, s[fmt.Sprintf(g.bench, g.num)][g.unit], s[fmt.Sprintf(g.bench, g.den)][g.unit])
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
