package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// An op is one operation measured: called reps times at each volume, the i-th call given i.
type op struct {
	name string
	// runs says when the app runs it: "per purchase", "per second", "per scrape"…
	runs string
	call func(ctx context.Context, i int) error
}

// sweep fills the database volume by volume and measures every op at each.
func sweep(ctx context.Context, o *options, progress func(string, ...any)) (*dataReport, error) {
	admin, err := sql.Open("mysql", o.serverDSN)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	admin.SetMaxOpenConns(1)
	for _, q := range []string{"DROP DATABASE IF EXISTS `" + o.db + "`", "CREATE DATABASE `" + o.db + "`"} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	dsn, err := withDB(o.serverDSN, o.db, nil)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.DiscardHandler)
	fill, err := store.Open(ctx, log, dsn, store.Options{MaxOpenConns: 4})
	if err != nil {
		return nil, err
	}
	defer fill.Close()
	if err := store.Migrate(ctx, log, fill.DB()); err != nil {
		return nil, err
	}

	slowLog := filepath.Join(o.slowLogDir, fmt.Sprintf("seckill-scale-%d.slow.log", os.Getpid()))
	restore, err := slowLogOn(ctx, admin, slowLog)
	if err != nil {
		return nil, err
	}
	defer restore()
	// The measured store: its sessions log every statement with its plan (long_query_time 0,
	// log_slow_verbosity explain, as session variables the driver sets on each connection).
	mdsn, err := withDB(o.serverDSN, o.db, map[string]string{"long_query_time": "0", "log_slow_verbosity": "'query_plan,explain'"})
	if err != nil {
		return nil, err
	}
	// A payment window longer than the run: the live sales' orders must not fall due while the
	// next volume fills, or the later volumes' scans would find them.
	st, err := store.Open(ctx, log, mdsn, store.Options{MaxOpenConns: 4, PaymentWindow: 24 * time.Hour})
	if err != nil {
		return nil, err
	}
	defer st.Close()

	rep := &dataReport{Reps: o.reps, Sales: o.sales, Volumes: o.rows}
	if err := admin.QueryRowContext(ctx, "SELECT @@innodb_buffer_pool_size DIV 1048576").Scan(&rep.BufferPoolMB); err != nil {
		return nil, err
	}
	firstSale, err := createSales(ctx, fill.DB(), o.sales)
	if err != nil {
		return nil, err
	}
	filled := 0
	for vi, volume := range o.rows {
		t0 := time.Now()
		if err := fillTo(ctx, fill.DB(), filled, volume, firstSale, o.sales); err != nil {
			return nil, fmt.Errorf("fill to %d rows: %w", volume, err)
		}
		filled = volume
		took := time.Since(t0)
		if err := settle(ctx, admin, o.settle); err != nil {
			return nil, err
		}
		progress("%d rows filled in %s, settled in %s", volume, took.Round(time.Millisecond), (time.Since(t0) - took).Round(time.Millisecond))
		rep.FillSeconds = append(rep.FillSeconds, took.Seconds())
		ops, err := liveOps(ctx, st, o.reps, vi)
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			d, err := measure(ctx, st, op, o.reps, volume)
			if err != nil {
				return nil, fmt.Errorf("%s at %d rows: %w", op.name, volume, err)
			}
			rep.add(op, vi, d)
		}
		progress("%d rows: %d operations measured", volume, len(ops))
	}
	entries, err := readSlowLog(slowLog, o.db)
	if err != nil {
		return nil, err
	}
	if err := rep.attribute(entries); err != nil {
		return nil, err
	}
	os.Remove(slowLog)
	return rep, nil
}

// withDB is the server DSN naming db, with extra session variables.
func withDB(serverDSN, db string, vars map[string]string) (string, error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return "", fmt.Errorf("-mysql: %w", err)
	}
	cfg.DBName = db
	if len(vars) > 0 && cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	for k, v := range vars {
		cfg.Params[k] = v
	}
	return cfg.FormatDSN(), nil
}

