package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
)

const dashboardFile = "deploy/grafana/dashboards/seckill.json"

// panel is the part of a Grafana panel the checks read.
type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // of a collapsed row
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID        string          `json:"uid"`
	Title      string          `json:"title"`
	Templating json.RawMessage `json:"templating"`
	Panels     []panel         `json:"panels"`
}

// provisionedDatasource returns the uid and type of the datasource Grafana is provisioned with.
func provisionedDatasource(t *testing.T) datasourceRef {
	t.Helper()
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
		} `yaml:"datasources"`
	}
	readYAML(t, "deploy/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].UID == "" {
		t.Fatalf("want one provisioned datasource with a uid, got %+v", ds.Datasources)
	}
	return datasourceRef{Type: ds.Datasources[0].Type, UID: ds.Datasources[0].UID}
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw := readRepoFile(t, dashboardFile)
	if !json.Valid(raw) {
		t.Fatalf("%s is not valid JSON", dashboardFile)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// allPanels flattens rows.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardExprs returns every PromQL expression of the dashboard, by "panel title/refId".
func dashboardExprs(t *testing.T, d dashboard) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			out[p.Title+"/"+tg.RefID] = tg.Expr
		}
	}
	return out
}

// TestDashboardStructure: valid JSON, a title and uid, every panel and query on the provisioned
// datasource, ids unique, panels on the 24-column grid without overlapping.
func TestDashboardStructure(t *testing.T) {
	d := loadDashboard(t)
	ds := provisionedDatasource(t)
	if d.UID == "" || d.Title == "" || len(d.UID) > 40 {
		t.Errorf("uid %q, title %q: both are needed (uid at most 40 characters) for a stable URL", d.UID, d.Title)
	}
	var tmpl struct{ List []json.RawMessage }
	if len(d.Templating) > 0 {
		if err := json.Unmarshal(d.Templating, &tmpl); err != nil {
			t.Errorf("templating: %v", err)
		}
	}
	if len(tmpl.List) > 0 {
		t.Error("the dashboard has template variables, whose queries this test does not check: teach it")
	}
	ids := map[int]string{}
	type cell struct{ x, y int }
	used := map[cell]string{}
	queries := 0
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or also %q's", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		g := p.GridPos
		if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
			t.Errorf("panel %q: gridPos %+v is off the 24-column grid", p.Title, g)
		}
	overlap:
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := used[cell{x, y}]; ok {
					t.Errorf("panel %q overlaps %q", p.Title, other)
					break overlap
				}
				used[cell{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != ds {
			t.Errorf("panel %q: datasource %+v, want the provisioned %+v", p.Title, p.Datasource, ds)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.Datasource != nil && *tg.Datasource != ds {
				t.Errorf("panel %q query %s: datasource %+v, want %+v", p.Title, tg.RefID, tg.Datasource, ds)
			}
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q query %s has no expr", p.Title, tg.RefID)
			}
		}
	}
	if queries == 0 {
		t.Fatal("no queries in the dashboard")
	}

	// A job matcher must name jobs deploy/prometheus/prometheus.yml scrapes.
	var prom struct {
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "deploy/prometheus/prometheus.yml", &prom)
	var jobs []string
	for _, sc := range prom.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	for key, expr := range dashboardExprs(t, d) {
		r, err := parsePromQL(expr)
		if err != nil {
			continue // reported by TestDashboardMetricsExist
		}
		for _, sel := range r.selectors {
			for _, m := range sel.matchers {
				if m.label != "job" || (m.op != "=" && m.op != "=~") {
					continue
				}
				re, err := regexp.Compile("^(?:" + m.value + ")$")
				if err != nil {
					t.Errorf("%s: job=~%q: %v", key, m.value, err)
					continue
				}
				if !slices.ContainsFunc(jobs, re.MatchString) {
					t.Errorf("%s: job%s%q matches no job of prometheus.yml", key, m.op, m.value)
				}
			}
		}
	}

	// What the issue asks the dashboard to show, by the metric that carries it.
	var all strings.Builder
	for _, e := range dashboardExprs(t, d) {
		all.WriteString(e + "\n")
	}
	exprs := all.String()
	for what, metric := range map[string]string{
		"purchases/s by strategy and outcome": "seckill_purchases_total",
		"latency percentiles":                 "seckill_purchase_duration_seconds_bucket",
		"lock wait":                           "seckill_lock_wait_seconds_bucket",
		"locks lost":                          "seckill_locks_lost_total",
		"outbox backlog":                      "seckill_outbox_backlog",
		"consumer lag":                        "seckill_consumer_lag",
		"stock per product":                   "seckill_product_stock",
	} {
		if !strings.Contains(exprs, metric) {
			t.Errorf("the dashboard does not show %s (%s)", what, metric)
		}
	}
}

