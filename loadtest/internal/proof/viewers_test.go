package proof

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

func TestParseViewerOptions(t *testing.T) {
	replicas := []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		counts  []int
		mode    viewers.Mode
		targets []string
	}{
		{"no viewers", nil, nil, nil, viewers.Poll, []string{"http://127.0.0.1:8080"}},
		{"polling through nginx", []string{"-viewers", "0, 250,1_000"}, nil, []int{0, 250, 1000}, viewers.Poll, []string{"http://127.0.0.1:8080"}},
		{"nginx where the stack put it", []string{"-viewers", "10"}, map[string]string{"SECKILL_LB_ADDR": "127.0.0.1:9080"}, []int{10}, viewers.Poll, []string{"http://127.0.0.1:9080"}},
		{"streams to the replicas", []string{"-viewers", "0,5000", "-view", "stream"}, nil, []int{0, 5000}, viewers.Stream, replicas},
		{"streams through nginx", []string{"-viewers", "5000", "-view", "stream", "-viewer-targets", "http://127.0.0.1:8080/"}, nil, []int{5000}, viewers.Stream, []string{"http://127.0.0.1:8080"}},
		{"polling the replicas", []string{"-viewers", "1000", "-viewer-targets", strings.Join(replicas, ",")}, nil, []int{1000}, viewers.Poll, replicas},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.counts, o.view.counts); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if o.view.mode != tc.mode {
				t.Errorf("mode %q, want %q", o.view.mode, tc.mode)
			}
			if diff := cmp.Diff(tc.targets, o.view.targets); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if !o.view.ownAddrs || o.view.pollEvery != time.Second || o.view.listEvery != 5*time.Second || o.view.linger != 10*time.Second {
				t.Errorf("defaults: %+v", o.view)
			}
		})
	}
	for _, args := range [][]string{
		{"-viewers", "1,x"},
		{"-viewers", "-1"},
		{"-viewers", "5,5"},
		{"-viewers", "5", "-view", "watch"},
		{"-viewers", "5", "-viewer-targets", "https://127.0.0.1:8080"},
		{"-viewers", "5", "-viewer-targets", "http://127.0.0.1:8080/api"},
		{"-viewers", "5", "-faults", "all"},
		{"-viewers", "5", "-zoo"},
		{"-viewers", "5", "-poll-every", "0s"},
		{"-viewers", "5", "-viewer-linger", "-1s"},
	} {
		if _, err := Parse(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("%q: parsed", args)
		}
	}
}

func TestLabelsAndNames(t *testing.T) {
	sr := attack.StrategyReport{Strategy: "mysql"}
	if sr.Label() != "mysql" {
		t.Errorf("without viewers: %q", sr.Label())
	}
	sr.Viewers = &attack.ViewersReport{}
	if sr.Label() != "mysql" {
		t.Errorf("0 viewers: %q", sr.Label())
	}
	sr.Viewers.Viewers, sr.Viewers.Mode = 5000, viewers.Stream
	if sr.Label() != "mysql · 5,000 stream viewers" {
		t.Errorf("5000 stream viewers: %q", sr.Label())
	}
	sr.Viewers.Round = 2
	if sr.Label() != "mysql · 5,000 stream viewers · round 2" {
		t.Errorf("round 2: %q", sr.Label())
	}
	for _, tc := range []struct {
		crowd        CrowdRun
		product, tag string
	}{
		{CrowdRun{}, "loadtest · zk", "zk"}, // the product and buyers of a run without viewers
		{CrowdRun{count: 250}, "loadtest · zk · 250 poll viewers", "zk-v250"},
		{CrowdRun{count: 0, round: 1}, "loadtest · zk", "zk"},
		{CrowdRun{count: 0, round: 2}, "loadtest · zk · round 2", "zk-v0-r2"},
		{CrowdRun{count: 250, round: 3}, "loadtest · zk · 250 poll viewers · round 3", "zk-v250-r3"},
	} {
		if got := productName("zk", tc.crowd, viewers.Poll); got != tc.product {
			t.Errorf("productName %+v: %q, want %q", tc.crowd, got, tc.product)
		}
		if got := buyerTag("zk", tc.crowd); got != tc.tag {
			t.Errorf("buyerTag %+v: %q, want %q", tc.crowd, got, tc.tag)
		}
	}
}

