// Command scale measures how the cost of the store's hot operations grows with the data: the
// reservations, orders and order events of ended sales pre-filled to each volume of -rows (0, 1M,
// 10M by default, spread over 100 ended sales: filled with INSERT … SELECT from MariaDB's
// sequence tables, not through the API), and at each volume, on a live sale of its own, every operation that runs per request or
// per second — a purchase, the relay's claim, the consumer's order insert, a buyer's order read,
// the expirer's and returner's scans, the backlog gauges, the product list, the audits — called
// -reps times.
//
// Two figures per operation and volume: the median time of a call (the weather moves it), and the
// rows the server examined per call (it does not: MariaDB's slow log, on for this run's
// connections only, counts them and shows each statement's plan). An operation is flat when its
// rows examined do not grow with the volume; the report says which are not, and quotes the plan
// (EXPLAIN) of every statement at the largest volume.
//
// It works in its own database (seckill_scale, dropped and recreated), so it can run beside the
// local stack. It turns the server's slow log on (global, long_query_time untouched: only this
// run's sessions log everything) and back off at the end.
//
//	make scale                                     # 0, 1M and 10M rows (the fill takes minutes)
//	go run ./loadtest/scale -rows 0,20000 -reps 10 -settle 0s  # the short form of CI
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

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
}

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
	err := cli.ParseFlags(fs, args, func() error {
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
	rep, err := sweep(ctx, o, progress)
	if err != nil {
		return err
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
	return nil
}
