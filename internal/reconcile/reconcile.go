// Package reconcile runs the audit's checks continuously on the live sales: every interval it
// loads a bounded number of them from MySQL (audit.Load: one consistent snapshot per sale, plain
// SQL, none of the sale code) and reports each broken invariant, so that an oversold or drifting
// sale raises an alert while the sale is on, not when someone runs the load test's audit.
//
// Only the invariants that hold at every committed instant are checked (audit's Violations with
// drained false): a purchase's reservation and its stock deduction commit together, and so do an
// order's return and its units going back, whatever the strategy. That a reservation has become
// an order is not checked: the order queue may be behind by design.
//
// The cost is off the purchase path and bounded: at most PerRun sales a run, each a handful of
// indexed aggregate queries over that sale's rows, in a read-only transaction. Half of a run goes
// to the sales created or reset most recently (a flash sale's busy ones: each is checked within a
// run of its start), the other half to all the live sales in turn, so a thousand live sales are
// all seen within ⌈1000 / (PerRun/2)⌉ runs.
package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/audit"
)

// Sale is one sale to check.
type Sale struct {
	ProductID int64
	Strategy  string
	// since is when the sale was created or last reset: the newest are checked first.
	since time.Time
}

// Finding is what one check of one sale found: the violations in words (none: sound) and the
// units oversold.
type Finding struct {
	Sale       Sale
	Violations []string
	Oversold   int
}

// Recorder takes the findings of each run (metrics.Reconcile).
type Recorder interface {
	// Checked is one sale's check: the invariants it breaks (0: sound) and its units oversold.
	Checked(productID int64, strategy string, violations, oversold int)
	// Live says which sales are live after a run: the figures of any other may be dropped.
	Live(productIDs []int64)
	// Ran is the end of a run: how long it took, and whether it failed.
	Ran(took time.Duration, failed bool)
}

// Options tune the loop.
type Options struct {
	// Every is the interval between runs.
	Every time.Duration
	// PerRun is the most sales checked in one run (default 32).
	PerRun int
	// EndedFor keeps a sale checked this long after it ended (default 10 minutes): its last
	// orders are still being paid, expired and returned.
	EndedFor time.Duration
	// StatementLimit bounds each statement of a sale's check (default 5 s; MariaDB's
	// max_statement_time): a check reads one consistent snapshot of the sale's rows, and a sale
	// of a million orders, under load, held one for 36 s, in which InnoDB purged nothing and
	// every scan of the tables the sale's expirers and relays walked grew slower. A sale whose
	// check runs out of time is skipped (logged, counted as unchecked), not failed.
	StatementLimit time.Duration
	Log            *slog.Logger
	Now            func() time.Time
}

// Loop is the reconciliation of one process.
type Loop struct {
	db   *sql.DB
	rec  Recorder
	o    Options
	next int64 // the product id to start the next run from: the sales are taken in turn
}

// New makes a loop over db reporting to rec.
func New(db *sql.DB, rec Recorder, o Options) (*Loop, error) {
	if db == nil || rec == nil {
		return nil, errors.New("reconcile: a database and a recorder are needed")
	}
	if o.Every <= 0 {
		return nil, fmt.Errorf("reconcile: interval %s: must be positive", o.Every)
	}
	if o.PerRun <= 0 {
		o.PerRun = 32
	}
	if o.EndedFor <= 0 {
		o.EndedFor = 10 * time.Minute
	}
	if o.StatementLimit <= 0 {
		o.StatementLimit = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Loop{db: db, rec: rec, o: o}, nil
}

// Run checks every Every until ctx ends.
func (l *Loop) Run(ctx context.Context) error {
	t := time.NewTicker(l.o.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			l.Once(ctx)
		}
	}
}