func TestCrowdRuns(t *testing.T) {
	for _, tc := range []struct {
		v    viewerOptions
		want []CrowdRun
	}{
		{viewerOptions{}, []CrowdRun{{}}},
		{viewerOptions{counts: []int{0, 250, 1000}, rounds: 1}, []CrowdRun{{0, 0}, {250, 0}, {1000, 0}}},
		{viewerOptions{counts: []int{0, 250, 1000}, rounds: 3}, []CrowdRun{{0, 1}, {250, 1}, {1000, 1}, {1000, 2}, {250, 2}, {0, 2}, {0, 3}, {250, 3}, {1000, 3}}},
	} {
		if diff := cmp.Diff(tc.want, crowdRuns(tc.v), cmp.AllowUnexported(CrowdRun{})); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", tc.v, diff)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

// TestViewersRounds: with rounds, each attack is related to the median attack without viewers,
// and each size is summed up over its rounds.
func TestViewersRounds(t *testing.T) {
	mk := func(count, round int, acc float64, verdict string, seen int) attack.StrategyReport {
		s := attack.StrategyReport{Strategy: "mysql", AcceptedPerSec: acc, Verdict: verdict, Viewers: &attack.ViewersReport{
			Summary: viewers.Summary{Mode: viewers.Poll, Viewers: count, SoldOutSeen: seen},
			Round:   round, MySQL: &attack.MySQLRates{ReadsPerSec: 100, WritesPerSec: 50}}}
		if count > 0 {
			s.Viewers.Lag.Latency = yardstick.Latency{Count: 1, P99: acc}
		}
		return s
	}
	ss := []attack.StrategyReport{
		mk(0, 1, 400, "PASS", 0), mk(1000, 1, 300, "PASS", 1000),
		mk(1000, 2, 380, "FAIL", 999), mk(0, 2, 600, "PASS", 0),
		mk(0, 3, 500, "PASS", 0), mk(1000, 3, 450, "PASS", 1000),
	}
	relateToNoViewers(ss)
	if got := ss[1].Viewers.AcceptedVsNone; got != 0.6 {
		t.Errorf("round 1's 1,000: ÷ 0 viewers %.2f, want 300 ÷ the median 500", got)
	}
	md := viewersRoundsMarkdown(ss)
	for _, want := range []string{
		"| mysql | 0 | poll | 3 | 500 | 1.00 (0.80, 1.20, 1.00) | — | 0 | — | 100 | 50 | PASS × 3 |",
		"| mysql | 1,000 | poll | 3 | 380 | 0.76 (0.60, 0.76, 0.90) | 380 | 0 | 2,999 of 3,000 | 100 | 50 | FAIL × 1, PASS × 2 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the rounds table lacks %q:\n%s", want, md)
		}
	}
	if viewersRoundsMarkdown(ss[:0]) != "" {
		t.Error("a rounds table without rounds")
	}
}

