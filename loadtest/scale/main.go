// Command scale measures how the cost grows with what grows in a real flash sale, in sweeps
// (-sweeps), each point audited:
//
//   - data: the reservations, orders and order events of ended sales pre-filled to each volume
//     of -rows (0, 1M, 10M by default, spread over 100 ended sales: filled with INSERT … SELECT
//     from MariaDB's sequence tables, not through the API), and at each volume, on a live sale of
//     its own, every operation that runs per request or per second — a purchase, the relay's
//     claim, the consumer's order insert, a buyer's order read, the expirer's and returner's
//     scans, the backlog gauges, the product list, the audits — called -reps times. Two figures
//     per operation and volume: the median time of a call (the weather moves it), and the rows
//     the server examined per call (it does not: MariaDB's slow log, on for this run's
//     connections only, counts them and shows each statement's plan). It works in its own
//     database (seckill_scale, dropped and recreated), so it can run beside the local stack.
//   - buyers: one sale to crowds up to a million distinct buyers through nginx (buyers.go);
//   - sales: 1 to 1,000 sales open at once, idle then bought (sales.go);
//   - stock: one crowd on sales of 1k to 10M units (stock.go);
//   - expiries: 1k to 1M unpaid orders due at once, drained while a probe buys (expiries.go);
//   - replicas: the stack restarted with 1 to 4 replicas (replicas.go).
//
// All but data need the stack of make up.
//
//	make scale                                     # every sweep in full (~50 min)
//	go run ./loadtest/scale -sweeps data -rows 0,20000 -reps 10 -settle 0s
package main

