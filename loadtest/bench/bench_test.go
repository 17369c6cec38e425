package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// TestMain lets the test binary be the bare gin child of the gin phase.
func TestMain(m *testing.M) { yardstick.Main(m.Run) }

func noEnv(string) string { return "" }

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gin", "soldout", "r", "read", "fanout", "returns", "accept"}, o.phases); diff != "" {
		t.Errorf("default phases (-want +got):\n%s", diff)
	}
	if o.subscribers != 1000 || o.fanoutWith != "mysql" || o.fanoutBuyers != 16 {
		t.Errorf("fan-out defaults: %d subscribers, %s, %d workers", o.subscribers, o.fanoutWith, o.fanoutBuyers)
	}
	if o.connections != 64 || !slices.Equal(o.workers, []int{32, 64, 256}) || !slices.Equal(o.strategies, []string{"mysql", "redis", "zk", "redis-lua"}) || o.duration != 5*time.Second || o.warmup != time.Second || o.adminToken != "dev-admin-token" {
		t.Errorf("defaults: %+v", o)
	}
	if diff := cmp.Diff([]string{"default", "1"}, o.batches); diff != "" {
		t.Errorf("default batch configurations (-want +got):\n%s", diff)
	}
	o, err = parseOptions([]string{"-targets", "http://127.0.0.1:8081/, http://127.0.0.1:8082", "-phases", "accept"}, func(k string) string {
		return map[string]string{"SECKILL_ADMIN_TOKEN": "from-the-env"}[k]
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"http://127.0.0.1:8081", "http://127.0.0.1:8082"}, o.targets); diff != "" {
		t.Errorf("targets (-want +got):\n%s", diff)
	}
	if o.adminToken != "from-the-env" || len(o.batches) != 1 {
		t.Errorf("with -targets: token %q, batches %q; want the env's token and one configuration (as running)", o.adminToken, o.batches)
	}
	for _, args := range [][]string{
		{"-phases", "gin,warp"},
		{"-phases", ""},
		{"-batch", "0"},
		{"-batch", "default,lots"},
		{"-workers", "0"},
		{"-duration", "0s"},
		{"-duration", "11m"},
		{"-targets", "http://127.0.0.1:8081", "-profile"},
		{"-strategies", "", "-phases", "accept"},
		{"stray"},
		{"-subscribers", "0"},
		{"-fanout-workers", "0"},
	} {
		if _, err := parseOptions(args, noEnv, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) accepted it", args)
		}
	}
}

func TestReplicaEnv(t *testing.T) {
	base := []string{"PATH=/bin", "SECKILL_PEERS=http://127.0.0.1:8081", "SECKILL_BATCH_MAX=7", "SECKILL_MYSQL_DSN=root:@tcp(127.0.0.1:3306)/seckill"}
	got := replicaEnv(base, map[string]string{"SECKILL_MYSQL_DSN": "x/seckill_bench", "SECKILL_PEERS": "a,b"}, "SECKILL_BATCH_MAX", "SECKILL_BATCH_LINGER")
	want := []string{"PATH=/bin", "SECKILL_MYSQL_DSN=x/seckill_bench", "SECKILL_PEERS=a,b"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replicaEnv (-want +got):\n%s", diff)
	}

	b := &bench{o: &options{mysqlDSN: "root:@tcp(127.0.0.1:3306)/seckill_bench", adminToken: "tok-12345"}}
	env := envMap(b.replicaEnv(base, "1", nil)(1, "127.0.0.1:1001", "127.0.0.1:2001", []string{"http://127.0.0.1:1000", "http://127.0.0.1:1001"}))
	for k, v := range map[string]string{
		"SECKILL_HTTP_ADDR": "127.0.0.1:1001", "SECKILL_PPROF_ADDR": "127.0.0.1:2001", "SECKILL_INSTANCE_ID": "bench-2",
		"SECKILL_MYSQL_DSN": "root:@tcp(127.0.0.1:3306)/seckill_bench", "SECKILL_AUTO_MIGRATE": "true",
		"SECKILL_KAFKA_TOPIC": "seckill.bench.orders", "SECKILL_KAFKA_GROUP": "seckill-bench",
		"SECKILL_PEERS": "http://127.0.0.1:1000,http://127.0.0.1:1001", "SECKILL_RATE_PER_USER": "0",
		"SECKILL_LOG_LEVEL": "warn", "SECKILL_BATCH_MAX": "1", "SECKILL_ADMIN_TOKEN": "tok-12345", "PATH": "/bin",
	} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	env = envMap(b.replicaEnv(base, batchDefault, nil)(0, "a", "p", nil))
	if _, set := env["SECKILL_BATCH_MAX"]; set {
		t.Error("the default configuration must leave SECKILL_BATCH_MAX unset, even when the caller's environment sets it")
	}
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m[k] = "DUPLICATE"
			continue
		}
		m[k] = v
	}
	return m
}

