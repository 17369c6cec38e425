package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestLongestGap: the matrix's stall is the run of slices without a sale while units were left.
func TestLongestGap(t *testing.T) {
	tl := func(accepted ...int) []Sample {
		out := make([]Sample, len(accepted))
		for i, a := range accepted {
			out[i].Accepted = a
		}
		return out
	}
	for _, c := range []struct {
		name          string
		tl            []Sample
		left          bool
		longest, tail time.Duration
	}{
		{"sold out without a pause", tl(0, 3, 2, 1, 0, 0), false, 0, 0},
		{"a pause, then sold out", tl(1, 0, 0, 0, 2, 0, 0), false, 300 * time.Millisecond, 0},
		{"stalled to the end", tl(1, 1, 0, 0, 0, 0), true, 400 * time.Millisecond, 400 * time.Millisecond},
		{"never sold", tl(0, 0, 0), true, 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		longest, tail := longestGap(c.tl, c.left)
		if longest != c.longest || tail != c.tail {
			t.Errorf("%s: longest %s, tail %s; want %s, %s", c.name, longest, tail, c.longest, c.tail)
		}
	}
}

// TestWaitQuantile interpolates in the histogram's buckets as histogram_quantile does.
func TestWaitQuantile(t *testing.T) {
	c := zooCounters{wait: map[float64]float64{0.001: 50, 0.01: 90, 0.1: 100, math.Inf(1): 100}}
	for _, q := range []struct{ q, want float64 }{{0.5, 0.001}, {0.7, 0.001 + 0.009*20/40}, {0.99, 0.01 + 0.09*9/10}} {
		if got := c.waitQuantile(q.q); math.Abs(got-q.want) > 1e-9 {
			t.Errorf("q%.2f = %g, want %g", q.q, got, q.want)
		}
	}
	if got := (zooCounters{wait: map[float64]float64{}}).waitQuantile(0.5); got != 0 {
		t.Errorf("no waits: %g, want 0", got)
	}
}

// TestZooCells: a cell's outcome comes from the audit — oversold first, then undersold, then a
// stall — and is judged against the write-ups' expectation.
func TestZooCells(t *testing.T) {
	sr := func(oversold, initial, stock int, violations ...string) *StrategyReport {
		r := &StrategyReport{Oversold: oversold, Violations: violations, Status: map[int]int{429: 7}}
		r.Facts.InitialStock, r.Facts.Stock = initial, stock
		return r
	}
	for _, c := range []struct {
		name string
		sr   *StrategyReport
		want string
	}{
		{"whole", sr(0, 100, 0), outcomePass},
		{"oversold", sr(3, 100, -3, "3 units oversold"), outcomeOversold},
		{"undersold", sr(0, 100, 12, "UNDERSOLD: 12 of 100 units left although 1000 buyers came"), outcomeUndersold},
		{"other breakage", sr(0, 100, 0, "2 purchases accepted twice"), outcomeFail},
	} {
		cell := cellOf(c.sr, outcomePass, "")
		if cell.Outcome != c.want {
			t.Errorf("%s: %s, want %s (%v)", c.name, cell.Outcome, c.want, c.sr.Violations)
		}
		if !strings.Contains(cell.Detail, "7 × 429") {
			t.Errorf("%s: detail %q lacks the 429s", c.name, cell.Detail)
		}
		if cell.ok() != (c.want == outcomePass) {
			t.Errorf("%s: ok() = %v against an expected PASS", c.name, cell.ok())
		}
	}

	stalled := sr(0, 50, 20, "UNDERSOLD: 20 of 50 units left although 200 buyers came")
	stalled.Timeline = make([]Sample, 100)
	stalled.Timeline[10].Accepted = 30
	step := &StepReport{Strategies: []StrategyReport{*stalled}, PerStrategy: []StepStrategy{{RecoverySeconds: -1}},
		Violations: []string{"mysql-lock-table-naive: no purchase accepted after the fault was undone"}}
	cell := stepCell(step, outcomeStall)
	if cell.Outcome != outcomeStall || !cell.ok() {
		t.Errorf("a sale with units left and no sale for 8.9 s after the fault: %s (%s), want STALL", cell.Outcome, cell.Detail)
	}
	step.PerStrategy[0].RecoverySeconds = 0.4
	if cell := stepCell(step, outcomePass); cell.Outcome == outcomeStall {
		t.Errorf("a sale selling again after the fault is not stalled: %s", cell.Detail)
	}
}
