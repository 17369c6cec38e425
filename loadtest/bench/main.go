// Command bench measures seckill-go's purchase path against this machine's own limits, in one
// run: every figure is a ratio to a yardstick measured in the same run, because the load client
// and the servers share two cores and absolute rates move ±40 % between runs.
//
//   - the bare gin ceiling: a gin handler that parses a purchase and answers 409, in a process of
//     its own, blasted by the same client as the app;
//   - the sold-out path: the app's 3 replicas refusing a sold-out product, ÷ the bare gin ceiling;
//   - R: a raw single-row conditional UPDATE loop on a scratch table;
//   - the accept path of each strategy: purchases accepted per second on a product that never
//     sells out, ÷ R, and the time the order queue then takes to confirm every unit; once with
//     the replicas' default batching and once with SECKILL_BATCH_MAX=1 (one buyer per lock);
//   - the read path: GET of one product (a fresh sale's) over the replicas, ÷ the read ceiling,
//     a bare gin handler answering a fixed product in a process of its own, same client, same run;
//   - the fan-out: M subscribers holding the event stream of one product over the replicas while
//     purchases move its stock: events delivered per second (and per subscriber), and how late
//     the subscribers learnt of each unit sold.
//
// Every phase runs -rounds times (3), the rounds alternated — gin, sold-out, R, read, fan-out,
// accept, then all again — so that each ratio divides by a yardstick measured minutes, not a run,
// away; the report gives each one's median and its spread (min–max) over the rounds, then every
// round's figures. A difference smaller than the spread is the machine's weather.
//
// It starts its own replicas of bin/seckill (free loopback ports, database seckill_bench dropped
// and recreated each run, Kafka topic seckill.bench.orders), never the ones of `make up`, and
// stops them by pid at the end and on Ctrl-C. It prints a Markdown table and writes it, with a
// JSON twin, to loadtest/results/bench-<run>.md.
//
// Speed is reported, never asserted. Exit status: 0 when the run completed, 1 when a phase got
// answers that break the API's contract (a 5xx, a 202 on a sold-out product, an accepted purchase
// that is not reserved, an oversell), 2 on a usage or setup error.
//
//	make bench                                            # services up, make build, then this
//	go run ./loadtest/bench -strategies mysql -batch 1    # one strategy, one configuration
//	go run ./loadtest/bench -profile                      # and a CPU profile of replica 1 per phase
//	go run ./loadtest/bench compare -a DIR -b DIR         # two sides' reports (make bench-compare)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