// prometheusSeries are series Prometheus makes itself for every target, not the app.
var prometheusSeries = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// scrapeLabels are added by Prometheus to every series it scrapes.
var scrapeLabels = []string{"instance", "job"}

// faultOnly are series the app exports only after a fault nobody can provoke from outside in a
// test (a lock lease lost while held): they are checked against the metrics package the app
// registers, after recording one such event. Keep this list short.
var faultOnly = map[string]func(*metrics.Metrics){
	"seckill_locks_lost_total": func(m *metrics.Metrics) { m.LockLost(sale.StrategyRedis) },
}

// TestDashboardMetricsExist starts the real app against the local services, makes one purchase
// per strategy so that the labelled series exist, and checks that every metric and label the
// dashboard's PromQL reads is in its /metrics.
func TestDashboardMetricsExist(t *testing.T) {
	d := loadDashboard(t)
	exprs := dashboardExprs(t, d)
	refs := map[string]promqlRefs{}
	for _, key := range sortedKeys(exprs) {
		r, err := parsePromQL(exprs[key])
		if err != nil {
			t.Errorf("%s: %q: %v", key, exprs[key], err)
		}
		refs[key] = r
	}

	checkMetricRefs(t, refs, appMetrics(t))
}

// appMetrics returns the metric families of the real app's /metrics (liveMetrics), with the
// faultOnly ones added from the metrics package after recording their event.
func appMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	families := liveMetrics(t)
	if len(faultOnly) > 0 {
		m := metrics.New()
		for name, record := range faultOnly {
			if _, live := families[name]; live {
				t.Logf("%s is in the live /metrics: it no longer needs to be in faultOnly", name)
				continue
			}
			record(m)
		}
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if _, live := families[f.GetName()]; !live && faultOnly[f.GetName()] != nil {
				families[f.GetName()] = f
			}
		}
	}
	return families
}

// checkMetricRefs checks every metric and label that refs (PromQL expressions by a name for
// the messages) read against families: the metric is exported, a matcher's label exists (and an
// = matcher's value was seen), a grouping label belongs to one of the expression's metrics.
func checkMetricRefs(t *testing.T, refs map[string]promqlRefs, families map[string]*dto.MetricFamily) {
	t.Helper()
	for _, key := range sortedKeys(refs) {
		r := refs[key]
		labels := map[string]bool{}
		for _, l := range scrapeLabels {
			labels[l] = true
		}
		for _, sel := range r.selectors {
			if prometheusSeries[sel.metric] {
				for _, m := range sel.matchers {
					labels[m.label] = true
				}
				continue
			}
			fam, extra, err := family(families, sel.metric)
			if err != nil {
				t.Errorf("%s: %v", key, err)
				continue
			}
			have := seriesLabels(fam)
			for _, l := range extra {
				have[l] = map[string]bool{}
			}
			for l := range have {
				labels[l] = true
			}
			for _, m := range sel.matchers {
				values, ok := have[m.label]
				switch {
				case !ok && !slices.Contains(scrapeLabels, m.label):
					t.Errorf("%s: %s has no label %q (it has %v)", key, sel.metric, m.label, sortedKeys(have))
				case ok && m.op == "=" && len(values) > 0 && !values[m.value]:
					t.Errorf("%s: %s{%s=%q}: no such value (seen: %v)", key, sel.metric, m.label, m.value, sortedKeys(values))
				}
			}
		}
		for _, g := range r.grouping {
			if !labels[g] {
				t.Errorf("%s: groups by %q, which none of its metrics has", key, g)
			}
		}
	}
}