func TestDropDatabaseRefusesOtherNames(t *testing.T) {
	for _, dsn := range []string{"root:@tcp(127.0.0.1:3306)/seckill", "root:@tcp(127.0.0.1:3306)/", "root:@tcp(127.0.0.1:3306)/seckill_bench`x"} {
		if err := dropDatabase(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "seckill_bench") {
			t.Errorf("dropDatabase(%s) = %v, want a refusal", dsn, err)
		}
	}
}

func sampleReport() *Report {
	rows := []Row{
		{Kind: kindGin, What: "bare gin ceiling", Config: "1 process · 64 connections", Figure: 24000, Unit: "req/s", P50: 2.4, P99: 9.76, Answers: map[string]int{"409 sold_out": 130000}, CPU: &yardstick.CPUShare{Busy: 0.93, Steal: 0.064, Idle: 0.006}},
		{Kind: kindSoldOut, What: "sold-out path", Config: "mysql · 3 replicas · 64 connections · batch default (128)", ProductID: 1, Figure: 12000, Unit: "req/s", P50: 4.1, P99: 31, Answers: map[string]int{"409 sold_out": 70000, "0 no answer": 2}, Notes: []string{"2 answers were not 409 sold_out"}},
		{Kind: kindR, What: "R", Config: "16 goroutines · autocommit · seckill_yardstick.hot_row", Figure: 4000, Unit: "rows/s"},
		{Kind: kindGinRead, What: "bare gin GET", Config: "1 process · 64 connections", Figure: 30000, Unit: "req/s", P50: 1.9, P99: 7, Answers: map[string]int{"200": 160000}},
		{Kind: kindRead, What: "read path: GET one product", Config: "mysql · 3 replicas · 64 connections · batch default (128)", ProductID: 5, Figure: 15000, Unit: "req/s", P50: 3.5, P99: 20, Answers: map[string]int{"200": 90000}},
		{Kind: kindFanout, What: "fan-out: events delivered", Config: "1,000 subscribers over 3 replicas · mysql, 16 purchase workers · batch default (128)", ProductID: 6, Figure: 5200, Unit: "events/s", P50: 140, P99: 420,
			Answers: map[string]int{"202": 15000}, Accepted: 15000, Fanout: &viewers.Summary{Mode: viewers.Stream, Viewers: 1000, Targets: []string{"http://127.0.0.1:1"}, Connected: 1000, WindowSeconds: 5,
				Status: map[int]int{200: 1000}, ByKind: map[string]int{"stream": 1000}, Events: map[string]int{"snapshot": 1000, "stock": 20000, "stats": 5000}, EventsPerSec: 5200, PerViewerPerSec: 5.2,
				Lag: viewers.Lag{Latency: yardstick.Latency{Count: 200000, P50: 140, P99: 420, Max: 700}, Units: 200, Samples: 200000}}},
		{Kind: kindAccept, What: "accept mysql", Config: "batch default (128) · 32 workers · 3 replicas", ProductID: 2, Figure: 8000, Unit: "accepted/s", P50: 3.3, P99: 140, Answers: map[string]int{"202": 48000}, Accepted: 48000, ReservedAtEnd: 48000, Reserved: 48000, Confirmed: 48000, Drained: true, DrainSeconds: 1.26, Profile: "loadtest/results/bench-x-accept-mysql-batch-default.pprof"},
		{Kind: kindAccept, What: "accept redis-lua", Config: "batch default (128) · 256 workers · 3 replicas", ProductID: 4, Figure: 24000, Unit: "accepted/s", P50: 9, P99: 25, Answers: map[string]int{"202": 144000}, Accepted: 144000, ReservedAtEnd: 1440, Reserved: 144000, Confirmed: 144000, Drained: true, DrainSeconds: 9.4, CPU: &yardstick.CPUShare{Busy: 0.7, Steal: 0.25, IOWait: 0.01, Idle: 0.04}},
		{Kind: kindAccept, What: "accept zk", Config: "batch 1 · 32 workers · 3 replicas", ProductID: 3, Figure: 400, Unit: "accepted/s", P50: 80, P99: 300, Answers: map[string]int{"202": 2400}, Accepted: 2400, Reserved: 2400, Confirmed: 1000},
	}
	for i := range rows {
		rows[i].Round = 1
	}
	computeRatios(rows)
	return &Report{
		RunID: "20261123-140000", StartedAt: time.Date(2026, 11, 23, 14, 0, 0, 0, time.UTC), Seconds: 201.4,
		Machine: "vm: 2 × AMD EPYC, linux/amd64, go1.26.8", Commit: "abc1234",
		Settings: Settings{Rounds: 1, Replicas: 3, Connections: 64, Workers: []int{32}, Warmup: "1s", Duration: "5s", AcceptDuration: "5s", RDuration: "5s",
			RGoroutines: 16, Strategies: []string{"mysql", "zk"}, SoldOutStrategy: "mysql", Batches: []string{"default", "1"}, Stock: 100_000_000},
		Rows:     rows,
		Problems: []string{"accept zk (batch 1): 3 answers 5xx"},
	}
}

