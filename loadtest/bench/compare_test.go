package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// side is the rows of runs of one commit: per run, R and one accept row with the given ratio.
func side(ratios ...float64) []Row {
	var rows []Row
	for i, ratio := range ratios {
		rows = append(rows,
			Row{Round: 1, Kind: kindR, What: "R", Config: "r", Figure: 1000 + float64(i), Unit: "rows/s"},
			Row{Round: 1, Kind: kindAccept, What: "accept mysql", Config: "a", Figure: 1000 * ratio, Unit: "accepted/s", Ratio: ratio, RatioTo: "R"})
	}
	return rows
}

// TestCompareSides: a difference is beyond the spread only when the sides do not overlap; a
// measurement of one side only is left out; a round without its yardstick does not count.
func TestCompareSides(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   []Row
		beyond bool
		change float64
	}{
		{"a 10 % slowdown, runs tight", side(2.0, 2.05, 1.98), side(1.8, 1.82, 1.79), true, -0.1},
		{"the same commit, runs apart", side(2.0, 1.6, 2.3), side(2.1, 1.7, 1.9), false, -0.05},
		{"one run a side proves nothing", side(2.0), side(1.0), false, -0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := compareSides(tc.a, tc.b)
			if len(cs) != 2 || cs[0].What != "R" || cs[1].What != "accept mysql" {
				t.Fatalf("compared %+v, want R then accept mysql", cs)
			}
			c := cs[1]
			if c.Beyond != tc.beyond || c.Change < tc.change-0.001 || c.Change > tc.change+0.001 {
				t.Errorf("beyond %v change %.3f, want %v %.3f (%+v)", c.Beyond, c.Change, tc.beyond, tc.change, c)
			}
		})
	}
	a := append(side(2, 2), Row{Kind: kindRead, What: "read path", Config: "x", Figure: 10, Ratio: 0.8, RatioTo: "bare gin GET"})
	b := append(side(2, 2), Row{Round: 2, Kind: kindAccept, What: "accept mysql", Config: "a", Figure: 5, RatioTo: "R"}) // its round had no R
	cs := compareSides(a, b)
	if len(cs) != 2 {
		t.Fatalf("compared %d measurements, want the 2 on both sides: %+v", len(cs), cs)
	}
	if n := len(cs[1].B); n != 2 {
		t.Errorf("side B counts %d accept runs, want 2 (the one without a ratio left out)", n)
	}
}

// TestRunCompare reads two sides' reports as make bench-compare leaves them and prints the verdict.
func TestRunCompare(t *testing.T) {
	dirA, dirB, out := t.TempDir(), t.TempDir(), t.TempDir()
	for i, ratio := range []float64{2.0, 2.05, 1.98} {
		for _, s := range []struct {
			dir   string
			ratio float64
		}{{dirA, ratio}, {dirB, ratio * 0.9}} {
			rep := &Report{RunID: "20261129-00000" + string(rune('0'+i)), Rows: side(s.ratio)}
			if _, err := writeReport(s.dir, rep); err != nil {
				t.Fatal(err)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"compare", "-a", dirA, "-b", dirB, "-a-label", "abc123", "-b-label", "def456", "-out", out}, noEnv, &stdout, &stderr); err != nil {
		t.Fatalf("compare: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"## seckill-go bench compare: abc123 → def456",
		"3 runs of A, 3 of B",
		"| accept mysql | a | 2.00 of R | 1.80 | -10.0 % | 2.00, 2.05, 1.98 | 1.80, 1.84, 1.78 | **beyond the spread** |",
		"report: " + out,
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the comparison lacks %q:\n%s", want, stdout.String())
		}
	}
	if err := run(context.Background(), []string{"compare", "-a", dirA}, noEnv, &stdout, &stderr); err == nil {
		t.Error("compare without -b: no error")
	}
	if err := run(context.Background(), []string{"compare", "-a", dirA, "-b", t.TempDir()}, noEnv, &stdout, &stderr); err == nil {
		t.Error("compare with an empty side: no error")
	}
}
