package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// bench is one run.
type bench struct {
	o     *options
	say   func(string, ...any)
	rep   *Report
	stamp string // the run's time, hhmmss, in every buyer id: b<stamp>p<phase>-<n>
	phase int    // phases run so far, so that no two phases share a buyer
	round int    // the round under way, from 1
	// traceMarks are what the trace sink had received when each tracing-on phase began.
	traceMarks []traceMark
	// mu guards rep, phase and traceMarks while a tracing pair's phases run beside each other.
	mu sync.Mutex
}

// traceMark is what the trace sink had received when the phase of rows[row] began.
type traceMark struct {
	row int
	at  sinkCounts
}

// add records a measurement of the round under way.
func (b *bench) add(row Row) {
	b.mu.Lock()
	defer b.mu.Unlock()
	row.Round = b.round
	b.rep.Rows = append(b.rep.Rows, row)
}

func (b *bench) run(ctx context.Context) (*Report, error) {
	o := b.o
	start := time.Now()
	b.stamp = start.UTC().Format("150405")
	b.rep = &Report{
		RunID:     start.UTC().Format("20060102-150405"),
		StartedAt: start.UTC(),
		Machine:   yardstick.Machine(),
		Commit:    cli.GitCommit(ctx),
		Settings: Settings{
			Rounds: o.rounds, Replicas: o.replicas, ReplicaProcs: o.replicaProcs(), Targets: o.targets, Connections: o.connections, Workers: o.workers,
			Warmup: o.warmup.String(), Duration: o.duration.String(), AcceptDuration: o.acceptFor.String(),
			RDuration: o.rFor.String(), RGoroutines: o.rGoroutines, Strategies: o.strategies,
			SoldOutStrategy: o.soldOutWith, Batches: o.batches, BatchLinger: o.batchLinger, Stock: o.stock,
		},
		Problems: []string{},
	}
	if b.has(phaseFanout) {
		b.rep.Settings.Subscribers, b.rep.Settings.FanoutStrategy, b.rep.Settings.FanoutWorkers = o.subscribers, o.fanoutWith, o.fanoutBuyers
	}
	err := b.phases(ctx)
	computeRatios(b.rep.Rows)
	b.rep.Summary = summarize(b.rep.Rows)
	b.rep.Tracing = tracingRows(b.rep.Rows)
	b.rep.Seconds = time.Since(start).Seconds()
	if err != nil {
		b.rep.Aborted = err.Error()
	}
	return b.rep, err
}

func (b *bench) has(phase string) bool { return slices.Contains(b.o.phases, phase) }

// phases runs what -phases asks for, -rounds times alternated, in the order of allPhases: on
// the first replica configuration the bare gin ceiling, the sold-out path, R, the read path, the
// fan-out and (in the first round) the returns, then the accept phases of every configuration.
// The bare gin ceiling runs beside idle replicas: measured in each round, next to the phases it
// divides, a yardstick shares their weather.
func (b *bench) phases(ctx context.Context) error {
	o := b.o
	if !b.has(phaseSoldOut) && !b.has(phaseAccept) && !b.has(phaseRead) && !b.has(phaseFanout) && !b.has(phaseReturns) {
		return b.rounds(func(int) error { return b.yardsticks(ctx) })
	}
	configs := o.batches
	if !b.has(phaseAccept) {
		configs = configs[:1]
	}
	var env []string
	if len(o.targets) == 0 {
		var err error
		if env, err = stackEnv(ctx, o.envScript); err != nil {
			return err
		}
		if err := dropDatabase(ctx, o.mysqlDSN); err != nil {
			return err
		}
		topology, err := config.RedisTopology(func(k string) string { return envValue(env, k, "") })
		if err != nil {
			return fmt.Errorf("the stack's Redis settings: %w", err)
		}
		b.rep.Settings.Topology = "Redis " + topology.String() + " · ZooKeeper " + envValue(env, "SECKILL_ZK_SERVERS", "127.0.0.1:2181")
		if err := dropRedisSales(ctx, topology, o.mysqlDSN); err != nil {
			return err
		}
	}
	for i, batch := range configs {
		if err := b.configuration(ctx, i == 0, batch, env); err != nil {
			return err
		}
	}
	return nil
}

