package main

import (
	"cmp"
	"fmt"
	"html"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

func (r *report) verdict() string {
	if r.Pass {
		return "PASS"
	}
	return "FAIL"
}

// markdown is the report as the results index keeps it.
func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## seckill-go soak %s — %s\n\n", r.Run, r.verdict())
	fmt.Fprintf(&b, "%s of steady load from %s UTC (warm-up until %s), commit %s, %s.\n\n",
		r.Ended.Sub(r.Started).Round(time.Second), r.Started.UTC().Format("2006-01-02 15:04:05"), r.WarmEnd.UTC().Format(time.TimeOnly), r.Commit, yardstick.Machine())
	fmt.Fprintf(&b, "Options: %s.\n\n", joinMap(r.Options, "%s=%s"))
	fmt.Fprintf(&b, "Purchases: %s; %d ticks skipped (every buyer slot busy). Payments: %s. The run's %d sales' orders by status: %s. "+
		"Viewers: %d crowds, %d events, %d streams dropped.\n\n",
		joinMap(r.Tally.Purchases, "%s × %d"), r.Tally.Skipped, joinMap(r.Tally.Pays, "%s × %d"), r.Products, joinMap(r.Orders, "%s %d"),
		r.Viewers.Crowds, r.Viewers.Events, r.Viewers.Drops)
	b.WriteString("Growth. *run*: under load after the warm-up, the median of the first quarter (early) against the last (late); *rest*: at rest after the warm-up (early) and after the run (late), every connection closed. Each against its limit (late ≤ early × (1 + share) + floor); the slope is over the judged run under load.\n\n")
	b.WriteString("| when | source | gauge | early | late | limit | slope per hour | samples | verdict |\n|---|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, g := range r.Growth {
		v := "ok"
		if !g.OK {
			v = "**GREW**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d | %s |\n", g.When, g.Source, g.Gauge, format(g.Gauge, g.Early), format(g.Gauge, g.Late),
			format(g.Gauge, g.Limit), signed(format(g.Gauge, g.PerHour)), g.Samples, v)
	}
	fmt.Fprintf(&b, "\nAudit: %d products, %d violations; purchases answered 202 without an order: %d.\n", r.Products, len(r.Violations), r.Missing)
	for _, v := range r.Violations[:min(len(r.Violations), 10)] {
		fmt.Fprintf(&b, "- %s\n", v)
	}
	if len(r.Failures) > 0 {
		b.WriteString("\nFailures:\n")
		for _, f := range r.Failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	return b.String()
}

func signed(s string) string {
	if !strings.HasPrefix(s, "-") {
		return "+" + s
	}
	return s
}

// joinMap lists m's entries sorted by key, each formatted with f (key, value).
func joinMap[V any](m map[string]V, f string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf(f, k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// html is the report with each gauge plotted over time, a line per source.
func (r *report) html() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><meta charset="utf-8"><title>seckill-go soak ` + html.EscapeString(r.Run) + `</title>
<style>body{font:14px system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}svg{background:#fafafa;border:1px solid #ddd}
pre{white-space:pre-wrap}.l0{stroke:#1f77b4}.l1{stroke:#d62728}.l2{stroke:#2ca02c}.l3{stroke:#9467bd}.l4{stroke:#ff7f0e}
polyline{fill:none;stroke-width:1.5}.warm{fill:#eee}text{font-size:11px;fill:#555}</style>`)
	fmt.Fprintf(&b, "<h1>soak %s — %s</h1>\n<pre>%s</pre>\n", html.EscapeString(r.Run), r.verdict(), html.EscapeString(r.markdown()))
	for _, g := range []gauge{heap, goroutines, openFiles, dbConns, mysqlThreads} {
		b.WriteString(r.chart(g))
	}
	return b.String()
}

// chart is one gauge over the run as an SVG: the warm-up shaded, one polyline per source.
func (r *report) chart(g gauge) string {
	const w, h, pad = 900.0, 220.0, 40.0
	bySource := map[string][]sample{}
	var top float64
	for _, s := range r.Samples {
		if v, ok := s.Values[g]; ok {
			bySource[s.Source] = append(bySource[s.Source], s)
			top = max(top, v)
		}
	}
	if len(bySource) == 0 || !r.Ended.After(r.Started) {
		return ""
	}
	top = cmp.Or(top*1.1, 1)
	span := r.Ended.Sub(r.Started).Seconds()
	x := func(t time.Time) float64 { return pad + (w-2*pad)*max(0, t.Sub(r.Started).Seconds())/span }
	y := func(v float64) float64 { return h - pad - (h-2*pad)*v/top }
	var b strings.Builder
	fmt.Fprintf(&b, "<h2>%s</h2>\n<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">", g, w, h, w, h)
	fmt.Fprintf(&b, `<rect class="warm" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, pad, pad, x(r.WarmEnd)-pad, h-2*pad)
	fmt.Fprintf(&b, `<text x="2" y="%.1f">%s</text><text x="2" y="%.1f">0</text>`, pad, format(g, top), h-pad)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`, w-pad-40, h-pad+14, r.Ended.Sub(r.Started).Round(time.Second))
	for i, src := range slices.Sorted(maps.Keys(bySource)) {
		var pts []string
		for _, s := range bySource[src] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At), y(s.Values[g])))
		}
		fmt.Fprintf(&b, `<polyline class="l%d" points="%s"/>`, i%5, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="l%d">%s</text>`, pad+float64(i)*180, h-8, i%5, html.EscapeString(src))
	}
	b.WriteString("</svg>\n")
	return b.String()
}
