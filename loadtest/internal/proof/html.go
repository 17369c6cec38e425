package proof

import (
	"bytes"
	_ "embed" // the page template, report.html.tmpl
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// writeHTML renders r as a self-contained HTML page. Nothing is written if rendering fails.
func writeHTML(w io.Writer, r *attack.Report) error {
	if r == nil {
		return fmt.Errorf("write HTML report: no report")
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, newPageView(r)); err != nil {
		return fmt.Errorf("write HTML report %s: %w", r.RunID, err)
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("write HTML report %s: %w", r.RunID, err)
	}
	return nil
}

// ---------------------------------------------------------------- the page's view of a Report

type pageView struct {
	*attack.Report
	Started  string
	Pace     string
	Chaos    string
	Verdict  verdictView
	Failed   []string // strategies whose verdict is FAIL
	Rows     []strategyView
	Outcomes []string // column order of the outcome table
	Combined chartView
	// Viewers is the viewers table (-viewers), ViewerColumns its figures' headings.
	Viewers       []viewerRowView
	ViewerColumns []string
	// Rounds is the rounds table (-viewer-rounds), RoundsHeader its columns.
	Rounds       [][]string
	RoundsHeader []string
	RoundsNote   string
}

// viewerRowView is one attack's row of the viewers table, its figures written as the Markdown's.
type viewerRowView struct {
	Strategy, Mode, Count, Color string
	Verdict                      verdictView
	Cells                        []string
}

type strategyView struct {
	*attack.StrategyReport
	Index       int
	Color       string
	Unsafe      bool
	Verdict     verdictView
	LatAccepted attack.Latency // the latency of accepted purchases
	LatAll      attack.Latency // the latency of every answer
	HasAccepted bool
	HasAll      bool
	Outcomes    []int // in pageView.Outcomes order
	LatencyRef  chartView
	AcceptedRef chartView
}

type verdictView struct {
	Word   string // PASS, FAIL, OVERSOLD
	Symbol string // shown beside the word so the verdict does not rest on colour alone
	Class  string // CSS class: pass, fail, warn
	Note   string
}

func newPageView(r *attack.Report) pageView {
	names := make([]string, len(r.Strategies))
	for i, s := range r.Strategies {
		names[i] = s.Label()
	}
	colors := strategyColors(names)

	p := pageView{
		Report:   r,
		Started:  "—",
		Pace:     pace(r.Settings),
		Chaos:    orNone(r.Settings.Chaos),
		Outcomes: outcomeColumns(r.Strategies),
	}
	if !r.StartedAt.IsZero() {
		p.Started = r.StartedAt.UTC().Format("2006-01-02 15:04:05 MST")
	}
	if r.Passed {
		p.Verdict = verdictView{Word: "PASS", Symbol: "✓", Class: "pass",
			Note: "Every safe strategy kept every invariant, and the unsafe control (if run) was caught overselling."}
	} else {
		p.Verdict = verdictView{Word: "FAIL", Symbol: "✗", Class: "fail",
			Note: "An invariant broke, or the unsafe control failed to show its oversell: see the violations below."}
	}
	for i := range r.Strategies {
		s := &r.Strategies[i]
		if s.Verdict == "FAIL" {
			p.Failed = append(p.Failed, s.Label())
		}
		row := strategyView{
			StrategyReport: s,
			Index:          i,
			Color:          colors[s.Label()],
			Unsafe:         unsafe(s.Strategy),
			Verdict:        strategyVerdict(s.Verdict),
		}
		row.LatAccepted, row.LatAll = s.Latency["accepted"], s.Latency["all"]
		row.HasAccepted, row.HasAll = row.LatAccepted.Count > 0, row.LatAll.Count > 0
		for _, o := range p.Outcomes {
			row.Outcomes = append(row.Outcomes, s.Outcomes[o])
		}
		row.LatencyRef = latencyChart(fmt.Sprintf("chart-%d-latency", i), s, row.Color)
		row.AcceptedRef = acceptedChart(fmt.Sprintf("chart-%d-accepted", i), s, row.Color, stockOf(r, s))
		p.Rows = append(p.Rows, row)
	}
	p.Combined = combinedChart("chart-all-accepted", r, colors)
	for i := range r.Strategies {
		s := &r.Strategies[i]
		if s.Viewers == nil {
			continue
		}
		cells := viewerCells(s)
		p.ViewerColumns = viewerColumns
		p.Viewers = append(p.Viewers, viewerRowView{Strategy: s.Strategy, Mode: string(s.Viewers.Mode), Count: cells[0],
			Color: colors[s.Label()], Verdict: strategyVerdict(s.Verdict), Cells: cells[1:]})
	}
	if p.Rounds = roundsRows(r.Strategies); len(p.Rounds) > 0 {
		p.RoundsHeader, p.RoundsNote = roundsHeader, roundsNote
	}
	return p
}

// unsafe says whether a strategy is one of the unsafe ones, kept to show how they fail (none,
// the lock zoo's capped and naive variants): the report labels them as controls.
func unsafe(strategy string) bool {
	info, known := sale.Strategy(strategy).Info()
	return known && !info.Safe
}

func strategyVerdict(word string) verdictView {
	switch word {
	case "PASS":
		return verdictView{Word: word, Symbol: "✓", Class: "pass"}
	case "OVERSOLD":
		return verdictView{Word: word, Symbol: "⚠", Class: "warn", Note: "expected of the unsafe control"}
	case "":
		return verdictView{Word: "—", Class: "none"}
	default:
		return verdictView{Word: word, Symbol: "✗", Class: "fail"}
	}
}

// outcomeColumns lists the outcomes of the report in the Markdown table's order, followed by
// any outcome the harness added since, sorted.
func outcomeColumns(ss []attack.StrategyReport) []string {
	cols := slices.Clone(outcomeOrder)
	var extra []string
	for _, s := range ss {
		for o := range s.Outcomes {
			if !slices.Contains(cols, o) && !slices.Contains(extra, o) {
				extra = append(extra, o)
			}
		}
	}
	slices.Sort(extra)
	return append(cols, extra...)
}

// stockOf is the stock the strategy's product was put on sale with, as the database says.
func stockOf(r *attack.Report, s *attack.StrategyReport) int {
	if s.Facts.InitialStock > 0 {
		return s.Facts.InitialStock
	}
	return r.Settings.Stock
}

// ---------------------------------------------------------------- colours

// Okabe–Ito and Paul Tol colours: distinguishable with the common colour-vision deficiencies
// and on paper. The unsafe control always gets the warning colour, and its lines are dashed.
const warnColor = "#D55E00"

var (
	// ownColors go to the project's own safe strategies, in registry order (mysql, redis, zk,
	// redis-lua).
	ownColors   = []string{"#0072B2", "#CC79A7", "#009E73", "#E69F00"}
	fixedColors = func() map[string]string {
		out := map[string]string{attack.UnsafeStrategy: warnColor}
		for i, st := range sale.StrategiesWhere(sale.OwnSafe) {
			out[string(st)] = ownColors[i%len(ownColors)]
		}
		return out
	}()
	spareColors = []string{"#56B4E9", "#882255", "#44AA99", "#999933", "#332288", "#AA4499"}
)

// strategyColors gives every strategy one colour, the same in every chart of the page.
func strategyColors(names []string) map[string]string {
	out := make(map[string]string, len(names))
	next := 0
	for _, n := range names {
		if _, done := out[n]; done {
			continue
		}
		if c, ok := fixedColors[n]; ok {
			out[n] = c
			continue
		}
		out[n] = spareColors[next%len(spareColors)]
		next++
	}
	return out
}

func dashOf(strategy string) string {
	if unsafe(strategy) {
		return "7 4"
	}
	return ""
}

// ---------------------------------------------------------------- chart geometry (pure)

// px is an SVG coordinate, printed with one decimal at most.
type px float64

func (p px) String() string { return attack.FormatNum(float64(p), 1) }

type point struct{ X, Y float64 }

// scale maps a domain interval onto a pixel range, linearly or on log10.
type scale struct {
	d0, d1, r0, r1 float64
	log            bool
}

func linearScale(d0, d1, r0, r1 float64) scale {
	if d1 == d0 {
		d1 = d0 + 1
	}
	return scale{d0: d0, d1: d1, r0: r0, r1: r1}
}

// logScale needs 0 < d0 < d1.
func logScale(d0, d1, r0, r1 float64) scale {
	s := linearScale(math.Log10(d0), math.Log10(d1), r0, r1)
	s.log = true
	return s
}

// at maps v; NaN for values a log scale cannot show.
func (s scale) at(v float64) float64 {
	if s.log {
		if v <= 0 {
			return math.NaN()
		}
		v = math.Log10(v)
	}
	return s.r0 + (v-s.d0)/(s.d1-s.d0)*(s.r1-s.r0)
}

// niceStep is a round step (1, 2 or 5 × 10^k) cutting span into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(max(n, 1))
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm < 1.5:
		return mag
	case norm < 3:
		return 2 * mag
	case norm < 7:
		return 5 * mag
	default:
		return 10 * mag
	}
}

