package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Report is one run of the bench, written as Markdown (stdout and results/bench-<run>.md) and
// JSON (results/bench-<run>.json).
type Report struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"` // the whole run, start-ups and drains included
	Machine   string    `json:"machine"`
	Commit    string    `json:"commit"`
	Settings  Settings  `json:"settings"`
	Rows      []Row     `json:"rows"`
	// Summary is every measurement's median and spread over the rounds, in the order the rows
	// first came.
	Summary []SummaryRow `json:"summary"`
	// Tracing is the tracing comparison (-tracing): each strategy's accept ratio with tracing on
	// and off, paired round by round.
	Tracing []TracingRow `json:"tracing,omitempty"`
	// Problems are answers and audits that break the API's contract; the exit status is 1 when
	// there is any.
	Problems []string `json:"problems"`
	// Aborted is the error that ended the run early, if one did; the rows are those measured.
	Aborted string `json:"aborted,omitempty"`
}

// Settings are the knobs of the run.
type Settings struct {
	Replicas        int      `json:"replicas"`
	ReplicaProcs    string   `json:"replica_gomaxprocs,omitempty"` // GOMAXPROCS of each replica the bench started
	Targets         []string `json:"targets,omitempty"`            // replicas the bench did not start
	Rounds          int      `json:"rounds"`
	Connections     int      `json:"connections"`
	Workers         []int    `json:"workers"`
	Warmup          string   `json:"warmup"`
	Duration        string   `json:"duration"`
	AcceptDuration  string   `json:"accept_duration"`
	RDuration       string   `json:"r_duration"`
	RGoroutines     int      `json:"r_goroutines"`
	Strategies      []string `json:"strategies"`
	SoldOutStrategy string   `json:"sold_out_strategy"`
	Batches         []string `json:"batches"`
	BatchLinger     string   `json:"batch_linger,omitempty"`
	Stock           int      `json:"stock"`
	Subscribers     int      `json:"subscribers,omitempty"`
	FanoutStrategy  string   `json:"fanout_strategy,omitempty"`
	FanoutWorkers   int      `json:"fanout_workers,omitempty"`
	// Topology is where the replicas the bench started found Redis and ZooKeeper.
	Topology string `json:"topology,omitempty"`
	// Tracing is the tracing configuration's, when the run had one.
	Tracing *TracingSettings `json:"tracing,omitempty"`
}

// TracingSettings are the tracing configuration's: its replicas' SECKILL_TRACING_SAMPLE, the
// worker counts measured with tracing on, the bench's OTLP sink, and what the sink received over
// the whole run.
type TracingSettings struct {
	Sample   string     `json:"sample"`
	Workers  []int      `json:"workers"`
	Sink     string     `json:"sink"`
	Received sinkCounts `json:"received"`
	// Beside says each pair's phases ran at the same time, half the workers each.
	Beside bool `json:"beside,omitempty"`
}

// The kinds of Row.
const (
	kindGin     = "gin"
	kindSoldOut = "soldout"
	kindR       = "r"
	kindAccept  = "accept"
	kindGinRead = "gin-read" // the read ceiling: bare gin answering a fixed product
	kindRead    = "read"     // the app's read path
	kindFanout  = "fanout"   // the event stream's fan-out
	kindReturns = "returns"  // units of unpaid orders back on sale
)

