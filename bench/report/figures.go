package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// figure is one row of the README's table of figures: what lowwater (or
// the Sender) measured against a reference, in each of a few runs. The
// goals judge a run; the figures describe a state of the code on a
// machine, so that the README's table is made by a command, from runs
// kept in bench/runs, and not copied out of them by hand.
type figure struct {
	text        string
	bench, unit string // bench names the benchmark with %s for the impl
	num, den    string
	ref         string // names the reference in its column
	// noRatio leaves the ratio out where it says nothing (0 goroutines
	// against 10,000).
	noRatio bool
}

var figures = []figure{
	{text: "one update through `actors.Sender`, 1 producer", bench: "Update/impl=%s/producers=1", unit: "sec/op", num: "sender", den: "mutex", ref: "mutex"},
	{text: "one update through `actors.Sender`, 8 producers", bench: "Update/impl=%s/producers=8", unit: "sec/op", num: "sender", den: "mutex", ref: "mutex"},
	{text: "one raw `Send` update, 1 producer", bench: "Update/impl=%s/producers=1", unit: "sec/op", num: "lowwater", den: "floor", ref: "hand-off floor"},
	{text: "one raw `Send` update, 8 producers", bench: "Update/impl=%s/producers=8", unit: "sec/op", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "`UpdateBatch` of 64, per update", bench: "UpdateBatch/impl=%s/batch=64", unit: "sec/op", num: "lowwater", den: "baseline", ref: "baseline's 64 calls"},
	{text: "group commit, 1,000 pchannels on bbolt", bench: "GroupCommit/impl=%s/commit=group", unit: "saves/s", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same against raw bbolt `db.Batch`", bench: "GroupCommit/impl=%s/commit=group", unit: "saves/s", num: "lowwater", den: "bboltbatch", ref: "`db.Batch`"},
	{text: "group commit, 100 pchannels on bbolt", bench: "GroupCommitFew/impl=%s/commit=group", unit: "saves/s", num: "lowwater", den: "bboltbatch", ref: "`db.Batch`"},
	{text: "CPU per save, group commit", bench: "GroupCommit/impl=%s/commit=group", unit: "cpu-µs/save", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "CPU per save, a catalog that costs nothing", bench: "GroupCommit/impl=%s/commit=none", unit: "cpu-µs/save", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "updates/s over 10,000 pchannels", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "updates/s", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same, a Sender per pchannel (nothing to coalesce)", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "updates/s", num: "sender", den: "baseline", ref: "baseline"},
	{text: "one update that raises the minimum, raw `Send`", bench: "UpdateRising/impl=%s/vchannels=100", unit: "sec/op", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same through `actors.Sender`", bench: "UpdateRising/impl=%s/vchannels=100", unit: "sec/op", num: "sender", den: "baseline", ref: "baseline"},
	{text: "persist lag of a burst of 100 such updates, 1 ms catalog, p50", bench: "PersistLag/impl=%s/catalog=1ms", unit: "lag-p50-ms", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same, p99", bench: "PersistLag/impl=%s/catalog=1ms", unit: "lag-p99-ms", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same burst through `actors.Sender`, p50", bench: "PersistLag/impl=%s/catalog=1ms", unit: "lag-p50-ms", num: "sender", den: "baseline", ref: "baseline"},
	{text: "persist lag p99 over 10,000 pchannels", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "lag-p99-ms", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "the same at one load, 500,000 updates/s offered", bench: "Scale/impl=%s/pchannels=10000/vchannels=100/rate=500000", unit: "lag-p99-ms", num: "lowwater", den: "baseline", ref: "baseline"},
	{text: "etcd, 1,000 pchannels, 3 members (`Batcher`)", bench: "EtcdSaves/impl=%s/pchannels=1000/members=3", unit: "saves/s", num: "lowwater", den: "serial", ref: "one txn at a time"},
	{text: "idle goroutines, 10,000 pchannels", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "goroutines", num: "lowwater", den: "baseline", ref: "baseline", noRatio: true},
	{text: "heap per idle pchannel (100 vchannels)", bench: "Scale/impl=%s/pchannels=10000/vchannels=100", unit: "heap-bytes/pchannel", num: "lowwater", den: "baseline", ref: "baseline"},
}

// figuresTable writes the README's table of figures from runs: each
// side's median in every run, given as the range over the runs, and each
// run's ratio of the two, in the order of runs. A run that did not
// measure a row leaves a – in its place.
func figuresTable(runs []keptRun) string {
	var md strings.Builder
	md.WriteString("Runs: ")
	for i, r := range runs {
		if i > 0 {
			md.WriteString(";\n") // a line a run: the README's source stays readable
		}
		fmt.Fprintf(&md, "%d. %s (commit %s, cpu %s, load at start %s)", i+1, r.name, orDash(r.commit), orDash(r.cpu), orDash(r.load))
	}
	md.WriteString(".\n\n| what | lowwater | reference | ratio, runs " + runNumbers(len(runs)) + " |\n| --- | ---: | ---: | ---: |\n")
	for _, f := range figures {
		var nums, dens []float64
		ratios := make([]string, len(runs))
		for i, r := range runs {
			num, okNum := medianOf(r.res, fmt.Sprintf(f.bench, f.num), f.unit)
			den, okDen := medianOf(r.res, fmt.Sprintf(f.bench, f.den), f.unit)
			if okNum {
				nums = append(nums, num)
			}
			if okDen {
				dens = append(dens, den)
			}
			ratios[i] = "–"
			if okNum && okDen && den != 0 {
				ratios[i] = fmt.Sprintf("%.2f×", num/den)
			}
		}
		ratio := strings.Join(ratios, " / ")
		if f.noRatio {
			ratio = ""
		}
		fmt.Fprintf(&md, "| %s | %s | %s, %s | %s |\n", f.text, span(nums, f.unit), f.ref, span(dens, f.unit), ratio)
	}
	md.WriteString(moved(runs))
	return md.String()
}

// moved lists the figures whose median in one run lies outside the 95 %
// interval of its median in another: on a shared machine such a figure
// moved with the machine more than its rounds can tell, and is a
// finding, not a figure to quote. Each benchmark's measure once, however
// many rows show it.
func moved(runs []keptRun) string {
	if len(runs) < 2 {
		return ""
	}
	var lines []string
	seen := map[string]bool{}
	for _, f := range figures {
		for _, impl := range []string{f.num, f.den} {
			bench := fmt.Sprintf(f.bench, impl)
			if seen[bench+" "+f.unit] {
				continue
			}
			seen[bench+" "+f.unit] = true
			if line := movedLine(runs, bench, f.unit); line != "" {
				lines = append(lines, "- "+bench+" ("+f.unit+"): "+line)
			}
		}
	}
	if len(lines) == 0 {
		return "\nEvery median lies within the 95 % interval of its median in the other\nruns.\n"
	}
	return "\nMoved more than its 95 % interval between runs, a finding rather than\na figure to quote (a run's median outside another's interval):\n\n" +
		strings.Join(lines, "\n") + "\n"
}

// movedLine names the first pair of runs where the median of bench's
// unit in one lies outside the other's interval, "" if there is none.
func movedLine(runs []keptRun, bench, unit string) string {
	for i, a := range runs {
		vs := a.res[bench][unit]
		if len(vs) == 0 {
			continue
		}
		in := summarize(vs)
		for j, b := range runs {
			if j == i {
				continue
			}
			m, ok := medianOf(b.res, bench, unit)
			// Outside as the table shows it too: a median a rounding
			// away from the interval moved by nothing a reader sees.
			lo, hi, at := inUnit(in.Lo, unit).String(), inUnit(in.Hi, unit).String(), inUnit(m, unit).String()
			if ok && (m < in.Lo && at != lo || m > in.Hi && at != hi) {
				return fmt.Sprintf("%s in run %d, outside run %d's [%s, %s]", at, j+1, i+1, lo, hi)
			}
		}
	}
	return ""
}

func runNumbers(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = strconv.Itoa(i + 1)
	}
	return strings.Join(s, " / ")
}

// span gives the lowest and highest of vs in unit as a reader reads it,
// one figure if they show alike, – if there is none.
func span(vs []float64, unit string) string {
	if len(vs) == 0 {
		return "–"
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	l, h := inUnit(lo, unit), inUnit(hi, unit)
	if l.n == h.n {
		return l.String()
	}
	if l.suffix == h.suffix {
		return l.n + "–" + h.n + h.suffix
	}
	return l.String() + "–" + h.String()
}

// shown is a figure as the table gives it: a number, then its unit.
type shown struct{ n, suffix string }

func (s shown) String() string { return s.n + s.suffix }

func inUnit(v float64, unit string) shown {
	switch unit {
	case "sec/op":
		return shown{sig3(v * 1e9), " ns"}
	case "cpu-µs/save":
		return shown{strconv.FormatFloat(v, 'f', 2, 64), " µs"}
	case "lag-p50-ms", "lag-p99-ms":
		return shown{sig3(v), " ms"}
	case "heap-bytes/pchannel":
		return shown{strconv.FormatFloat(v/1024, 'f', 1, 64), " KiB"}
	case "goroutines":
		return shown{grouped(v), ""}
	}
	// A rate: saves/s, updates/s.
	switch {
	case v >= 1e6:
		return shown{sig3(v / 1e6), "M " + unit}
	case v >= 1e4:
		return shown{sig3(v / 1e3), "k " + unit}
	}
	return shown{grouped(v), " " + unit}
}

// grouped gives v rounded to a whole number, its thousands set apart by
// commas: 10,000.
func grouped(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// sig3 gives v with three significant figures, no exponent, none of them
// after the point beyond what three take: 345, 26.1, 0.953.
func sig3(v float64) string {
	if v == 0 {
		return "0"
	}
	digits := max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(v, 'f', digits, 64)
}