import (
	"context"
	"errors"
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
	cli.Main("scale", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// options are the command line.
type options struct {
	serverDSN  string
	db         string
	rows       []int
	sales      int
	settle     time.Duration
	reps       int
	outDir     string
	slowLogDir string
	sweeps     []string
	buyers     buyersOptions
	open       salesOptions
	stockSizes []int
	stockCrowd int
	expiries   expiriesOptions
	replicas   replicasOptions
}

// The sweeps -sweeps names.
const (
	sweepData   = "data"
	sweepBuyers = "buyers"
	sweepSales  = "sales"
	sweepStock  = "stock"
	sweepExpiry = "expiries"
	sweepRepl   = "replicas"
)

// allSweeps are the sweeps, in the order -sweeps runs them by default.
var allSweeps = []string{sweepData, sweepBuyers, sweepSales, sweepStock, sweepExpiry, sweepRepl}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("scale", stderr)
	fs.StringVar(&o.serverDSN, "mysql", cli.EnvOr(getenv, "SECKILL_TEST_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/"), "the MySQL server, without a database")
	fs.StringVar(&o.db, "db", "seckill_scale", "the database to drop, create and fill")
	rows := fs.String("rows", "0,1000000,10000000", "volumes of the sweep: rows in each of reservations, orders and order_events, ascending")
	fs.IntVar(&o.sales, "sales", 100, "ended sales the volume is spread over (the same number at every volume: what grows is their rows)")
	fs.DurationVar(&o.settle, "settle", time.Minute, "after each fill, the longest wait for InnoDB to write back the pages the fill left dirty (to 5 % of its buffer pool)")
	fs.IntVar(&o.reps, "reps", 30, "calls of each operation at each volume")
	fs.StringVar(&o.outDir, "out", "loadtest/results", "where the report goes")
	fs.StringVar(&o.slowLogDir, "slow-log-dir", os.TempDir(), "where the server writes the run's slow log (the server's user must be able to write there)")
	sweeps := fs.String("sweeps", strings.Join(allSweeps, ","), "the sweeps to run, in order: data (the store's operations at each -rows; a database of its own), buyers (a sale of -buyer-stock units to each -buyers crowd through -target, per -buyer-strategies), sales (each -sales-open count of sales open at once: idle, then bought out), stock (a sale of each -stock-sizes to -stock-buyers buyers, per -buyer-strategies), expiries (each -expiries count of unpaid orders due at once) and replicas (the stack restarted with each -replicas count, a sale of -buyer-stock units to -replica-buyers buyers per -buyer-strategies); all but data need the stack of make up")
	buyers := fs.String("buyers", "10000,100000,1000000", "buyers sweep: the crowds, distinct buyers of one purchase each, ascending")
	fs.IntVar(&o.buyers.stock, "buyer-stock", 10_000, "buyers sweep: units of each sale")
	buyerStrategies := fs.String("buyer-strategies", sale.JoinStrategies(sale.StrategiesWhere(sale.OwnSafe), ","), "buyers sweep: the strategies, one sale each per crowd")
	fs.StringVar(&o.buyers.target, "target", "http://"+cli.EnvOr(getenv, "SECKILL_LB_ADDR", "127.0.0.1:8080"), "buyers and sales sweeps: the public entry the buyers go through (make up's nginx)")
	fs.StringVar(&o.buyers.admin, "admin", "http://127.0.0.1:8081", "buyers and sales sweeps: a replica's base URL, for the admin calls (nginx refuses them)")
	fs.IntVar(&o.buyers.workers, "buyer-workers", 256, "buyers sweep: purchases in flight")
	fs.StringVar(&o.buyers.mysqlDSN, "app-mysql-dsn", cli.EnvOr(getenv, "SECKILL_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/seckill"), "buyers and sales sweeps: the stack's database, for the audit")
	fs.StringVar(&o.open.token, "admin-token", cli.EnvOr(getenv, "SECKILL_ADMIN_TOKEN", "dev-admin-token"), "sales sweep: the admin bearer token (the buyers sweep's load test reads SECKILL_ADMIN_TOKEN)")
	fs.DurationVar(&o.buyers.timeout, "buyer-timeout", 15*time.Minute, "buyers sweep: the longest attack of one sale")
	stockSizes := fs.String("stock-sizes", "1000,100000,1000000,10000000", "stock sweep: the units of the sale, ascending")
	fs.IntVar(&o.stockCrowd, "stock-buyers", 20_000, "stock sweep: distinct buyers of one purchase each, on every sale")
	expiries := fs.String("expiries", "1000,10000,100000,1000000", "expiries sweep: the unpaid orders due at once, ascending")
	fs.IntVar(&o.expiries.probeRate, "expiry-probe-rate", 50, "expiries sweep: purchases a second of the probe on a sale of its own, before and during each drain")
	fs.DurationVar(&o.expiries.timeout, "expiry-timeout", 10*time.Minute, "expiries sweep: the longest wait for a crowd of due orders to be expired and returned")
	replicas := fs.String("replicas", "1,2,3,4", "replicas sweep: the counts of replicas the stack is restarted with, in turn (it gets its own count back at the end)")
	fs.IntVar(&o.replicas.buyers, "replica-buyers", 20_000, "replicas sweep: distinct buyers of each sale")
	fs.StringVar(&o.replicas.scripts, "scripts", "scripts", "replicas sweep: the directory of make up's up.sh and down.sh")
	salesOpen := fs.String("sales-open", "1,10,100,1000", "sales sweep: how many sales are open at once, each count in turn")
	fs.StringVar(&o.open.strategy, "sales-strategy", "mysql", "sales sweep: the strategy of every sale")
	fs.IntVar(&o.open.units, "sales-units", 10, "sales sweep: units of each sale (its buyers: twice as many)")
	fs.DurationVar(&o.open.idle, "sales-idle", 10*time.Second, "sales and replicas sweeps: how long the replicas' idle memory and CPU are measured (sales: with no sale and with each count open)")
	fs.DurationVar(&o.open.settle, "sales-settle", 6*time.Second, "sales sweep: how long after opening the sales their idle use is measured from (a board reads a sale that just opened every refresh for 5 s)")
	fs.IntVar(&o.open.workers, "sales-workers", 256, "sales sweep: purchases in flight")
	fs.StringVar(&o.open.pidDir, "pid-dir", ".run/pids", "sales sweep: where make up keeps its replicas' pid files")
	fs.DurationVar(&o.open.drain, "sales-drain", 2*time.Minute, "sales sweep: the longest wait for every sale's orders after its purchases")
	err := cli.ParseFlags(fs, args, func() error {
		o.sweeps = cli.SplitList(*sweeps)
		for _, s := range o.sweeps {
			if !slices.Contains(allSweeps, s) {
				return fmt.Errorf("-sweeps: %q is not one of %s", s, strings.Join(allSweeps, ", "))
			}
		}
		for _, s := range cli.SplitList(*stockSizes) {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil || n < 1 || n > sale.MaxStock {
				return fmt.Errorf("-stock-sizes: %q is not a stock (1 to %d)", s, sale.MaxStock)
			}
			o.stockSizes = append(o.stockSizes, n)
		}
		for _, s := range cli.SplitList(*expiries) {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil || n < 1 || n > sale.MaxStock {
				return fmt.Errorf("-expiries: %q is not a count of orders (1 to %d)", s, sale.MaxStock)
			}
			o.expiries.counts = append(o.expiries.counts, n)
		}
		if slices.Contains(o.sweeps, sweepExpiry) && (len(o.expiries.counts) == 0 || o.expiries.probeRate < 1 || o.expiries.timeout <= 0) {
			return errors.New("the expiries sweep needs -expiries, a positive -expiry-probe-rate and -expiry-timeout")
		}
		for _, s := range cli.SplitList(*replicas) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 9 {
				return fmt.Errorf("-replicas: %q is not a count of replicas (1 to 9: make up's ports 8081–8089)", s)
			}
			o.replicas.counts = append(o.replicas.counts, n)
		}
		if slices.Contains(o.sweeps, sweepStock) && (len(o.stockSizes) == 0 || o.stockCrowd < 1) {
			return errors.New("the stock sweep needs -stock-sizes and a positive -stock-buyers")
		}
		for _, s := range cli.SplitList(*salesOpen) {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil || n < 1 {
				return fmt.Errorf("-sales-open: %q is not a count of sales", s)
			}
			o.open.counts = append(o.open.counts, n)
		}
		if slices.Contains(o.sweeps, sweepSales) && (len(o.open.counts) == 0 || o.open.units < 1 || o.open.workers < 1 || o.open.idle <= 0) {
			return errors.New("the sales sweep needs -sales-open, a positive -sales-units, -sales-workers and -sales-idle")
		}
		o.open.target, o.open.admin, o.open.mysqlDSN = o.buyers.target, o.buyers.admin, o.buyers.mysqlDSN
		o.replicas.idle, o.replicas.pidDir = o.open.idle, o.open.pidDir
		o.expiries.target, o.expiries.admin, o.expiries.token, o.expiries.mysqlDSN, o.expiries.pidDir = o.buyers.target, o.buyers.admin, o.open.token, o.buyers.mysqlDSN, o.open.pidDir
		o.buyers.strategies = cli.SplitList(*buyerStrategies)
		for _, s := range cli.SplitList(*buyers) {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil || n < 1 {
				return fmt.Errorf("-buyers: %q is not a count of buyers", s)
			}
			o.buyers.counts = append(o.buyers.counts, n)
		}
		if slices.Contains(o.sweeps, sweepBuyers) && (len(o.buyers.counts) == 0 || len(o.buyers.strategies) == 0 || o.buyers.stock < 1 || o.buyers.workers < 1) {
			return errors.New("the buyers sweep needs -buyers, -buyer-strategies, a positive -buyer-stock and -buyer-workers")
		}
		if slices.Contains(o.sweeps, sweepRepl) && (len(o.replicas.counts) == 0 || o.replicas.buyers < 1 || len(o.buyers.strategies) == 0) {
			return errors.New("the replicas sweep needs -replicas, a positive -replica-buyers and -buyer-strategies")
		}
		if slices.Contains(o.sweeps, sweepStock) && (len(o.buyers.strategies) == 0 || o.buyers.workers < 1) {
			return errors.New("the stock sweep needs -buyer-strategies and a positive -buyer-workers")
		}
		for _, s := range cli.SplitList(*rows) {
			n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
			if err != nil || n < 0 {
				return fmt.Errorf("-rows: %q is not a count of rows", s)
			}
			if len(o.rows) > 0 && n <= o.rows[len(o.rows)-1] {
				return fmt.Errorf("-rows: %d after %d: the volumes must ascend (each fills on top of the last)", n, o.rows[len(o.rows)-1])
			}
			o.rows = append(o.rows, n)
		}
		switch {
		case len(o.rows) == 0:
			return errors.New("-rows: no volume")
		case o.sales < 1:
			return errors.New("-sales must be at least 1")
		case o.reps < 1:
			return errors.New("-reps must be at least 1")
		case o.db == "" || strings.ContainsAny(o.db, "`'\" ;"):
			return fmt.Errorf("-db %q: a plain database name", o.db)
		}
		return nil
	})
	return o, err
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	progress := cli.Progress(stdout)
	start := time.Now()
	rep := &runReport{}
	for _, sw := range o.sweeps {
		switch sw {
		case sweepData:
			if rep.Data, err = sweep(ctx, o, progress); err != nil {
				return err
			}
		case sweepBuyers:
			if rep.Buyers, err = runBuyers(ctx, o.buyers, getenv, stderr, progress); err != nil {
				return err
			}
		case sweepSales:
			if rep.Sales, err = runSales(ctx, o.open, progress); err != nil {
				return err
			}
		case sweepExpiry:
			if rep.Expiries, err = runExpiries(ctx, o.expiries, progress); err != nil {
				return err
			}
		case sweepRepl:
			if rep.Replicas, err = runReplicas(ctx, o.replicas, o.buyers, getenv, stderr, progress); err != nil {
				return err
			}
		case sweepStock:
			if rep.Stock, err = runStock(ctx, o.buyers, o.stockSizes, o.stockCrowd, getenv, stderr, progress); err != nil {
				return err
			}
		}
	}
	rep.Commit = cli.GitCommit(ctx)
	rep.Took = time.Since(start).Round(time.Second).String()
	base := "scale-" + start.Format("20060102-150405")
	md := rep.markdown()
	names, err := cli.WriteReport(o.outDir, base, rep, cli.Text{Ext: ".md", Body: md}, cli.Text{Ext: ".html", Body: rep.html(md)})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, md)
	progress("report: %s", strings.Join(names, ", "))
	if rep.Buyers != nil && !rep.Buyers.passed() {
		return cli.Failure("a sale of the buyers sweep did not PASS; see its verdicts")
	}
	if rep.Stock != nil && !rep.Stock.passed() {
		return cli.Failure("a sale of the stock sweep did not PASS; see its verdicts")
	}
	if rep.Expiries != nil && !rep.Expiries.passed() {
		return cli.Failure("a point of the expiries sweep did not PASS; see its verdicts")
	}
	if rep.Replicas != nil && !rep.Replicas.passed() {
		return cli.Failure("a sale of the replicas sweep did not PASS; see its verdicts")
	}
	if rep.Sales != nil && !rep.Sales.passed() {
		return cli.Failure("a point of the sales sweep did not PASS; see its verdicts")
	}
	return nil
}