// rounds runs round -rounds times, numbering the rows of each.
func (b *bench) rounds(round func(n int) error) error {
	for n := 1; n <= b.o.rounds; n++ {
		b.round = n
		if b.o.rounds > 1 {
			b.say("round %d of %d", n, b.o.rounds)
		}
		if err := round(n); err != nil {
			return err
		}
	}
	return nil
}

// yardsticks measures the bare gin ceiling and R, those of them -phases asks for.
func (b *bench) yardsticks(ctx context.Context) error {
	if b.has(phaseGin) {
		if err := b.bareGin(ctx); err != nil {
			return err
		}
	}
	if b.has(phaseR) {
		return b.rowRate(ctx)
	}
	return nil
}

// configuration runs the phases of one replica configuration (SECKILL_BATCH_MAX=batch) on
// replicas of its own, started with env and stopped at the end, round after round: on the first,
// the yardsticks, the sold-out path, the read path and the fan-out (and the returns, once), then
// on each the accept phase of every strategy. The first configuration also has the tracing one
// beside it, with -tracing: replicas of the same settings with tracing on, whose accept phase of
// each strategy at each -tracing-workers runs next to that of the first configuration (tracing
// off) in the same round, before it in even rounds and after it in odd ones (pairOrder), so that
// each on ÷ off divides figures measured a few seconds apart.
func (b *bench) configuration(ctx context.Context, first bool, batch string, env []string) error {
	o := b.o
	label := batchLabel(batch)
	off := acceptSide{targets: o.targets}
	var on *acceptSide
	if len(o.targets) == 0 {
		b.say("starting %d replicas, %s", o.replicas, label)
		c, err := startCluster(ctx, o.seckill, o.replicas, b.replicaEnv(env, batch, nil), filepath.Join(o.runDir, b.rep.RunID), "batch-"+batch, b.say)
		if err != nil {
			return err
		}
		defer func() {
			b.say("stopping the replicas (%s)", label)
			c.stop()
		}()
		off.targets, off.pprof, off.pids, off.own = c.urls(), c.replicas[0].pprofURL, c.pids(), c.pids()
		if first && o.tracingOn() {
			sink, err := startTraceSink()
			if err != nil {
				return err
			}
			defer sink.close()
			b.rep.Settings.Tracing = &TracingSettings{Sample: o.tracingSample, Workers: o.tracingWorkers, Sink: sink.URL, Beside: o.tracingBeside}
			b.say("starting %d more replicas, %s with tracing on (sample %s, OTLP sink %s)", o.replicas, label, o.tracingSample, sink.URL)
			t, err := startCluster(ctx, o.seckill, o.replicas, b.replicaEnv(env, batch, sink), filepath.Join(o.runDir, b.rep.RunID), "tracing-batch-"+batch, b.say)
			if err != nil {
				return err
			}
			defer func() {
				b.say("stopping the replicas (%s, tracing on)", label)
				t.stop()
				b.rep.Settings.Tracing.Received = sink.snapshot() // after the last exports of their shutdown
				attributeTraces(b.rep.Rows, b.traceMarks, b.rep.Settings.Tracing.Received)
			}()
			// Both sets' CPU counts in either's phase: they share the database and the Kafka
			// group, so each set's relays and consumers carry part of the other's orders. The
			// idle set's own idling weighs on on and off alike.
			both := slices.Concat(off.pids, t.pids())
			on = &acceptSide{targets: t.urls(), pprof: t.replicas[0].pprofURL, pids: both, own: t.pids(), tracing: tracingOnLabel, sink: sink}
			off.pids, off.tracing = both, tracingOffLabel
		}
	}
	return b.rounds(func(round int) error {
		if first {
			if err := b.firstConfiguration(ctx, off.targets, off.pprof, label, round); err != nil {
				return err
			}
		}
		if b.has(phaseAccept) {
			for _, workers := range o.workers {
				paired := on != nil && slices.Contains(o.tracingWorkers, workers)
				for _, st := range o.strategies {
					if paired && o.tracingBeside {
						if err := b.acceptBeside(ctx, off, *on, st, batch, workers); err != nil {
							return err
						}
						continue
					}
					s := off
					if !paired {
						s.tracing = ""
					}
					for _, side := range pairOrder(s, on, paired, round) {
						if err := b.accept(ctx, side, st, batch, workers); err != nil {
							return err
						}
					}
				}
			}
		}
		return nil
	})
}