// Row is one measurement.
type Row struct {
	// Round is the round it was measured in, from 1: a ratio divides by the yardstick of its round.
	Round  int     `json:"round"`
	Kind   string  `json:"kind"`
	What   string  `json:"what"`
	Config string  `json:"config"`
	Figure float64 `json:"figure"`
	Unit   string  `json:"unit"`
	// Ratio is Figure over the yardstick named by RatioTo, measured in the same run; 0 when
	// that yardstick was not measured, or for a yardstick itself.
	Ratio   float64 `json:"ratio"`
	RatioTo string  `json:"ratio_to,omitempty"`
	// RatioGin is, for an accept row, Figure over the bare gin ceiling too: the share of the
	// bare HTTP layer's rate the app keeps while it sells (0 without the ceiling).
	RatioGin float64 `json:"ratio_gin,omitempty"`
	// CPU is how the machine's CPU time went during the phase's measured window: busy, and
	// stolen by the hypervisor for other guests (a shared VM's weather, which moves a CPU-bound
	// phase and hardly an fsync-bound one such as R).
	CPU *yardstick.CPUShare `json:"cpu,omitempty"`
	// P50 and P99 are latencies in ms: of every answer for the HTTP yardstick and the sold-out
	// path, of the 202s for an accept row; 0 for R.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`

	ProductID int64 `json:"product_id,omitempty"`
	// Workers are an accept phase's workers.
	Workers int `json:"workers,omitempty"`
	// ReplicaCPUUS is, for an accept row on replicas the bench started, the CPU time (user and
	// system) all of them used during the measured window per purchase accepted in it, µs: what a
	// purchase costs the app, background work of the window included (the relay, the consumer,
	// the persister, an exporter). Unlike a rate it hardly depends on who else had the CPU.
	ReplicaCPUUS float64 `json:"replica_cpu_us_per_accepted,omitempty"`
	// Tracing is, in a run with the tracing configuration, "on" for its accept rows and "off" for
	// the first configuration's at the same workers, which they are paired with; "" otherwise.
	Tracing string `json:"tracing,omitempty"`
	// Traces is, for a tracing-on row, what the bench's OTLP sink received from the phase's start
	// to the next tracing-on phase's start (attributeTraces).
	Traces *sinkCounts `json:"traces,omitempty"`
	// Answers counts every answer of the phase, warm-up included, by status and error code.
	Answers map[string]int `json:"answers,omitempty"`
	// Accepted is the number of 202s of an accept phase, warm-up included; Reserved and
	// Confirmed are the units the product's stats showed reserved and confirmed at the end.
	Accepted  int `json:"accepted,omitempty"`
	Reserved  int `json:"reserved,omitempty"`
	Confirmed int `json:"confirmed_units,omitempty"`
	// DrainSeconds is, for an accept row, the time from the phase's last answer until every
	// reserved unit was confirmed as an order; Drained is false when that did not happen within
	// the drain timeout.
	DrainSeconds float64 `json:"drain_seconds,omitempty"`
	Drained      bool    `json:"drained,omitempty"`
	// ReservedAtEnd is how many of the phase's units were in MySQL when its last answer came:
	// all of them for the strategies that reserve in MySQL before they answer, few for redis-lua
	// when its persisters gave way to the burst.
	ReservedAtEnd int `json:"reserved_at_end"`
	// Fanout is the fan-out row's subscribers: what they read (events by type, per second, per
	// subscriber) and how late they learnt of the units sold.
	Fanout *viewers.Summary `json:"fanout,omitempty"`
	// Profile is the CPU profile of replica 1 during the phase, if taken.
	Profile string   `json:"profile,omitempty"`
	Notes   []string `json:"notes,omitempty"`
}

// computeRatios divides every sold-out row by the bare gin ceiling, and every accept row by R and
// by the bare gin ceiling, each by the yardstick measured in its own round.
func computeRatios(rows []Row) {
	type key struct {
		kind  string
		round int
	}
	yardsticks := map[key]float64{}
	for _, r := range rows {
		if isYardstick(r.Kind) {
			yardsticks[key{r.Kind, r.Round}] = r.Figure
		}
	}
	for i := range rows {
		r := &rows[i]
		of := func(kind string) float64 {
			if y := yardsticks[key{kind, r.Round}]; y > 0 {
				return r.Figure / y
			}
			return 0
		}
		switch r.Kind {
		case kindSoldOut:
			r.RatioTo, r.Ratio = "bare gin", of(kindGin)
		case kindRead:
			r.RatioTo, r.Ratio = "bare gin GET", of(kindGinRead)
		case kindAccept:
			r.RatioTo, r.Ratio, r.RatioGin = "R", of(kindR), of(kindGin)
		}
	}
}

