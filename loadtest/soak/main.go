// Command soak runs a steady mixed load on the stack of `make up` for a set time and fails on slow
// leaks: purchases of every safe strategy at a paced rate (a new sale per strategy every sale
// period, so that sales open, sell out and close all along), half of the orders paid, the rest
// left to expire and give their units back, and a crowd of event-stream viewers that follows the
// newest sale. Every sample period it reads each replica's heap, goroutines, open files and MySQL
// pool (/metrics) and MySQL's connected threads; after the warm-up, the median of the run's last
// quarter must stay within a bound of the first quarter's (growth.go). At the end every product
// is audited (internal/audit) and every purchase answered 202 must be an order.
//
// Exit status: 0 PASS, 1 FAIL (growth past a bound, an audit violation, an accepted purchase
// without its order, a purchase left without an answer), 2 on a usage or setup error. The report,
// with the gauges plotted over time, goes to loadtest/results/soak-<run>.{md,html,json}.
//
//	make soak                                   # 30 minutes
//	make soak SOAK_FLAGS='-for 150s -warmup 1m'  # CI's short form
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	_ "github.com/go-sql-driver/mysql" // the audit reads the database directly

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

func main() {
	cli.Main("soak", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// options are the command line.
type options struct {
	duration, warmup, sampleEvery, salePeriod time.Duration
	rate                                      float64
	strategies                                []string
	payShare                                  float64
	viewers                                   int
	adminBase                                 string
	replicas                                  []string
	token, dsn, results                       string
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&o.duration, "for", 30*time.Minute, "how long the load runs")
	fs.DurationVar(&o.warmup, "warmup", 0, "the start not judged for growth: caches fill, pools open, the JIT of nothing (default: a sixth of -for, at least 1m, at most 5m)")
	fs.DurationVar(&o.sampleEvery, "sample", 0, "how often the gauges are read (default: -for / 180, at least 2s, at most 10s)")
	fs.DurationVar(&o.salePeriod, "sale-every", 2*time.Minute, "a new sale per strategy this often, stocked to sell out near its end")
	fs.Float64Var(&o.rate, "rate", 60, "purchases per second, over every strategy")
	strategies := fs.String("strategies", sale.JoinStrategies(sale.StrategiesWhere(sale.OwnSafe), ","), "the strategies sold, each its own sale")
	fs.Float64Var(&o.payShare, "pay", 0.5, "the share of accepted orders paid; the others expire (SECKILL_PAYMENT_WINDOW) and return their units")
	fs.IntVar(&o.viewers, "viewers", 100, "event-stream viewers following the newest sale of the first strategy (0: none)")
	fs.StringVar(&o.adminBase, "admin", "", "where the admin API is (default: the first replica)")
	replicas := fs.String("replicas", getenv("SECKILL_PEERS"), "the replicas' base URLs, comma-separated: buyers and viewers go to them in turn (not through nginx, whose idle connections to them would blur what a replica keeps), their /metrics are sampled")
	fs.StringVar(&o.token, "admin-token", getenv("SECKILL_ADMIN_TOKEN"), "the admin API's token")
	fs.StringVar(&o.dsn, "dsn", getenv("SECKILL_MYSQL_DSN"), "MySQL, for the audit and its connected threads")
	fs.StringVar(&o.results, "results", "loadtest/results", "where the report goes")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.strategies, o.replicas = cli.SplitList(*strategies), cli.SplitList(*replicas)
	if o.adminBase == "" && len(o.replicas) > 0 {
		o.adminBase = o.replicas[0]
	}
	if o.warmup == 0 {
		o.warmup = min(max(o.duration/6, time.Minute), 5*time.Minute)
	}
	if o.sampleEvery == 0 {
		o.sampleEvery = min(max(o.duration/180, 2*time.Second), 10*time.Second)
	}
	var bad []string
	switch {
	case o.duration <= o.warmup:
		bad = append(bad, "-for must be longer than -warmup")
	case o.warmup < store.PoolIdleTime:
		// A replica's pool keeps a burst's connections for PoolIdleTime: an early window before
		// that holds a pool still growing to its size, and the pool's verdict would be noise
		// (a CI run judged 10 connections after a 30 s warm-up against 17 a minute later).
		bad = append(bad, fmt.Sprintf("-warmup must be at least %s, the replicas' pool idle time: before it the pool has not reached its size", store.PoolIdleTime))
	case o.rate <= 0 || o.payShare < 0 || o.payShare > 1 || o.viewers < 0:
		bad = append(bad, "-rate must be positive, -pay within 0..1, -viewers not negative")
	case len(o.strategies) == 0 || len(o.replicas) == 0:
		bad = append(bad, "-strategies and -replicas (SECKILL_PEERS: source scripts/env.sh, or use make soak) must name at least one")
	case o.token == "" || o.dsn == "":
		bad = append(bad, "-admin-token and -dsn are needed (SECKILL_ADMIN_TOKEN, SECKILL_MYSQL_DSN)")
	case o.salePeriod < 10*time.Second:
		bad = append(bad, "-sale-every must be at least 10s")
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "; "))
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	db, err := sql.Open("mysql", o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	say := cli.Progress(stdout)
	s := &soak{
		o: o, db: db, say: say, runID: time.Now().UTC().Format("20060102-150405"),
		admin:   appapi.New(o.adminBase, o.token),
		buyers:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512}},
		sampler: &sampler{replicas: o.replicas, db: db, http: &http.Client{Timeout: 5 * time.Second}},
	}
	rep, err := s.run(ctx)
	if err != nil {
		return err
	}
	md, html := rep.markdown(), rep.html()
	names, err := cli.WriteReport(o.results, "soak-"+s.runID, rep, cli.Text{Ext: ".md", Body: md}, cli.Text{Ext: ".html", Body: html})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(names, ", "))
	if !rep.Pass {
		return cli.Failure("FAIL: " + strings.Join(rep.Failures, "; "))
	}
	return nil
}

// soak is one run.
type soak struct {
	o       *options
	db      *sql.DB
	say     func(string, ...any)
	runID   string
	admin   *appapi.Client
	buyers  *http.Client
	sampler *sampler

	mu         sync.Mutex
	current    map[string]int64 // the strategy's sale being sold
	products   []int64          // every sale of the run
	accepted   map[string]int64 // order id → product, of every 202
	tally      tally
	samples    []sample
	sampleErrs []string
}
