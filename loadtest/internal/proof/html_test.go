package proof

import (
	"bytes"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/net/html"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

var update = flag.Bool("update", false, "rewrite the golden pages testdata/sample-report.html and sample-edge-cases.html (open them in a browser to look at a change)")

func TestLinearScale(t *testing.T) {
	for _, tc := range []struct {
		name              string
		d0, d1, r0, r1, v float64
		want              float64
	}{
		{"start", 0, 10, 50, 550, 0, 50},
		{"end", 0, 10, 50, 550, 10, 550},
		{"middle", 0, 10, 50, 550, 5, 300},
		{"inverted range, as for y", 0, 100, 260, 20, 25, 200},
		{"outside the domain extrapolates", 0, 10, 0, 100, 12, 120},
		{"empty domain does not divide by zero", 3, 3, 0, 100, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := linearScale(tc.d0, tc.d1, tc.r0, tc.r1).at(tc.v); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("at(%v) = %v, want %v", tc.v, got, tc.want)
			}
		})
	}
}

func TestLogScale(t *testing.T) {
	s := logScale(1, 1000, 300, 0)
	for _, tc := range []struct{ v, want float64 }{{1, 300}, {10, 200}, {100, 100}, {1000, 0}} {
		if got := s.at(tc.v); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("at(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
	for _, v := range []float64{0, -1} {
		if got := s.at(v); !math.IsNaN(got) {
			t.Errorf("at(%v) = %v, want NaN: a log axis cannot show it", v, got)
		}
	}
}

func TestNiceStepAndMax(t *testing.T) {
	for _, tc := range []struct {
		span     float64
		n        int
		wantStep float64
		wantMax  float64
	}{
		{10, 5, 2, 10},
		{9.3, 8, 1, 10},
		{1000, 5, 200, 1000},
		{1013, 5, 200, 1200},
		{0.37, 4, 0.1, 0.4},
		{2_600, 6, 500, 3000},
		{0, 5, 1, 1},
		{math.NaN(), 5, 1, 1},
	} {
		if got := niceStep(tc.span, tc.n); math.Abs(got-tc.wantStep) > 1e-12 {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.wantStep)
		}
		if got := niceMax(tc.span, tc.n); math.Abs(got-tc.wantMax) > 1e-12 {
			t.Errorf("niceMax(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.wantMax)
		}
	}
}

func TestLinearTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		n      int
		want   []float64
	}{
		{"zero to ten", 0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{"decimals without float noise", 0, 0.6, 6, []float64{0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6}},
		{"offset start", 3, 17, 3, []float64{5, 10, 15}},
		{"large", 0, 1200, 6, []float64{0, 200, 400, 600, 800, 1000, 1200}},
		{"degenerate", 4, 4, 5, []float64{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, linearTicks(tc.lo, tc.hi, tc.n)); diff != "" {
				t.Errorf("linearTicks(%v, %v, %d) (-want +got):\n%s", tc.lo, tc.hi, tc.n, diff)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lo, hi float64
		want   []float64
	}{
		{"two decades get 2 and 5", 1, 100, []float64{1, 2, 5, 10, 20, 50, 100}},
		{"four decades get powers only", 0.1, 1000, []float64{0.1, 1, 10, 100, 1000}},
		{"sub-millisecond", 0.01, 1, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}},
		{"invalid", 0, 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, logTicks(tc.lo, tc.hi)); diff != "" {
				t.Errorf("logTicks(%v, %v) (-want +got):\n%s", tc.lo, tc.hi, diff)
			}
		})
	}
	if lo, hi := logDomain(3.2, 1870); lo != 1 || hi != 10000 {
		t.Errorf("logDomain(3.2, 1870) = %v, %v; want 1, 10000", lo, hi)
	}
}