// TracingRow compares one strategy's accept path at one worker count with tracing on and off:
// the accepted/s ÷ R of each (medians over the rounds), and on ÷ off, computed in each round
// from the two phases measured in it, one after the other, then its median and spread.
type TracingRow struct {
	What    string  `json:"what"`
	Workers int     `json:"workers"`
	Rounds  int     `json:"rounds"` // rounds with both sides measured
	Off     float64 `json:"off_ratio_median"`
	On      float64 `json:"on_ratio_median"`
	OnOff   float64 `json:"on_off_median"`
	Min     float64 `json:"on_off_min"`
	Max     float64 `json:"on_off_max"`
	// Exports and Spans are what the OTLP sink received during the tracing-on phases, summed
	// over the rounds; Accepted the 202s of those phases.
	Exports  int `json:"exports"`
	Spans    int `json:"spans"`
	Accepted int `json:"accepted"`
	// CPUOff and CPUOn are the medians of the replicas' CPU per accepted purchase (µs), and
	// CPUOnOff and its min–max those of on ÷ off computed in each round: what tracing costs the
	// app in CPU, which the machine's weather moves far less than the rates. 0 when not measured.
	CPUOff    float64 `json:"cpu_off_us_median,omitempty"`
	CPUOn     float64 `json:"cpu_on_us_median,omitempty"`
	CPUOnOff  float64 `json:"cpu_on_off_median,omitempty"`
	CPUMin    float64 `json:"cpu_on_off_min,omitempty"`
	CPUMax    float64 `json:"cpu_on_off_max,omitempty"`
	CPURounds int     `json:"cpu_rounds,omitempty"`
}

// tracingBound is how far on ÷ off may be from 1 for tracing to count as cheap (issue #33).
const tracingBound = 0.05

// Within says whether tracing on kept the ratio within tracingBound of tracing off.
func (t TracingRow) Within() bool { return t.OnOff >= 1-tracingBound && t.OnOff <= 1+tracingBound }

// tracingRows pairs the accept rows of the tracing comparison (Row.Tracing on and off) by
// strategy, workers and round, in the order the off rows came. A ratio divides by R of its own
// round (computeRatios first); a round missing either side, or R, is left out.
func tracingRows(rows []Row) []TracingRow {
	type key struct {
		what    string
		workers int
	}
	type pair struct{ off, on *Row }
	var order []key
	byRound := map[key]map[int]*pair{}
	for i := range rows {
		r := &rows[i]
		if r.Kind != kindAccept || r.Tracing == "" {
			continue
		}
		k := key{r.What, r.Workers}
		if byRound[k] == nil {
			byRound[k] = map[int]*pair{}
			order = append(order, k)
		}
		p := byRound[k][r.Round]
		if p == nil {
			p = &pair{}
			byRound[k][r.Round] = p
		}
		if r.Tracing == tracingOnLabel {
			p.on = r
		} else {
			p.off = r
		}
	}
	var out []TracingRow
	for _, k := range order {
		t := TracingRow{What: k.what, Workers: k.workers}
		var offs, ons, ratios, cpuOffs, cpuOns, cpuRatios []float64
		for _, round := range slices.Sorted(maps.Keys(byRound[k])) {
			p := byRound[k][round]
			if p.on != nil && p.on.Traces != nil {
				t.Exports += p.on.Traces.Exports
				t.Spans += p.on.Traces.Spans
			}
			if p.on != nil {
				t.Accepted += p.on.Accepted
			}
			if p.off != nil && p.on != nil && p.off.ReplicaCPUUS > 0 && p.on.ReplicaCPUUS > 0 {
				cpuOffs, cpuOns = append(cpuOffs, p.off.ReplicaCPUUS), append(cpuOns, p.on.ReplicaCPUUS)
				cpuRatios = append(cpuRatios, p.on.ReplicaCPUUS/p.off.ReplicaCPUUS)
			}
			if p.off == nil || p.on == nil || p.off.Ratio <= 0 || p.on.Ratio <= 0 {
				continue
			}
			offs, ons, ratios = append(offs, p.off.Ratio), append(ons, p.on.Ratio), append(ratios, p.on.Ratio/p.off.Ratio)
		}
		if t.CPURounds = len(cpuRatios); t.CPURounds > 0 {
			t.CPUOff, t.CPUOn, t.CPUOnOff = median(cpuOffs), median(cpuOns), median(cpuRatios)
			t.CPUMin, t.CPUMax = slices.Min(cpuRatios), slices.Max(cpuRatios)
		}
		t.Rounds = len(ratios)
		if t.Rounds > 0 {
			t.Off, t.On, t.OnOff = median(offs), median(ons), median(ratios)
			t.Min, t.Max = slices.Min(ratios), slices.Max(ratios)
		}
		out = append(out, t)
	}
	return out
}