// niceMax rounds hi up to a multiple of the tick step of [0, hi] in about n intervals, so the
// axis ends on a labelled tick.
func niceMax(hi float64, n int) float64 {
	if !(hi > 0) || math.IsInf(hi, 0) {
		return 1
	}
	step := niceStep(hi, n)
	return math.Ceil(hi/step-1e-9) * step
}

// linearTicks are the multiples of a nice step within [lo, hi], about n intervals apart.
func linearTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	step := niceStep(hi-lo, n)
	first := math.Ceil(lo/step - 1e-9)
	var ticks []float64
	for i := first; i*step <= hi+step*1e-9; i++ {
		ticks = append(ticks, roundTo(i*step, step))
	}
	return ticks
}

// logTicks are the powers of ten within [lo, hi], with 2× and 5× between them when the range
// spans less than three decades.
func logTicks(lo, hi float64) []float64 {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	first, last := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	mults := []float64{1}
	if last-first < 3 {
		mults = []float64{1, 2, 5}
	}
	var ticks []float64
	for e := first; e <= last; e++ {
		for _, m := range mults {
			v := m * math.Pow(10, e)
			if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
				ticks = append(ticks, roundTo(v, math.Pow(10, e)))
			}
		}
	}
	return ticks
}

// logDomain widens [lo, hi] (both > 0) to whole decades.
func logDomain(lo, hi float64) (float64, float64) {
	return math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
}

