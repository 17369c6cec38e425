package attack

import (
	"sort"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Report is one run of the harness: every strategy attacked, with the yardsticks measured in the
// same run. It is written as Markdown (stdout and results/<run>.md), JSON (results/<run>.json)
// and a self-contained HTML page with charts (results/<run>.html).
type Report struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Machine   string    `json:"machine"`
	Targets   []string  `json:"targets"`
	// Topology is where the app's Redis and ZooKeeper were (its /readyz says).
	Topology map[string]string `json:"topology,omitempty"`
	Settings Settings          `json:"settings"`
	// Yardsticks are nil when the run skipped them (-baseline 0).
	Yardsticks *Yardsticks      `json:"yardsticks"`
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
	Rate        int           `json:"rate"`          // requests per second; 0 = as fast as Workers allow
	Workers     int           `json:"workers"`       // most requests in flight
	MaxDuration time.Duration `json:"max_duration"`  // per strategy
	Chaos       string        `json:"chaos"`         // "" or "kill"
	Pay         float64       `json:"pay,omitempty"` // the share of winners who pay (-pay); 0: no payment phase
	// Viewers are the crowd sizes of -viewers (each strategy attacked once per size), View how
	// they watched and ViewerTargets where; empty without -viewers.
	Viewers       []int    `json:"viewers,omitempty"`
	View          string   `json:"view,omitempty"`
	ViewerTargets []string `json:"viewer_targets,omitempty"`
}

// Yardsticks are this machine's own limits, measured in the same run (see
// loadtest/internal/yardstick): what the ratio columns divide by.
type Yardsticks struct {
	// R is a raw single-row conditional UPDATE loop: the commit rate of one hot row without the
	// app, the yardstick of every strategy's accepted/s.
	R yardstick.RowResult `json:"r"`
	// BareGin is the HTTP ceiling: a bare gin handler that parses a purchase and answers 409, in
	// a process of its own, the yardstick of every strategy's sold-out req/s.
	BareGin BareGin `json:"bare_gin"`
}

// BareGin is the bare gin ceiling as the attack's client measured it.
type BareGin struct {
	RequestsPerSec float64 `json:"requests_per_sec"`
	Workers        int     `json:"workers"`
	Client         string  `json:"client"`
}

// StrategyReport is the attack on one strategy and its verdict.
type StrategyReport struct {
	Strategy  string `json:"strategy"`
	ProductID int64  `json:"product_id"`

	Requests       int     `json:"requests"`
	Seconds        float64 `json:"seconds"`          // from the first request to the last answer
	RequestsPerSec float64 `json:"requests_per_sec"` // Requests / Seconds
	Accepted       int     `json:"accepted"`         // distinct order ids acknowledged with 202
	// Lost are the accepted purchases a fault destroyed as it promises to (redis-flush: redis-lua's
	// purchases still only in Redis), counted in Accepted and left out of the audit's checks.
	Lost           int     `json:"lost,omitempty"`
	AcceptedPerSec float64 `json:"accepted_per_sec"` // Accepted / SellOutSeconds
	SellOutSeconds float64 `json:"sell_out_seconds"` // from the first request to the last first-time 202
	// AcceptedPerR is AcceptedPerSec ÷ R (0 without yardsticks).
	AcceptedPerR float64 `json:"accepted_per_r"`
	// SoldOutPerSec is the rate of the answers once the product sold out: the answers that
	// arrived after the last first-time 202 ÷ the time from that 202 to the last answer. It is 0
	// when that tail is too short to be a rate (under minSoldOutSeconds or minSoldOutAnswers).
	SoldOutPerSec float64 `json:"sold_out_per_sec"`
	// SoldOutPerGin is SoldOutPerSec ÷ the bare gin ceiling (0 without either).
	SoldOutPerGin float64 `json:"sold_out_per_bare_gin"`

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

	// Viewers is the crowd that watched the attack and MySQL's rates during it (-viewers), nil
	// without -viewers.
	Viewers *ViewersReport `json:"viewers,omitempty"`

	// Payment is the payment phase (-pay), nil without one.
	Payment *PaymentReport `json:"payment,omitempty"`

	// Facts are the database's at the last audit: after the attack's queue drained, or with -pay
	// at the end of the payment phase.
	Facts      audit.Facts `json:"facts"`
	Oversold   int         `json:"oversold"`
	Violations []string    `json:"violations"`
	// Verdict is PASS, FAIL (an invariant broke) or OVERSOLD (the unsafe control, as expected).
	Verdict string `json:"verdict"`
}

// Latency percentiles, in milliseconds: the yardstick's, so that both reports compute them alike.
type Latency = yardstick.Latency

// RatioOf is x ÷ y, or 0 when either is missing.
func RatioOf(x, y float64) float64 {
	if x <= 0 || y <= 0 {
		return 0
	}
	return x / y
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

// WriteFiles writes a report (cli.WriteReport) and returns its paths sorted, as the reports' line
// has always listed them (.html, .json, .md): compose-smoke reads the run's id off the first.
func WriteFiles(dir, base string, v any, texts ...cli.Text) ([]string, error) {
	names, err := cli.WriteReport(dir, base, v, texts...)
	sort.Strings(names)
	return names, err
}
