package main

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// runReport is a run: each sweep it ran.
type runReport struct {
	Commit   string          `json:"commit"`
	Took     string          `json:"took"`
	Data     *dataReport     `json:"data,omitempty"`
	Buyers   *buyersReport   `json:"buyers,omitempty"`
	Sales    *salesReport    `json:"sales,omitempty"`
	Stock    *buyersReport   `json:"stock,omitempty"`
	Expiries *expiriesReport `json:"expiries,omitempty"`
	Replicas *replicasReport `json:"replicas,omitempty"`
}

// dataReport is the data sweep: every op's figures at every volume.
type dataReport struct {
	Reps         int       `json:"reps"`
	Sales        int       `json:"ended_sales"`
	BufferPoolMB int       `json:"innodb_buffer_pool_mb"`
	Volumes      []int     `json:"volumes"`
	FillSeconds  []float64 `json:"fill_seconds"`
	Ops          []*opRow  `json:"ops"`
}

// opRow is one op's figures, a point per volume.
type opRow struct {
	Name   string  `json:"name"`
	Runs   string  `json:"runs"`
	Points []point `json:"points"`
	// Plans are the op's statement shapes with their plans at the largest volume.
	Plans []plan `json:"plans"`
}

// point is an op at one volume.
type point struct {
	Volume     int     `json:"volume"`
	MedianUS   float64 `json:"median_us"`
	P90US      float64 `json:"p90_us"`
	Statements float64 `json:"statements_per_call"`
	// Examined is the rows the server examined per call (the slow log's Rows_examined, summed
	// over the call's statements).
	Examined  float64 `json:"rows_examined_per_call"`
	FullScans int     `json:"full_scans"`
}

// plan is one statement shape of an op and its EXPLAIN rows.
type plan struct {
	Query   string   `json:"query"`
	Explain []string `json:"explain"`
}

func (r *dataReport) add(op op, vi int, ds []time.Duration) {
	var row *opRow
	for _, o := range r.Ops {
		if o.Name == op.name {
			row = o
		}
	}
	if row == nil {
		row = &opRow{Name: op.name, Runs: op.runs}
		r.Ops = append(r.Ops, row)
	}
	us := make([]float64, len(ds))
	for i, d := range ds {
		us[i] = float64(d.Microseconds())
	}
	slices.Sort(us)
	row.Points = append(row.Points, point{Volume: r.Volumes[vi], MedianUS: us[len(us)/2], P90US: us[len(us)*9/10]})
}

// attribute gives every op's point its statements from the slow log: those between the op's
// marker at that volume and the end marker after it.
func (r *dataReport) attribute(entries []entry) error {
	type key struct {
		name   string
		volume int
	}
	type tally struct {
		statements, examined, fullScans int
		shapes                          map[string][]string
		order                           []string
	}
	tallies := map[key]*tally{}
	var cur *tally
	for _, e := range entries {
		q := strings.TrimPrefix(e.query, "SELECT '")
		switch {
		case strings.HasPrefix(q, markerPrefix):
			volume, name, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(q, markerPrefix), "'"), "|")
			v, err := strconv.Atoi(volume)
			if err != nil {
				return fmt.Errorf("slow log: marker %q", e.query)
			}
			cur = &tally{shapes: map[string][]string{}}
			tallies[key{name, v}] = cur
		case strings.HasPrefix(q, markerEnd):
			cur = nil
		case cur != nil:
			cur.statements++
			cur.examined += e.rowsExamined
			if e.fullScan {
				cur.fullScans++
			}
			s := shape(e.query)
			if _, seen := cur.shapes[s]; !seen {
				cur.order = append(cur.order, s)
			}
			cur.shapes[s] = planRows(e.explain)
		}
	}
	for _, o := range r.Ops {
		for i := range o.Points {
			p := &o.Points[i]
			t := tallies[key{o.Name, p.Volume}]
			if t == nil {
				return fmt.Errorf("slow log: no statements of %q at %d rows (is the slow log written where -slow-log-dir says?)", o.Name, p.Volume)
			}
			p.Statements = float64(t.statements) / float64(r.Reps)
			p.Examined = float64(t.examined) / float64(r.Reps)
			p.FullScans = t.fullScans
			if i == len(o.Points)-1 {
				for _, s := range t.order {
					o.Plans = append(o.Plans, plan{Query: s, Explain: t.shapes[s]})
				}
			}
		}
	}
	return nil
}

