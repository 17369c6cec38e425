// Command buckets measures, on this machine's own MySQL and Redis, what splitting one sale's
// stock into K buckets (K rows, or K keys in K cluster slots) buys and costs:
//
//   - throughput by K: R's conditional UPDATE loop (autocommit, G goroutines) over K rows, each
//     unit from a bucket picked at random, and the same with a Lua decrement-if-positive over K
//     Redis keys; each rate as a ratio to K=1 of the same run;
//   - the tail: N units in K buckets sold to a crowd of more buyers than units, once per policy
//     (pinned, probe on empty, probe with the replicas' empty flags, rebalance) and per arrival
//     (uniform, Zipf-skewed): units sold, units left unsold, buyers refused while units were
//     left, and the extra calls each policy pays.
//
// It works in a database of its own (-database, dropped and recreated at the start, dropped at
// the end) and under a Redis key prefix of its own (-prefix; its keys deleted at the end, never
// FLUSHALL). It prints a Markdown report and writes it, with a JSON twin, to
// loadtest/results/buckets-<run>.md. Exit status: 0 when the run completed, 1 when a tail run
// broke an invariant (an oversell, a count that disagrees with the store), 2 on a usage or setup
// error.
//
//	make buckets
//	go run ./loadtest/buckets -phases tail -backends redis -units 1000 -buyers 1500
//	go run ./loadtest/buckets -backends redis -redis-cluster 127.0.0.1:7301,127.0.0.1:7302
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

	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

