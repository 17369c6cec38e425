package main

import (
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseGauges(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 81
go_memstats_heap_inuse_bytes 2.1250048e+07
go_memstats_heap_inuse_bytes_total 7
process_open_fds 39 1700000000000
go_sql_open_connections{db_name="seckill"} 5
go_sql_open_connections{db_name="other one"} 2
seckill_purchases_total{strategy="mysql"} 12
`
	got, err := parseGauges(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[gauge]float64{goroutines: 81, heap: 21250048, openFiles: 39, dbConns: 7}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for g, v := range want {
		if got[g] != v {
			t.Errorf("%s = %v, want %v", g, got[g], v)
		}
	}
	if _, err := parseGauges(strings.NewReader("go_goroutines lots\n")); err == nil {
		t.Error("a value that is not a number was read")
	}
}

// series makes samples of one source every step over d, with value(t) for the gauge at the time
// t since the start.
func series(start time.Time, d, step time.Duration, g gauge, value func(time.Duration) float64) []sample {
	var out []sample
	for at := time.Duration(0); at <= d; at += step {
		out = append(out, sample{At: start.Add(at), Source: "r1", Values: map[gauge]float64{g: value(at)}})
	}
	return out
}

// TestJudgeGrowth: a heap that saws with each GC cycle and a pool that jitters pass; a heap
// leaking 1 MiB a minute and a pool leaking a connection every two minutes over 30 minutes fail
// (the negative controls); goroutines are not judged under load; a run too short to fill the
// windows is an error, not a pass.
func TestJudgeGrowth(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	warm, end := start.Add(5*time.Minute), start.Add(35*time.Minute)
	saw := func(at time.Duration) float64 { return 20<<20 + float64(int(at.Seconds())%40)*(1<<20)/4 } // 20–30 MiB
	jitter := func(at time.Duration) float64 { return 16 + 3*math.Sin(at.Seconds()) }
	for _, tc := range []struct {
		name  string
		g     gauge
		value func(time.Duration) float64
		ok    bool
	}{
		{"sawing heap", heap, saw, true},
		{"jittering pool", dbConns, jitter, true},
		{"leaking heap", heap, func(at time.Duration) float64 { return saw(at) + at.Minutes()*(1<<20) }, false},
		{"leaking pool", dbConns, func(at time.Duration) float64 { return jitter(at) + at.Minutes()/2 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := judgeGrowth(series(start, 35*time.Minute, 10*time.Second, tc.g, tc.value), warm, end)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].OK != tc.ok {
				t.Fatalf("%+v, want OK=%v", got, tc.ok)
			}
		})
	}
	if got, err := judgeGrowth(series(start, 35*time.Minute, 10*time.Second, goroutines, func(at time.Duration) float64 { return at.Seconds() }), warm, end); err == nil {
		t.Errorf("goroutines judged under load: %+v", got)
	}
	if _, err := judgeGrowth(series(start, 35*time.Minute, 10*time.Minute, heap, saw), warm, end); err == nil {
		t.Error("a sample every 10 minutes was judged")
	}
	if _, err := judgeGrowth(nil, end, warm); err == nil {
		t.Error("a run that ended before its warm-up was judged")
	}
}

// TestJudgeIdle: at rest, a replica back where it was passes; one that kept 17 more goroutines
// or 8 more files (a leak the run left behind) fails, as do rests that do not pair up.
func TestJudgeIdle(t *testing.T) {
	at := func(g, f float64) []sample {
		return []sample{{Source: "r1", Values: map[gauge]float64{goroutines: g, openFiles: f}}}
	}
	for _, tc := range []struct {
		name        string
		after       []sample
		okG, okFile bool
	}{
		{"back where it was", at(95, 41), true, true},
		{"goroutines left", at(100+17, 40), false, true},
		{"files left", at(100, 40+8), true, false},
	} {
		got, err := judgeIdle(at(100, 40), tc.after)
		if err != nil || len(got) != 2 || got[0].OK != tc.okG || got[1].OK != tc.okFile {
			t.Errorf("%s: %+v %v", tc.name, got, err)
		}
	}
	if _, err := judgeIdle(nil, nil); err == nil {
		t.Error("no rest was judged")
	}
	if _, err := judgeIdle(at(1, 1), []sample{{Source: "r2"}}); err == nil {
		t.Error("rests of different replicas were judged")
	}
}

func TestOptions(t *testing.T) {
	env := map[string]string{"SECKILL_PEERS": "http://a:1,http://b:2/", "SECKILL_ADMIN_TOKEN": "t", "SECKILL_MYSQL_DSN": "d"}
	o, err := parseOptions(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 30*time.Minute || o.warmup != 5*time.Minute || o.sampleEvery != 10*time.Second || len(o.replicas) != 2 {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseOptions([]string{"-for", "3m"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || o.warmup != time.Minute || o.sampleEvery != 2*time.Second {
		t.Errorf("short form: %+v %v", o, err)
	}
	for _, args := range [][]string{{"-for", "1m", "-warmup", "2m"}, {"-for", "3m", "-warmup", "30s"}, {"-rate", "0"}, {"-pay", "2"}, {"-strategies", ""}, {"-sale-every", "1s"}} {
		if _, err := parseOptions(args, func(k string) string { return env[k] }, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestChart(t *testing.T) {
	start := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r := &report{Run: "x", Started: start, WarmEnd: start.Add(time.Minute), Ended: start.Add(4 * time.Minute),
		Samples: series(start, 4*time.Minute, 30*time.Second, goroutines, func(time.Duration) float64 { return 100 })}
	svg := r.chart(goroutines)
	if !strings.Contains(svg, "<polyline") || strings.Count(svg, ",") < 9 {
		t.Errorf("chart: %s", svg)
	}
	if r.chart(heap) != "" {
		t.Error("a chart of a gauge without samples")
	}
}