// growth is how much more an op examines per call at the largest volume than at the smallest:
// "flat" within half again plus 20 rows (a few more index pages, a page split), else the factor.
func (o *opRow) growth() string {
	first, last := o.Points[0].Examined, o.Points[len(o.Points)-1].Examined
	if last <= first*1.5+20 {
		return "flat"
	}
	if first < 1 {
		return fmt.Sprintf("grows: %s rows", count(last))
	}
	return fmt.Sprintf("grows ×%.0f", last/first)
}

func (r *runReport) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# How the cost grows\n\ncommit %s · took %s\n\n", r.Commit, r.Took)
	if r.Data != nil {
		r.Data.markdown(&b)
	}
	if r.Buyers != nil {
		r.Buyers.markdown(&b)
	}
	if r.Sales != nil {
		r.Sales.markdown(&b)
	}
	if r.Stock != nil {
		r.Stock.stockMarkdown(&b)
	}
	if r.Expiries != nil {
		r.Expiries.markdown(&b)
	}
	if r.Replicas != nil {
		r.Replicas.markdown(&b)
	}
	return b.String()
}

func (r *dataReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the store's cost grows with the data\n\n%d calls per operation and volume · InnoDB buffer pool %d MB\n\n", r.Reps, r.BufferPoolMB)
	fmt.Fprintf(b, "Volume: rows in each of reservations, orders and order_events, of %d ended sales. Fill times: ", r.Sales)
	for i, v := range r.Volumes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%s in %.0f s", count(float64(v)), r.FillSeconds[i])
	}
	b.WriteString(".\n\n### Rows examined per call (the slow log's count: not weather)\n\n")
	r.tableHead(b, []string{"operation", "runs"}, "verdict")
	for _, o := range r.Ops {
		fmt.Fprintf(b, "| %s | %s |", o.Name, o.Runs)
		for _, p := range o.Points {
			fmt.Fprintf(b, " %s |", trim(p.Examined))
		}
		fmt.Fprintf(b, " %s |\n", o.growth())
	}
	b.WriteString("\n### Time per call, median (p90), µs — this machine's weather included\n\n")
	r.tableHead(b, []string{"operation"}, "")
	for _, o := range r.Ops {
		fmt.Fprintf(b, "| %s |", o.Name)
		for _, p := range o.Points {
			fmt.Fprintf(b, " %.0f (%.0f) |", p.MedianUS, p.P90US)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n### The plans at %s rows\n\nEvery statement an operation ran, its values replaced by `?`, and MariaDB's EXPLAIN of it (id, select_type, table, type, possible_keys, key, key_len, ref, rows, r_rows, filtered, r_filtered, Extra).\n",
		count(float64(r.Volumes[len(r.Volumes)-1])))
	for _, o := range r.Ops {
		fmt.Fprintf(b, "\n#### %s\n\n```\n", o.Name)
		for _, p := range o.Plans {
			fmt.Fprintf(b, "%s\n", p.Query)
			for _, e := range p.Explain {
				fmt.Fprintf(b, "    %s\n", strings.ReplaceAll(e, "\t", " | "))
			}
		}
		b.WriteString("```\n")
	}
}

// tableHead writes a table's head: the first columns, one per volume (right-aligned), and last
// when it is not empty.
func (r *dataReport) tableHead(b *strings.Builder, first []string, last string) {
	b.WriteString("| " + strings.Join(first, " | ") + " |")
	for _, v := range r.Volumes {
		fmt.Fprintf(b, " %s rows |", count(float64(v)))
	}
	if last != "" {
		b.WriteString(" " + last + " |")
	}
	b.WriteString("\n|" + strings.Repeat("---|", len(first)) + strings.Repeat("---:|", len(r.Volumes)))
	if last != "" {
		b.WriteString("---|")
	}
	b.WriteString("\n")
}

