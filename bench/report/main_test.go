package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestVerdict(t *testing.T) {
	atMost := goal{unit: "sec/op", most: 1.0}
	atMost15 := goal{unit: "sec/op", most: 1.5}
	atLeast := goal{unit: "saves/s", least: 1.0, atLeast: true}
	cpu := goal{unit: "cpu-µs/save", most: 6, absolute: true}
	for _, c := range []struct {
		name     string
		g        goal
		num, den []float64
		want     string // a prefix of the verdict
	}{
		{"below, every round", atMost, []float64{40, 42, 44, 46, 48, 50}, []float64{70, 72, 74, 76, 78, 80}, "yes"},
		{"above, every round", atMost, []float64{70, 72, 74, 76, 78, 80}, []float64{40, 42, 44, 46, 48, 50}, "**no**"},
		{"below on medians, rounds mixed", atMost, []float64{50, 53, 55, 57, 60, 64}, []float64{51, 54, 57, 59, 62, 63}, "even (p="},
		{"above on medians, rounds mixed", atMost, []float64{51, 54, 57, 59, 62, 63}, []float64{50, 53, 55, 57, 60, 64}, "even (p="},
		// The bound scales the reference: 1.5 × [100, 110] is [150, 165].
		{"under 1.5×, every round", atMost15, []float64{130, 132, 134, 136, 138, 140}, []float64{100, 102, 104, 106, 108, 110}, "yes"},
		{"over 1.0× but under 1.5×, mixed", atMost15, []float64{140, 150, 155, 160, 165, 170}, []float64{100, 102, 104, 106, 108, 110}, "even (p="},
		{"at least, every round", atLeast, []float64{100, 102, 104, 106, 108, 110}, []float64{60, 62, 64, 66, 68, 70}, "yes"},
		{"at least, short every round", atLeast, []float64{60, 62, 64, 66, 68, 70}, []float64{100, 102, 104, 106, 108, 110}, "**no**"},
		// CPU per save is judged against the bound itself, not the reference.
		{"cpu, under every round", cpu, []float64{5, 5.1, 5.2, 5.3, 5.4, 5.5}, []float64{7, 8, 9, 7, 8, 9}, "yes"},
		{"cpu, over every round", cpu, []float64{10, 11, 12, 13, 14, 15}, []float64{1, 2, 3, 1, 2, 3}, "**no**"},
		{"cpu, straddling", cpu, []float64{5, 5.5, 5.9, 6.1, 6.5, 7}, []float64{7, 8, 9, 7, 8, 9}, "even (p="},
		// Five rounds of six under the bound do not tell it: a sign test
		// gives p = 14/64, whatever the reference's rounds.
		{"cpu, five of six under", cpu, []float64{5, 5.1, 5.2, 5.3, 5.4, 6.5}, []float64{7, 8, 9, 7, 8, 9}, "even (p=0.22; medians: yes)"},
		{"cpu, five of six under, three reference rounds", cpu, []float64{5, 5.1, 5.2, 5.3, 5.4, 6.5}, []float64{7, 8, 9}, "even (p=0.22; medians: yes)"},
		{"cpu, five of six under, twelve reference rounds", cpu, []float64{5, 5.1, 5.2, 5.3, 5.4, 6.5}, []float64{7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8, 9}, "even (p=0.22; medians: yes)"},
		// A goal at least, its rounds on both sides of the target.
		{"at least, mixed", atLeast, []float64{95, 99, 101, 103, 104, 108}, []float64{96, 98, 100, 102, 105, 107}, "even (p="},
		// At the target to the letter, every round: met on the medians,
		// and nothing told (p = 1), either way.
		{"at most, at the target", atMost15, []float64{150, 150, 150, 150, 150, 150}, []float64{100, 100, 100, 100, 100, 100}, "even (p=1.00; medians: yes)"},
		{"at least, at the target", atLeast, []float64{100, 100, 100, 100, 100, 100}, []float64{100, 100, 100, 100, 100, 100}, "even (p=1.00; medians: yes)"},
		{"cpu, at the bound", cpu, []float64{6, 6, 6, 6, 6, 6}, []float64{7, 8, 9, 7, 8, 9}, "even (p=1.00; medians: yes)"},
	} {
		if got := verdict(c.g, c.num, c.den); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: verdict = %q, want %q…", c.name, got, c.want)
		}
	}
	// The medians' verdict rides along with "even".
	if got := verdict(atMost, []float64{50, 53, 55, 57, 60, 64}, []float64{51, 54, 57, 59, 62, 63}); !strings.HasSuffix(got, "medians: yes)") {
		t.Errorf("below on medians: verdict = %q, want the medians' yes", got)
	}
	if got := verdict(atMost, []float64{51, 54, 57, 59, 62, 63}, []float64{50, 53, 55, 57, 60, 64}); !strings.HasSuffix(got, "medians: **no**)") {
		t.Errorf("above on medians: verdict = %q, want the medians' no", got)
	}
}