// writeTracing renders the tracing comparison.
func writeTracing(b *strings.Builder, s *TracingSettings, rows []TracingRow) {
	if s == nil && len(rows) == 0 {
		return
	}
	b.WriteString("\nTracing: each strategy's accept path with tracing off (the first configuration's replicas) and on (replicas of the same settings with SECKILL_TRACING=otlp")
	if s != nil {
		fmt.Fprintf(b, ", SECKILL_TRACING_SAMPLE=%s, exporting over OTLP/HTTP to the bench's own sink %s", s.Sample, s.Sink)
	}
	if s != nil && s.Beside {
		b.WriteString("), the two phases at the same time in each round, half the workers each (the workers column: the pair's), each side's CPU per accepted its own replicas'; on ÷ off is computed in each round:\n\n")
	} else {
		b.WriteString("), the two phases next to each other in each round (off first in odd rounds, on first in even ones); on ÷ off is computed in each round:\n\n")
	}
	b.WriteString("| what | workers | rounds | off (median) | on (median) | on ÷ off (median) | on ÷ off (min–max) | within 5 % | replicas' CPU per accepted, off · on (µs, medians) | CPU on ÷ off (median, min–max) | exports · spans (on) | spans per 1,000 accepted |\n|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|---:|\n")
	for _, t := range rows {
		cpu, cpuRatio := "—", "—"
		if t.CPURounds > 0 {
			cpu = fmt.Sprintf("%.0f · %.0f", t.CPUOff, t.CPUOn)
			cpuRatio = fmt.Sprintf("%.3f (%.3f–%.3f)", t.CPUOnOff, t.CPUMin, t.CPUMax)
		}
		if t.Rounds == 0 {
			fmt.Fprintf(b, "| %s | %d | 0 | — | — | — | — | — | %s | %s | %s · %s | — |\n", t.What, t.Workers, cpu, cpuRatio, appapi.Thousands(t.Exports), appapi.Thousands(t.Spans))
			continue
		}
		within := "no"
		if t.Within() {
			within = "yes"
		}
		perK := "—"
		if t.Accepted > 0 {
			perK = fmt.Sprintf("%.1f", 1000*float64(t.Spans)/float64(t.Accepted))
		}
		fmt.Fprintf(b, "| %s | %d | %d | %.2f of R | %.2f of R | %.3f | %.3f–%.3f | %s | %s | %s | %s · %s | %s |\n",
			t.What, t.Workers, t.Rounds, t.Off, t.On, t.OnOff, t.Min, t.Max, within, cpu, cpuRatio, appapi.Thousands(t.Exports), appapi.Thousands(t.Spans), perK)
	}
	if s != nil {
		fmt.Fprintf(b, "\nThe sink received %s exports, %s spans, %s bytes over the run", appapi.Thousands(s.Received.Exports), appapi.Thousands(s.Received.Spans), appapi.Thousands(int(s.Received.Bytes)))
		if s.Received.Refused > 0 {
			fmt.Fprintf(b, " (and refused %d it could not read)", s.Received.Refused)
		}
		b.WriteString(".\n")
	}
}

// SummaryRow is one measurement over the rounds: the median of its figure and of its ratio,
// and the ratio's spread (for a yardstick, the figure's).
type SummaryRow struct {
	Kind    string  `json:"kind"`
	What    string  `json:"what"`
	Config  string  `json:"config"`
	Rounds  int     `json:"rounds"`
	Figure  float64 `json:"figure_median"`
	Unit    string  `json:"unit"`
	Ratio   float64 `json:"ratio_median"`
	RatioTo string  `json:"ratio_to,omitempty"`
	// Min and Max bound the ratio over the rounds, or the figure for a yardstick and a row
	// without a ratio.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	P99 float64 `json:"p99_ms_median"`
}