func TestSoldTimes(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ans := func(sent, lat, status int, order string, replayed bool) attack.Answer {
		return attack.Answer{Sent: t0.Add(ms(sent)), Latency: ms(lat), Status: status, OrderID: order, Replayed: replayed}
	}
	arrived, sent := soldTimes([]attack.Answer{
		ans(0, 50, 202, "o1", false),
		ans(5, 10, 409, "", false),
		ans(10, 30, 202, "o2", false),
		ans(12, 5, 202, "o1", true),    // a replay: not a unit sold again
		ans(20, 100, 202, "o1", false), // the same order again: counted once
		ans(30, 0, 0, "", false),
	})
	if diff := cmp.Diff([]time.Time{t0.Add(ms(50)), t0.Add(ms(40))}, arrived); diff != "" {
		t.Errorf("arrived (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Time{t0, t0.Add(ms(10))}, sent); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
}

func TestRelateToNoViewers(t *testing.T) {
	ss := []attack.StrategyReport{
		{Strategy: "mysql", AcceptedPerSec: 4000, Viewers: &attack.ViewersReport{}},
		{Strategy: "mysql", AcceptedPerSec: 3600, Viewers: &attack.ViewersReport{Summary: viewers.Summary{Viewers: 250}}},
		{Strategy: "redis", AcceptedPerSec: 3000, Viewers: &attack.ViewersReport{Summary: viewers.Summary{Viewers: 250}}}, // no redis run without viewers
		{Strategy: "zk", AcceptedPerSec: 1000},
	}
	relateToNoViewers(ss)
	for i, want := range []float64{1, 0.9, 0} {
		if got := ss[i].Viewers.AcceptedVsNone; got != want {
			t.Errorf("%s with %d viewers: ÷ 0 viewers %.2f, want %.2f", ss[i].Strategy, ss[i].Viewers.Viewers, got, want)
		}
	}
}

func TestMySQLRates(t *testing.T) {
	before := mysqlStatus{"Com_select": 1000, "Com_insert": 10, "Com_update": 20, "Com_delete": 0, "Com_insert_select": 1, "Questions": 5000}
	after := mysqlStatus{"Com_select": 1500, "Com_insert": 110, "Com_update": 220, "Com_delete": 50, "Com_insert_select": 1, "Questions": 9000}
	got := mysqlRates(before, after, 2*time.Second)
	if got.ReadsPerSec != 250 || got.WritesPerSec != 175 || got.Deltas["Questions"] != 4000 {
		t.Errorf("%+v: want 250 reads/s, (100+200+50)/2 = 175 writes/s", got)
	}
	if z := mysqlRates(before, after, 0); z.ReadsPerSec != 0 {
		t.Errorf("no window: %+v", z)
	}
}

func TestViewersMarkdown(t *testing.T) {
	r := viewersReport()
	md := Markdown(r)
	for _, want := range []string{
		"| mysql · 1,000 poll viewers | **FAIL** |",
		"| mysql | 0 | poll | **PASS** | 4000 | 1.00 | — | — | — | — | — | — | — | — | — | — | 210 | 4350 |",
		"| mysql | 1,000 | poll | **FAIL** | 3600 | 0.90 | 2200 | 1.2 / 8.5 | 93 % | 0 | 2 | 0 | — | 310 / 990 | 1250 | 999 of 1,000 | 205 | 4300 |",
		"| mysql | 5,000 | stream | **PASS** | 3400 | 0.85 | — | 3.1 / 40 | — | 0 | 0 | 12 | 21000 | 120 / 480 | 700 | 5,000 of 5,000 | 208 | 4290 |",
		"**mysql · 1,000 poll viewers: 1 of 1,000 viewers never read the sold out",
		"mysql · 1,000 poll viewers, first viewer failures: 127.0.0.1:8080 /api/v1/products/11: 502",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(Markdown(fullReport()), "Viewers during") {
		t.Error("a report without viewers has a viewers table")
	}
}

// viewersReport is a run of -viewers 0,1000 (poll) and 5000 (stream) on mysql, the 1,000 failing.
func viewersReport() *attack.Report {
	base := strategy("mysql", 11, 500, 6, 1.4, 4, 35)
	none := base
	none.AcceptedPerSec = 4000
	none.Viewers = &attack.ViewersReport{Summary: viewers.Summary{Mode: viewers.Poll}, MySQL: &attack.MySQLRates{Seconds: 6, ReadsPerSec: 210, WritesPerSec: 4350}}
	poll := base
	poll.AcceptedPerSec, poll.Verdict = 3600, "FAIL"
	poll.Violations = []string{"2 viewer reads answered 5xx (200 × 5,000 · 304 × 66,000 · 502 × 2)", "1 of 1,000 viewers never read the sold out (waited 10s after the drain)"}
	poll.Viewers = &attack.ViewersReport{
		Summary: viewers.Summary{
			Mode: viewers.Poll, Viewers: 1000, Targets: []string{"http://127.0.0.1:8080"}, Connected: 1000, WindowSeconds: 6,
			Reads: 13200, ReadsPerSec: 2200, ReadLatency: yardstick.Latency{Count: 13200, P50: 1.2, P95: 4, P99: 8.5, Max: 30},
			NotModifiedShare: 0.93, Status: map[int]int{200: 5000, 304: 66000, 502: 2},
			Lag:         viewers.Lag{Latency: yardstick.Latency{Count: 200000, P50: 310, P99: 990, Max: 1400}, Units: 200, Samples: 200000},
			LagFromSend: viewers.Lag{Latency: yardstick.Latency{Count: 200000, P50: 400, P99: 1250, Max: 1600}, Units: 200, Samples: 200000},
			SoldOutSeen: 999,
			Failures:    []string{"127.0.0.1:8080 /api/v1/products/11: 502 <html>"},
		},
		MySQL: &attack.MySQLRates{Seconds: 6, ReadsPerSec: 205, WritesPerSec: 4300},
	}
	stream := base
	stream.AcceptedPerSec = 3400
	stream.Events = []attack.Event{{T: 1, What: "replica 2 SIGKILLed"}, {T: 2.4, What: "replica 2 restarted and healthy"}}
	stream.Viewers = &attack.ViewersReport{
		Summary: viewers.Summary{
			Mode: viewers.Stream, Viewers: 5000, Targets: []string{"http://127.0.0.1:8081", "http://127.0.0.1:8082", "http://127.0.0.1:8083"}, Connected: 5000, WindowSeconds: 6,
			ReadLatency: yardstick.Latency{Count: 1700, P50: 3.1, P99: 40, Max: 60}, Status: map[int]int{200: 6700, 0: 12},
			Events: map[string]int{"snapshot": 6700, "stock": 110000, "sold_out": 5000, "stats": 20000}, EventsPerSec: 21000, PerViewerPerSec: 4.2, Drops: 1700,
			Lag:         viewers.Lag{Latency: yardstick.Latency{Count: 1000000, P50: 120, P99: 480, Max: 2100}, Units: 200, Samples: 1000000},
			LagFromSend: viewers.Lag{Latency: yardstick.Latency{Count: 1000000, P50: 180, P99: 700, Max: 2300}, Units: 200, Samples: 1000000},
			SoldOutSeen: 5000,
		},
		MySQL: &attack.MySQLRates{Seconds: 6, ReadsPerSec: 208, WritesPerSec: 4290},
	}
	r := fullReport()
	r.Settings.Chaos = "kill"
	r.Settings.Viewers, r.Settings.View = []int{0, 1000, 5000}, "poll"
	r.Strategies = []attack.StrategyReport{none, poll, stream}
	relateToNoViewers(r.Strategies)
	r.Passed = false
	return r
}

// TestViewersSmoke is the watched stampede in small, inside `make test`: three replicas of the
// app, a mysql sale of 50 units attacked without viewers and with 30, polling (the replicas
// directly: no nginx here) and then streaming. Every attack must pass, each viewer read the sold
// out, none was answered 5xx, and the report carries the figures.
func TestViewersSmoke(t *testing.T) {
	stack, targets := apptest.Cluster(t, 3, nil)
	for _, mode := range []string{"poll", "stream"} {
		t.Run(mode, func(t *testing.T) {
			o, err := Parse([]string{
				"-targets", strings.Join(targets, ","), "-strategies", "mysql",
				"-stock", "50", "-buyers", "500", "-workers", "16", "-baseline", "0", "-drain-timeout", "60s",
				"-viewers", "0,30", "-view", mode, "-viewer-targets", strings.Join(targets, ","), "-viewer-warmup", "500ms",
				"-poll-every", "200ms", "-list-every", "1s",
				"-admin-token", apptest.AdminToken, "-mysql-dsn", stack.DSN, "-out", "",
			}, func(string) string { return "" }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			db, err := attack.OpenDB(o.MysqlDSN)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rep, err := Run(t.Context(), db, o, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(Markdown(rep))
			if !rep.Passed || len(rep.Strategies) != 2 {
				t.Fatalf("passed %v, %d attacks; want a pass of 2", rep.Passed, len(rep.Strategies))
			}
			none, watched := rep.Strategies[0].Viewers, rep.Strategies[1].Viewers
			if none == nil || none.Viewers != 0 || none.MySQL == nil || none.AcceptedVsNone != 1 {
				t.Errorf("the attack without viewers: %+v", none)
			}
			if watched == nil || watched.Viewers != 30 || watched.SoldOutSeen != 30 || watched.FiveXX() != 0 || watched.MySQL == nil {
				t.Fatalf("the watched attack: %+v", watched)
			}
			if watched.Lag.Samples != 30*50 || watched.Lag.Missed != 0 || watched.Lag.Latency.Count == 0 {
				t.Errorf("lag %+v: want 30 viewers × 50 units, none missed", watched.Lag)
			}
			switch mode {
			case "poll":
				if watched.Status[200] == 0 || watched.Status[304] == 0 || watched.ByKind[viewers.KindList] == 0 {
					t.Errorf("polls: status %v, by kind %v; want 200s, 304s and the list read", watched.Status, watched.ByKind)
				}
			case "stream":
				if watched.Events["snapshot"] < 30 || watched.Events["sold_out"] == 0 || watched.EventsPerSec <= 0 {
					t.Errorf("events %v, %.0f/s: want a snapshot per viewer and the sold out", watched.Events, watched.EventsPerSec)
				}
			}
		})
	}
}