// acceptBeside runs a strategy's tracing pair at one worker count: its off and on accept phases
// at the same time, half the workers each, on their own products, so that whatever the machine
// does meanwhile (the weather: ±25–40 % between runs here) weighs on both alike, and on ÷ off
// measures tracing rather than the minute. Each side's CPU per purchase counts its own replicas'
// CPU: they share the database and the Kafka group, so each set's relays and consumers carry
// part of the other's orders, about as much either way.
func (b *bench) acceptBeside(ctx context.Context, off, on acceptSide, strategy, batch string, workers int) error {
	off.pids, on.pids = off.own, on.own
	off.beside, on.beside = true, true
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range []acceptSide{off, on} {
		wg.Go(func() { errs[i] = b.accept(ctx, s, strategy, batch, workers) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pairOrder is the order of a strategy's accept phases at one worker count in a round: off alone
// when not paired with the tracing configuration; else off then on in odd rounds and on then off
// in even ones, so that neither side is always the one measured after the other (a phase leaves
// its orders' pipeline, and the machine's weather, to the next).
func pairOrder(off acceptSide, on *acceptSide, paired bool, round int) []acceptSide {
	switch {
	case !paired || on == nil:
		return []acceptSide{off}
	case round%2 == 0:
		return []acceptSide{*on, off}
	}
	return []acceptSide{off, *on}
}

// attributeTraces gives each tracing-on row (marks: the sink's counts when its phase began, in
// the order the phases ran) what the trace sink received from its phase's start to the next
// tracing-on phase's start, the last one's to final (the sink's counts once the tracing replicas
// stopped, their last batches flushed). Only the tracing replicas export, and their exporter sends
// a batch up to 5 s after its spans end, during whatever phase comes next: a window that ends at
// the phase's own end would miss part of its spans, one that runs to the next on phase catches
// them (an off phase or more lies between two on phases).
func attributeTraces(rows []Row, marks []traceMark, final sinkCounts) {
	for i, m := range marks {
		end := final
		if i+1 < len(marks) {
			end = marks[i+1].at
		}
		if m.row < 0 || m.row >= len(rows) {
			continue
		}
		got := end.sub(m.at)
		rows[m.row].Traces = &got
	}
}

// acceptSide is a set of replicas the accept phases run on: the configuration's, or the tracing
// configuration's beside them.
type acceptSide struct {
	targets []string
	pprof   string
	// pids are the processes whose CPU time per accepted purchase the phase reports: the
	// replicas', both sets' when the tracing configuration runs beside; none for replicas the
	// bench did not start (-targets).
	pids []int
	// own are the side's own replicas (pids may hold both sets').
	own []int
	// tracing marks the rows of the tracing comparison: tracingOffLabel on the configuration's
	// own replicas at a paired worker count, tracingOnLabel on the tracing ones; "" elsewhere.
	tracing string
	// beside says the phase runs at the same time as its pair's other side, half the workers
	// each (acceptBeside).
	beside bool
	sink   *traceSink // the tracing replicas' collector, nil for the others
}

// The values of Row.Tracing.
const (
	tracingOffLabel = "off"
	tracingOnLabel  = "on"
)

// firstConfiguration runs, in one round, the phases measured on the first configuration only.
func (b *bench) firstConfiguration(ctx context.Context, targets []string, pprof, label string, round int) error {
	if b.has(phaseGin) {
		if err := b.bareGin(ctx); err != nil {
			return err
		}
	}
	if b.has(phaseSoldOut) {
		if err := b.soldOut(ctx, targets, pprof, label); err != nil {
			return err
		}
	}
	if b.has(phaseR) {
		if err := b.rowRate(ctx); err != nil {
			return err
		}
	}
	if b.has(phaseRead) {
		if err := b.read(ctx, targets, pprof, label); err != nil {
			return err
		}
	}
	if b.has(phaseFanout) {
		if err := b.fanout(ctx, targets, pprof, label); err != nil {
			return err
		}
	}
	if b.has(phaseReturns) && round == 1 { // a drain of 100,000 orders: measured once
		return b.returns(ctx, targets, label)
	}
	return nil
}

// replicaEnv returns the environment of replica i of a configuration: scripts/env.sh's, plus a
// database, a Kafka topic and a group of the bench's own, the replicas as peers, no per-user
// rate limit unless -limits (every buyer is distinct anyway), warnings only, pprof on its own
// port, and the batch size of the configuration.
//
// With a trace sink, the replicas are the tracing configuration's: SECKILL_TRACING=otlp at
// -tracing-sample, exporting to the sink, named bench-tracing-N. Without one, while the run has a
// tracing configuration, SECKILL_TRACING=off whatever the caller's environment says, so that
// "off" is off.
func (b *bench) replicaEnv(base []string, batch string, sink *traceSink) func(i int, addr, pprof string, peers []string) []string {
	return func(i int, addr, pprof string, peers []string) []string {
		instance := fmt.Sprintf("bench-%d", i+1)
		if sink != nil {
			instance = fmt.Sprintf("bench-tracing-%d", i+1)
		}
		set := map[string]string{
			"SECKILL_HTTP_ADDR":    addr,
			"SECKILL_PPROF_ADDR":   pprof,
			"SECKILL_INSTANCE_ID":  instance,
			"SECKILL_MYSQL_DSN":    b.o.mysqlDSN,
			"SECKILL_AUTO_MIGRATE": "true",
			"SECKILL_KAFKA_TOPIC":  "seckill.bench.orders",
			"SECKILL_KAFKA_GROUP":  "seckill-bench",
			"SECKILL_PEERS":        strings.Join(peers, ","),
			"SECKILL_LOG_LEVEL":    "warn",
			"SECKILL_ADMIN_TOKEN":  b.o.adminToken,
			// The bench measures the purchase path: its orders must not expire, and their units
			// come back, while later phases are measured.
			"SECKILL_PAYMENT_WINDOW": "24h",
		}
		if !b.o.limits {
			set["SECKILL_RATE_PER_USER"] = "0"
		}
		switch {
		case sink != nil:
			set["SECKILL_TRACING"], set["SECKILL_TRACING_SAMPLE"], set["OTEL_EXPORTER_OTLP_ENDPOINT"] = "otlp", b.o.tracingSample, sink.URL
		case b.o.tracingOn():
			set["SECKILL_TRACING"] = "off"
		}
		if envValue(base, "GOMAXPROCS", "") == "" {
			set["GOMAXPROCS"] = strconv.Itoa(replicaProcs(b.o.replicas))
		}
		unset := []string{}
		if batch == batchDefault {
			unset = append(unset, "SECKILL_BATCH_MAX")
		} else {
			set["SECKILL_BATCH_MAX"] = batch
		}
		if b.o.batchLinger != "" {
			set["SECKILL_BATCH_LINGER"] = b.o.batchLinger
		} else {
			unset = append(unset, "SECKILL_BATCH_LINGER")
		}
		return replicaEnv(base, set, unset...)
	}
}

// replicaProcs is the GOMAXPROCS the replicas the bench starts run with ("" when it starts none).
func (o *options) replicaProcs() string {
	if len(o.targets) > 0 {
		return ""
	}
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return v + ", the caller's"
	}
	return strconv.Itoa(replicaProcs(o.replicas))
}

// replicaProcs is the GOMAXPROCS of each of n replicas sharing this machine: its cores ÷ n, at
// least 1, as scripts/lib.sh's replica_procs gives the replicas of `make up` (and a container's CPU
// limit would).
func replicaProcs(n int) int { return max(1, runtime.NumCPU()/max(n, 1)) }

// batchLabel names a configuration: "batch default (128)" with the app's default as this
// source tree has it, "batch 1".
func batchLabel(batch string) string {
	switch batch {
	case batchDefault:
		cfg, err := config.Load("seckill", nil, func(k string) string {
			if k == "SECKILL_ADMIN_TOKEN" {
				return "placeholder-token"
			}
			return ""
		}, io.Discard)
		if err != nil {
			return "batch default"
		}
		return fmt.Sprintf("batch default (%d)", cfg.Sale.BatchMax)
	case "as running":
		return "replicas as running"
	}
	return "batch " + batch
}

// blastID is a fresh buyer prefix for the next phase.
func (b *bench) blastID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.phase++
	return b.stamp + "p" + strconv.Itoa(b.phase)
}

func (b *bench) problem(format string, args ...any) {
	p := fmt.Sprintf(format, args...)
	b.mu.Lock()
	b.rep.Problems = append(b.rep.Problems, p)
	b.mu.Unlock()
	b.say("CONTRACT BROKEN: %s", p)
}

// bareGin measures the ceiling of the HTTP layer: the bare gin handler in a process of its own,
// blasted with the connections and the duration of the sold-out phase.
func (b *bench) bareGin(ctx context.Context) error {
	_, err := b.ceiling(ctx, "bare gin ceiling", "bare-gin.log", "409 sold_out", kindGin,
		yardstick.Blast{IdempotencyKeys: true})
	return err
}

// ceiling blasts a route of the bare gin handler, in a process of its own started for it, with
// the connections and the duration of the HTTP phases (blast gives the rest: the route and its
// requests), checks that every answer was want, and adds its row as what.
func (b *bench) ceiling(ctx context.Context, what, logName, want, kind string, blast yardstick.Blast) (*yardstick.Result, error) {
	o := b.o
	logPath := filepath.Join(o.runDir, b.rep.RunID, logName)
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p, err := yardstick.StartBareGin(ctx, "", logf)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	b.say("%s: pid %d on %s, %d connections, %s + %s", what, p.Pid, p.URL, o.connections, o.warmup, o.duration)
	cpu := cpuWindow(o.warmup)
	blast.Targets, blast.ProductID, blast.Workers, blast.Warmup, blast.Duration, blast.RunID =
		[]string{p.URL}, 1, o.connections, o.warmup, o.duration, b.blastID()
	res, err := blast.Run(ctx)
	if err != nil {
		return res, err
	}
	if n := res.Answers[want]; n != res.Sent {
		return res, fmt.Errorf("%s: %d of %d answers were %s: %s %q", what, n, res.Sent, want, answersCell(res.Answers), res.Failures)
	}
	b.add(Row{
		Kind: kind, What: what, Config: fmt.Sprintf("1 process · %d connections", o.connections),
		Figure: res.PerSec, Unit: "req/s", P50: res.All.P50, P99: res.All.P99, Answers: res.Answers, CPU: cpu(),
	})
	b.say("%s: %.0f req/s", what, res.PerSec)
	return res, p.Stop()
}

// rowRate measures R on the replicas' MySQL server, in the yardstick's scratch database.
func (b *bench) rowRate(ctx context.Context) error {
	dsn, err := serverDSN(b.o.mysqlDSN)
	if err != nil {
		return err
	}
	b.say("R: %d goroutines, %s", b.o.rGoroutines, b.o.rFor)
	cpu := cpuWindow(rWarmup)
	res, err := yardstick.RowRate(ctx, yardstick.RowOptions{DSN: dsn, Goroutines: b.o.rGoroutines, Warmup: rWarmup, Duration: b.o.rFor})
	if err != nil {
		return err
	}
	b.add(Row{
		Kind: kindR, What: "R", Config: fmt.Sprintf("%d goroutines · autocommit · %s", res.Goroutines, res.Where),
		Figure: res.RowsPerSec, Unit: "rows/s", Notes: []string{"`" + res.Statement + "`"}, CPU: cpu(),
	})
	b.say("R: %.0f rows/s", res.RowsPerSec)
	return nil
}

// soldOut measures the app refusing: a product of one unit is sold, then distinct buyers with
// distinct keys blast it over every replica. Every answer must be 409 sold_out.
func (b *bench) soldOut(ctx context.Context, targets []string, pprof, label string) error {
	o := b.o
	a := newAPI(targets[0], o.adminToken)
	id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · sold out · %s", b.rep.RunID, o.soldOutWith), o.soldOutWith, 1)
	if err != nil {
		return err
	}
	if err := a.purchase(ctx, id, "bench-"+b.stamp+"-first"); err != nil {
		return fmt.Errorf("sell the sold-out product's only unit: %w", err)
	}
	row := Row{Kind: kindSoldOut, What: "sold-out path", ProductID: id,
		Config: fmt.Sprintf("%s · %s · %d connections · %s", o.soldOutWith, replicas(len(targets)), o.connections, label)}
	b.say("sold-out path: product %d, %d connections over %d replicas, %s + %s", id, o.connections, len(targets), o.warmup, o.duration)
	profile := b.profile(ctx, pprof, "soldout-"+o.soldOutWith, o.duration)
	cpu := cpuWindow(o.warmup)
	res, err := yardstick.Blast{
		Targets: targets, ProductID: id, Workers: o.connections, Warmup: o.warmup, Duration: o.duration,
		RunID: b.blastID(), IdempotencyKeys: true,
	}.Run(ctx)
	if err != nil {
		return err
	}
	row.CPU = cpu()
	profile(&row)
	row.Figure, row.Unit, row.P50, row.P99, row.Answers = res.PerSec, "req/s", res.All.P50, res.All.P99, res.Answers
	if n := res.Status[http.StatusAccepted]; n > 0 {
		b.problem("sold-out path: %d purchases accepted on product %d, whose only unit was sold before", n, id)
	}
	if n := fiveXX(res.Status); n > 0 {
		b.problem("sold-out path: %d answers 5xx", n)
	}
	if other := res.Sent - res.Answers["409 sold_out"]; other > 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("%d answers were not 409 sold_out: %s %q", other, answersCell(res.Answers), res.Failures))
	}
	b.add(row)
	b.say("sold-out path: %.0f req/s", res.PerSec)
	return nil
}