// Once runs one round: the live sales, and up to PerRun of them checked, from where the last
// round stopped. Its findings go to the recorder; a violation is logged too.
func (l *Loop) Once(ctx context.Context) []Finding {
	began := time.Now()
	live, err := l.live(ctx)
	var found []Finding
	if err == nil {
		found, err = l.check(ctx, l.turn(live))
	}
	if ctx.Err() != nil {
		return found // shutting down: a run cut short is no finding
	}
	for _, f := range found {
		if len(f.Violations) > 0 {
			l.o.Log.Error("reconcile: a sale breaks the audit's invariants", "product", f.Sale.ProductID,
				"strategy", f.Sale.Strategy, "oversold", f.Oversold, "violations", f.Violations)
		}
	}
	if err != nil {
		l.o.Log.Warn("reconcile: run failed", "err", err)
	}
	for _, f := range found {
		l.rec.Checked(f.Sale.ProductID, f.Sale.Strategy, len(f.Violations), f.Oversold)
	}
	if err == nil {
		ids := make([]int64, len(live))
		for i, s := range live {
			ids[i] = s.ProductID
		}
		l.rec.Live(ids)
	}
	l.rec.Ran(time.Since(began), err != nil)
	return found
}

// live lists the sales on now, or ended within EndedFor, in id order.
func (l *Loop) live(ctx context.Context) ([]Sale, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, strategy, updated_at FROM products WHERE sale_ends_at > ? ORDER BY id`,
		l.o.Now().Add(-l.o.EndedFor).UTC())
	if err != nil {
		return nil, fmt.Errorf("reconcile: live sales: %w", err)
	}
	defer rows.Close()
	var out []Sale
	for rows.Next() {
		var s Sale
		if err := rows.Scan(&s.ProductID, &s.Strategy, &s.since); err != nil {
			return nil, fmt.Errorf("reconcile: live sales: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reconcile: live sales: %w", err)
	}
	return out, nil
}

// turn picks this run's sales out of live (in id order): the PerRun/2 newest (created or reset
// last), then, from the first id at or after l.next and wrapping around, as many others as fill
// PerRun; l.next moves past the last of those.
func (l *Loop) turn(live []Sale) []Sale {
	if len(live) <= l.o.PerRun {
		return live
	}
	newest := slices.Clone(live)
	slices.SortStableFunc(newest, func(a, b Sale) int { return b.since.Compare(a.since) })
	picked := slices.Clone(newest[:l.o.PerRun/2])
	taken := map[int64]bool{}
	for _, s := range picked {
		taken[s.ProductID] = true
	}
	start := 0
	for start < len(live) && live[start].ProductID < l.next {
		start++
	}
	for i := 0; i < len(live) && len(picked) < l.o.PerRun; i++ {
		s := live[(start+i)%len(live)]
		if !taken[s.ProductID] {
			picked = append(picked, s)
			l.next = s.ProductID + 1
		}
	}
	return picked
}

// check audits each sale, each on a connection of its own whose statements are bounded by
// StatementLimit.
func (l *Loop) check(ctx context.Context, sales []Sale) ([]Finding, error) {
	found := make([]Finding, 0, len(sales))
	var errs []error
	for _, s := range sales {
		f, err := l.load(ctx, s.ProductID)
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == errStatementTimeout:
			l.o.Log.Warn("reconcile: a sale too large to check within the bound; skipped", "product", s.ProductID,
				"strategy", s.Strategy, "statement_limit", l.o.StatementLimit)
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		found = append(found, Finding{Sale: s, Violations: f.Violations(false), Oversold: f.Oversold()})
	}
	return found, errors.Join(errs...)
}

// errStatementTimeout is MariaDB's ER_STATEMENT_TIMEOUT: max_statement_time ran out.
const errStatementTimeout = 1969

// load is audit.Load on a connection whose session bounds each statement by StatementLimit (a
// server that does not know max_statement_time, MySQL's, runs it unbounded).
func (l *Loop) load(ctx context.Context, productID int64) (audit.Facts, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return audit.Facts{}, fmt.Errorf("reconcile: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION max_statement_time = ?", l.o.StatementLimit.Seconds()); err == nil {
		// The connection goes back to the pool as it came.
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION max_statement_time = DEFAULT")
		}()
	}
	return audit.Load(ctx, conn, productID)
}