// roundTo removes the float noise of v = i × step (0.30000000000000004 → 0.3).
func roundTo(v, step float64) float64 {
	digits := max(0, 1-int(math.Floor(math.Log10(step)))) + 1
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// tickLabel writes an axis value short: 0.5, 20, 1500, 12k, 2.5M.
func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return attack.FormatNum(v/1e6, 2) + "M"
	case a >= 1e4:
		return attack.FormatNum(v/1e3, 1) + "k"
	default:
		return attack.FormatNum(v, 3)
	}
}

// pathData is the SVG path through pts; a point with a NaN coordinate ends the line, and the
// next one starts a new piece, so a gap in the data is a gap in the line.
func pathData(pts []point) string {
	var b strings.Builder
	pen := false
	for _, p := range pts {
		if math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.X, 0) || math.IsInf(p.Y, 0) {
			pen = false
			continue
		}
		if pen {
			b.WriteByte('L')
		} else {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteByte('M')
		}
		b.WriteString(attack.FormatNum(p.X, 1))
		b.WriteByte(' ')
		b.WriteString(attack.FormatNum(p.Y, 1))
		pen = true
	}
	return b.String()
}

// cumulativeAccepted is the running total of first-time 202s at the end of each timeline slice,
// starting from (0, 0).
func cumulativeAccepted(tl []attack.Sample) []point {
	step := attack.TimelineStep.Seconds()
	pts := make([]point, 0, len(tl)+1)
	pts = append(pts, point{0, 0})
	total := 0
	for _, s := range tl {
		total += s.Accepted
		pts = append(pts, point{s.T + step, float64(total)})
	}
	return pts
}

// latencySeries are the p50 and p99 of each slice at its middle; a slice without requests has
// no latency and leaves a gap.
func latencySeries(tl []attack.Sample) (p50, p99 []point) {
	half := attack.TimelineStep.Seconds() / 2
	for _, s := range tl {
		x := s.T + half
		if s.Requests == 0 {
			p50 = append(p50, point{x, math.NaN()})
			p99 = append(p99, point{x, math.NaN()})
			continue
		}
		p50 = append(p50, point{x, s.P50})
		p99 = append(p99, point{x, s.P99})
	}
	return p50, p99
}

