package deploy

import (
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	alertsFile     = "deploy/prometheus/alerts.yml"
	alertTestsFile = "deploy/prometheus/alerts_test.yml"
	runbookPage    = "docs/stacks.md"
)

// alertRule is the part of a Prometheus rule the checks read.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func loadAlertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, alertsFile, &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return rules
}

// promtoolPath returns promtool, or fails the test saying how to install it: `make test` runs
// scripts/promtool.sh first, as it runs scripts/chromium.sh for the browser test.
func promtoolPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is required to check the Prometheus configuration, alert rules and their tests, and was not found on PATH: " +
			"install it with scripts/promtool.sh (Debian's prometheus package; its service is not started)")
	}
	return p
}

// TestAlertsPromtool has promtool check alerts.yml and run its unit tests, alerts_test.yml: each
// alert fires on the series of its fault and stays silent on a healthy one.
func TestAlertsPromtool(t *testing.T) {
	promtool := promtoolPath(t)
	root := repoRoot(t)
	for _, args := range [][]string{
		{"check", "rules", alertsFile},
		{"test", "rules", alertTestsFile},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesLoaded: prometheus.yml loads alerts.yml, and docker-compose.yml mounts it where
// prometheus.yml (mounted itself) looks for it; the unit tests load the same file.
func TestAlertRulesLoaded(t *testing.T) {
	var prom struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, "deploy/prometheus/prometheus.yml", &prom)
	if diff := cmp.Diff([]string{"alerts.yml"}, prom.RuleFiles); diff != "" {
		t.Errorf("prometheus.yml rule_files (-want +got):\n%s", diff)
	}
	mounts := map[string]string{} // target -> source
	for _, v := range loadCompose(t).services["prometheus"].volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 {
			mounts[parts[1]] = parts[0]
		}
	}
	var config string
	for dst, src := range mounts {
		if src == "./deploy/prometheus/prometheus.yml" {
			config = dst
		}
	}
	if config == "" {
		t.Fatalf("compose does not mount deploy/prometheus/prometheus.yml into prometheus (mounts %v)", mounts)
	}
	for _, rf := range prom.RuleFiles {
		dst := rf
		if !path.IsAbs(rf) {
			dst = path.Join(path.Dir(config), rf)
		}
		// The file next to prometheus.yml in the repository, so that promtool check config finds it too.
		want := "./" + path.Join("deploy/prometheus", rf)
		if got := mounts[dst]; got != want {
			t.Errorf("rule file %s: compose mounts %q at %s, want %s", rf, got, dst, want)
		}
	}

	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	readYAML(t, alertTestsFile, &tests)
	if diff := cmp.Diff([]string{"alerts.yml"}, tests.RuleFiles); diff != "" {
		t.Errorf("%s tests other rules than alerts.yml (-want +got):\n%s", alertTestsFile, diff)
	}
}

// labelRef finds the labels an annotation's template reads.
var labelRef = regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestAlertRules: every rule is an alert with a for: duration, a severity, a summary, a
// description, and a runbook_url naming a heading of the runbook page; each alert has a unit
// test where it fires and one where it stays silent; its templates read only labels its
// expression keeps.
func TestAlertRules(t *testing.T) {
	rules := loadAlertRules(t)
	headings := map[string]bool{}
	for _, l := range strings.Split(string(readRepoFile(t, runbookPage)), "\n") {
		if h, ok := strings.CutPrefix(l, "### "); ok {
			headings[githubAnchor(h)] = true
		}
	}

	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, alertTestsFile, &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}

	seen := map[string]bool{}
	for _, r := range rules {
		name := r.Alert
		if name == "" {
			t.Errorf("rule %q is not an alert: say here what a recording rule is for", r.Record)
			continue
		}
		if seen[name] {
			t.Errorf("alert %s is defined twice", name)
		}
		seen[name] = true
		if r.For == "" {
			t.Errorf("%s has no for: (say 0m if it must fire at once)", name)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", name, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s has no %s annotation", name, a)
			}
		}
		if want := runbookPage + "#" + strings.ToLower(name); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %s", name, r.Annotations["runbook_url"], want)
		} else if !headings[strings.ToLower(name)] {
			t.Errorf("%s: %s has no heading ### %s", name, runbookPage, name)
		}
		if !fires[name] || !silent[name] {
			t.Errorf("%s: %s must fire it in a test (%v) and keep it silent in one (%v)", name, alertTestsFile, fires[name], silent[name])
		}

		refs, err := parsePromQL(r.Expr)
		if err != nil {
			t.Errorf("%s: %q: %v", name, r.Expr, err)
			continue
		}
		if len(refs.grouping) == 0 {
			continue // the series' own labels: TestAlertMetricsExist checks them
		}
		kept := slices.Compact(slices.Sorted(slices.Values(refs.grouping)))
		for _, a := range sortedKeys(r.Annotations) {
			for _, m := range labelRef.FindAllStringSubmatch(r.Annotations[a], -1) {
				if !slices.Contains(kept, m[1]) {
					t.Errorf("%s: %s reads $labels.%s, which its aggregation (by %v) drops", name, a, m[1], kept)
				}
			}
		}
	}
	for name := range fires {
		if !seen[name] {
			t.Errorf("%s tests alert %s, which %s does not define", alertTestsFile, name, alertsFile)
		}
	}
}

// TestAlertMetricsExist starts the real app (as TestDashboardMetricsExist does) and checks that
// every metric and label the alerts read, and every label their templates print, is in its
// /metrics: an alert on a metric the app does not export would never fire.
func TestAlertMetricsExist(t *testing.T) {
	rules := loadAlertRules(t)
	refs := map[string]promqlRefs{}
	for _, r := range rules {
		p, err := parsePromQL(r.Expr)
		if err != nil {
			t.Errorf("%s: %q: %v", r.Alert, r.Expr, err)
			continue
		}
		// The labels the templates print must exist too: as grouping, checkMetricRefs checks
		// that one of the expression's metrics (or the scrape) has them.
		for _, a := range r.Annotations {
			for _, m := range labelRef.FindAllStringSubmatch(a, -1) {
				if !slices.Contains(p.grouping, m[1]) {
					p.grouping = append(p.grouping, m[1])
				}
			}
		}
		refs[r.Alert] = p
	}
	checkMetricRefs(t, refs, appMetrics(t))
}

// githubAnchor is the anchor GitHub gives a heading: lower case, punctuation dropped, spaces
// to hyphens (enough for the runbook's headings, which are alert names).
func githubAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}
