package faults

import (
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// ChaosReport is one fault run (-faults): a step per fault. It is written as Markdown (stdout and
// results/chaos-<run>.md) and JSON (results/chaos-<run>.json).
type ChaosReport struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Machine   string    `json:"machine"`
	Targets   []string  `json:"targets"`
	// Topology is where the app's Redis and ZooKeeper were (its /readyz says).
	Topology   map[string]string `json:"topology,omitempty"`
	Strategies []string          `json:"strategies"`
	Rate       int               `json:"rate"`        // requests per second, all strategies together
	Step       time.Duration     `json:"step"`        // load per step
	FaultAfter time.Duration     `json:"fault_after"` // into the step
	FaultFor   time.Duration     `json:"fault_for"`   // how long a stopped service stays stopped
	Steps      []StepReport      `json:"steps"`
	// RunningAudit is what the replicas' own running audit said of the run's sales at its end
	// (nil when the run played no step).
	RunningAudit *RunningAudit `json:"running_audit,omitempty"`
	Passed       bool          `json:"passed"`
}

// StepReport is one fault played out under load, and what the buyers and the database show.
type StepReport struct {
	Fault  string         `json:"fault"`
	What   string         `json:"what"`
	Events []attack.Event `json:"events"`
	// InjectAt is when the fault began, in seconds into the step; OutageSeconds from then until
	// the broken thing served again (its restart included); RestoredSeconds the restart alone.
	InjectAt        float64 `json:"inject_at"`
	OutageSeconds   float64 `json:"outage_seconds"`
	RestoredSeconds float64 `json:"restored_seconds"`

	Requests        int `json:"requests"`
	Unavailable     int `json:"unavailable_503"`
	RateLimited     int `json:"rate_limited_429"` // back-pressure: a lock wait run out, a limit
	TransportErrors int `json:"transport_errors"` // no answer, or a proxy's 502/504
	Other5xx        int `json:"other_5xx"`
	// RecoverySeconds is, over the strategies whose buyers noticed the fault, the longest time
	// from the fault's undoing (the service answering, the replica healthy) to the first request
	// sent since then that was accepted; -1 when no buyer noticed the fault.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// CaughtUpSeconds is the time from the fault's undoing until every purchase accepted by
	// then was an order, the slowest strategy's.
	CaughtUpSeconds float64        `json:"caught_up_seconds"`
	PerStrategy     []StepStrategy `json:"per_strategy"`
	// Strategies are the full reports of the step's attacks, audit included.
	Strategies []attack.StrategyReport `json:"strategies"`
	Violations []string                `json:"violations"`
	Verdict    string                  `json:"verdict"` // PASS or FAIL
}

// StepStrategy is one strategy's figures in a step.
type StepStrategy struct {
	Strategy string `json:"strategy"`
	Verdict  string `json:"verdict"`
	Requests int    `json:"requests"`
	Accepted int    `json:"accepted"`
	// Lossy says the fault could destroy accepted purchases of the strategy (redis-flush:
	// redis-lua's, then only in its stream): Lost of them it did, among InReach it could.
	Lossy           bool           `json:"lossy,omitempty"`
	Lost            int            `json:"lost"`
	InReach         int            `json:"in_reach"`
	Unavailable     int            `json:"unavailable_503"`
	RateLimited     int            `json:"rate_limited_429"`
	TransportErrors int            `json:"transport_errors"`
	Latency503      attack.Latency `json:"latency_503"`
	// Latency503Away is over the 503s of the requests sent while the broken thing was away: from
	// its being stopped until its start again began (the fail-fast promise).
	Latency503Away  attack.Latency `json:"latency_503_away"`
	RecoverySeconds float64        `json:"recovery_seconds"` // -1: its buyers did not notice the fault
	// SoldOutInFault says its buyers noticed the fault, and it sold every unit before the fault
	// was undone: there was nothing to recover to (redis-lua, while MySQL is away).
	SoldOutInFault  bool    `json:"sold_out_in_fault,omitempty"`
	CaughtUpSeconds float64 `json:"caught_up_seconds"` // -1: not within the drain timeout
	// NoSaleSeconds is the longest time the step went without a sale, by the answers' arrival:
	// between two acceptances, and from the last one to the end of the load when units were left
	// then (TailSeconds; LeftAfterLoad of them).
	NoSaleSeconds float64 `json:"no_sale_seconds"`
	TailSeconds   float64 `json:"tail_seconds"`
	LeftAfterLoad int     `json:"left_after_load"`
	affected      bool    // a buyer got a 5xx or no answer
	sentAfter     bool    // a request was sent after the fault was undone
}