func main() {
	cli.Main("bench", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// options are the command line.
type options struct {
	seckill      string
	envScript    string
	replicas     int
	targets      []string // replicas already running: start none (no batch configurations, no profiles)
	phases       []string
	connections  int
	workers      []int
	rounds       int
	warmup       time.Duration
	duration     time.Duration
	acceptFor    time.Duration
	rFor         time.Duration
	rGoroutines  int
	strategies   []string
	soldOutWith  string
	batches      []string
	batchLinger  string
	stock        int
	drainTimeout time.Duration
	profile      bool
	limits       bool
	// tracing adds the tracing configuration: replicas of the first configuration's settings with
	// SECKILL_TRACING=otlp at tracingSample, exporting to the bench's own OTLP sink, whose accept
	// phases at tracingWorkers alternate with the first configuration's (tracing off).
	tracing        bool
	tracingSample  string
	tracingWorkers []int
	// tracingBeside runs a pair's on and off phases at the same time, half the workers each.
	tracingBeside bool
	subscribers   int
	fanoutWith    string
	fanoutBuyers  int
	// returnOrders orders over one product of each of returnStrategies fall due at once in the
	// returns phase.
	returnOrders     int
	returnStrategies []string
	mysqlDSN         string
	adminToken       string
	outDir           string
	runDir           string
}

// The phases, in the order they run.
const (
	phaseGin     = "gin"
	phaseSoldOut = "soldout"
	phaseR       = "r"
	phaseRead    = "read"
	phaseFanout  = "fanout"
	phaseReturns = "returns"
	phaseAccept  = "accept"
)

var allPhases = []string{phaseGin, phaseSoldOut, phaseR, phaseRead, phaseFanout, phaseReturns, phaseAccept}

// batchDefault in -batch leaves SECKILL_BATCH_MAX unset: the app's own default.
const batchDefault = "default"

// parseOptions reads the command line: flags, then the lists they hold, then validate.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.seckill, "seckill", "bin/seckill", "the app's binary (make build)")
	fs.StringVar(&o.envScript, "env", "scripts/env.sh", "the local stack's environment, sourced for every replica")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas of `seckill serve` to start")
	targets := fs.String("targets", "", "base URLs of replicas already running, comma-separated: start none and create the products there, run the accept phases once as the replicas are configured, no profiles")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run: gin (bare gin ceiling), soldout, r (R), read (GET one product ÷ the read ceiling), fanout (subscribers of the event stream while purchases move the stock), returns (units of unpaid orders back on sale), accept")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of every phase, alternated (gin, sold-out, R, read, fan-out, accept, then again): the report gives each ratio's median and spread over them; 1 for a quick look")
	fs.IntVar(&o.connections, "connections", 64, "connections of the bare gin and sold-out phases")
	workers := fs.String("workers", "32,64,256", "workers (requests in flight) of the accept phases, comma-separated: each strategy is measured at each (32: a steady trickle, where latency bounds the rate; 64: where redis-lua's p99 is judged; 256: a burst, as a flash sale is)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up of every HTTP phase, sent but not measured")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of the bare gin and sold-out phases")
	fs.DurationVar(&o.acceptFor, "accept-duration", 5*time.Second, "measured time of each accept phase")
	fs.DurationVar(&o.rFor, "r-duration", 5*time.Second, "measured time of R")
	fs.IntVar(&o.rGoroutines, "r-goroutines", 16, "goroutines of R")
	strategies := fs.String("strategies", sale.JoinStrategies(sale.StrategiesWhere(sale.OwnSafe), ","), "strategies of the accept phases, in order")
	fs.StringVar(&o.soldOutWith, "soldout-strategy", "mysql", "strategy of the sold-out product (and of the read path's)")
	fs.IntVar(&o.subscribers, "subscribers", 1000, "subscribers of the fan-out phase, holding GET /api/v1/events?product_id=N spread over the replicas")
	fs.StringVar(&o.fanoutWith, "fanout-strategy", "mysql", "strategy of the fan-out phase's product")
	fs.IntVar(&o.fanoutBuyers, "fanout-workers", 16, "purchases in flight while the fan-out phase's subscribers watch: they move the stock that the events carry")
	fs.IntVar(&o.returnOrders, "return-orders", 100_000, "orders of the returns phase, spread over its products, whose payment windows end at once")
	returnStrategies := fs.String("return-strategies", "mysql,redis-lua,zk", "one product of each in the returns phase")
	batches := fs.String("batch", batchDefault+",1", "SECKILL_BATCH_MAX of each replica configuration, in order; "+batchDefault+" leaves it unset")
	fs.StringVar(&o.batchLinger, "batch-linger", "", "SECKILL_BATCH_LINGER of every configuration (empty: unset)")
	fs.IntVar(&o.stock, "stock", 100_000_000, "stock of each accept product: enough never to sell out")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 2*time.Minute, "longest wait, after an accept phase, for every reserved unit to be confirmed as an order")
	fs.BoolVar(&o.limits, "limits", false, "keep the replicas' rate limits (SECKILL_RATE_* of the environment, else the app's defaults) to measure their cost; without it the per-user limit is off. The bench's client is on loopback, which the per-client limit exempts unless SECKILL_RATE_EXEMPT=none")
	fs.BoolVar(&o.tracing, "tracing", true, "also measure the accept phases with tracing on (SECKILL_TRACING=otlp to an OTLP/HTTP sink the bench runs), on replicas of their own started beside the first configuration's, alternated with its phases (tracing off) round by round; -tracing=false to skip")
	fs.StringVar(&o.tracingSample, "tracing-sample", "0.01", "SECKILL_TRACING_SAMPLE of the tracing configuration (the app's default)")
	tracingWorkers := fs.String("tracing-workers", "64", "workers of the tracing configuration's accept phases, each one of -workers")
	fs.BoolVar(&o.tracingBeside, "tracing-beside", true, "run each tracing pair's on and off accept phases at the same time, half the workers each, so that the machine's weather falls on both alike (false: one after the other, alternating which goes first)")
	fs.BoolVar(&o.profile, "profile", false, "take a CPU profile of replica 1 during each app phase and save it next to the report")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "root:@tcp(127.0.0.1:3306)/seckill_bench", "the replicas' database, dropped and recreated each run; R runs on the same server")
	fs.StringVar(&o.adminToken, "admin-token", cli.EnvOr(getenv, "SECKILL_ADMIN_TOKEN", "dev-admin-token"), "admin bearer token")
	fs.StringVar(&o.outDir, "out", "loadtest/results", "where the report goes")
	fs.StringVar(&o.runDir, "run-dir", ".run/bench", "where the replicas' logs go")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.targets = cli.SplitList(*targets)
	o.phases = cli.SplitList(*phases)
	o.strategies = cli.SplitList(*strategies)
	o.returnStrategies = cli.SplitList(*returnStrategies)
	o.batches = cli.SplitList(*batches)
	var err error
	if o.workers, err = parseWorkers(*workers); err != nil {
		return nil, err
	}
	if o.tracingWorkers, err = parseWorkers(*tracingWorkers); err != nil {
		return nil, errors.New("-tracing-" + strings.TrimPrefix(err.Error(), "-"))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(o.targets) > 0 {
		o.batches = []string{"as running"}
	}
	return o, nil
}