// accept measures one strategy accepting: a product with more stock than the phase can sell,
// distinct buyers each buying one unit with an Idempotency-Key; then the drain.
//
// On the tracing configuration's side its row says so (Config, Tracing) and notes what the trace
// sink had received when the phase began: attributeTraces turns those marks into each phase's
// count once the tracing replicas have stopped.
func (b *bench) accept(ctx context.Context, s acceptSide, strategy, batch string, workers int) error {
	o := b.o
	targets, pprof := s.targets, s.pprof
	label := batchLabel(batch)
	if s.tracing == tracingOnLabel {
		label += " · tracing on (sample " + o.tracingSample + ")"
	}
	var mark *sinkCounts
	if s.sink != nil {
		c := s.sink.snapshot()
		mark = &c
	}
	a := newAPI(targets[0], o.adminToken)
	id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · accept · %s · %s", b.rep.RunID, strategy, label), strategy, o.stock)
	if err != nil {
		return err
	}
	row := Row{Kind: kindAccept, What: "accept " + strategy, ProductID: id, Workers: workers, Tracing: s.tracing,
		Config: fmt.Sprintf("%s · %d workers · %s", label, workers, replicas(len(targets)))}
	blastWorkers := workers
	if s.beside {
		blastWorkers = max(1, workers/2)
		row.Config = fmt.Sprintf("%s · %d workers, beside its pair's other side with as many · %s", label, blastWorkers, replicas(len(targets)))
	}
	b.say("accept %s (%s): product %d, %d workers over %d replicas, %s + %s", strategy, label, id, blastWorkers, len(targets), o.warmup, o.acceptFor)
	slug := fmt.Sprintf("accept-%s-batch-%s-%dw", strategy, batch, workers)
	if s.tracing == tracingOnLabel {
		slug += "-tracing"
	}
	profile := b.profile(ctx, pprof, slug, o.acceptFor)
	cpu := cpuWindow(o.warmup)
	replicaCPU := replicaCPUWindow(o.warmup, s.pids)
	res, err := yardstick.Blast{
		Targets: targets, ProductID: id, Workers: blastWorkers, Warmup: o.warmup, Duration: o.acceptFor,
		RunID: b.blastID(), IdempotencyKeys: true,
	}.Run(ctx)
	if err != nil {
		return err
	}
	ended := time.Now()
	row.CPU = cpu()
	used := replicaCPU()
	acc := res.Latency[http.StatusAccepted]
	row.Figure, row.Unit, row.P50, row.P99, row.Answers = res.PerSecOf(http.StatusAccepted), "accepted/s", acc.P50, acc.P99, res.Answers
	if n := row.Figure * o.acceptFor.Seconds(); used > 0 && n > 0 {
		row.ReplicaCPUUS = float64(used.Microseconds()) / n
	}
	row.Accepted = res.Status[http.StatusAccepted]
	if n := fiveXX(res.Status); n > 0 {
		b.problem("accept %s (%s): %d answers 5xx", strategy, label, n)
	}
	if other := res.Sent - row.Accepted; other > 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("%d answers were not 202: %s %q", other, answersCell(res.Answers), res.Failures))
	}
	b.say("accept %s (%s): %.0f accepted/s; waiting for the order queue", strategy, label, row.Figure)
	if st, err := a.stats(ctx, id); err == nil {
		row.ReservedAtEnd = st.Reserved
	}

	st, drained, err := waitDrained(ctx, a, id, row.Accepted, o.drainTimeout)
	if err != nil {
		return err
	}
	drainedAfter := time.Since(ended)
	profile(&row) // after the drain: waiting for it must not count as draining
	row.Reserved, row.Confirmed, row.Drained = st.Reserved, st.ConfirmedUnits, drained
	if drained {
		row.DrainSeconds = drainedAfter.Seconds()
	} else {
		row.Notes = append(row.Notes, fmt.Sprintf("not drained within %s: %d units reserved, %d confirmed", o.drainTimeout, st.Reserved, st.ConfirmedUnits))
	}
	if st.Reserved < row.Accepted {
		b.problem("accept %s (%s): %d purchases answered 202 but only %d units reserved", strategy, label, row.Accepted, st.Reserved)
	}
	if st.Oversold > 0 || st.InitialStock-st.Stock != st.Reserved {
		b.problem("accept %s (%s): stock %d of %d with %d units reserved (oversold %d)", strategy, label, st.Stock, st.InitialStock, st.Reserved, st.Oversold)
	}
	b.mu.Lock()
	if mark != nil {
		b.traceMarks = append(b.traceMarks, traceMark{row: len(b.rep.Rows), at: *mark})
	}
	row.Round = b.round
	b.rep.Rows = append(b.rep.Rows, row)
	b.mu.Unlock()
	b.say("accept %s (%s): drained %v in %.1f s", strategy, label, drained, row.DrainSeconds)
	return nil
}