func TestLabels(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {0.5, "0.5"}, {0.30000000000000004, "0.3"}, {20, "20"}, {1500, "1500"}, {12_000, "12k"}, {12_500, "12.5k"}, {2_500_000, "2.5M"}, {math.Copysign(0, -1), "0"}} {
		if got := tickLabel(tc.v); got != tc.want {
			t.Errorf("tickLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v        float64
		decimals int
		want     string
	}{{1234567.891, 1, "1,234,567.9"}, {999.5, 0, "1,000"}, {-1234.5, 2, "-1,234.50"}, {-0.4, 1, "-0.4"}, {0, 0, "0"}, {math.NaN(), 1, "—"}} {
		if got := formatFixed(tc.v, tc.decimals); got != tc.want {
			t.Errorf("formatFixed(%v, %d) = %q, want %q", tc.v, tc.decimals, got, tc.want)
		}
	}
}

func TestPathData(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		pts  []point
		want string
	}{
		{"empty", nil, ""},
		{"one point", []point{{1, 2}}, "M1 2"},
		{"a line, rounded to 0.1 px", []point{{0, 0}, {10.04, 5.06}, {20, 7.5}}, "M0 0L10 5.1L20 7.5"},
		{"a gap starts a new piece", []point{{0, 0}, {1, 1}, {2, nan}, {3, 3}, {4, 4}}, "M0 0L1 1 M3 3L4 4"},
		{"leading and trailing gaps", []point{{nan, 0}, {1, 1}, {2, math.Inf(1)}}, "M1 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pathData(tc.pts); got != tc.want {
				t.Errorf("pathData = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSeries(t *testing.T) {
	tl := []attack.Sample{
		{T: 0, Requests: 10, Accepted: 3, P50: 2, P99: 9},
		{T: 0.1, Requests: 0},
		{T: 0.2, Requests: 10, Accepted: 2, P50: 3, P99: 12},
	}
	approx := cmpopts.EquateApprox(0, 1e-9)
	wantCum := []point{{0, 0}, {0.1, 3}, {0.2, 3}, {0.3, 5}}
	if diff := cmp.Diff(wantCum, cumulativeAccepted(tl), approx); diff != "" {
		t.Errorf("cumulativeAccepted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]point{{0, 0}}, cumulativeAccepted(nil)); diff != "" {
		t.Errorf("cumulativeAccepted(nil) (-want +got):\n%s", diff)
	}
	p50, p99 := latencySeries(tl)
	nanOK := cmpopts.EquateNaNs()
	if diff := cmp.Diff([]point{{0.05, 2}, {0.15, math.NaN()}, {0.25, 3}}, p50, approx, nanOK); diff != "" {
		t.Errorf("p50 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]point{{0.05, 9}, {0.15, math.NaN()}, {0.25, 12}}, p99, approx, nanOK); diff != "" {
		t.Errorf("p99 (-want +got):\n%s", diff)
	}
}

func TestLegendLayout(t *testing.T) {
	// 22 px swatch + 7 px a character, 18 px apart; wraps past 120 px.
	got := legendLayout([]string{"p99", "p50", "a long label"}, 10, 16, 120, 18)
	want := []point{{10, 16}, {10 + 43 + 18, 16}, {10, 34}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("legendLayout (-want +got):\n%s", diff)
	}
}

func TestStrategyColors(t *testing.T) {
	got := strategyColors([]string{"zk", "x1", "none", "mysql", "x2", "zk"})
	want := map[string]string{"zk": "#009E73", "none": warnColor, "mysql": "#0072B2", "x1": spareColors[0], "x2": spareColors[1]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("strategyColors (-want +got):\n%s", diff)
	}
}

func TestWriteHTML(t *testing.T) {
	for _, tc := range []struct {
		name, sample string
		report       *attack.Report
		verdicts     []string
	}{
		{"edge cases", "sample-edge-cases.html", edgeCaseReport(), []string{"FAIL", "OVERSOLD", "PASS"}},
		{"full run", "sample-report.html", fullReport(), []string{"PASS", "OVERSOLD"}},
		{"viewers", "sample-viewers.html", viewersReport(), []string{"PASS", "FAIL", "1,000 poll viewers", "Viewers", "999 of 1,000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeHTML(&buf, tc.report); err != nil {
				t.Fatal(err)
			}
			page := buf.String()
			if *update {
				writeSample(t, tc.sample, buf.Bytes())
			}
			// The golden page: the template's output changes only when someone means it to
			// (go test ./loadtest -run TestWriteHTML -update, then look at the page).
			golden, err := os.ReadFile(filepath.Join("testdata", tc.sample))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.Split(string(golden), "\n"), strings.Split(page, "\n")); diff != "" {
				t.Errorf("the page differs from testdata/%s (-want +got):\n%s", tc.sample, diff)
			}

			doc, err := html.Parse(strings.NewReader(page))
			if err != nil {
				t.Fatalf("the page does not parse as HTML: %v", err)
			}
			svgs := elements(doc, "svg")
			if want := 2*len(tc.report.Strategies) + 1; len(svgs) != want {
				t.Errorf("%d <svg> elements, want %d: two per strategy and the combined chart", len(svgs), want)
			}
			for _, svg := range svgs {
				if attr(svg, "aria-label") == "" || attr(svg, "role") != "img" {
					t.Errorf("svg %q: want role=img and an aria-label", attr(svg, "id"))
				}
				if titles := elements(svg, "title"); len(titles) == 0 || titles[0].Parent != svg || text(titles[0]) == "" {
					t.Errorf("svg %q: want a <title> as its first-level child", attr(svg, "id"))
				}
			}
			for _, word := range tc.verdicts {
				if !strings.Contains(page, word) {
					t.Errorf("the page does not say %s", word)
				}
			}
			if s := elements(doc, "script"); len(s) > 0 {
				t.Errorf("%d <script> elements; the page must run no script (and escape names)", len(s))
			}
			for _, n := range elements(doc, "") {
				for _, a := range n.Attr {
					v := strings.ToLower(strings.TrimSpace(a.Val))
					external := strings.HasPrefix(v, "http:") || strings.HasPrefix(v, "https:") || strings.HasPrefix(v, "//")
					if (a.Key == "src" || a.Key == "href" || strings.HasSuffix(a.Key, ":href")) && external {
						t.Errorf("<%s %s=%q>: the page must be self-contained", n.Data, a.Key, a.Val)
					}
				}
			}
			for _, style := range elements(doc, "style") {
				if css := text(style); strings.Contains(css, "url(") || strings.Contains(css, "@import") {
					t.Error("the stylesheet loads something")
				}
			}
			if strings.Contains(page, "ZgotmplZ") {
				t.Error("html/template refused a value (ZgotmplZ in the page)")
			}
		})
	}
}

func TestWriteHTMLEscapes(t *testing.T) {
	var buf bytes.Buffer
	if err := writeHTML(&buf, edgeCaseReport()); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	if strings.Contains(page, "<script>") {
		t.Error("a strategy name reached the page unescaped")
	}
	if !strings.Contains(page, "&lt;script&gt;") {
		t.Error("the strategy name <script>… is not on the page, escaped")
	}
}

func TestWriteHTMLNilReport(t *testing.T) {
	var buf bytes.Buffer
	if err := writeHTML(&buf, nil); err == nil {
		t.Error("want an error for a nil report")
	}
	if buf.Len() != 0 {
		t.Error("wrote a page for a nil report")
	}
}

// ---------------------------------------------------------------- synthetic reports

// edgeCaseReport has an oversold control, a chaos event, a strategy that failed with an empty
// timeline and a name that must be escaped, and no yardsticks.
func edgeCaseReport() *attack.Report {
	mysql := strategy("mysql", 1, 200, 8, 1.6, 6, 40)
	mysql.Events = []attack.Event{{T: 1.2, What: "SIGKILL replica-2 (pid 4242)"}, {T: 3.1, What: "replica-2 restarted"}}
	mysql.Payment = &attack.PaymentReport{WindowSeconds: 5.2, First: attack.PayTally{Orders: 200, Payers: 100, Paid: 99, Declined: 6, Late: 1},
		Expired: 101, Returned: 101, WaitSeconds: 4.4, Second: attack.WaveReport{Units: 101, Buyers: 2020, Accepted: 101, Pay: attack.PayTally{Orders: 101, Payers: 101, Paid: 101}}}
	none := oversoldControl(2, 200, 472, 6, 1.2, 3, 15)
	evil := attack.StrategyReport{
		Strategy: `<script>alert("x")</script>`, ProductID: 3, Verdict: "FAIL",
		Outcomes: map[string]int{"transport_error": 2000, "made_up": 1}, Status: map[int]int{0: 2000},
		Latency:    map[string]attack.Latency{"all": {Count: 2000, P50: 3000, P95: 3000, P99: 3000, Max: 3001}},
		Facts:      audit.Facts{ProductID: 3, InitialStock: 200, Stock: 200, PerUserLimit: 1},
		Violations: []string{`no answer at all: dial tcp 127.0.0.1:8083: connect: connection refused <b>`},
		Payment:    &attack.PaymentReport{Skipped: "-pay-skip"},
	}
	return &attack.Report{
		RunID: "20261122T201500Z-edge", StartedAt: time.Date(2026, 11, 22, 20, 15, 0, 0, time.UTC),
		Machine: "linux/amd64, 2 CPUs", Targets: []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"},
		Settings:   attack.Settings{Stock: 200, Buyers: 2000, Attempts: 2, Workers: 64, MaxDuration: 30 * time.Second, Chaos: "kill"},
		Strategies: []attack.StrategyReport{mysql, none, evil},
		Passed:     false,
	}
}

// fullReport looks like a real run of every strategy, with yardsticks.
func fullReport() *attack.Report {
	mysql := strategy("mysql", 11, 500, 6, 1.4, 4, 35)
	redis := strategy("redis", 12, 500, 7, 2.1, 6, 60)
	zk := strategy("zk", 13, 500, 12, 7.5, 25, 2600) // lock waits: p99 two decades above p50
	zk.Events = []attack.Event{{T: 4.0, What: "SIGKILL replica-1"}, {T: 6.5, What: "replica-1 back"}}
	none := oversoldControl(14, 500, 1180, 5, 1.0, 2, 12)
	r := &attack.Report{
		RunID: "20261122T203000Z", StartedAt: time.Date(2026, 11, 22, 20, 30, 0, 0, time.UTC),
		Machine: "linux/amd64, 2 CPUs, Debian 12", Targets: []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"},
		Settings: attack.Settings{Stock: 500, Buyers: 5000, Attempts: 2, Rate: 1500, Workers: 128, MaxDuration: 60 * time.Second, Chaos: "kill"},
		Yardsticks: &attack.Yardsticks{
			R:       yardstick.RowResult{RowsPerSec: 4400, Statement: "UPDATE hot_row SET stock = stock - 1 WHERE id = ? AND stock >= 1", Goroutines: 16, Where: "seckill_yardstick.hot_row"},
			BareGin: attack.BareGin{RequestsPerSec: 24000, Workers: 128, Client: "vegeta, as the attack"},
		},
		Strategies: []attack.StrategyReport{mysql, redis, zk, none},
		Passed:     true,
	}
	for i, s := range r.Strategies {
		r.Strategies[i].AcceptedPerR = s.AcceptedPerSec / r.Yardsticks.R.RowsPerSec
		r.Strategies[i].SoldOutPerSec = 9000
		r.Strategies[i].SoldOutPerGin = 9000 / r.Yardsticks.BareGin.RequestsPerSec
	}
	return r
}

// strategy makes a PASSing attack of `seconds` at a steady rate that sells `stock` units (or
// 3.36× that for the unsafe control) by sellOut seconds, with latencies around p50 and p99 ms.
func strategy(name string, id int64, stock int, seconds, sellOut, p50, p99 float64) attack.StrategyReport {
	sold := stock
	if name == attack.UnsafeStrategy {
		sold = int(float64(stock) * 3.36)
	}
	n := int(seconds / attack.TimelineStep.Seconds())
	sellSlices := max(1, int(sellOut/attack.TimelineStep.Seconds()))
	var tl []attack.Sample
	total := 0
	for i := range n {
		t := float64(i) * attack.TimelineStep.Seconds()
		req := 120 + int(40*math.Sin(t*3))
		acc := 0
		if i < sellSlices {
			// front-loaded: most units go in the first slices, as in a real stampede
			acc = int(math.Round(float64(sold) * (math.Pow(float64(i+1)/float64(sellSlices), 0.6) - math.Pow(float64(i)/float64(sellSlices), 0.6))))
			acc = min(acc, sold-total)
			if i == sellSlices-1 {
				acc = sold - total
			}
		}
		total += acc
		wave := 1 + 0.3*math.Sin(t*5)
		s := attack.Sample{T: math.Round(t*10) / 10, Requests: req, Accepted: acc, P50: p50 * wave, P99: p99 * wave * (1 + 0.5*math.Cos(t*2))}
		if i == n/2 {
			s = attack.Sample{T: s.T} // a slice without requests: a gap in the latency lines
		}
		tl = append(tl, s)
	}
	requests := 0
	for _, s := range tl {
		requests += s.Requests
	}
	return attack.StrategyReport{
		Strategy: name, ProductID: id,
		Requests: requests, Seconds: seconds, RequestsPerSec: float64(requests) / seconds,
		Accepted: total, AcceptedPerSec: float64(total) / sellOut, SellOutSeconds: sellOut,
		Outcomes: map[string]int{"accepted": total, "replayed": total, "sold_out": requests - 2*total - 3, "rate_limited": 3},
		Status:   map[int]int{202: 2 * total, 409: requests - 2*total - 3, 429: 3},
		Latency: map[string]attack.Latency{
			"accepted": {Count: total, P50: p50, P95: p99 * 0.7, P99: p99, Max: p99 * 1.8},
			"all":      {Count: requests, P50: p50 * 0.8, P95: p99 * 0.6, P99: p99 * 0.9, Max: p99 * 1.8},
		},
		Timeline: tl,
		Facts: audit.Facts{ProductID: id, InitialStock: stock, Stock: stock - total, PerUserLimit: 1,
			Reservations: total, ReservedUnits: total, Orders: total, OrderUnits: total},
		Verdict: "PASS",
	}
}

// oversoldControl is the unsafe control caught overselling stock by oversold units, as the
// database shows it once the queue drained, with an attack as strategy makes one.
func oversoldControl(id int64, stock, oversold int, seconds, sellOut, p50, p99 float64) attack.StrategyReport {
	s := strategy(attack.UnsafeStrategy, id, stock, seconds, sellOut, p50, p99)
	sold := stock + oversold
	s.Verdict, s.Oversold = "OVERSOLD", oversold
	s.Facts.Stock, s.Facts.ReservedUnits, s.Facts.Reservations, s.Facts.OrderUnits, s.Facts.Orders = -oversold, sold, sold, sold, sold
	s.Violations = audit.Facts{InitialStock: stock, Stock: -oversold, ReservedUnits: sold, OrderUnits: sold}.Violations(true)
	return s
}

// ---------------------------------------------------------------- helpers

func writeSample(t testing.TB, name string, data []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

// elements are the element nodes under n named tag ("" for all), in document order.
func elements(n *html.Node, tag string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && (tag == "" || d.Data == tag) {
			out = append(out, d)
		}
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return b.String()
}
