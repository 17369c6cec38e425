// Command loadtest is seckill-go's proof under load. For each strategy it puts a fresh product on
// sale through the admin API, sends many more buyers than units at several replicas at once
// (vegeta as a library), and then decides from evidence — the answers the buyers got and the
// database read with plain SQL — that no unit was oversold, none was lost, no buyer got more
// than the limit and every retry got its first answer. It measures this machine's own limits in
// the same run (R, one hot row's commit rate without the app, and the bare gin ceiling of the
// HTTP layer: see loadtest/internal/yardstick) and divides by them, and reports Markdown, JSON and
// an HTML page with charts.
//
// Exit status: 0 when every safe strategy passed (and the `none` control, if run, oversold as it
// must), 1 when an invariant broke, 2 on a usage or setup error.
//
//	go run ./loadtest                                   # mysql, redis, zk over the 3 local replicas
//	go run ./loadtest -strategies none                  # the negative control (server: SECKILL_ALLOW_UNSAFE_STRATEGIES=true)
//	go run ./loadtest -chaos kill                       # SIGKILL a replica mid-attack, restart it
//	go run ./loadtest -pay 0.5 -stock 100 -buyers 1000  # the payment phase (quick with SECKILL_PAYMENT_WINDOW=10s make up)
//	go run ./loadtest -faults all -targets http://127.0.0.1:8080   # the fault run of make chaos
//	go run ./loadtest -audit-only -product-id 7         # only the database audit (used by make k6)
//	go run ./loadtest -waiting-room -strategies mysql,none   # fairness behind a waiting room: FIFO and shuffled pre-queue, honest buyers and bots
//	go run ./loadtest -strategies mysql -workers 256 -viewers 0,250,1000              # the watched stampede, polling through nginx
//	go run ./loadtest -strategies mysql -workers 256 -viewers 0,5000 -view stream     # the same, 5,000 streams over the replicas
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/fairness"
	"github.com/seckill-go/seckill-go/loadtest/internal/faults"
	"github.com/seckill-go/seckill-go/loadtest/internal/proof"
	"github.com/seckill-go/seckill-go/loadtest/internal/zoo"
)

func main() {
	cli.Main("loadtest", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout) })
}

// mode is which run the command line asks for: the flag that names it selects the flags it
// takes, so that each mode parses only its own (and refuses another's).
type mode int

const (
	modeRun mode = iota
	modeFaults
	modeZoo
	modeAudit
	modeWaitingRoom
)

// modeOf finds the mode's flag in args: -faults with a list, -zoo, -audit-only, -waiting-room;
// else the load test proper.
func modeOf(args []string) mode {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "zoo" && (!hasVal || val == "true"):
			return modeZoo
		case name == "audit-only" && (!hasVal || val == "true"):
			return modeAudit
		case name == "waiting-room" && (!hasVal || val == "true"):
			return modeWaitingRoom
		case name == "faults" && hasVal && val != "":
			return modeFaults
		case name == "faults" && !hasVal && i+1 < len(args) && args[i+1] != "":
			return modeFaults
		}
	}
	return modeRun
}

// run parses the command line of the mode it names and runs that mode.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	switch modeOf(args) {
	case modeFaults:
		o, err := faults.Parse(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.MysqlDSN, func(db *sql.DB) error { return faultRun(ctx, db, o, stdout) })
	case modeZoo:
		o, err := zoo.Parse(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.MysqlDSN, func(db *sql.DB) error { return zooRun(ctx, db, o, stdout) })
	case modeAudit:
		o, err := attack.ParseAudit(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.MysqlDSN, func(db *sql.DB) error { return attack.AuditOnly(ctx, db, o, stdout) })
	case modeWaitingRoom:
		o, err := fairness.Parse(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.MysqlDSN, func(db *sql.DB) error { return roomRun(ctx, db, o, stdout) })
	}
	o, err := proof.Parse(args, getenv, os.Stderr)
	if err != nil {
		return err
	}
	return withDB(o.MysqlDSN, func(db *sql.DB) error { return loadRun(ctx, db, o, stdout) })
}

// withDB opens the app's database for fn and closes it after.
func withDB(dsn string, fn func(*sql.DB) error) error {
	db, err := attack.OpenDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db)
}

// loadRun is the load test proper: the attacks, their report, and exit status 1 if an invariant
// broke.
func loadRun(ctx context.Context, db *sql.DB, o *proof.Options, stdout io.Writer) error {
	rep, err := proof.Run(ctx, db, o, progress(stdout, o.Quiet))
	if err != nil {
		return err
	}
	return report(stdout, o.OutDir, proof.Markdown(rep), func() ([]string, error) { return proof.WriteReport(o.OutDir, rep) },
		rep.Passed, "invariants broken; see the verdicts above")
}

// faultRun is run for -faults: the steps, their report, and exit status 1 if one failed.
func faultRun(ctx context.Context, db *sql.DB, o *faults.Options, stdout io.Writer) error {
	rep, err := faults.Run(ctx, db, o, progress(stdout, o.Quiet))
	if err != nil {
		return err
	}
	return report(stdout, o.OutDir, faults.Markdown(rep), func() ([]string, error) { return faults.WriteReport(o.OutDir, rep) },
		rep.Passed, "a fault broke an invariant or a promise; see the verdicts above")
}

// zooRun is run for -zoo: the matrix, its report, and exit status 1 if a cell is not what the
// write-ups say it should be.
func zooRun(ctx context.Context, db *sql.DB, o *zoo.Options, stdout io.Writer) error {
	rep, err := zoo.Run(ctx, db, o, progress(stdout, o.Quiet))
	if err != nil {
		return err
	}
	return report(stdout, o.OutDir, zoo.Markdown(rep), func() ([]string, error) { return zoo.WriteReport(o.OutDir, rep) },
		rep.Passed, "a strategy did not behave as the write-ups say; see the matrix")
}

// roomRun is run for -waiting-room: the sales behind the room, their report, and exit status 1
// if an audit or a room check failed.
func roomRun(ctx context.Context, db *sql.DB, o *fairness.Options, stdout io.Writer) error {
	rep, err := fairness.Run(ctx, db, o, progress(stdout, o.Quiet))
	if err != nil {
		return err
	}
	return report(stdout, o.OutDir, fairness.Markdown(rep), func() ([]string, error) { return fairness.WriteReport(o.OutDir, rep) },
		rep.Passed, "the waiting room broke a promise or an invariant; see the verdicts above")
}

// report prints a run's Markdown, writes its files when there is an outDir, and returns the
// run's failure (exit status 1) when it did not pass.
func report(stdout io.Writer, outDir, markdown string, write func() ([]string, error), passed bool, failure string) error {
	fmt.Fprint(stdout, markdown)
	if outDir != "" {
		files, err := write()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	}
	if !passed {
		return cli.Failure(failure)
	}
	return nil
}

// progress returns a printf for progress lines (to stdout, before the report).
func progress(w io.Writer, quiet bool) func(format string, args ...any) {
	if quiet {
		return func(string, ...any) {}
	}
	return cli.Progress(w)
}
