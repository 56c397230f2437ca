package main

import (
	"testing"

	"golang.org/x/perf/benchmath"
)

func TestVerdict(t *testing.T) {
	iv := func(lo, center, hi float64) benchmath.Summary {
		return benchmath.Summary{Lo: lo, Center: center, Hi: hi}
	}
	atMost := goal{unit: "sec/op", most: 1.0}
	atMost15 := goal{unit: "sec/op", most: 1.5}
	atLeast := goal{unit: "saves/s", least: 1.0, atLeast: true}
	cpu := goal{unit: "cpu-µs/save", most: 6}
	for _, c := range []struct {
		name     string
		g        goal
		num, den benchmath.Summary
		want     string
	}{
		{"below, clear", atMost, iv(40, 50, 60), iv(70, 80, 90), "yes"},
		{"above, clear", atMost, iv(80, 90, 100), iv(40, 50, 60), "**no**"},
		{"below, overlapping", atMost, iv(45, 55, 65), iv(50, 60, 70), "even (medians: yes)"},
		{"above, overlapping", atMost, iv(50, 62, 70), iv(50, 60, 70), "even (medians: **no**)"},
		// The bound scales the reference's interval: 1.5 × [100, 120].
		{"under 1.5×, clear", atMost15, iv(130, 140, 145), iv(100, 110, 120), "yes"},
		{"under 1.5×, overlapping", atMost15, iv(130, 160, 190), iv(100, 110, 120), "even (medians: yes)"},
		{"at least, clear", atLeast, iv(100, 110, 120), iv(60, 80, 90), "yes"},
		{"at least, short and clear", atLeast, iv(50, 60, 70), iv(100, 110, 120), "**no**"},
		{"at least, overlapping", atLeast, iv(80, 95, 110), iv(90, 100, 120), "even (medians: **no**)"},
		// CPU per save is judged against the bound itself, not the reference.
		{"cpu, clear", cpu, iv(5, 5.2, 5.5), iv(7, 8, 9), "yes"},
		{"cpu, over and clear", cpu, iv(10, 12, 14), iv(1, 2, 3), "**no**"},
		{"cpu, straddling", cpu, iv(5, 6.5, 7), iv(7, 8, 9), "even (medians: **no**)"},
	} {
		if got := verdict(c.g, c.num, c.den); got != c.want {
			t.Errorf("%s: verdict = %q, want %q", c.name, got, c.want)
		}
	}
}
