package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/procstat"
	"github.com/seckill-go/seckill-go/loadtest/internal/proof"
)

// The buyers sweep: one sale of -buyer-stock units, bought by each count of -buyers distinct
// buyers through the public entry (nginx), once per strategy, with the load test's own attack
// and audit (every point PASSes or the run fails). What grows is the crowd: the sale sells out
// within its first few percent of requests, and the rest is the refusals of a sold-out sale
// (the in-memory gate), which must stay cheap however many come.

// buyersOptions are the buyers sweep's flags.
type buyersOptions struct {
	counts     []int
	stock      int
	strategies []string
	target     string
	admin      string
	workers    int
	mysqlDSN   string
	timeout    time.Duration
}

// buyersReport is the sweep: a point per strategy and crowd. The stock sweep is the same with
// the crowd fixed (Crowd) and the sale's units growing (Sizes).
type buyersReport struct {
	Target  string        `json:"target"`
	Stock   int           `json:"stock,omitempty"`
	Workers int           `json:"workers"`
	Counts  []int         `json:"buyers,omitempty"`
	Crowd   int           `json:"crowd,omitempty"`
	Sizes   []int         `json:"stock_sizes,omitempty"`
	Points  []buyersPoint `json:"points"`
}

// buyersPoint is one sale: its crowd, its strategy, and what the load test measured and judged.
type buyersPoint struct {
	Strategy string `json:"strategy"`
	Stock    int    `json:"stock"`
	Buyers   int    `json:"buyers"`
	Requests int    `json:"requests"`
	Accepted int    `json:"accepted"`
	// SellOutS is from the first request to the last first-time 202.
	SellOutS       float64 `json:"sell_out_s"`
	AcceptedPerSec float64 `json:"accepted_per_sec"`
	// RequestsPerSec is every answer's rate over the whole attack (most are sold out).
	RequestsPerSec float64 `json:"requests_per_sec"`
	AttackS        float64 `json:"attack_s"`
	// P50MS and P99MS are of every answer; AcceptedP99MS of the 202s.
	P50MS         float64 `json:"p50_ms"`
	P99MS         float64 `json:"p99_ms"`
	AcceptedP99MS float64 `json:"accepted_p99_ms"`
	Status5xx     int     `json:"status_5xx"`
	// GeneratorCPUS is this process's own CPU (user + system) over the attack, its judging
	// and its audit: the load generator shares the machine with what it loads.
	GeneratorCPUS float64  `json:"generator_cpu_s"`
	Verdict       string   `json:"verdict"`
	Violations    []string `json:"violations,omitempty"`
}

// runBuyers runs every crowd of o.counts against every strategy, smallest crowd first.
func runBuyers(ctx context.Context, o buyersOptions, getenv func(string) string, stderr io.Writer, say func(string, ...any)) (*buyersReport, error) {
	rep := &buyersReport{Target: o.target, Stock: o.stock, Workers: o.workers, Counts: o.counts}
	return rep, buyEach(ctx, o, rep, "buyers", getenv, stderr, say)
}