// project maps data points to pixels.
func project(pts []point, sx, sy scale) []point {
	out := make([]point, len(pts))
	for i, p := range pts {
		out[i] = point{sx.at(p.X), sy.at(p.Y)}
	}
	return out
}

// timelineEnd is the last second worth showing: the end of the last slice, event or answer.
func timelineEnd(s *attack.StrategyReport) float64 {
	end := s.Seconds
	if n := len(s.Timeline); n > 0 {
		end = max(end, s.Timeline[n-1].T+attack.TimelineStep.Seconds())
	}
	for _, e := range s.Events {
		end = max(end, e.T)
	}
	return end
}

// ---------------------------------------------------------------- charts

type chartView struct {
	ID, Title, Desc string
	W, H            px
	X0, Y0, X1, Y1  px // the plot area
	XLabel, YLabel  string
	XTicks, YTicks  []tickView
	Refs            []refView
	Events          []eventView
	Lines           []lineView
	Legend          []legendView
	Empty           string // shown instead of data
}

type tickView struct {
	Pos   px
	Label string
}

type lineView struct {
	Name        string
	D           string
	Color, Dash string
	Width       px
}

type refView struct {
	Y, LabelX, LabelY px
	Label             string
}

type eventView struct {
	X, LabelX, LabelY px
	Anchor            string
	Label             string
}

type legendView struct {
	X, Y        px
	Color, Dash string
	Label       string
}

// chartFrame lays out a chart: its size, the legend rows above the plot and the plot area.
type chartFrame struct {
	w, h                   float64
	left, right, top, bot  float64
	legendX0, legendY0     float64
	legendRowH, legendMaxW float64
}

func newFrame(w, h float64, legend []string) (chartFrame, []point) {
	f := chartFrame{w: w, h: h, left: 60, right: 18, bot: 44, legendRowH: 18}
	f.legendX0, f.legendY0 = f.left, 16
	f.legendMaxW = w - f.left - f.right
	pos := legendLayout(legend, f.legendX0, f.legendY0, f.legendMaxW, f.legendRowH)
	rows := 1
	if n := len(pos); n > 0 {
		rows = int(math.Round((pos[n-1].Y-f.legendY0)/f.legendRowH)) + 1
	}
	f.top = f.legendY0 + float64(rows-1)*f.legendRowH + 18
	return f, pos
}

// legendLayout places legend entries left to right from (x0, y0), wrapping to a new row of
// height rowH when the next one would pass maxW. Text width is estimated at 7 px a character
// (12 px sans-serif), which is all the precision a legend needs.
func legendLayout(labels []string, x0, y0, maxW, rowH float64) []point {
	const swatch, gap, charW = 22, 18, 7
	pos := make([]point, len(labels))
	x, y := x0, y0
	for i, l := range labels {
		w := swatch + charW*float64(len([]rune(l)))
		if x > x0 && x+w > x0+maxW {
			x, y = x0, y+rowH
		}
		pos[i] = point{x, y}
		x += w + gap
	}
	return pos
}

func (f chartFrame) view(id, title, desc, xlabel, ylabel string) chartView {
	return chartView{
		ID: id, Title: title, Desc: desc, XLabel: xlabel, YLabel: ylabel,
		W: px(f.w), H: px(f.h),
		X0: px(f.left), Y0: px(f.top), X1: px(f.w - f.right), Y1: px(f.h - f.bot),
	}
}

func (f chartFrame) xScale(end float64) (scale, []tickView) {
	end = niceMax(end, 8)
	sx := linearScale(0, end, f.left, f.w-f.right)
	return sx, ticksOf(linearTicks(0, end, 8), sx)
}

func ticksOf(vals []float64, s scale) []tickView {
	out := make([]tickView, 0, len(vals))
	for _, v := range vals {
		out = append(out, tickView{Pos: px(s.at(v)), Label: tickLabel(v)})
	}
	return out
}

func legendViews(pos []point, lines []lineView) []legendView {
	out := make([]legendView, len(lines))
	for i, l := range lines {
		out[i] = legendView{X: px(pos[i].X), Y: px(pos[i].Y), Color: l.Color, Dash: l.Dash, Label: l.Name}
	}
	return out
}