func TestSignTestP(t *testing.T) {
	for _, c := range []struct {
		below, above int
		want         float64
	}{
		{6, 0, 2.0 / 64}, {0, 6, 2.0 / 64}, {5, 1, 14.0 / 64}, {4, 2, 44.0 / 64},
		{3, 3, 1}, {4, 0, 2.0 / 16}, {0, 0, 1}, {1, 0, 1},
	} {
		if got := signTestP(c.below, c.above); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("signTestP(%d, %d) = %v, want %v", c.below, c.above, got, c.want)
		}
	}
}

// Each goal is judged on its own rows, in its own direction, against its
// own bound: rounds a fifth inside the bound meet it and a fifth outside
// miss it, every round telling. A goal whose rows were swapped, whose
// bound divided the reference, or that was judged the wrong way round
// fails one of the two.
func TestEachGoalIsJudgedOnItsRowsAndBound(t *testing.T) {
	ref := []float64{100, 101, 102, 103, 104, 105}
	for _, g := range goals {
		bound := g.most
		if g.atLeast {
			bound = g.least
		}
		inside, outside := 0.8, 1.25
		if g.atLeast {
			inside, outside = outside, inside
		}
		for _, c := range []struct {
			factor float64
			want   string
		}{{inside, "| yes |"}, {outside, "| **no** |"}} {
			measured := make([]float64, len(ref))
			for i, v := range ref {
				measured[i] = v * bound * c.factor
				if g.absolute {
					measured[i] = bound * c.factor * v / 100
				}
			}
			s := samples{
				fmt.Sprintf(g.bench, g.num): {g.unit: measured},
				fmt.Sprintf(g.bench, g.den): {g.unit: ref},
			}
			if row := judge(s, g); !strings.HasSuffix(row, c.want+"\n") {
				t.Errorf("%s at %.2f× its bound: %q, want it to end %q", g.key, c.factor, row, c.want)
			}
		}
	}
}

// Every goal measures lowwater against a reference, on rows the newest
// run kept holds, in its unit: a goal that named a benchmark, an impl or
// a unit the benchmarks do not write would be judged "not measured" in
// every run.
func TestEachGoalMeasuresLowwaterOnRowsOfTheNewestRun(t *testing.T) {
	runs, err := readRuns(filepath.Join("..", "runs"), runSpan{})
	if err != nil {
		t.Fatal(err)
	}
	newest := runs[len(runs)-1]
	ours := func(impl string) bool { return impl == "lowwater" || impl == "sender" }
	for _, g := range goals {
		// The measured side is lowwater's (raw Send, or the Sender), the
		// reference never: a goal with its sides swapped is caught here.
		if !ours(g.num) || ours(g.den) {
			t.Errorf("goal %s measures %s against %s", g.key, g.num, g.den)
		}
		for _, impl := range []string{g.num, g.den} {
			name := fmt.Sprintf(g.bench, impl)
			if len(newest.res[name][g.unit]) == 0 {
				t.Errorf("goal %s: run %s has no %s in %s", g.key, newest.name, name, g.unit)
			}
		}
	}
}

// A figure shows to two places, and to three or four where two would put
// it at the bound it misses or only just meets.
func TestNearBound(t *testing.T) {
	for _, c := range []struct {
		v, bound float64
		want     string
	}{
		{0.9990, 1, "0.999"}, {1.004, 1, "1.004"}, {1, 1, "1.00"}, {1.13, 1, "1.13"},
		{1.2013, 1.2, "1.201"}, {0.97, 1.2, "0.97"}, {0.4981, 0.5, "0.498"},
		{1.0004, 1, "1.0004"}, {1.00004, 1, "1.0000"},
		{6.004, 6, "6.004"}, {5.28, 6, "5.28"}, // CPU per save, in µs
	} {
		if got := nearBound(c.v, c.bound); got != c.want {
			t.Errorf("nearBound(%v, %v) = %q, want %q", c.v, c.bound, got, c.want)
		}
	}
	// In RESULTS.md, 3c's ratio is the baseline's, not held to its bound.
	for _, g := range goals {
		if g.key != "3c" {
			continue
		}
		s := samples{
			fmt.Sprintf(g.bench, g.num): {g.unit: []float64{5, 5, 5, 5, 5, 5}},
			fmt.Sprintf(g.bench, g.den): {g.unit: []float64{5.001, 5.001, 5.001, 5.001, 5.001, 5.001}},
		}
		if row := judge(s, g); !strings.Contains(row, "| 1.00× |") {
			t.Errorf("3c's row shows its ratio to the baseline other than to two places: %q", row)
		}
	}
}