// Markdown renders the fault run.
func Markdown(r *ChaosReport) string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\n## seckill-go chaos run %s — %s\n\n", r.RunID, verdict)
	fmt.Fprintf(&b, "%s · %s · %s · %d req/s for %s per fault · fault %s in, services away %s\n\n",
		r.Machine, strings.Join(r.Targets, ", "), strings.Join(r.Strategies, ", "), r.Rate, r.Step, r.FaultAfter, r.FaultFor)
	b.WriteString(attack.TopologyLine(r.Topology) + "\n\n")
	if ra := r.RunningAudit; ra != nil {
		fmt.Fprintf(&b, "**The running audit** (the replicas' own, from MySQL, read at the end after %s): %s — %d of the run's sales checked, %d never; "+
			"safe strategies' sales breaking an invariant: %d; the control's oversell seen in %d of its %d sales%s\n\n",
			ra.Waited, passWord(ra.Passed), ra.Sales, len(ra.Missing), len(ra.Drifted), ra.ControlOversold, ra.ControlSales, errSuffix(ra.Err))
		for _, d := range ra.Drifted {
			fmt.Fprintf(&b, "- %s\n", d)
		}
	}
	b.WriteString("| fault | down s (restart s) | requests | 503 | 503 p50 / p99 / max ms | 429 | lost answers | other 5xx | recovered after s | orders caught up after s | audit |\n")
	b.WriteString("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, s := range r.Steps {
		var p50, p99, most float64
		for _, ss := range s.PerStrategy {
			p50, p99, most = max(p50, ss.Latency503.P50), max(p99, ss.Latency503.P99), max(most, ss.Latency503.Max)
		}
		lat := "—"
		if s.Unavailable > 0 {
			lat = fmt.Sprintf("%.1f / %.1f / %.1f", p50, p99, most)
		}
		fmt.Fprintf(&b, "| %s | %.1f (%.1f) | %d | %d | %s | %d | %d | %d | %s | %.1f | **%s** %s |\n",
			s.Fault, s.OutageSeconds, s.RestoredSeconds, s.Requests, s.Unavailable, lat, s.RateLimited, s.TransportErrors, s.Other5xx,
			attack.Seconds(s.RecoverySeconds), s.CaughtUpSeconds, s.Verdict, auditSummary(s))
	}
	b.WriteString("\nPer strategy (503 latency: the slowest strategy's percentiles above):\n\n" +
		"| fault | strategy | requests | accepted | 503 | 503 p99 ms | 503 while away: n, p50 / p99 / max ms | 429 | lost answers | recovered after s | orders caught up after s | audit |\n" +
		"|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|\n")
	for _, s := range r.Steps {
		for _, ss := range s.PerStrategy {
			p99, away := "—", "—"
			if ss.Unavailable > 0 {
				p99 = fmt.Sprintf("%.1f", ss.Latency503.P99)
			}
			if l := ss.Latency503Away; l.Count > 0 {
				away = fmt.Sprintf("%d, %.1f / %.1f / %.1f", l.Count, l.P50, l.P99, l.Max)
			}
			verdict, recovered := ss.Verdict, attack.Seconds(ss.RecoverySeconds)
			if ss.SoldOutInFault {
				recovered = "sold out in the fault"
			}
			if ss.Lossy {
				verdict += fmt.Sprintf(", %d lost of %d in reach", ss.Lost, ss.InReach)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %s | %s | %d | %d | %s | %s | %s |\n", s.Fault, ss.Strategy, ss.Requests, ss.Accepted,
				ss.Unavailable, p99, away, ss.RateLimited, ss.TransportErrors, recovered, attack.Seconds(ss.CaughtUpSeconds), verdict)
		}
	}
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "\n- **%s**: %s.", s.Fault, s.What)
		for _, e := range s.Events {
			fmt.Fprintf(&b, " %.1f s: %s.", e.T, e.What)
		}
		for _, ss := range s.PerStrategy {
			if ss.Lossy {
				fmt.Fprintf(&b, " %s: %d of the %d accepted purchases the fault could destroy were lost; the audit holds every other one to every invariant.",
					ss.Strategy, ss.Lost, ss.InReach)
			}
		}
		for _, v := range s.Violations {
			fmt.Fprintf(&b, "\n  - **%s**", v)
		}
	}
	b.WriteString("\n\ndown: from the fault's start (stop command, kill) until the service answered or the replica was healthy again. " +
		"lost answers: no answer, or nginx's 502/504; like every 503, each was settled after the step by retrying its purchase with its Idempotency-Key. " +
		"503 while away: the 503s of requests sent from the service's stop to its start (a strategy that fails fast must answer each within " + failFastWithin.String() + "). " +
		"recovered after: from the service's return to the first request sent since then that was accepted, over the strategies whose buyers noticed the fault (—: none did; sold out in the fault: it sold every unit before the return). " +
		"orders caught up after: from the service's return until every purchase accepted by then was an order. " +
		"audit: every strategy's answers and database, after the order queue drained (stock, reservations, orders, one per user, every acknowledged purchase an order, no other); " +
		"lost of in reach: the accepted purchases a fault destroyed as it promises to (redis-flush: redis-lua's, still only in Redis), each among the ones it could reach, left out of the checks.\n")
	return b.String()
}

// auditSummary counts the step's strategies that passed.
func auditSummary(s StepReport) string {
	pass := 0
	for _, ss := range s.PerStrategy {
		if ss.Verdict == "PASS" || ss.Verdict == "OVERSOLD" { // the control's OVERSOLD is its pass
			pass++
		}
	}
	return fmt.Sprintf("(%d/%d)", pass, len(s.PerStrategy))
}

// WriteReport writes results/chaos-<run>.md and .json and returns their paths.
func WriteReport(dir string, r *ChaosReport) ([]string, error) {
	return attack.WriteFiles(dir, "chaos-"+r.RunID, r, cli.Text{Ext: ".md", Body: Markdown(r)})
}

func passWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func errSuffix(err string) string {
	if err == "" {
		return ""
	}
	return " (last scrape: " + err + ")"
}