func eventViews(events []attack.Event, sx scale, f chartFrame) []eventView {
	out := make([]eventView, 0, len(events))
	for i, e := range events {
		x := sx.at(e.T)
		ev := eventView{X: px(x), LabelX: px(x + 4), LabelY: px(f.top + 14 + 14*float64(i%3)), Anchor: "start", Label: e.What}
		if x > f.left+(f.w-f.left-f.right)*0.6 {
			ev.LabelX, ev.Anchor = px(x-4), "end"
		}
		out = append(out, ev)
	}
	return out
}

const (
	chartW, chartH       = 560, 300
	combinedW, combinedH = 1120, 360
	xAxisLabel           = "seconds since the first request"
)

// latencyChart plots the p50 and p99 latency of each timeline slice. When p99 and p50 are two
// decades or more apart (a lock wait beside a fast path), the axis is logarithmic, or the p50
// line would lie flat on the floor.
func latencyChart(id string, s *attack.StrategyReport, color string) chartView {
	lines := []lineView{{Name: "p99", Color: color, Width: 2}, {Name: "p50", Color: color, Dash: "5 4", Width: 1.5}}
	f, pos := newFrame(chartW, chartH, []string{"p99", "p50"})
	title := fmt.Sprintf("%s: latency over time", s.Label())
	c := f.view(id, title, fmt.Sprintf("p50 and p99 latency in milliseconds of the requests sent in each %s slice, strategy %s.", attack.TimelineStep, s.Label()),
		xAxisLabel, "latency, ms")
	c.Legend = legendViews(pos, lines)

	p50, p99 := latencySeries(s.Timeline)
	lo, hi := math.Inf(1), 0.0
	for _, p := range slices.Concat(p50, p99) {
		if p.Y > 0 {
			lo, hi = min(lo, p.Y), max(hi, p.Y)
		}
	}
	sx, xt := f.xScale(timelineEnd(s))
	c.XTicks = xt
	if hi == 0 {
		c.Empty = "no latency samples"
		c.YTicks = ticksOf([]float64{0}, linearScale(0, 1, f.h-f.bot, f.top))
		return c
	}
	var sy scale
	if hi/lo >= 100 {
		d0, d1 := logDomain(lo, hi)
		sy = logScale(d0, d1, f.h-f.bot, f.top)
		c.YTicks = ticksOf(logTicks(d0, d1), sy)
		c.YLabel = "latency, ms (log scale)"
	} else {
		top := niceMax(hi, 5)
		sy = linearScale(0, top, f.h-f.bot, f.top)
		c.YTicks = ticksOf(linearTicks(0, top, 5), sy)
	}
	lines[0].D = pathData(project(p99, sx, sy))
	lines[1].D = pathData(project(p50, sx, sy))
	c.Lines = lines
	c.Events = eventViews(s.Events, sx, f)
	return c
}

// acceptedChart plots the running total of accepted purchases against the stock.
func acceptedChart(id string, s *attack.StrategyReport, color string, stock int) chartView {
	lines := []lineView{{Name: "accepted (cumulative)", Color: color, Dash: dashOf(s.Strategy), Width: 2}}
	labels := []string{lines[0].Name, fmt.Sprintf("stock (%d)", stock)}
	f, pos := newFrame(chartW, chartH, labels)
	c := f.view(id, fmt.Sprintf("%s: accepted over time", s.Label()),
		fmt.Sprintf("Cumulative accepted purchases of strategy %s against the stock of %d units; above the stock line is an oversell.", s.Label(), stock),
		xAxisLabel, "accepted purchases")
	c.Legend = legendViews(pos, append(lines, lineView{Name: labels[1], Color: refColor, Dash: refDash}))

	sx, xt := f.xScale(timelineEnd(s))
	c.XTicks = xt
	pts := cumulativeAccepted(s.Timeline)
	top := niceMax(max(float64(stock), pts[len(pts)-1].Y)*1.05, 5)
	sy := linearScale(0, top, f.h-f.bot, f.top)
	c.YTicks = ticksOf(linearTicks(0, top, 5), sy)
	c.Refs = []refView{stockRef(stock, sy, f)}
	if len(s.Timeline) == 0 {
		c.Empty = "no timeline samples"
		return c
	}
	lines[0].D = pathData(project(pts, sx, sy))
	c.Lines = lines
	c.Events = eventViews(s.Events, sx, f)
	return c
}

