package main

import (
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
)

// Report is one run of the harness: every strategy attacked, with the baselines measured in the
// same run. It is written as Markdown (stdout and results/<run>.md), JSON (results/<run>.json)
// and a self-contained HTML page with charts (results/<run>.html).
type Report struct {
	RunID      string           `json:"run_id"`
	StartedAt  time.Time        `json:"started_at"`
	Machine    string           `json:"machine"`
	Targets    []string         `json:"targets"`
	Settings   Settings         `json:"settings"`
	Baselines  []Baseline       `json:"baselines"`
	Strategies []StrategyReport `json:"strategies"`
	// Passed is false when any safe strategy broke an invariant or the unsafe control failed to
	// show its oversell.
	Passed bool `json:"passed"`
}

// Settings are the knobs of the run.
type Settings struct {
	Stock       int           `json:"stock"`
	Buyers      int           `json:"buyers"`
	Attempts    int           `json:"attempts"`
	Rate        int           `json:"rate"`         // requests per second; 0 = as fast as Workers allow
	Workers     int           `json:"workers"`      // most requests in flight
	MaxDuration time.Duration `json:"max_duration"` // per strategy
	Chaos       string        `json:"chaos"`        // "" or "kill"
}

// Baseline is the raw rate of the store operation underneath a strategy, measured straight
// through the client library, in the same run: the yardstick of the ratio column.
type Baseline struct {
	Strategy    string  `json:"strategy"`
	Operation   string  `json:"operation"`
	Concurrency int     `json:"concurrency"`
	OpsPerSec   float64 `json:"ops_per_sec"`
}

// StrategyReport is the attack on one strategy and its verdict.
type StrategyReport struct {
	Strategy  string `json:"strategy"`
	ProductID int64  `json:"product_id"`

	Requests       int     `json:"requests"`
	Seconds        float64 `json:"seconds"`          // from the first request to the last answer
	RequestsPerSec float64 `json:"requests_per_sec"` // Requests / Seconds
	Accepted       int     `json:"accepted"`         // distinct order ids acknowledged with 202
	AcceptedPerSec float64 `json:"accepted_per_sec"` // Accepted / SellOutSeconds
	SellOutSeconds float64 `json:"sell_out_seconds"` // from the first request to the last first-time 202
	// Ratio is AcceptedPerSec over the strategy's baseline OpsPerSec.
	Ratio float64 `json:"ratio"`

	// Outcomes counts answers by outcome: accepted, replayed, sold_out, limit_reached,
	// rate_limited, unavailable, transport_error, other.
	Outcomes map[string]int `json:"outcomes"`
	// Status counts answers by HTTP status (0: no answer).
	Status map[int]int `json:"status"`
	// Latency is per outcome.
	Latency map[string]Latency `json:"latency"`
	// Timeline buckets the attack in TimelineStep slices.
	Timeline []Sample `json:"timeline"`
	// Events are what happened to the system during the attack (chaos), by time.
	Events []Event `json:"events,omitempty"`

	Facts      audit.Facts `json:"facts"`
	Oversold   int         `json:"oversold"`
	Violations []string    `json:"violations"`
	// Verdict is PASS, FAIL (an invariant broke) or OVERSOLD (the unsafe control, as expected).
	Verdict string `json:"verdict"`
}

// Latency percentiles, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// TimelineStep is the width of a Sample.
const TimelineStep = 100 * time.Millisecond

// Sample is one TimelineStep of an attack, by the time requests were sent.
type Sample struct {
	T        float64 `json:"t"` // seconds since the first request, start of the slice
	Requests int     `json:"requests"`
	Accepted int     `json:"accepted"` // first-time 202s in the slice
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
}

// Event is something done to the system during an attack.
type Event struct {
	T    float64 `json:"t"`
	What string  `json:"what"`
}
