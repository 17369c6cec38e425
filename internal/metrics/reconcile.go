package metrics

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reconcile is the reconciliation loop's figures (internal/reconcile): per live sale, the
// invariants of the audit it breaks and the units it oversold, as of its last check; per run, how
// long it took and whether it failed.
type Reconcile struct {
	violations *prometheus.GaugeVec
	oversold   *prometheus.GaugeVec
	runs       *prometheus.CounterVec
	took       prometheus.Histogram
	live       prometheus.Gauge

	mu       sync.Mutex
	strategy map[int64]string // the label of each product's series
}

// RegisterReconcile registers the reconciliation's metrics.
func (m *Metrics) RegisterReconcile() *Reconcile {
	f := factory{m.reg}
	return &Reconcile{
		violations: f.gaugeVec("seckill_reconcile_violations",
			"Invariants of the audit the sale broke at its last check (0: sound): stock against reservations, returns, the order lifecycle, payments, the per-user limit.",
			"product_id", "strategy"),
		oversold: f.gaugeVec("seckill_reconcile_oversold_units",
			"Units the sale handed out beyond its initial stock, at its last check (0 but for the unsafe control).",
			"product_id", "strategy"),
		runs: f.counterVec("seckill_reconcile_runs_total",
			"Reconciliation runs, by outcome (ok, failed: a database error).", "outcome"),
		took: f.histogram("seckill_reconcile_run_seconds",
			"How long one reconciliation run took.", prometheus.ExponentialBuckets(0.001, 4, 8)),
		live: f.gauge("seckill_reconcile_live_sales",
			"Sales the reconciliation checks in turn: on sale now or ended within its window."),
		strategy: map[int64]string{},
	}
}

// Checked implements reconcile.Recorder.
func (r *Reconcile) Checked(productID int64, strategy string, violations, oversold int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := strconv.FormatInt(productID, 10)
	if old, ok := r.strategy[productID]; ok && old != strategy { // reset to another strategy
		r.violations.DeleteLabelValues(id, old)
		r.oversold.DeleteLabelValues(id, old)
	}
	r.strategy[productID] = strategy
	r.violations.WithLabelValues(id, strategy).Set(float64(violations))
	r.oversold.WithLabelValues(id, strategy).Set(float64(oversold))
}

// Live implements reconcile.Recorder: the series of sales no longer live go.
func (r *Reconcile) Live(productIDs []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := make(map[int64]bool, len(productIDs))
	for _, id := range productIDs {
		keep[id] = true
	}
	for id, st := range r.strategy {
		if !keep[id] {
			r.violations.DeleteLabelValues(strconv.FormatInt(id, 10), st)
			r.oversold.DeleteLabelValues(strconv.FormatInt(id, 10), st)
			delete(r.strategy, id)
		}
	}
	r.live.Set(float64(len(productIDs)))
}

// Ran implements reconcile.Recorder.
func (r *Reconcile) Ran(took time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "failed"
	}
	r.runs.WithLabelValues(outcome).Inc()
	r.took.Observe(took.Seconds())
}