// A goal whose rows a run lacks is not measured there.
func TestJudgeOfAGoalNotMeasured(t *testing.T) {
	g := goals[0]
	s := samples{fmt.Sprintf(g.bench, g.num): {g.unit: []float64{1, 2, 3, 4, 5, 6}}}
	if row := judge(s, g); !strings.HasSuffix(row, "| n/a | n/a | n/a | not measured |\n") {
		t.Errorf("judge without the reference's rows = %q", row)
	}
}

// history reads each kept run's own record and judges every goal as
// RESULTS.md does; a run that did not measure a goal counts for none.
func TestHistory(t *testing.T) {
	dir := t.TempDir()
	run := func(name, header string, sender, mutex float64) {
		var b strings.Builder
		b.WriteString(header)
		for range 6 {
			fmt.Fprintf(&b, "BenchmarkUpdate/impl=sender/producers=1-2 \t1\t%g ns/op\n", sender)
			fmt.Fprintf(&b, "BenchmarkUpdate/impl=mutex/producers=1-2 \t1\t%g ns/op\n", mutex)
		}
		b.WriteString("PASS\n")
		if err := os.WriteFile(filepath.Join(dir, name+".txt"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A run of group commit too: 3c's column gives the CPU per save,
	// 7.00 µs, a miss though it is 0.70× the baseline's.
	cpuRun := "BenchmarkGroupCommit/impl=lowwater/commit=group-2 \t1\t7 cpu-µs/save\n" +
		"BenchmarkGroupCommit/impl=baseline/commit=group-2 \t1\t10 cpu-µs/save\n"
	run("2026-01-01-1000", strings.Repeat(cpuRun, 6), 40, 50)                                             // 0.80×, met
	run("2026-01-02-1000", commitKey+": abc1234\n"+loadKey+": 0.50 0.40 0.30\ncpu: Some CPU  \n", 60, 50) // 1.20×, missed
	md, err := history(dir, runSpan{}, "runs")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"from 2 runs kept in [",
		"| 1a: one update through the Sender ≤ 1.0× the mutex design, 1 producer | 2 | 0.80× / 1.00× / 1.20× | 1 | 1 / 1 |",
		"| 1b: one update through the Sender ≤ 1.0× the mutex design, 8 producers | 0 | | | |",
		"| 2026-01-01-1000 | – | – | – | 0.80 | – | – | – | – | – | **7.00** |",
		"| 2026-01-02-1000 | abc1234 | Some CPU | 0.50 0.40 0.30 | **1.20** | – |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("history lacks %q:\n%s", want, md)
		}
	}
	if _, err := history(t.TempDir(), runSpan{}, "runs"); err == nil {
		t.Error("history of no run: no error")
	}
	// since leaves the earlier runs out, until the later ones.
	md, err = history(dir, runSpan{since: "2026-01-02"}, "runs")
	if err != nil || !strings.Contains(md, "from 1 run kept in [") || strings.Contains(md, "2026-01-01-1000") {
		t.Errorf("history since 2026-01-02 = %v:\n%s", err, md)
	}
	md, err = history(dir, runSpan{until: "2026-01-01-1000"}, "runs")
	if err != nil || !strings.Contains(md, "from 1 run kept in [") || strings.Contains(md, "2026-01-02-1000") {
		t.Errorf("history until 2026-01-01-1000 = %v:\n%s", err, md)
	}
	// A file that holds no result is no run, and is named.
	if err := os.WriteFile(filepath.Join(dir, "x.txt"), []byte("hello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := history(dir, runSpan{}, "runs"); err == nil || !strings.Contains(err.Error(), "x.txt: no benchmark result") {
		t.Errorf("history with a file that is no run: %v", err)
	}
	// A run cut short is refused, and named: its rounds are not all there.
	cut := t.TempDir()
	whole, err := os.ReadFile(filepath.Join(dir, "2026-01-01-1000.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cut, "2026-01-03-1000.txt"), whole[:len(whole)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := history(cut, runSpan{}, "runs"); err == nil || !strings.Contains(err.Error(), "2026-01-03-1000.txt: cut short") {
		t.Errorf("history with a run cut short: %v", err)
	}
}

// keep never overwrites a run kept before in the same minute.
func TestKeepNamesEachRunApart(t *testing.T) {
	dir := t.TempDir()
	began := time.Date(2026, 12, 3, 14, 5, 0, 0, time.UTC)
	var paths []string
	for i := range 3 {
		p, err := keep(dir, began, []byte{byte('a' + i)})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(p))
	}
	want := []string{"2026-12-03-1405.txt", "2026-12-03-1405-2.txt", "2026-12-03-1405-3.txt"}
	for i := 4; i <= 10; i++ {
		p, err := keep(dir, began, []byte{'x'})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Base(p))
		want = append(want, fmt.Sprintf("2026-12-03-1405-%d.txt", i))
	}
	if !slices.Equal(paths, want) {
		t.Fatalf("kept as %v, want %v", paths, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, want[0])); string(b) != "a" {
		t.Fatalf("the first run was overwritten: %q", b)
	}
	// And they are read in the order they ran.
	for _, p := range paths {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("BenchmarkX-2 \t1\t1 ns/op\nPASS\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := readRuns(dir, runSpan{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.name+".txt")
	}
	if !slices.Equal(names, want) {
		t.Fatalf("read as %v, want %v", names, want)
	}
	// until takes every run of its minute, and none after it.
	if runs, err := readRuns(dir, runSpan{until: "2026-12-03-1405"}); err != nil || len(runs) != len(want) {
		t.Fatalf("until the minute the runs were kept: %d runs, %v; want %d", len(runs), err, len(want))
	}
	if runs, err := readRuns(dir, runSpan{until: "2026-12-03-1404"}); err != nil || len(runs) != 0 {
		t.Fatalf("until the minute before: %d runs, %v; want none", len(runs), err)
	}
}

// The machine is named as the benchmarks named it, and as /proc/cpuinfo
// does where that differs.
func TestMachine(t *testing.T) {
	for _, c := range []struct{ bench, model, want string }{
		{"", "AMD EPYC", "AMD EPYC"},
		{"AMD EPYC", "AMD EPYC", "AMD EPYC"},
		{"Oxide Virtual Turin-like Processor", "AMD EPYC", "Oxide Virtual Turin-like Processor (/proc/cpuinfo: AMD EPYC)"},
	} {
		if got := machine(c.bench, c.model); got != c.want {
			t.Errorf("machine(%q, %q) = %q, want %q", c.bench, c.model, got, c.want)
		}
	}
}

// The README's table of figures: each side's range of medians over the
// runs, in a reader's units, and each run's ratio in the order given.
func TestFiguresTable(t *testing.T) {
	res := func(lines ...string) samples {
		s := samples{}
		for _, l := range lines {
			name, rest, _ := strings.Cut(l, " ")
			var v float64
			var unit string
			fmt.Sscanf(rest, "%g %s", &v, &unit)
			if s[name] == nil {
				s[name] = map[string][]float64{}
			}
			s[name][unit] = append(s[name][unit], v)
		}
		return s
	}
	runs := []keptRun{
		{name: "2026-01-01-1000", commit: "abc1234", cpu: "Some CPU", load: "0.5 0.4 0.3", res: res(
			"Update/impl=sender/producers=1 30e-9 sec/op",
			"Update/impl=mutex/producers=1 40e-9 sec/op",
			"GroupCommit/impl=lowwater/commit=group 345000 saves/s",
			"GroupCommit/impl=baseline/commit=group 300000 saves/s",
			"Scale/impl=lowwater/pchannels=10000/vchannels=100 0 goroutines",
			"Scale/impl=baseline/pchannels=10000/vchannels=100 10000 goroutines",
		)},
		{name: "2026-01-01-1010", res: res(
			"Update/impl=sender/producers=1 46e-9 sec/op",
			"Update/impl=mutex/producers=1 40e-9 sec/op",
		)},
	}
	md := figuresTable(runs)
	for _, want := range []string{
		"Runs: 1. 2026-01-01-1000 (commit abc1234, cpu Some CPU, load at start 0.5 0.4 0.3);\n2. 2026-01-01-1010 (commit –, cpu –, load at start –).",
		"| what | lowwater | reference | ratio, runs 1 / 2 |",
		"| one update through `actors.Sender`, 1 producer | 30.0–46.0 ns | mutex, 40.0 ns | 0.75× / 1.15× |",
		"| group commit, 1,000 pchannels on bbolt | 345k saves/s | baseline, 300k saves/s | 1.15× / – |",
		"| one raw `Send` update, 1 producer | – | hand-off floor, – | – / – |",
		"| idle goroutines, 10,000 pchannels | 0 | baseline, 10,000 |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the table lacks %q:\n%s", want, md)
		}
	}
}