// combinedChart races every strategy's cumulative accepted purchases on one time axis.
func combinedChart(id string, r *attack.Report, colors map[string]string) chartView {
	var lines []lineView
	var stocks []int
	end := 0.0
	for i := range r.Strategies {
		s := &r.Strategies[i]
		name := s.Label()
		if unsafe(name) {
			name += " (unsafe control)"
		}
		lines = append(lines, lineView{Name: name, Color: colors[s.Label()], Dash: dashOf(s.Strategy), Width: 2})
		if st := stockOf(r, s); !slices.Contains(stocks, st) {
			stocks = append(stocks, st)
		}
		end = max(end, timelineEnd(s))
	}
	slices.Sort(stocks)
	labels := make([]string, 0, len(lines)+1)
	for _, l := range lines {
		labels = append(labels, l.Name)
	}
	labels = append(labels, "stock")
	f, pos := newFrame(combinedW, combinedH, labels)
	c := f.view(id, "Accepted over time, all strategies",
		"Cumulative accepted purchases of every strategy on one time axis, against the stock; the steepest line sells out first, and a line above the stock line oversold.",
		xAxisLabel, "accepted purchases")
	c.Legend = legendViews(pos, append(slices.Clone(lines), lineView{Name: "stock", Color: refColor, Dash: refDash}))

	sx, xt := f.xScale(end)
	c.XTicks = xt
	hi := 0.0
	series := make([][]point, len(r.Strategies))
	for i := range r.Strategies {
		series[i] = cumulativeAccepted(r.Strategies[i].Timeline)
		hi = max(hi, series[i][len(series[i])-1].Y)
	}
	for _, st := range stocks {
		hi = max(hi, float64(st))
	}
	top := niceMax(hi*1.05, 6)
	sy := linearScale(0, top, f.h-f.bot, f.top)
	c.YTicks = ticksOf(linearTicks(0, top, 6), sy)
	for _, st := range stocks {
		c.Refs = append(c.Refs, stockRef(st, sy, f))
	}
	if !slices.ContainsFunc(r.Strategies, func(s attack.StrategyReport) bool { return len(s.Timeline) > 0 }) {
		c.Empty = "no timeline samples"
		return c
	}
	for i := range lines {
		if len(r.Strategies[i].Timeline) > 0 {
			lines[i].D = pathData(project(series[i], sx, sy))
		}
	}
	c.Lines = lines
	return c
}

const (
	refColor = "#5b6270"
	refDash  = "2 3"
)

func stockRef(stock int, sy scale, f chartFrame) refView {
	y := sy.at(float64(stock))
	return refView{Y: px(y), LabelX: px(f.w - f.right - 4), LabelY: px(y - 5), Label: fmt.Sprintf("stock %d", stock)}
}

// ---------------------------------------------------------------- template

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"int":  appapi.Thousands,
	"f":    func(v float64, decimals int) string { return formatFixed(v, decimals) },
	"ms":   func(v float64) string { return formatFixed(v, msDecimals(v)) },
	"secs": func(v float64) string { return formatFixed(v, 2) + " s" },
	"dur":  func(d time.Duration) string { return d.String() },
	"add":  func(a, b px) px { return a + b },
	"sub":  func(a, b px) px { return a - b },
	"mid":  func(a, b px) px { return (a + b) / 2 },
	"ratio": func(v float64) string {
		if v == 0 {
			return "—"
		}
		return formatFixed(v, 2) + "×"
	},
}).Parse(pageHTML))

// pageHTML is the page's template: see report.html.tmpl.
//
//go:embed report.html.tmpl
var pageHTML string

// formatFixed prints v with exactly `decimals` decimals and grouped thousands.
func formatFixed(v float64, decimals int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	n, err := strconv.Atoi(whole)
	if err != nil {
		return s
	}
	out := appapi.Thousands(n)
	if n == 0 && strings.HasPrefix(whole, "-") {
		out = "-0"
	}
	if frac != "" {
		out += "." + frac
	}
	return out
}

// msDecimals keeps about three significant digits of a latency.
func msDecimals(v float64) int {
	switch a := math.Abs(v); {
	case a < 10:
		return 2
	case a < 100:
		return 1
	default:
		return 0
	}
}