func main() {
	cli.Main("buckets", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// The phases, in the order they run.
const (
	phaseThroughput = "throughput"
	phaseTail       = "tail"
)

var allPhases = []string{phaseThroughput, phaseTail}

// options are the command line.
type options struct {
	mysqlDSN   string
	database   string
	redisAddr  string
	cluster    string
	prefix     string
	phases     []string
	backends   []string
	ks         []int
	goroutines int
	rounds     int
	warmup     time.Duration
	duration   time.Duration
	tailK      int
	units      int
	buyers     int
	workers    int
	replicas   int
	skew       float64
	seed       uint64
	policies   []string
	arrivals   []string
	outDir     string
}

func parseOptions(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("buckets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", "root:@tcp(127.0.0.1:3306)/", "the MySQL server (its database name is ignored: see -database)")
	fs.StringVar(&o.database, "database", "seckill_buckets", "the run's own database, dropped and recreated at the start, dropped at the end")
	fs.StringVar(&o.redisAddr, "redis", "127.0.0.1:6379", "the Redis server")
	fs.StringVar(&o.cluster, "redis-cluster", "", "seed addresses of a Redis Cluster, comma-separated: measure there instead of -redis (each bucket's key has a hash tag of its own, so the buckets spread over the masters)")
	fs.StringVar(&o.prefix, "prefix", "seckill:buckets:", "the run's Redis key prefix; its keys are deleted at the end")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run: throughput (rate by K), tail (the end of a sale, per policy)")
	backends := fs.String("backends", "mysql,redis", "stores to measure, in order: mysql, redis")
	ks := fs.String("k", "1,2,4,8,16", "bucket counts of the throughput phase")
	fs.IntVar(&o.goroutines, "goroutines", 16, "goroutines of the throughput phase (R's 16)")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds of the throughput phase: each measures every K, ascending then descending in turn; the figure is their mean")
	fs.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "warm-up of each throughput measurement")
	fs.DurationVar(&o.duration, "duration", 2*time.Second, "measured time of each throughput measurement")
	fs.IntVar(&o.tailK, "tail-k", 8, "buckets of the tail phase")
	fs.IntVar(&o.units, "units", 10_000, "units of each tail sale (N)")
	fs.IntVar(&o.buyers, "buyers", 15_000, "buyers of each tail sale, one unit each: more than -units")
	fs.IntVar(&o.workers, "workers", 64, "buyers in flight in the tail phase")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas the summary policy's in-memory empty flags are kept apart by (buyer i on replica i mod n)")
	fs.Float64Var(&o.skew, "skew", 1.0, "Zipf exponent s of the skewed arrival: bucket b gets buyers in proportion to 1/(b+1)^s")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the skewed arrival (the same crowd for every policy)")
	policies := fs.String("policies", strings.Join(allPolicies, ","), "tail policies: "+strings.Join(allPolicies, ", "))
	arrivals := fs.String("arrivals", strings.Join(allArrivals, ","), "tail arrivals: "+strings.Join(allArrivals, ", "))
	fs.StringVar(&o.outDir, "out", "loadtest/results", "where the report goes")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	o.phases, o.backends = cli.SplitList(*phases), cli.SplitList(*backends)
	o.policies, o.arrivals = cli.SplitList(*policies), cli.SplitList(*arrivals)
	for _, k := range cli.SplitList(*ks) {
		n, err := strconv.Atoi(k)
		if err != nil || n < 1 || n > 1024 {
			return nil, fmt.Errorf("-k: %q is not a number from 1 to 1024", k)
		}
		o.ks = append(o.ks, n)
	}
	for _, l := range []struct {
		flag       string
		got, known []string
	}{{"-phases", o.phases, allPhases}, {"-backends", o.backends, []string{"mysql", "redis"}}, {"-policies", o.policies, allPolicies}, {"-arrivals", o.arrivals, allArrivals}} {
		if len(l.got) == 0 {
			return nil, fmt.Errorf("%s: nothing given", l.flag)
		}
		for _, v := range l.got {
			if !slices.Contains(l.known, v) {
				return nil, fmt.Errorf("%s: %q is none of %s", l.flag, v, strings.Join(l.known, ", "))
			}
		}
	}
	switch {
	case len(o.ks) == 0:
		return nil, errors.New("-k: no bucket count")
	case o.goroutines < 1 || o.rounds < 1 || o.workers < 1 || o.replicas < 1 || o.tailK < 1 || o.tailK > 1024 || o.units < 1:
		return nil, errors.New("-goroutines, -rounds, -workers, -replicas, -units and -tail-k (at most 1024) must be positive")
	case o.buyers <= o.units:
		return nil, errors.New("-buyers must exceed -units: the tail is about a crowd larger than the stock")
	case o.warmup < 0 || o.duration <= 0 || o.warmup+o.duration > 5*time.Minute:
		return nil, errors.New("-duration must be positive, and a measurement at most 5 minutes")
	case o.skew <= 0:
		return nil, errors.New("-skew must be positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	say := cli.Progress(stderr)
	rep, runErr := measure(ctx, o, say)
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
	if n := len(rep.problems()); n > 0 {
		return cli.Failure(fmt.Sprintf("%d broken invariants: see the tail table", n))
	}
	return nil
}

// measure runs the phases on each backend, and cleans up after itself whatever happens.
func measure(ctx context.Context, o *options, say func(string, ...any)) (*Report, error) {
	start := time.Now()
	rep := &Report{
		RunID: start.UTC().Format("20060102-150405"), StartedAt: start.UTC(), Machine: yardstick.Machine(), Commit: cli.GitCommit(ctx),
		LoadAverage: loadAverage(),
		Settings: Settings{
			Backends: o.backends, K: o.ks, Goroutines: o.goroutines, Rounds: o.rounds, Warmup: o.warmup.String(), Duration: o.duration.String(),
			TailK: o.tailK, Units: o.units, Buyers: o.buyers, Workers: o.workers, Replicas: o.replicas, Skew: o.skew, Seed: o.seed,
			Policies: o.policies, Arrivals: o.arrivals, Database: o.database, Prefix: o.prefix,
		},
		Throughput: []ThroughputRow{}, Tail: []TailRow{},
	}
	err := measureAll(ctx, o, rep, say)
	computeRatios(rep.Throughput)
	rep.Seconds = time.Since(start).Seconds()
	if err != nil {
		rep.Aborted = err.Error()
	}
	return rep, err
}

func measureAll(ctx context.Context, o *options, rep *Report, say func(string, ...any)) error {
	conns := max(o.goroutines, o.workers)
	for _, name := range o.backends {
		var be backend
		switch name {
		case "mysql":
			m, err := openMySQL(ctx, o.mysqlDSN, o.database, conns)
			if err != nil {
				return err
			}
			defer func() {
				m.Close()
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				defer cancel()
				if err := dropMySQL(dctx, o.mysqlDSN, o.database); err != nil {
					say("drop database %s: %v", o.database, err)
				}
			}()
			be = m
		case "redis":
			r, err := openRedis(ctx, o.redisAddr, o.cluster, o.prefix, conns)
			if err != nil {
				return err
			}
			defer func() {
				if err := r.Close(); err != nil {
					say("delete the run's Redis keys: %v", err)
				}
			}()
			be = r
		}
		rep.Servers = append(rep.Servers, be.Describe(ctx))
		if slices.Contains(o.phases, phaseThroughput) {
			rows := make([]ThroughputRow, len(o.ks))
			for round := range o.rounds {
				for j := range o.ks {
					i := j
					if round%2 == 1 {
						i = len(o.ks) - 1 - j // descending: a drift of the machine favours neither end
					}
					r, err := measureThroughput(ctx, be, o.ks[i], o.goroutines, o.warmup, o.duration)
					if err != nil {
						return err
					}
					say("throughput %s K=%d round %d: %.0f units/s", name, o.ks[i], round+1, r.UnitsPerS)
					rows[i].Backend, rows[i].K, rows[i].Goroutines, rows[i].Masters = r.Backend, r.K, r.Goroutines, r.Masters
					rows[i].merge(r)
				}
			}
			rep.Throughput = append(rep.Throughput, rows...)
		}
		if slices.Contains(o.phases, phaseTail) {
			for _, arrival := range o.arrivals {
				for _, policy := range o.policies {
					row, err := runTail(ctx, be, tailConfig{
						Policy: policy, Arrival: arrival, K: o.tailK, Units: o.units, Buyers: o.buyers,
						Workers: o.workers, Replicas: o.replicas, Skew: o.skew, Seed: o.seed,
					})
					if err != nil {
						return fmt.Errorf("tail %s %s %s: %w", name, policy, arrival, err)
					}
					say("tail %s %s %s: sold %d of %d, left %d, false sold-outs %d, calls %d", name, policy, arrival, row.Sold, row.Units, row.Undersell, row.FalseSoldOuts, row.Calls)
					rep.Tail = append(rep.Tail, row)
				}
			}
		}
	}
	return nil
}

// loadAverage is the 1, 5 and 15 minute load averages at the start: others share this machine.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