// A figure whose median in one run lies outside its interval in another
// is named under the table; one that stayed inside, or left it by less
// than the table shows, is not.
func TestFiguresTableNamesWhatMoved(t *testing.T) {
	rounds := func(bench, unit string, vs ...float64) samples {
		return samples{bench: {unit: vs}}
	}
	run := func(sender, mutex []float64) keptRun {
		s := rounds("Update/impl=sender/producers=1", "sec/op", sender...)
		s["Update/impl=mutex/producers=1"] = rounds("", "sec/op", mutex...)[""]
		return keptRun{res: s}
	}
	still := []float64{40e-9, 41e-9, 39e-9, 40e-9, 42e-9, 38e-9}
	runs := []keptRun{
		run([]float64{30e-9, 31e-9, 29e-9, 30e-9, 30e-9, 31e-9}, still),
		run([]float64{46e-9, 45e-9, 47e-9, 46e-9, 46e-9, 48e-9}, still),
	}
	md := figuresTable(runs)
	want := "- Update/impl=sender/producers=1 (sec/op): 46.0 ns in run 2, outside run 1's [29.0 ns, 31.0 ns]\n"
	if !strings.Contains(md, want) || strings.Contains(md, "impl=mutex") {
		t.Errorf("the table names as moved other than the Sender's update alone:\n%s", md)
	}
	// 31.04 ns against an interval up to 31.0 ns: outside, by less than
	// the table shows.
	runs[1] = run([]float64{29.5e-9, 31.04e-9, 31.04e-9, 31.04e-9, 31.04e-9, 31.04e-9}, still)
	if md := figuresTable(runs); !strings.Contains(md, "Every median lies within the 95 % interval") {
		t.Errorf("a move the table does not show is named:\n%s", md)
	}
}