// html is the report's page: each sweep's charts, then the Markdown as preformatted text.
func (r *runReport) html(md string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><meta charset="utf-8"><title>seckill-go: how the cost grows</title>
<style>body{font:14px system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}svg{background:#fafafa;border:1px solid #ddd}pre{white-space:pre-wrap}</style>
<h1>How the cost grows</h1>`)
	if r.Data != nil {
		r.Data.html(&b)
	}
	if r.Buyers != nil {
		r.Buyers.html(&b)
	}
	if r.Sales != nil {
		r.Sales.html(&b)
	}
	if r.Stock != nil {
		r.Stock.stockHTML(&b)
	}
	if r.Expiries != nil {
		r.Expiries.html(&b)
	}
	if r.Replicas != nil {
		r.Replicas.html(&b)
	}
	fmt.Fprintf(&b, "<pre>%s</pre>\n", html.EscapeString(md))
	return b.String()
}

// html draws the data sweep: rows examined and time per call against the volume, a line per op.
func (r *dataReport) html(b *strings.Builder) {
	xs := make([]string, len(r.Volumes))
	for i, v := range r.Volumes {
		xs[i] = count(float64(v)) + " rows"
	}
	curves := func(y func(point) float64) []series {
		out := make([]series, len(r.Ops))
		for k, o := range r.Ops {
			out[k].name = o.Name
			for _, p := range o.Points {
				out[k].ys = append(out[k].ys, y(p))
			}
		}
		return out
	}
	b.WriteString("<h2>The data</h2>\n")
	chart(b, "Rows examined per call", xs, curves(func(p point) float64 { return p.Examined }))
	chart(b, "Time per call, median (µs)", xs, curves(func(p point) float64 { return p.MedianUS }))
}

// series is one line of a chart: a value per x.
type series struct {
	name string
	ys   []float64
}

// chart draws one line per series: the xs evenly spaced, y on a log scale from the decade below
// the smallest value (the lines differ by orders of magnitude; a flat line is what matters).
func chart(b *strings.Builder, title string, xs []string, lines []series) {
	const w, h, left, right, top, bottom = 960.0, 420.0, 60.0, 330.0, 20.0, 40.0
	maxY, minY := 1.0, math.Inf(1)
	for _, l := range lines {
		for _, v := range l.ys {
			if v > 0 {
				maxY, minY = max(maxY, v), min(minY, v)
			}
		}
	}
	top10 := math.Pow(10, math.Ceil(math.Log10(maxY)))
	bottom10 := 1.0
	if minY < 1 {
		bottom10 = math.Pow(10, math.Floor(math.Log10(minY)))
	}
	ly := func(v float64) float64 {
		return top + (h-top-bottom)*(1-(math.Log10(max(v, bottom10))-math.Log10(bottom10))/(math.Log10(top10)-math.Log10(bottom10)))
	}
	lx := func(i int) float64 {
		if len(xs) == 1 {
			return left
		}
		return left + (w-left-right)*float64(i)/float64(len(xs)-1)
	}
	fmt.Fprintf(b, "<h3>%s</h3>\n<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">", html.EscapeString(title), w, h, w, h)
	for d := bottom10; d <= top10*1.001; d *= 10 {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`,
			left, w-right, ly(d), ly(d), left-4, ly(d)+4, count(d))
	}
	for i, x := range xs {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="11" text-anchor="middle">%s</text>`, lx(i), h-bottom+16, html.EscapeString(x))
	}
	for k, l := range lines {
		color := fmt.Sprintf("hsl(%d,65%%,42%%)", k*360/max(len(lines), 1))
		var pts []string
		for i, v := range l.ys {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(i), ly(v)))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" fill="%s">%s</text>`, w-right+8, top+float64(k)*15+10, color, html.EscapeString(l.name))
	}
	b.WriteString("</svg>\n")
}

// count writes n as 0, 950, 20k, 1M, 10M.
func count(n float64) string {
	switch {
	case n >= 1e6 && math.Mod(n, 1e6) == 0:
		return fmt.Sprintf("%.0fM", n/1e6)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.0fk", n/1e3)
	}
	return trim(n)
}

// trim writes a per-call figure: whole when it is, else with one decimal.
func trim(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// verdictText is a point's verdict for a report's table, its violations after it.
func verdictText(verdict string, violations []string) string {
	if len(violations) > 0 {
		verdict += ": " + strings.Join(violations, "; ")
	}
	return verdict
}
