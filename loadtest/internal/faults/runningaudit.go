package faults

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// RunningAudit is what a replica's running audit (internal/reconcile) said of the run's sales
// once every fault was over: none of a safe strategy breaking an invariant, and the unsafe
// control's oversell seen (the check works). The audit takes the live sales in
// turn, so a sale's figures may be from a check during its step rather than after it.
type RunningAudit struct {
	// Sales are the run's sales the running audit reported on; Missing those it never checked
	// within the wait.
	Sales   int     `json:"sales"`
	Missing []int64 `json:"missing,omitempty"`
	// Drifted are the safe strategies' sales it found breaking an invariant ("id strategy: n").
	Drifted []string `json:"drifted,omitempty"`
	// ControlOversold are the control's sales it found oversold, of ControlSales.
	ControlOversold int    `json:"control_oversold"`
	ControlSales    int    `json:"control_sales"`
	Waited          string `json:"waited"`
	Err             string `json:"error,omitempty"`
	Passed          bool   `json:"passed"`
}

// runningAuditWait is the longest the run waits for the running audit to have checked its sales
// (make up runs it on replica 1 every 10 s: 16 of the newest sales a run, 16 others in turn).
const runningAuditWait = 60 * time.Second

// checkRunningAudit reads the running audit's gauges from the replica at url's /metrics until it
// has reported on every sale of sales (product id → strategy) and seen the control's oversell,
// or runningAuditWait passes, and judges them.
func checkRunningAudit(ctx context.Context, url string, sales map[int64]string) RunningAudit {
	began := time.Now()
	var ra RunningAudit
	for {
		ra = judgeRunningAudit(scrapeAudit(ctx, url), sales)
		done := len(ra.Missing) == 0 && (ra.ControlSales == 0 || ra.ControlOversold > 0)
		if done || time.Since(began) > runningAuditWait || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	ra.Waited = time.Since(began).Round(100 * time.Millisecond).String()
	// A sale never checked is reported, not failed: a replica restarted by a fault starts its
	// figures afresh and takes the older sales in turn again.
	ra.Passed = ra.Err == "" && len(ra.Drifted) == 0 && (ra.ControlSales == 0 || ra.ControlOversold > 0)
	return ra
}

// auditFigures are the running audit's two gauges by product: violations and units oversold;
// err is a failed scrape.
type auditFigures struct {
	violations, oversold map[int64]float64
	err                  error
}

// scrapeAudit reads the gauges from url's /metrics.
func scrapeAudit(ctx context.Context, url string) auditFigures {
	f := auditFigures{violations: map[int64]float64{}, oversold: map[int64]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		f.err = err
		return f
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.err = err
		return f
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		f.err = fmt.Errorf("GET %s/metrics: %s", url, res.Status)
		return f
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		f.err = err
		return f
	}
	read := func(name string, into map[int64]float64) {
		for _, m := range fams[name].GetMetric() {
			if id, err := strconv.ParseInt(labelOf(m, "product_id"), 10, 64); err == nil {
				into[id] = m.GetGauge().GetValue()
			}
		}
	}
	read("seckill_reconcile_violations", f.violations)
	read("seckill_reconcile_oversold_units", f.oversold)
	return f
}

// judgeRunningAudit compares the figures with the run's sales.
func judgeRunningAudit(f auditFigures, sales map[int64]string) RunningAudit {
	var ra RunningAudit
	if f.err != nil {
		ra.Err = f.err.Error()
	}
	ids := make([]int64, 0, len(sales))
	for id := range sales {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		st := sales[id]
		v, checked := f.violations[id]
		if st == attack.UnsafeStrategy {
			ra.ControlSales++
			if f.oversold[id] > 0 {
				ra.ControlOversold++
			}
		}
		if !checked {
			ra.Missing = append(ra.Missing, id)
			continue
		}
		ra.Sales++
		if v > 0 && st != attack.UnsafeStrategy {
			ra.Drifted = append(ra.Drifted, fmt.Sprintf("%d %s: %.0f invariants broken", id, st, v))
		}
	}
	return ra
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