func TestInUnit(t *testing.T) {
	for _, c := range []struct {
		v          float64
		unit, want string
	}{
		{37.4e-9, "sec/op", "37.4 ns"},
		{127.2e-9, "sec/op", "127 ns"},
		{2.853e6, "updates/s", "2.85M updates/s"},
		{22164, "saves/s", "22.2k saves/s"},
		{757, "saves/s", "757 saves/s"},
		{1231, "saves/s", "1,231 saves/s"},
		{0.953, "lag-p99-ms", "0.953 ms"},
		{1.082, "lag-p50-ms", "1.08 ms"},
		{11468.8, "heap-bytes/pchannel", "11.2 KiB"},
		{6.618, "cpu-µs/save", "6.62 µs"},
	} {
		s := inUnit(c.v, c.unit)
		if got := s.String(); got != c.want {
			t.Errorf("inUnit(%g, %s) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

// The README's table of figures is what the command it quotes prints over
// the runs it names: a table edited by hand, or left behind when the
// command was pointed at newer runs, fails here.
func TestREADMEFiguresAreTheCommandsOutput(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	const cmd = "go run ./bench/report -figures "
	at := strings.Index(text, cmd)
	if at < 0 {
		t.Fatalf("the README quotes no %q", cmd)
	}
	line, _, _ := strings.Cut(text[at+len(cmd):], "```")
	var paths []string
	for _, f := range strings.Fields(strings.ReplaceAll(line, "\\\n", " ")) {
		if !strings.HasPrefix(f, "bench/runs/") {
			t.Fatalf("the README's command names %q, not a run kept in bench/runs", f)
		}
		paths = append(paths, filepath.Join("..", "..", f))
	}
	if len(paths) < 2 {
		t.Fatalf("the README's command names %d runs; its figures are ranges over at least two", len(paths))
	}
	runs := make([]keptRun, len(paths))
	for i, p := range paths {
		if runs[i], err = readRun(p); err != nil {
			t.Fatal(err)
		}
	}
	if want := figuresTable(runs); !strings.Contains(text, want) {
		t.Errorf("the README's table is not the output of its command over %v; it should hold:\n%s", paths, want)
	}
}
