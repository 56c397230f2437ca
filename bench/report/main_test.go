package main

import (
	"strings"
	"testing"
)

func TestVerdict(t *testing.T) {
	atMost := goal{unit: "sec/op", most: 1.0}
	atMost15 := goal{unit: "sec/op", most: 1.5}
	atLeast := goal{unit: "saves/s", least: 1.0, atLeast: true}
	cpu := goal{unit: "cpu-µs/save", most: 6}
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