func TestComputeRatios(t *testing.T) {
	rows := sampleReport().Rows
	var got []string
	for _, r := range rows {
		got = append(got, fmt.Sprintf("%s %.2f %s %.3f", r.What, r.Ratio, r.RatioTo, r.RatioGin))
	}
	want := []string{"bare gin ceiling 0.00  0.000", "sold-out path 0.50 bare gin 0.000", "R 0.00  0.000", "bare gin GET 0.00  0.000",
		"read path: GET one product 0.50 bare gin GET 0.000", "fan-out: events delivered 0.00  0.000", "accept mysql 2.00 R 0.333", "accept redis-lua 6.00 R 1.000", "accept zk 0.10 R 0.017"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ratios (-want +got):\n%s", diff)
	}
	// Without the yardstick, no ratio, and the table says why.
	alone := []Row{{Kind: kindAccept, What: "accept mysql", Figure: 10}}
	computeRatios(alone)
	if alone[0].Ratio != 0 || ratioCell(alone[0]) != "— (no R)" {
		t.Errorf("without R: ratio %v, cell %q", alone[0].Ratio, ratioCell(alone[0]))
	}
}

func TestMarkdown(t *testing.T) {
	md := markdown(sampleReport())
	for _, want := range []string{
		"## seckill-go bench 20261123-140000",
		"vm: 2 × AMD EPYC, linux/amd64, go1.26.8 · 2026-11-23 14:00 UTC · commit abc1234 · run took 3m21s",
		"| bare gin ceiling | 1 process · 64 connections | 1 | 24,000 req/s | yardstick | 2.40 | 9.76 | — | 93 % · 6 % |",
		"| sold-out path | mysql · 3 replicas · 64 connections · batch default (128) | 1 | 12,000 req/s | 0.50 of bare gin | 4.10 | 31.0 | — | — |",
		"| R | 16 goroutines · autocommit · seckill_yardstick.hot_row | 1 | 4,000 rows/s | yardstick | — | — | — | — |",
		"| accept mysql | batch default (128) · 32 workers · 3 replicas | 1 | 8,000 accepted/s | 2.00 of R · 0.33 of bare gin | 3.30 | 140 | 1.3 s | — |",
		"| accept redis-lua | batch default (128) · 256 workers · 3 replicas | 1 | 24,000 accepted/s | 6.00 of R · 1.00 of bare gin | 9.00 | 25.0 | 9.4 s (1 % in MySQL at the end) | 70 % · 25 % |",
		"| accept zk | batch 1 · 32 workers · 3 replicas | 1 | 400 accepted/s | 0.10 of R · 0.02 of bare gin | 80.0 | 300 | **not drained** | — |",
		"| sold-out path | mysql · 3 replicas · 64 connections · batch default (128) | 1 | 409 sold_out × 70,000 · 0 no answer × 2 | — | — |",
		"| accept zk | batch 1 · 32 workers · 3 replicas | 3 | 202 × 2,400 | 2,400 | 1,000 |",
		"- **accept zk (batch 1): 3 answers 5xx**",
		"- sold-out path (mysql · 3 replicas · 64 connections · batch default (128)): 2 answers were not 409 sold_out",
		"`go tool pprof -top loadtest/results/bench-x-accept-mysql-batch-default.pprof`",
		"| bare gin GET | 1 process · 64 connections | 1 | 30,000 req/s | yardstick | 1.90 | 7.00 | — | — |",
		"| read path: GET one product | mysql · 3 replicas · 64 connections · batch default (128) | 1 | 15,000 req/s | 0.50 of bare gin GET | 3.50 | 20.0 | — | — |",
		"| fan-out: events delivered | 1,000 subscribers over 3 replicas · mysql, 16 purchase workers · batch default (128) | 1 | 5,200 events/s | 5.20 /s per subscriber | 140 | 420 | — | — |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "| R | 16 goroutines · autocommit · seckill_yardstick.hot_row | — |") {
		t.Error("R has no answers; it must not be in the answers table")
	}
}