// buyEach buys out a sale of each strategy at each point of rep's sweep (its Counts, or its
// Sizes with its Crowd), appending the points to rep.
func buyEach(ctx context.Context, o buyersOptions, rep *buyersReport, sweep string, getenv func(string) string, stderr io.Writer, say func(string, ...any)) error {
	if err := reachable(ctx, o.target+"/api/v1/products"); err != nil {
		return fmt.Errorf("the %s sweep needs the stack of make up (or -sweeps data): %w", sweep, err)
	}
	db, err := attack.OpenDB(o.mysqlDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, x := range rep.xs() {
		stock, n := rep.Stock, x
		if len(rep.Sizes) > 0 {
			stock, n = x, rep.Crowd
		}
		for _, st := range o.strategies {
			args := []string{
				"-targets", o.target, "-admin", o.admin, "-strategies", st,
				"-stock", strconv.Itoa(stock), "-buyers", strconv.Itoa(n), "-attempts", "1",
				"-workers", strconv.Itoa(o.workers), "-duration", o.timeout.String(),
				"-baseline", "0", "-out", "", "-quiet", "-mysql-dsn", o.mysqlDSN,
			}
			po, err := proof.Parse(args, getenv, stderr)
			if err != nil {
				return err
			}
			say("%s: %s, %d units, %d buyers through %s", sweep, st, stock, n, o.target)
			before := ownCPU()
			r, err := proof.Run(ctx, db, po, say)
			if err != nil {
				return fmt.Errorf("%s %s, %d units, %d buyers: %w", sweep, st, stock, n, err)
			}
			p := buyersPointOf(r.Strategies[0], stock, n)
			p.GeneratorCPUS = (ownCPU() - before).Seconds()
			say("%s: %s, %d units, %d buyers: %s, %d accepted at %.0f/s, p99 %.0f ms, %d 5xx", sweep, st, stock, n, p.Verdict, p.Accepted, p.AcceptedPerSec, p.P99MS, p.Status5xx)
			rep.Points = append(rep.Points, p)
		}
	}
	return nil
}

// reachable asks url once and wants a 200.
func reachable(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func buyersPointOf(sr attack.StrategyReport, stock, buyers int) buyersPoint {
	p := buyersPoint{
		Strategy: sr.Strategy, Stock: stock, Buyers: buyers, Requests: sr.Requests, Accepted: sr.Accepted,
		SellOutS: sr.SellOutSeconds, AcceptedPerSec: sr.AcceptedPerSec, RequestsPerSec: sr.RequestsPerSec,
		AttackS: sr.Seconds, P50MS: sr.Latency["all"].P50, P99MS: sr.Latency["all"].P99,
		AcceptedP99MS: sr.Latency["accepted"].P99, Verdict: sr.Verdict, Violations: sr.Violations,
	}
	for status, n := range sr.Status {
		if status >= 500 {
			p.Status5xx += n
		}
	}
	return p
}

// ownCPU is the user and system time this process has used so far (0 where /proc is not).
func ownCPU() time.Duration {
	d, _ := procstat.CPU([]int{os.Getpid()})
	return d
}

// passed reports whether every point PASSed.
func (r *buyersReport) passed() bool {
	return !slices.ContainsFunc(r.Points, func(p buyersPoint) bool { return p.Verdict != "PASS" })
}

// strategies are the strategies of the points, in their order.
func (r *buyersReport) strategies() []string {
	var out []string
	for _, p := range r.Points {
		if !slices.Contains(out, p.Strategy) {
			out = append(out, p.Strategy)
		}
	}
	return out
}

// xs are the sweep's points: its crowds, or in the stock sweep its sale sizes.
func (r *buyersReport) xs() []int {
	if len(r.Sizes) > 0 {
		return r.Sizes
	}
	return r.Counts
}

// x is p's place on the sweep's axis.
func (r *buyersReport) x(p buyersPoint) int {
	if len(r.Sizes) > 0 {
		return p.Stock
	}
	return p.Buyers
}

// point is st's point at x (buyers, or units in the stock sweep), if it ran.
func (r *buyersReport) point(st string, x int) (buyersPoint, bool) {
	i := slices.IndexFunc(r.Points, func(p buyersPoint) bool { return p.Strategy == st && r.x(p) == x })
	if i < 0 {
		return buyersPoint{}, false
	}
	return r.Points[i], true
}

func (r *buyersReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the cost grows with the crowd\n\nOne sale of %s units per strategy and crowd, each buyer sending one purchase through %s (%d in flight), judged and audited by the load test.\n\n",
		count(float64(r.Stock)), r.Target, r.Workers)
	b.WriteString("| strategy | buyers | verdict | time to sell out | accepted/s | requests/s | p50 · p99 (ms), all | p99 of the 202s (ms) | 5xx | generator CPU (s per 100k requests) |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, st := range r.strategies() {
		for _, n := range r.Counts {
			p, ok := r.point(st, n)
			if !ok {
				continue
			}
			verdict := verdictText(p.Verdict, p.Violations)
			fmt.Fprintf(b, "| %s | %s | %s | %.2f s | %.0f | %.0f | %.1f · %.1f | %.1f | %d | %.1f |\n", st, count(float64(n)), verdict,
				p.SellOutS, p.AcceptedPerSec, p.RequestsPerSec, p.P50MS, p.P99MS, p.AcceptedP99MS, p.Status5xx, p.GeneratorCPUS/float64(max(p.Requests, 1))*1e5)
		}
	}
	b.WriteString("\n")
}

func (r *buyersReport) html(b *strings.Builder) {
	xs := r.labels(" buyers")
	chart(b, "Time to sell out (ms)", xs, r.curves(func(p buyersPoint) float64 { return p.SellOutS * 1000 }))
	chart(b, "p99 of every answer (ms)", xs, r.curves(func(p buyersPoint) float64 { return p.P99MS }))
	chart(b, "Requests answered per second", xs, r.curves(func(p buyersPoint) float64 { return p.RequestsPerSec }))
}

// labels are the sweep's points as the charts' x labels, each followed by unit.
func (r *buyersReport) labels(unit string) []string {
	xs := make([]string, 0, len(r.xs()))
	for _, n := range r.xs() {
		xs = append(xs, count(float64(n))+unit)
	}
	return xs
}

// curves are a chart's lines: one per strategy, y of its point at each place of the sweep.
func (r *buyersReport) curves(y func(buyersPoint) float64) []series {
	var out []series
	for _, st := range r.strategies() {
		s := series{name: st}
		for _, x := range r.xs() {
			p, _ := r.point(st, x)
			s.ys = append(s.ys, y(p))
		}
		out = append(out, s)
	}
	return out
}
