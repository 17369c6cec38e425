package zoo

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/faults"
)

// TestNoSale: a step's stall is measured by the answers' arrival: the longest time between two
// sales, and the tail after the last one when units were left.
func TestNoSale(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(sent, took int, status int, order string) attack.Answer {
		return attack.Answer{Sent: t0.Add(time.Duration(sent) * time.Millisecond), Latency: time.Duration(took) * time.Millisecond, Status: status, OrderID: order}
	}
	for _, c := range []struct {
		name                string
		answers             []attack.Answer
		stock               int
		longest, tail, left float64
	}{
		{"sold out steadily", []attack.Answer{at(0, 10, 202, "a"), at(5, 10, 202, "b"), at(20, 5, 409, "")}, 2, 0.005, 0, 0},
		// A buyer sent at 100 ms and served 3 s later sold at 3.1 s: the stall is by arrival.
		{"a pause, then sold out", []attack.Answer{at(0, 100, 202, "a"), at(100, 3000, 202, "b"), at(200, 3000, 202, "c")}, 3, 3.0, 0, 0},
		{"stalled to the end", []attack.Answer{at(0, 100, 202, "a"), at(200, 3000, 429, ""), at(5000, 3000, 429, "")}, 5, 7.9, 7.9, 4},
		{"a retry's 202 is one sale", []attack.Answer{at(0, 100, 202, "a"), at(10, 100, 202, "a")}, 1, 0, 0, 0},
	} {
		longest, tail, left := faults.NoSale(c.answers, c.stock)
		if math.Abs(longest-c.longest) > 1e-9 || math.Abs(tail-c.tail) > 1e-9 || float64(left) != c.left {
			t.Errorf("%s: longest %.3f, tail %.3f, left %d; want %.3f, %.3f, %.0f", c.name, longest, tail, left, c.longest, c.tail, c.left)
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
	sr := func(oversold, initial, stock int, violations ...string) *attack.StrategyReport {
		r := &attack.StrategyReport{Oversold: oversold, Violations: violations, Status: map[int]int{429: 7}}
		r.Facts.InitialStock, r.Facts.Stock = initial, stock
		return r
	}
	for _, c := range []struct {
		name string
		sr   *attack.StrategyReport
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

	stalled := sr(0, 50, 20)
	step := &faults.StepReport{Strategies: []attack.StrategyReport{*stalled},
		PerStrategy: []faults.StepStrategy{{RecoverySeconds: -1, LeftAfterLoad: 20, TailSeconds: 8.9, NoSaleSeconds: 8.9}},
		Events:      []attack.Event{{T: 12, What: "the dead holder's lock row deleted by hand after the load (1 row)"}},
		Violations:  []string{"mysql-lock-table-naive: no purchase accepted after the fault was undone", "300 requests planned, 120 answered"}}
	cell := stepCell(step, outcomeStall)
	if cell.Outcome != outcomeStall || !cell.ok() || !strings.Contains(cell.Detail, "by hand") {
		t.Errorf("units left and no sale for 8.9 s at the end of the load: %s (%s), want STALL and the cleanup", cell.Outcome, cell.Detail)
	}
	step.PerStrategy[0].RecoverySeconds = 0.4
	if cell := stepCell(step, outcomePass); cell.Outcome != outcomeFail {
		t.Errorf("a sale selling again after the fault, with unanswered requests: %s (%s), want FAIL", cell.Outcome, cell.Detail)
	}
	step.Violations, step.PerStrategy[0].LeftAfterLoad = nil, 0
	if cell := stepCell(step, outcomePass); cell.Outcome != outcomePass {
		t.Errorf("sold out after the fault: %s (%s), want PASS", cell.Outcome, cell.Detail)
	}
}

// TestZooHarnessesKeyedByRegistry: the harness's pieces are for strategies of the registry, each
// where the registry's expectations need it: an unstall for a fault expected to STALL, servers
// for a restart fault.
func TestZooHarnessesKeyedByRegistry(t *testing.T) {
	for st := range zooHarnesses {
		if _, ok := st.Info(); !ok {
			t.Errorf("zooHarnesses names %q, which the registry (sale.Catalog) lacks", st)
		}
	}
	for _, c := range sale.Catalog {
		h := zooHarnesses[c.Strategy]
		stalls := false
		for _, o := range c.Faults {
			stalls = stalls || o == sale.OutcomeStall
		}
		if stalls != (h.unstall != nil) {
			t.Errorf("%s: a fault expected to stall: %t; an unstall: %t", c.Strategy, stalls, h.unstall != nil)
		}
		_, restarts := c.Faults[sale.FaultRestart]
		if restarts != (len(h.restart.restart) > 0) {
			t.Errorf("%s: a restart fault expected: %t; servers to restart: %v", c.Strategy, restarts, h.restart.restart)
		}
	}
}