// Spread is (Max − Min) ÷ the median: how far apart the rounds were, as a share of the value.
func (s SummaryRow) Spread() float64 {
	mid := s.Ratio
	if mid == 0 {
		mid = s.Figure
	}
	if mid == 0 {
		return 0
	}
	return (s.Max - s.Min) / mid
}

// summarize groups the rows of one measurement (kind, what, configuration) over the rounds, in
// the order each first came.
func summarize(rows []Row) []SummaryRow {
	type key struct{ kind, what, config string }
	var order []key
	groups := map[key][]Row{}
	for _, r := range rows {
		k := key{r.Kind, r.What, r.Config}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	out := make([]SummaryRow, 0, len(order))
	for _, k := range order {
		g := groups[k]
		s := SummaryRow{Kind: k.kind, What: k.what, Config: k.config, Rounds: len(g), Unit: g[0].Unit, RatioTo: g[0].RatioTo}
		figures, ratios, p99s := make([]float64, len(g)), []float64{}, make([]float64, len(g))
		for i, r := range g {
			figures[i], p99s[i] = r.Figure, r.P99
			if r.Ratio > 0 {
				ratios = append(ratios, r.Ratio)
			}
		}
		s.Figure, s.P99 = median(figures), median(p99s)
		spreadOf := figures
		if len(ratios) > 0 {
			s.Ratio, spreadOf = median(ratios), ratios
		}
		s.Min, s.Max = slices.Min(spreadOf), slices.Max(spreadOf)
		out = append(out, s)
	}
	return out
}

// median is the middle value of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// markdown renders the report: the table, the answers, the problems and how to read them.
func markdown(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## seckill-go bench %s\n\n", r.RunID)
	fmt.Fprintf(&b, "%s · %s · commit %s · run took %s\n\n", r.Machine, r.StartedAt.UTC().Format("2006-01-02 15:04 MST"), r.Commit, (time.Duration(r.Seconds) * time.Second).String())
	s := r.Settings
	writeSettings(&b, s)
	if r.Aborted != "" {
		fmt.Fprintf(&b, "**Run aborted: %s** — the rows below are those measured before.\n\n", oneLine(r.Aborted))
	}

	if s.Subscribers > 0 {
		fmt.Fprintf(&b, "Read side: read path and read ceiling with %d connections × %s; fan-out: %s subscribers, %s, %d purchase workers × %s\n\n",
			s.Connections, s.Duration, appapi.Thousands(s.Subscribers), s.FanoutStrategy, s.FanoutWorkers, s.Duration)
	}
	if s.Rounds > 1 {
		writeSummary(&b, r.Summary)
		fmt.Fprintf(&b, "Every round (%d, alternated):\n\n", s.Rounds)
	}
	b.WriteString("| what | configuration | round | figure | ratio | p50 ms | p99 ms | drain | CPU busy · stolen |\n|---|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %s %s | %s | %s | %s | %s | %s |\n",
			row.What, row.Config, row.Round, appapi.Thousands(int(row.Figure+0.5)), row.Unit, ratioCell(row), ms(row.P50), ms(row.P99), drainCell(row), cpuCell(row.CPU))
	}

	writeTracing(&b, s.Tracing, r.Tracing)
	writeAnswers(&b, r)
	writeFindings(&b, r)
	b.WriteString(`
How to read it: every ratio divides by a yardstick measured in this run. The sold-out path's
req/s ÷ the bare gin ceiling's (same client, same connections) is the share of the bare HTTP
layer the app keeps while it refuses. An accept row's accepted/s ÷ R (one conditional UPDATE per
autocommit on one row, without the app) is the share of one hot row's commit rate that the app
turns into sales; above 1 means purchases share commits. The phases are closed-loop (each worker
waits for its answer), so a rate is at most workers ÷ mean latency. At 32 workers about ten
buyers per replica wait at any moment, so batches stay small and latency bounds the rate; 256 is
a burst, as a flash sale is, where combining has something to combine. p50/p99 are of every answer for the HTTP phases and of the 202s for the accept rows.
Read path: GET of one product over the replicas ÷ the read ceiling (bare gin GET: a gin handler
answering a fixed product of the same size, in its own process, same client and connections,
measured just before). Fan-out: the events that M subscribers of one product's stream read per
second while purchases move its stock (ratio column: per subscriber); its p50/p99 are how late
they learnt of each unit sold, from the unit's 202 arriving to the subscriber reading the stock
without it (200 units sampled × every subscriber).
CPU: the share of the machine's CPU time busy, and stolen by the hypervisor for other guests,
during the phase's measured window (/proc/stat); on a shared VM the stolen share moves the
CPU-bound phases (HTTP, the app) far more than R, which waits on fsync, so compare ratios of
runs with like steal.
Returns: units of orders whose windows all ended at once back in MySQL's stock per second (the
replicas' expirers expire and return them); its p50 is a cancel's answer on another product
meanwhile, which returns its own unit before it answers.
Drain: from the phase's last answer until every accepted unit is a confirmed order; for
redis-lua, with the share of the phase's units that were in MySQL when it ended (its persisters
give way to a burst, SECKILL_PERSIST_BURST: the order pipeline then runs after it).
Tracing: "off" is the first configuration's accept row; "on" is the same phase on replicas of the
same settings with tracing on, measured in the same round: at the same time, half the workers
each (-tracing-beside, the default: the machine's weather falls on both alike), or next to it,
after it in odd rounds and before it in even ones (both sets of replicas run throughout). Exports and spans of a tracing-on phase: what the sink received from its start to the next
tracing-on phase's start (the exporter sends a batch up to 5 s after its spans end); per 1,000
accepted, at a sample of 0.01, about ten traces of a few spans each.
`)
	return b.String()
}