// TestComputeRatiosByRound: a row divides by the yardstick of its own round.
func TestComputeRatiosByRound(t *testing.T) {
	rows := []Row{
		{Round: 1, Kind: kindR, Figure: 1000},
		{Round: 1, Kind: kindAccept, What: "accept mysql", Figure: 2000},
		{Round: 2, Kind: kindR, Figure: 4000},
		{Round: 2, Kind: kindAccept, What: "accept mysql", Figure: 2000},
		{Round: 3, Kind: kindAccept, What: "accept mysql", Figure: 2000}, // its round has no R
	}
	computeRatios(rows)
	if got := []float64{rows[1].Ratio, rows[3].Ratio, rows[4].Ratio}; !slices.Equal(got, []float64{2, 0.5, 0}) {
		t.Errorf("ratios %v, want [2 0.5 0]", got)
	}
}

// TestSummarize: each measurement's median and spread over its rounds, in the order rows came.
func TestSummarize(t *testing.T) {
	var rows []Row
	for round, f := range []struct{ gin, r, accept, p99 float64 }{{20000, 1000, 2000, 10}, {24000, 2000, 2000, 30}, {22000, 500, 1500, 20}} {
		rows = append(rows,
			Row{Round: round + 1, Kind: kindGin, What: "bare gin ceiling", Config: "c", Figure: f.gin, Unit: "req/s"},
			Row{Round: round + 1, Kind: kindR, What: "R", Config: "r", Figure: f.r, Unit: "rows/s"},
			Row{Round: round + 1, Kind: kindAccept, What: "accept mysql", Config: "a", Figure: f.accept, Unit: "accepted/s", P99: f.p99})
	}
	computeRatios(rows) // accept ÷ R: 2, 1, 3
	got := summarize(rows)
	want := []SummaryRow{
		{Kind: kindGin, What: "bare gin ceiling", Config: "c", Rounds: 3, Figure: 22000, Unit: "req/s", Min: 20000, Max: 24000},
		{Kind: kindR, What: "R", Config: "r", Rounds: 3, Figure: 1000, Unit: "rows/s", Min: 500, Max: 2000},
		{Kind: kindAccept, What: "accept mysql", Config: "a", Rounds: 3, Figure: 2000, Unit: "accepted/s", Ratio: 2, RatioTo: "R", Min: 1, Max: 3, P99: 20},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("summary (-want +got):\n%s", diff)
	}
	if s := got[2].Spread(); s != 1 {
		t.Errorf("spread of the accept ratio %v, want 1 (3 − 1 over the median 2)", s)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count %v, want 2.5", m)
	}
	rep := &Report{Settings: Settings{Rounds: 3}, Rows: rows, Summary: got}
	md := markdown(rep)
	for _, want := range []string{
		"Medians over the rounds",
		"| accept mysql | a | 3 | 2,000 accepted/s | 2.00 of R | 1.00–3.00 (100 %) | 20.0 |",
		"| R | r | 3 | 1,000 rows/s | yardstick | 500–2,000 (150 %) | — |",
		"Every round (3, alternated):",
		"| accept mysql | a | 3 | 1,500 accepted/s | 3.00 of R · 0.07 of bare gin |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	files, err := writeReport(dir, sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{filepath.Join(dir, "bench-20261123-140000.md"), filepath.Join(dir, "bench-20261123-140000.json")}, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(files[1])
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleReport(), &back); diff != "" {
		t.Errorf("the JSON twin does not read back as the report (-want +got):\n%s", diff)
	}
}