// parseWorkers reads -workers: positive numbers, comma-separated.
func parseWorkers(s string) ([]int, error) {
	var out []int
	for _, w := range cli.SplitList(s) {
		n, err := strconv.Atoi(w)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-workers: %q is not a positive number", w)
		}
		out = append(out, n)
	}
	return out, nil
}

// validate checks the parsed options: the phases and -batch configurations named, and the
// combinations of flags.
func (o *options) validate() error {
	for _, p := range o.phases {
		if !slices.Contains(allPhases, p) {
			return fmt.Errorf("-phases: %q is none of %s", p, strings.Join(allPhases, ", "))
		}
	}
	for _, b := range o.batches {
		if b != batchDefault && !isPositiveInt(b) {
			return fmt.Errorf("-batch: %q is neither %s nor a positive number", b, batchDefault)
		}
	}
	switch {
	case len(o.phases) == 0:
		return errors.New("-phases: nothing to run")
	case o.rounds < 1 || o.rounds > 20:
		return errors.New("-rounds: 1 to 20")
	case o.replicas < 1 || o.connections < 1 || len(o.workers) == 0 || o.rGoroutines < 1 || o.stock < 1 || o.subscribers < 1 || o.fanoutBuyers < 1:
		return errors.New("-replicas, -connections, -workers, -r-goroutines, -stock, -subscribers and -fanout-workers must be positive")
	case o.warmup < 0 || o.duration <= 0 || o.acceptFor <= 0 || o.rFor <= 0 || o.drainTimeout <= 0:
		return errors.New("durations must be positive (the warm-up may be 0)")
	case o.warmup+max(o.duration, o.acceptFor) > 10*time.Minute:
		return errors.New("a phase is bounded to 10 minutes")
	case slices.Contains(o.phases, phaseReturns) && (len(o.returnStrategies) == 0 || o.returnOrders < len(o.returnStrategies)):
		return errors.New("the returns phase needs a strategy and at least one order per strategy")
	case slices.Contains(o.phases, phaseAccept) && (len(o.strategies) == 0 || len(o.batches) == 0):
		return errors.New("the accept phases need at least one strategy and one -batch configuration")
	case o.tracingOn() && !o.tracingMeasurable():
		return fmt.Errorf("-tracing-workers %v, -tracing-sample %s: each worker count one of -workers %v (the tracing-on phases pair with those), the sample in (0, 1]; or -tracing=false", o.tracingWorkers, o.tracingSample, o.workers)
	case len(o.targets) > 0 && o.profile:
		return errors.New("-profile needs replicas the bench starts (their pprof ports): drop -targets")
	}
	return nil
}

// tracingMeasurable says whether every -tracing-workers is one of -workers, and the sample a
// fraction.
func (o *options) tracingMeasurable() bool {
	f, err := strconv.ParseFloat(o.tracingSample, 64)
	if err != nil || f <= 0 || f > 1 {
		return false
	}
	for _, w := range o.tracingWorkers {
		if !slices.Contains(o.workers, w) {
			return false
		}
	}
	return len(o.tracingWorkers) > 0
}

// tracingOn says whether this run has the tracing configuration: -tracing, accept phases, and
// replicas the bench starts (it cannot set the environment of replicas already running).
func (o *options) tracingOn() bool {
	return o.tracing && len(o.targets) == 0 && slices.Contains(o.phases, phaseAccept)
}

func isPositiveInt(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "compare" {
		return runCompare(args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	b := &bench{o: o, say: cli.Progress(stderr)} // progress on stderr; the report goes to stdout
	rep, runErr := b.run(ctx)
	if rep == nil {
		return runErr
	}
	fmt.Fprint(stdout, markdown(rep))
	files, err := writeReport(o.outDir, rep)
	if err != nil {
		return errors.Join(runErr, err)
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	if runErr != nil {
		return runErr
	}
	if len(rep.Problems) > 0 {
		return cli.Failure(fmt.Sprintf("%d answers or audits broke the contract: see Problems in the report", len(rep.Problems)))
	}
	return nil
}
