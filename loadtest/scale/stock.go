package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// The stock sweep: one crowd (-stock-buyers distinct buyers, one purchase each) on a sale of each
// size of -stock-sizes, per strategy, through the public entry, judged and audited like the
// buyers sweep. What grows is the sale's units: nothing on the purchase path may hold or walk
// state per unit (the stock is a counter in MySQL or Redis), so the rate and the latency must
// not move with it. The small sales sell out within the crowd and refuse the rest from memory;
// the large ones accept every buyer, which costs more per request: compare sizes on the same
// side of the crowd.

// runStock runs every size of sizes against every strategy of o, with crowd buyers each.
func runStock(ctx context.Context, o buyersOptions, sizes []int, crowd int, getenv func(string) string, stderr io.Writer, say func(string, ...any)) (*buyersReport, error) {
	rep := &buyersReport{Target: o.target, Workers: o.workers, Crowd: crowd, Sizes: sizes}
	return rep, buyEach(ctx, o, rep, "stock", getenv, stderr, say)
}

func (r *buyersReport) stockMarkdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the cost grows with the sale's stock\n\n%s distinct buyers, one purchase each, on one sale of each size per strategy, through %s (%d in flight), judged and audited by the load test. A sale smaller than the crowd sells out and refuses the rest; a larger one accepts every buyer.\n\n",
		count(float64(r.Crowd)), r.Target, r.Workers)
	b.WriteString("| strategy | units | verdict | accepted | time to sell out | accepted/s | requests/s | p50 · p99 (ms), all | p99 of the 202s (ms) | 5xx |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, st := range r.strategies() {
		for _, n := range r.Sizes {
			p, ok := r.point(st, n)
			if !ok {
				continue
			}
			verdict := verdictText(p.Verdict, p.Violations)
			sellOut := "— (not sold out)"
			if p.Accepted >= p.Stock {
				sellOut = fmt.Sprintf("%.2f s", p.SellOutS)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %.0f | %.0f | %.1f · %.1f | %.1f | %d |\n", st, count(float64(n)), verdict,
				p.Accepted, sellOut, p.AcceptedPerSec, p.RequestsPerSec, p.P50MS, p.P99MS, p.AcceptedP99MS, p.Status5xx)
		}
	}
	b.WriteString("\n")
}

func (r *buyersReport) stockHTML(b *strings.Builder) {
	xs := r.labels(" units")
	chart(b, "Accepted per second", xs, r.curves(func(p buyersPoint) float64 { return p.AcceptedPerSec }))
	chart(b, "p99 of the 202s (ms)", xs, r.curves(func(p buyersPoint) float64 { return p.AcceptedP99MS }))
	chart(b, "Requests answered per second", xs, r.curves(func(p buyersPoint) float64 { return p.RequestsPerSec }))
}
