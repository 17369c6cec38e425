package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestReconcileSeries: a check sets its sale's two gauges; a sale reset to another strategy keeps
// one series; a sale no longer live loses its series; runs count by outcome.
func TestReconcileSeries(t *testing.T) {
	m := New()
	r := m.RegisterReconcile()
	r.Checked(1, "mysql", 0, 0)
	r.Checked(2, "none", 3, 7)
	r.Checked(1, "redis-lua", 1, 0) // product 1 reset to redis-lua
	if n := seriesCount(t, m, "seckill_reconcile_violations"); n != 2 {
		t.Fatalf("%d violations series, want 2 (one a sale)", n)
	}
	if v := gaugeValue(t, r.oversold.WithLabelValues("2", "none")); v != 7 {
		t.Fatalf("oversold of sale 2: %v, want 7", v)
	}
	if v := gaugeValue(t, r.violations.WithLabelValues("1", "redis-lua")); v != 1 {
		t.Fatalf("violations of sale 1: %v, want 1", v)
	}
	r.Live([]int64{1})
	if n := seriesCount(t, m, "seckill_reconcile_oversold_units"); n != 1 {
		t.Fatalf("%d oversold series after sale 2 ended, want 1", n)
	}
	r.Ran(time.Millisecond, false)
	r.Ran(time.Millisecond, true)
	if v := counterValue(t, r.runs.WithLabelValues("failed")); v != 1 {
		t.Fatalf("failed runs %v, want 1", v)
	}
}

func gaugeValue(tb testing.TB, g prometheus.Gauge) float64 {
	tb.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