// family finds the metric family a PromQL metric name reads: the name itself (counter, gauge),
// or a histogram's _bucket/_sum/_count series. extra are labels the suffix adds (le).
func family(fams map[string]*dto.MetricFamily, name string) (*dto.MetricFamily, []string, error) {
	if f, ok := fams[name]; ok {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
			return nil, nil, fmt.Errorf("%s is a %s: query its _bucket, _sum or _count", name, f.GetType())
		}
		return f, nil, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := fams[base]
		switch {
		case !ok:
		case f.GetType() == dto.MetricType_HISTOGRAM && suffix == "_bucket":
			return f, []string{"le"}, nil
		case f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket":
			return f, nil, nil
		default:
			return nil, nil, fmt.Errorf("%s: %s is a %s, which has no %s series", name, base, f.GetType(), suffix)
		}
	}
	return nil, nil, fmt.Errorf("the app does not export %s", name)
}

// seriesLabels returns every label of a family's series with the values seen.
func seriesLabels(f *dto.MetricFamily) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if out[lp.GetName()] == nil {
				out[lp.GetName()] = map[string]bool{}
			}
			out[lp.GetName()][lp.GetValue()] = true
		}
	}
	return out
}

// liveMetrics runs one app instance in this process (internal/apptest) with every strategy
// served, sells the one unit of a product per strategy and refuses a second buyer, and returns
// its /metrics, parsed. The label values a dashboard query selects on must be among the ones this
// produces (outcome accepted and sold_out, every strategy).
func liveMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	stack := apptest.NewStack(t)
	// The running audit every 100 ms: its series exist once it has checked a sale.
	app := stack.Start(t, map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true", "SECKILL_RECONCILE_EVERY": "100ms"})
	admin, shop := apptest.Client{URL: app.URL, Token: apptest.AdminToken}, apptest.Client{URL: app.URL}
	for _, st := range []string{"mysql", "redis", "zk", "none"} {
		id := admin.CreateProduct(t, map[string]any{"name": "dashboard " + st, "price_cents": 100, "stock": 1, "strategy": st})
		path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
		if r := shop.MustDo(t, "POST", path, map[string]any{"user_id": "first-" + st}, nil); r.Status != http.StatusAccepted {
			t.Fatalf("%s: the first purchase: %d %s, want 202", st, r.Status, r.Raw)
		}
		if r := shop.MustDo(t, "POST", path, map[string]any{"user_id": "second-" + st}, nil); r.Status != http.StatusConflict {
			t.Fatalf("%s: the second purchase: %d %s, want 409", st, r.Status, r.Raw)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		fams := scrape(t, app.URL)
		if f := fams["seckill_reconcile_oversold_units"]; f != nil && len(f.GetMetric()) >= 4 {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatal("the running audit checked no sale within 20 s (seckill_reconcile_oversold_units has no series for the 4 products)")
		}
	}
}

// scrape reads the app's /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", res.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// TestPromtool checks the dashboard's PromQL and the Prometheus configuration (with the rule
// files it loads) with promtool (scripts/promtool.sh installs it; without it the test fails):
// Grafana's macros are replaced by durations, each expression becomes a recording rule, and
// promtool parses them.
func TestPromtool(t *testing.T) {
	promtool := promtoolPath(t)
	exprs := dashboardExprs(t, loadDashboard(t))
	macros := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")
	var rules bytes.Buffer
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, key := range sortedKeys(exprs) {
		expr, err := json.Marshal(macros.Replace(exprs[key])) // a JSON string is a YAML string
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&rules, "      - record: dashboard:query_%d\n        expr: %s\n", i, expr)
	}
	file := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(file, rules.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "rules", file},
		{"check", "config", filepath.Join(repoRoot(t), "deploy/prometheus/prometheus.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