// writeSummary renders the medians over the rounds: the figures to quote.
func writeSummary(b *strings.Builder, rows []SummaryRow) {
	b.WriteString("Medians over the rounds (spread: the lowest and highest round, and their distance as a share of the median):\n\n")
	b.WriteString("| what | configuration | rounds | figure (median) | ratio (median) | spread | p99 ms (median) |\n|---|---|---:|---:|---|---|---:|\n")
	for _, s := range rows {
		ratio, spread := "yardstick", fmt.Sprintf("%s–%s (%.0f %%)", appapi.Thousands(int(s.Min+0.5)), appapi.Thousands(int(s.Max+0.5)), 100*s.Spread())
		switch {
		case s.Ratio > 0:
			ratio = fmt.Sprintf("%.2f of %s", s.Ratio, s.RatioTo)
			spread = fmt.Sprintf("%.2f–%.2f (%.0f %%)", s.Min, s.Max, 100*s.Spread())
		case !isYardstick(s.Kind):
			ratio = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s %s | %s | %s | %s |\n", s.What, s.Config, s.Rounds, appapi.Thousands(int(s.Figure+0.5)), s.Unit, ratio, spread, ms(s.P99))
	}
	b.WriteString("\n")
}

// writeSettings renders the run's settings: the replicas and the knobs of each phase.
func writeSettings(b *strings.Builder, s Settings) {
	replicas := fmt.Sprintf("%d replicas started by the bench", s.Replicas)
	if s.ReplicaProcs != "" {
		replicas += " (GOMAXPROCS " + s.ReplicaProcs + " each)"
	}
	if len(s.Targets) > 0 {
		replicas = "replicas " + strings.Join(s.Targets, ", ")
	}
	if s.Topology != "" {
		replicas += " · " + s.Topology
	}
	linger := ""
	if s.BatchLinger != "" {
		linger = ", SECKILL_BATCH_LINGER=" + s.BatchLinger
	}
	fmt.Fprintf(b, "%s · warm-up %s per HTTP phase · bare gin and sold-out: %d connections × %s · accept: %s workers × %s, stock %s · R: %d goroutines × %s · strategies %s · batch configurations: %s%s\n\n",
		replicas, s.Warmup, s.Connections, s.Duration, joinInts(s.Workers), s.AcceptDuration, appapi.Thousands(s.Stock), s.RGoroutines, s.RDuration,
		strings.Join(s.Strategies, ", "), strings.Join(s.Batches, ", "), linger)
}

// writeAnswers renders the table of the answers each row got, and the orders its product ended
// with.
func writeAnswers(b *strings.Builder, r *Report) {
	b.WriteString("\nAnswers, warm-up included:\n\n| what | configuration | product | answers | reserved | confirmed |\n|---|---|---:|---|---:|---:|\n")
	for _, row := range r.Rows {
		if row.Kind == kindR {
			continue
		}
		product, reserved, confirmed := "—", "—", "—"
		if row.ProductID > 0 {
			product = strconv.FormatInt(row.ProductID, 10)
		}
		if row.Kind == kindAccept {
			reserved, confirmed = appapi.Thousands(row.Reserved), appapi.Thousands(row.Confirmed)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", row.What, row.Config, product, answersCell(row.Answers), reserved, confirmed)
	}
}

// writeFindings renders the broken contract, the rows' notes and their CPU profiles, each where
// there are any.
func writeFindings(b *strings.Builder, r *Report) {
	if len(r.Problems) > 0 {
		b.WriteString("\n**Contract broken:**\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(b, "- **%s**\n", p)
		}
	}
	var notes, profiles []string
	for _, row := range r.Rows {
		for _, n := range row.Notes {
			notes = append(notes, fmt.Sprintf("%s (%s): %s", row.What, row.Config, n))
		}
		if row.Profile != "" {
			profiles = append(profiles, fmt.Sprintf("%s (%s): `go tool pprof -top %s`", row.What, row.Config, row.Profile))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	if len(profiles) > 0 {
		b.WriteString("\nCPU profiles of replica 1 during each phase's measured window:\n\n")
		for _, p := range profiles {
			fmt.Fprintf(b, "- %s\n", p)
		}
	}
}

// isYardstick says whether rows of kind are yardsticks, which the others are divided by.
func isYardstick(kind string) bool { return kind == kindGin || kind == kindR || kind == kindGinRead }

func ratioCell(r Row) string {
	switch {
	case isYardstick(r.Kind):
		return "yardstick"
	case r.Kind == kindFanout && r.Fanout != nil:
		return fmt.Sprintf("%.2f /s per subscriber", r.Fanout.PerViewerPerSec)
	case r.RatioTo == "":
		return "—"
	case r.Ratio == 0:
		return "— (no " + r.RatioTo + ")"
	}
	cell := fmt.Sprintf("%.2f of %s", r.Ratio, r.RatioTo)
	if r.RatioGin > 0 {
		cell += fmt.Sprintf(" · %.2f of bare gin", r.RatioGin)
	}
	return cell
}

// cpuCell is the machine's CPU during a phase: "93 % · 24 %", busy and stolen.
func cpuCell(c *yardstick.CPUShare) string {
	if c == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f %% · %.0f %%", 100*c.Busy, 100*c.Steal)
}

func drainCell(r Row) string {
	switch {
	case r.Kind != kindAccept:
		return "—"
	case !r.Drained:
		return "**not drained**"
	}
	s := fmt.Sprintf("%.1f s", r.DrainSeconds)
	if r.Accepted > 0 && r.ReservedAtEnd < r.Accepted {
		s += fmt.Sprintf(" (%.0f %% in MySQL at the end)", 100*float64(r.ReservedAtEnd)/float64(r.Accepted))
	}
	return s
}

func ms(v float64) string {
	switch {
	case v == 0:
		return "—"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// answersCell lists answers by count, largest first: "409 sold_out × 120,345 · 0 no answer × 2".
func answersCell(answers map[string]int) string {
	keys := make([]string, 0, len(answers))
	for k := range answers {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if answers[a] != answers[b] {
			return answers[b] - answers[a]
		}
		return strings.Compare(a, b)
	})
	cells := make([]string, len(keys))
	for i, k := range keys {
		cells[i] = k + " × " + appapi.Thousands(answers[k])
	}
	if len(cells) == 0 {
		return "—"
	}
	return strings.Join(cells, " · ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// writeReport writes results/bench-<run>.md and .json and returns their paths.
func writeReport(dir string, r *Report) ([]string, error) {
	return cli.WriteReport(dir, "bench-"+r.RunID, r, cli.Text{Ext: ".md", Body: markdown(r)})
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
