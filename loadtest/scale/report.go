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

// report is a run: every op's figures at every volume.
type report struct {
	Commit       string    `json:"commit"`
	Took         string    `json:"took"`
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

func (r *report) add(op op, vi int, ds []time.Duration) {
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
func (r *report) attribute(entries []entry) error {
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

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# How the store's cost grows with the data\n\ncommit %s · %d calls per operation and volume · InnoDB buffer pool %d MB · took %s\n\n",
		r.Commit, r.Reps, r.BufferPoolMB, r.Took)
	fmt.Fprintf(&b, "Volume: rows in each of reservations, orders and order_events, of %d ended sales. Fill times: ", r.Sales)
	for i, v := range r.Volumes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s in %.0f s", count(float64(v)), r.FillSeconds[i])
	}
	b.WriteString(".\n\n## Rows examined per call (the slow log's count: not weather)\n\n")
	r.tableHead(&b, []string{"operation", "runs"}, "verdict")
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "| %s | %s |", o.Name, o.Runs)
		for _, p := range o.Points {
			fmt.Fprintf(&b, " %s |", trim(p.Examined))
		}
		fmt.Fprintf(&b, " %s |\n", o.growth())
	}
	b.WriteString("\n## Time per call, median (p90), µs — this machine's weather included\n\n")
	r.tableHead(&b, []string{"operation"}, "")
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "| %s |", o.Name)
		for _, p := range o.Points {
			fmt.Fprintf(&b, " %.0f (%.0f) |", p.MedianUS, p.P90US)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n## The plans at %s rows\n\nEvery statement an operation ran, its values replaced by `?`, and MariaDB's EXPLAIN of it (id, select_type, table, type, possible_keys, key, key_len, ref, rows, r_rows, filtered, r_filtered, Extra).\n",
		count(float64(r.Volumes[len(r.Volumes)-1])))
	for _, o := range r.Ops {
		fmt.Fprintf(&b, "\n### %s\n\n```\n", o.Name)
		for _, p := range o.Plans {
			fmt.Fprintf(&b, "%s\n", p.Query)
			for _, e := range p.Explain {
				fmt.Fprintf(&b, "    %s\n", strings.ReplaceAll(e, "\t", " | "))
			}
		}
		b.WriteString("```\n")
	}
	return b.String()
}

// tableHead writes a table's head: the first columns, one per volume (right-aligned), and last
// when it is not empty.
func (r *report) tableHead(b *strings.Builder, first []string, last string) {
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

// html is the report's page: a chart of rows examined and one of time per call, against the
// volume, then the Markdown as preformatted text.
func (r *report) html(md string) string {
	var b strings.Builder
	b.WriteString(`<!doctype html><meta charset="utf-8"><title>seckill-go: how the store's cost grows</title>
<style>body{font:14px system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}svg{background:#fafafa;border:1px solid #ddd}pre{white-space:pre-wrap}</style>
<h1>How the store's cost grows with the data</h1>`)
	r.chart(&b, "Rows examined per call", func(p point) float64 { return p.Examined })
	r.chart(&b, "Time per call, median (µs)", func(p point) float64 { return p.MedianUS })
	fmt.Fprintf(&b, "<pre>%s</pre>\n", html.EscapeString(md))
	return b.String()
}

// chart draws one line per op: the volumes evenly spaced on x, y on a log scale (the ops differ
// by orders of magnitude; a flat line is what matters).
func (r *report) chart(b *strings.Builder, title string, y func(point) float64) {
	const w, h, left, right, top, bottom = 960.0, 420.0, 60.0, 330.0, 20.0, 40.0
	maxY := 1.0
	for _, o := range r.Ops {
		for _, p := range o.Points {
			maxY = max(maxY, y(p))
		}
	}
	top10 := math.Pow(10, math.Ceil(math.Log10(maxY)))
	ly := func(v float64) float64 { return top + (h-top-bottom)*(1-math.Log10(max(v, 1))/math.Log10(top10)) }
	lx := func(i int) float64 {
		if len(r.Volumes) == 1 {
			return left
		}
		return left + (w-left-right)*float64(i)/float64(len(r.Volumes)-1)
	}
	fmt.Fprintf(b, "<h2>%s</h2>\n<svg width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">", html.EscapeString(title), w, h, w, h)
	for d := 1.0; d <= top10; d *= 10 {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%s</text>`,
			left, w-right, ly(d), ly(d), left-4, ly(d)+4, count(d))
	}
	for i, v := range r.Volumes {
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" font-size="11" text-anchor="middle">%s rows</text>`, lx(i), h-bottom+16, count(float64(v)))
	}
	for k, o := range r.Ops {
		color := fmt.Sprintf("hsl(%d,65%%,42%%)", k*360/max(len(r.Ops), 1))
		var pts []string
		for i, p := range o.Points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", lx(i), ly(y(p))))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="11" fill="%s">%s</text>`, w-right+8, top+float64(k)*15+10, color, html.EscapeString(o.Name))
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