// waitDrained polls the product's stats until every accepted purchase (one unit each) is
// reserved in MySQL and every reserved unit is confirmed as an order, or timeout passes (drained
// false). It returns the last stats. (redis-lua reserves in MySQL after it answers: its
// persister holds off during a burst.)
func waitDrained(ctx context.Context, a *api, id int64, accepted int, timeout time.Duration) (stats, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := a.stats(ctx, id)
		if err != nil {
			return st, false, err
		}
		if st.Reserved >= accepted && st.ConfirmedUnits >= st.Reserved {
			return st, true, nil
		}
		if time.Now().After(deadline) {
			return st, false, nil
		}
		select {
		case <-ctx.Done():
			return st, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// profile starts a CPU profile of the replica at pprofURL covering the measured window, d after
// the warm-up, of a phase that starts now, and returns a function that waits for it and returns
// the file it was saved to. Without pprofURL or -profile it does nothing. A failed profile is a
// note of the row, not a failed run.
func (b *bench) profile(ctx context.Context, pprofURL, slug string, d time.Duration) func(*Row) {
	if !b.o.profile || pprofURL == "" {
		return func(*Row) {}
	}
	o := b.o
	path := filepath.Join(o.outDir, fmt.Sprintf("bench-%s-%s.pprof", b.rep.RunID, slug))
	seconds := max(1, int(math.Ceil(d.Seconds())))
	done := make(chan error, 1)
	go func() {
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			return
		case <-time.After(o.warmup): // the profile covers the measured window, not the warm-up
		}
		done <- fetchProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", pprofURL, seconds), path, time.Duration(seconds)*time.Second+30*time.Second)
	}()
	return func(row *Row) {
		if err := <-done; err != nil {
			row.Notes = append(row.Notes, fmt.Sprintf("no CPU profile: %v", err))
			return
		}
		row.Profile = path
	}
}

func fetchProfile(ctx context.Context, url, path string, timeout time.Duration) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return fmt.Errorf("%w (does this binary serve SECKILL_PPROF_ADDR? make build)", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, res.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func replicas(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return strconv.Itoa(n) + " replicas"
}

func fiveXX(status map[int]int) int {
	n := 0
	for code, c := range status {
		if code >= 500 {
			n += c
		}
	}
	return n
}

// rWarmup is R's warm-up, before its measured window.
const rWarmup = 500 * time.Millisecond

// cpuWindow reads the machine's CPU counters once warmup has passed, when a phase's measured
// window begins, and returns a function to call when the window ends: how the CPU time between
// the two went, or nil where it cannot be read (not Linux) or the phase ended within its warm-up.
func cpuWindow(warmup time.Duration) func() *yardstick.CPUShare {
	var (
		mu    sync.Mutex
		first *yardstick.CPUTimes
	)
	t := time.AfterFunc(warmup, func() {
		if c, err := yardstick.ReadCPUTimes(); err == nil {
			mu.Lock()
			first = &c
			mu.Unlock()
		}
	})
	return func() *yardstick.CPUShare {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			return nil
		}
		now, err := yardstick.ReadCPUTimes()
		if err != nil {
			return nil
		}
		share, err := now.ShareSince(*first)
		if err != nil {
			return nil
		}
		return &share
	}
}