// TestRunYardsticksOnly runs the bench's yardstick phases for real (the bare gin child and R),
// briefly: no replicas.
func TestRunYardsticksOnly(t *testing.T) {
	itest.Integration(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := run(ctx, []string{"-phases", "gin,r", "-rounds", "2", "-warmup", "100ms", "-duration", "300ms", "-r-duration", "300ms", "-connections", "8",
		"-mysql-dsn", strings.TrimSuffix(itest.ServerDSN, "/") + "/seckill_bench", "-out", dir, "-run-dir", dir}, noEnv, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"| bare gin ceiling | 1 process · 8 connections | 2 |", "| R | 16 goroutines · autocommit · seckill_yardstick.hot_row | 2 |",
		"| bare gin ceiling | 1 process · 8 connections | 1 |", "| R | 16 goroutines · autocommit · seckill_yardstick.hot_row | 1 |", "Medians over the rounds", "report: "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	// Each phase says how busy the machine was and how much the hypervisor took (Linux).
	if _, err := yardstick.ReadCPUTimes(); err == nil {
		_, rounds, _ := strings.Cut(stdout.String(), "Every round")
		for _, line := range strings.Split(rounds, "\n") {
			if strings.Contains(line, " rows/s |") || strings.Contains(line, " req/s |") { // the rounds' table
				if !strings.HasSuffix(line, " % |") {
					t.Errorf("no CPU figure in %q", line)
				}
			}
		}
	}
}

// TestDropRedisSales: the bench deletes its own namespace's sales in Redis and nothing else.
func TestDropRedisSales(t *testing.T) {
	rdb := itest.Redis(t)
	ns := "seckill_bench_" + itest.Suffix(6)
	mine, other := "seckill:{"+ns+":1}:state", "seckill:{"+ns+"x:1}:state"
	for _, k := range []string{mine, other} {
		if err := rdb.Set(t.Context(), k, "1", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { rdb.Del(context.Background(), mine, other) })
	if err := dropRedisSales(t.Context(), itest.RedisTopology, "root:@tcp(127.0.0.1:3306)/"+ns); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(t.Context(), mine).Result(); n != 0 {
		t.Errorf("%s survived", mine)
	}
	if n, _ := rdb.Exists(t.Context(), other).Result(); n != 1 {
		t.Errorf("%s, another namespace's, was deleted", other)
	}
}

// TestCPUWindow: the window's first reading is taken once the warm-up has passed; a phase that
// ends within its warm-up has no CPU figure.
func TestCPUWindow(t *testing.T) {
	if _, err := yardstick.ReadCPUTimes(); err != nil {
		t.Skipf("no CPU counters here: %v", err)
	}
	done := cpuWindow(0)
	time.Sleep(50 * time.Millisecond)
	got := done()
	if got == nil {
		t.Fatal("no CPU figure for a window of 50 ms")
	}
	if sum := got.Busy + got.Steal + got.IOWait + got.Idle; sum < 0.99 || sum > 1.0001 {
		t.Errorf("shares %+v add up to %v", got, sum)
	}
	if early := cpuWindow(time.Hour)(); early != nil {
		t.Errorf("a phase that ended within its warm-up: %+v, want none", early)
	}
}