// slowLogOn points the server's slow log at path and turns it on, and returns what turns it back
// as it was. Sessions other than the measured store's keep their long_query_time (10 s by
// default): the log holds this run's statements and the others' very slow ones, which readSlowLog
// leaves out by their database.
func slowLogOn(ctx context.Context, admin *sql.DB, path string) (func(), error) {
	var wasOn int
	var wasFile string
	if err := admin.QueryRowContext(ctx, "SELECT @@global.slow_query_log, @@global.slow_query_log_file").Scan(&wasOn, &wasFile); err != nil {
		return nil, err
	}
	if _, err := admin.ExecContext(ctx, "SET GLOBAL slow_query_log_file = ?", path); err != nil {
		return nil, fmt.Errorf("slow log at %s: %w", path, err)
	}
	if _, err := admin.ExecContext(ctx, "SET GLOBAL slow_query_log = 1"); err != nil {
		return nil, fmt.Errorf("slow log on: %w", err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		admin.ExecContext(ctx, "SET GLOBAL slow_query_log = ?", wasOn)
		admin.ExecContext(ctx, "SET GLOBAL slow_query_log_file = ?", wasFile)
	}, nil
}

// fillChunk is how many rows of each table one INSERT … SELECT of the fill writes.
const fillChunk = 200_000

// createSales creates the n ended sales the fill spreads its rows over, one ended a day over the
// last 30 days, and returns the first one's id: they are consecutive.
func createSales(ctx context.Context, db *sql.DB, n int) (int64, error) {
	if _, err := db.ExecContext(ctx, `INSERT INTO products (name, price_cents, stock, initial_stock, strategy, sale_starts_at, sale_ends_at, per_user_limit, created_at, updated_at)
		SELECT CONCAT('ended sale ', seq), 100, 0, 0, 'mysql', NOW(6) - INTERVAL (seq % 30) DAY - INTERVAL 3 HOUR, NOW(6) - INTERVAL (seq % 30) DAY - INTERVAL 1 HOUR, 1,
			NOW(6) - INTERVAL (seq % 30) DAY - INTERVAL 3 HOUR, NOW(6) - INTERVAL (seq % 30) DAY - INTERVAL 1 HOUR FROM seq_0_to_`+strconv.Itoa(n-1)); err != nil {
		return 0, err
	}
	var first, last, count int64
	if err := db.QueryRowContext(ctx, "SELECT MIN(id), MAX(id), COUNT(*) FROM products").Scan(&first, &last, &count); err != nil {
		return 0, err
	}
	if count != int64(n) || last-first+1 != count {
		return 0, fmt.Errorf("the %d ended sales got ids %d–%d: not consecutive", n, first, last)
	}
	return first, nil
}

// fillTo grows reservations, orders and order_events from `from` rows each to `to`, spread over
// the ended sales (row k is sale k mod sales's, bought at its end): reservations published,
// orders three in four paid and one in four expired with their units returned, one event per
// order. That is what a shop holds after many sales, and none of it is due for anything.
func fillTo(ctx context.Context, db *sql.DB, from, to int, firstSale int64, sales int) error {
	for lo := from; lo < to; lo += fillChunk {
		hi := min(to, lo+fillChunk)
		var maxRes, maxOrder int64
		if err := db.QueryRowContext(ctx, "SELECT COALESCE((SELECT MAX(id) FROM reservations), 0), COALESCE((SELECT MAX(id) FROM orders), 0)").Scan(&maxRes, &maxOrder); err != nil {
			return err
		}
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{fmt.Sprintf(`INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at, published_at)
				SELECT CONCAT('f-', seq), ? + seq %% %[1]d, CONCAT('fu-', seq), 1, 'mysql', p.sale_ends_at, p.sale_ends_at
				FROM seq_%[2]d_to_%[3]d JOIN products p ON p.id = ? + seq %% %[1]d`, sales, lo, hi-1),
				[]any{firstSale, firstSale}},
			{`INSERT INTO orders (order_id, reservation_id, product_id, user_id, quantity, status, created_at, expires_at, paid_at, payment_id, closed_at, returned_at)
				SELECT r.order_id, r.id, r.product_id, r.user_id, 1, IF(r.id % 4 = 0, 'expired', 'paid'), r.created_at, r.created_at + INTERVAL 10 MINUTE,
					IF(r.id % 4 = 0, NULL, r.created_at + INTERVAL 1 MINUTE), IF(r.id % 4 = 0, NULL, CONCAT('pay-', r.id)),
					IF(r.id % 4 = 0, r.created_at + INTERVAL 10 MINUTE, NULL), IF(r.id % 4 = 0, r.created_at + INTERVAL 11 MINUTE, NULL)
				FROM reservations r WHERE r.id > ?`,
				[]any{maxRes}},
			{`INSERT INTO order_events (order_id, product_id, user_id, kind, quantity, created_at, published_at)
				SELECT o.order_id, o.product_id, o.user_id, IF(o.status = 'paid', 'order.paid', 'order.expired'), 1, o.created_at, o.created_at
				FROM orders o WHERE o.id > ?`,
				[]any{maxOrder}},
		} {
			if _, err := db.ExecContext(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// settle waits, up to max, until InnoDB has written back most of what the fill left dirty in
// its buffer pool, so that the measurements do not pay for the fill's writes.
func settle(ctx context.Context, db *sql.DB, max time.Duration) error {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		var name string
		var dirty, total float64
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_dirty'").Scan(&name, &dirty); err != nil {
			return err
		}
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_pages_total'").Scan(&name, &total); err != nil {
			return err
		}
		if dirty <= total/20 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return nil
}

// liveOps makes a live sale for volume index vi and returns the operations measured on it.
func liveOps(ctx context.Context, st *store.Store, reps, vi int) ([]op, error) {
	now := time.Now().UTC()
	p, err := st.CreateProduct(ctx, sale.NewProduct{Name: fmt.Sprintf("live sale %d", vi), PriceCents: 100, Stock: sale.MaxStock,
		Strategy: sale.StrategyMySQL, SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1, Listed: true}, now)
	if err != nil {
		return nil, err
	}
	mysqlStrategy, err := stock.NewMySQL(st)
	if err != nil {
		return nil, err
	}
	orderID := func(i int) string { return fmt.Sprintf("live-%d-%d", vi, i) }
	userID := func(i int) string { return fmt.Sprintf("buyer-%d-%d", vi, i) }
	var claimed []int64
	requeuedTo := time.Now().UTC().Add(-6 * time.Minute) // as if the relay had looked a minute ago
	return []op{
		{"purchase: reserve and deduct (mysql strategy, one buyer)", "per purchase", func(ctx context.Context, i int) error {
			return mysqlStrategy.Deduct(ctx, sale.Reservation{Receipt: sale.Receipt{OrderID: orderID(i), Status: sale.StatusQueued,
				ProductID: p.ID, UserID: userID(i), Quantity: 1, Strategy: sale.StrategyMySQL}, Epoch: p.Epoch, CreatedAt: time.Now().UTC()})
		}},
		{"relay: claim one outbox row", "per batch of the relay", func(ctx context.Context, i int) error {
			es, err := st.ClaimOutbox(ctx, "scale", time.Minute, 1)
			if err == nil && len(es) != 1 {
				err = fmt.Errorf("claimed %d rows, want 1", len(es))
			}
			if err == nil {
				claimed = append(claimed, es[0].ID)
			}
			return err
		}},
		{"relay: mark it published", "per batch of the relay", func(ctx context.Context, i int) error {
			return st.MarkPublished(ctx, claimed[i:i+1])
		}},
		{"consumer: create the order", "per order", func(ctx context.Context, i int) error {
			n, err := st.ConfirmOrders(ctx, []string{orderID(i)})
			if err == nil && n != 1 {
				err = fmt.Errorf("confirmed %d orders, want 1", n)
			}
			return err
		}},
		{"buyer reads an order", "per order page view", func(ctx context.Context, i int) error {
			_, err := st.BuyerOrder(ctx, orderID(i), userID(i))
			return err
		}},
		{"expirer: orders due", "per second", func(ctx context.Context, i int) error {
			_, err := st.ExpireDue(ctx, 100)
			return err
		}},
		{"returner: units not yet returned", "per second", func(ctx context.Context, i int) error {
			_, err := st.Unreturned(ctx, 100, 100, 0)
			return err
		}},
		{"units owed to the sales (gauge)", "per scrape", func(ctx context.Context, i int) error {
			_, err := st.UnreturnedUnits(ctx, []int64{p.ID, 1})
			return err
		}},
		{"checkout: orders due (ids)", "per second", func(ctx context.Context, i int) error {
			_, err := st.DueOrders(ctx, 100)
			return err
		}},
		{"relay safety net: its first look after a start (a day back)", "per relay start", func(ctx context.Context, i int) error {
			_, _, err := st.RequeueUnconfirmed(ctx, time.Time{}, 5*time.Minute, 24*time.Hour, 1000)
			return err
		}},
		{"relay safety net: each look after (from where the last ended)", "per relay every RequeueEvery (1 min)", func(ctx context.Context, i int) error {
			var err error
			_, requeuedTo, err = st.RequeueUnconfirmed(ctx, requeuedTo, 5*time.Minute, 24*time.Hour, 1000)
			return err
		}},
		{"payments stuck at the provider", "per minute", func(ctx context.Context, i int) error {
			_, err := st.StuckPayments(ctx, time.Minute, 100)
			return err
		}},
		{"outbox backlog gauge", "per scrape", func(ctx context.Context, i int) error {
			_, err := st.OutboxBacklog(ctx)
			return err
		}},
		{"event outbox backlog gauge", "per scrape", func(ctx context.Context, i int) error {
			_, err := st.EventBacklog(ctx)
			return err
		}},
		{"product list", "per change of the sales (reads are from memory)", func(ctx context.Context, i int) error {
			_, err := st.Products(ctx)
			return err
		}},
		{"keyed receipts of the live sale (a redis-lua rebuild)", "per rebuild", func(ctx context.Context, i int) error {
			_, err := st.KeyedReceipts(ctx, p.ID, 1000)
			return err
		}},
		{"running audit of the live sale (audit.Load)", "per sale per audit round", func(ctx context.Context, i int) error {
			_, err := audit.Load(ctx, st.DB(), p.ID)
			return err
		}},
		{"admin stats of the live sale (store.Stats)", "per admin request", func(ctx context.Context, i int) error {
			_, err := st.Stats(ctx, p.ID)
			return err
		}},
	}, nil
}

// measure runs op reps times between its marker and the end marker in the slow log and returns its calls' times.
func measure(ctx context.Context, st *store.Store, op op, reps, volume int) ([]time.Duration, error) {
	if _, err := st.DB().ExecContext(ctx, "SELECT ?", marker(op.name, volume)); err != nil {
		return nil, err
	}
	ds := make([]time.Duration, reps)
	for i := range reps {
		t0 := time.Now()
		if err := op.call(ctx, i); err != nil {
			return nil, err
		}
		ds[i] = time.Since(t0)
	}
	if _, err := st.DB().ExecContext(ctx, "SELECT ?", markerEnd); err != nil {
		return nil, err
	}
	return ds, nil
}

// marker is the statement text that opens an op's calls at a volume in the slow log.
func marker(name string, volume int) string { return markerPrefix + strconv.Itoa(volume) + "|" + name }

// The markers' texts: an op's calls start after its marker and end at markerEnd.
const (
	markerPrefix = "scale-op|"
	markerEnd    = "scale-end"
)
