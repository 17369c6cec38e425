package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/procstat"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// The expiries sweep: N unpaid orders falling due at once, for each N of -expiries. A mysql sale
// of N units is sold out in the database (N reservations, N orders awaiting payment, the stock
// taken: filled with INSERT … SELECT, not through the API, in chunks), every order then given
// one expiry (fillDue), so that all fall due at the same instant. Then the replicas' expirers and
// returners work through them: the time until every order is expired and every unit back in the
// stock, the rate, the replicas' CPU per thousand orders, and meanwhile the purchase path,
// probed at -expiry-probe-rate purchases a second on a sale of its own: its latency with nothing
// due (before the fill) and while the crowd of due orders drains. The audit then wants every unit
// back and every order expired once.

// expiriesOptions are the expiries sweep's flags.
type expiriesOptions struct {
	counts    []int
	target    string
	admin     string
	token     string
	mysqlDSN  string
	pidDir    string
	probeRate int
	timeout   time.Duration
}

// expiriesReport is the sweep: a point per count of orders.
type expiriesReport struct {
	ProbeRate int             `json:"probe_purchases_per_s"`
	Replicas  int             `json:"replicas"`
	Points    []expiriesPoint `json:"points"`
}

// expiriesPoint is N orders due at once.
type expiriesPoint struct {
	Orders int     `json:"orders"`
	FillS  float64 `json:"fill_s"`
	// LateS is how long after the moment they were all due the last orders' expiry was written
	// (0: every order was due at that moment).
	LateS float64 `json:"due_late_s,omitempty"`
	// ExpiredS is from the fill's commit until no order of the sale awaits payment; ReturnedS
	// until its stock is whole again.
	ExpiredS  float64 `json:"expired_s"`
	ReturnedS float64 `json:"returned_s"`
	PerS      float64 `json:"returned_per_s"`
	// CPUMSPer1k is the replicas' CPU (user + system) over the drain, per 1,000 orders.
	CPUMSPer1k float64 `json:"replica_cpu_ms_per_1k_orders"`
	// Base and Drain are the probe's purchases: before the fill, and during the drain.
	Base  probeFigures `json:"probe_before"`
	Drain probeFigures `json:"probe_during"`
	// ResetS is how long the admin's reset of the drained sale took (its end: every reservation,
	// order, event and tally of the sale deleted in one transaction); ResetErr its error, when it
	// did not finish (the sale is then ended in the database by hand). Not judged: it is the
	// admin's, measured for its curve.
	ResetS     float64  `json:"admin_reset_s"`
	ResetErr   string   `json:"admin_reset_error,omitempty"`
	Verdict    string   `json:"verdict"`
	Violations []string `json:"violations,omitempty"`
}

// probeFigures are the probe's purchases over a window.
type probeFigures struct {
	Sent      int     `json:"sent"`
	P50MS     float64 `json:"p50_ms"`
	P99MS     float64 `json:"p99_ms"`
	Status5xx int     `json:"status_5xx"`
}

// runExpiries runs every count of o.counts, smallest first.
func runExpiries(ctx context.Context, o expiriesOptions, say func(string, ...any)) (*expiriesReport, error) {
	pids, db, admin, err := openStack(ctx, "expiries", o.target, o.pidDir, o.mysqlDSN, o.admin, o.token)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	run := time.Now().UTC().Format("150405")
	// The probe's sale: big enough for every purchase of the sweep.
	probeIDs, err := openSales(ctx, admin, "expiries-probe-"+run, 1, "mysql", 10_000_000)
	if err != nil {
		return nil, err
	}
	defer func() { _ = endSales(context.WithoutCancel(ctx), admin, probeIDs, "mysql", 10_000_000) }()
	probe := &prober{target: o.target, sale: probeIDs[0], rate: o.probeRate, user: "xp" + run}
	rep := &expiriesReport{ProbeRate: o.probeRate, Replicas: len(pids)}
	for _, n := range o.counts {
		p := expiriesPoint{Orders: n}
		ids, err := openSales(ctx, admin, fmt.Sprintf("expiries-%s-%d", run, n), 1, "mysql", n)
		if err != nil {
			return nil, err
		}
		id := ids[0]
		say("expiries: %d orders: the probe alone for 3 s", n)
		if p.Base, err = probe.during(ctx, func(ctx context.Context) error { return sleep(ctx, 3*time.Second) }); err != nil {
			return nil, err
		}
		say("expiries: filling sale %d with %d orders due at once", id, n)
		t0 := time.Now()
		due, late, err := fillDue(ctx, db, id, n, fmt.Sprintf("x%s-%d", run, n))
		if err != nil {
			return nil, fmt.Errorf("fill %d due orders: %w", n, err)
		}
		p.FillS, p.LateS = due.Sub(t0).Seconds(), late.Seconds()
		cpu0, err := procstat.CPU(pids)
		if err != nil {
			return nil, err
		}
		var expired, returned time.Duration
		p.Drain, err = probe.during(ctx, func(ctx context.Context) (werr error) {
			expired, returned, werr = waitReturned(ctx, db, id, n, o.timeout)
			return werr
		})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		cpu1, cerr := procstat.CPU(pids)
		if cerr != nil {
			return nil, cerr
		}
		p.ExpiredS, p.ReturnedS = expired.Seconds(), returned.Seconds()
		if returned > 0 {
			p.PerS = float64(n) / returned.Seconds()
			p.CPUMSPer1k = float64((cpu1 - cpu0).Milliseconds()) * 1000 / float64(n)
		} else {
			p.Violations = append(p.Violations, fmt.Sprintf("not every unit back within %s", o.timeout))
		}
		p.Violations = append(p.Violations, auditExpired(ctx, db, id, n)...)
		if k := p.Base.Status5xx + p.Drain.Status5xx; k > 0 {
			p.Violations = append(p.Violations, fmt.Sprintf("%d probe purchases answered 5xx", k))
		}
		p.Verdict = "PASS"
		if len(p.Violations) > 0 {
			p.Verdict = "FAIL"
		}
		say("expiries: %d orders: %s, expired in %.1f s, returned in %.1f s (%.0f/s), probe p99 %.0f → %.0f ms %s",
			n, p.Verdict, p.ExpiredS, p.ReturnedS, p.PerS, p.Base.P99MS, p.Drain.P99MS, strings.Join(p.Violations, "; "))
		resetStart := time.Now()
		rerr := endSales(ctx, admin, ids, "mysql", n)
		p.ResetS = time.Since(resetStart).Seconds()
		if rerr != nil {
			p.ResetErr = rerr.Error()
			say("expiries: the admin's reset of the sale of %d orders failed after %.1f s (%v); ending it in the database", n, p.ResetS, rerr)
			if err := endInDatabase(ctx, db, ids); err != nil {
				return nil, err
			}
		}
		rep.Points = append(rep.Points, p)
	}
	return rep, nil
}

// endInDatabase ends the sales of ids by moving their window into the past, without the admin's
// reset (which deletes their rows in one transaction, and may not finish for a large one).
func endInDatabase(ctx context.Context, db *sql.DB, ids []int64) error {
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, `UPDATE products SET sale_starts_at = UTC_TIMESTAMP() - INTERVAL 2 MINUTE,
			sale_ends_at = UTC_TIMESTAMP() - INTERVAL 1 MINUTE, updated_at = UTC_TIMESTAMP(6) WHERE id = ?`, id); err != nil {
			return fmt.Errorf("end sale %d in the database: %w", id, err)
		}
	}
	return nil
}

// fillChunkDue is how many orders one transaction of fillDue writes: a transaction of a million
// rows, with the expirers' SKIP LOCKED scans running into its rows, filled this machine's InnoDB
// buffer pool (128 MB) with lock structures, and MariaDB aborted.
const fillChunkDue = 10_000

// neverDue is an expiry no order of the fill reaches before fillDue sets the real one.
var neverDue = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)

// fillDue sells out product id (n units, no sale yet) in the database: n reservations,
// published, and n orders of one unit each awaiting payment, the stock taken, chunk by chunk,
// each chunk consistent on its own (the running audit may look in between). The orders are
// written not due, then all given one expiry, a moment after the last of those writes should be
// done (as long again as half the inserts took): it returns that moment, when every order is due
// at once, having waited for it. late is how long after it the last order's expiry was written,
// if the writes took longer than that (its orders were due at their commit, a moment after the
// others).
func fillDue(ctx context.Context, db *sql.DB, id int64, n int, prefix string) (due time.Time, late time.Duration, err error) {
	start := time.Now()
	for lo := 1; lo <= n; lo += fillChunkDue {
		if err := fillDueChunk(ctx, db, id, lo, min(n, lo+fillChunkDue-1), prefix); err != nil {
			return time.Time{}, 0, err
		}
	}
	var first, last int64
	if err := db.QueryRowContext(ctx, "SELECT MIN(id), MAX(id) FROM orders WHERE product_id = ?", id).Scan(&first, &last); err != nil {
		return time.Time{}, 0, err
	}
	// The moment, as the server's clock says it (the expirers compare with its NOW(6)).
	ahead := time.Since(start)/2 + 2*time.Second
	var at string
	if err := db.QueryRowContext(ctx, "SELECT DATE_FORMAT(NOW(6) + INTERVAL ? MICROSECOND, '%Y-%m-%d %H:%i:%s.%f')", ahead.Microseconds()).Scan(&at); err != nil {
		return time.Time{}, 0, err
	}
	due = time.Now().Add(ahead)
	for lo := first; lo <= last; lo += fillChunkDue {
		if _, err := db.ExecContext(ctx, "UPDATE orders SET expires_at = ? WHERE product_id = ? AND id BETWEEN ? AND ? AND expires_at = ?",
			at, id, lo, min(last, lo+fillChunkDue-1), neverDue.Format("2006-01-02 15:04:05")); err != nil {
			return time.Time{}, 0, err
		}
	}
	if late = time.Since(due); late < 0 {
		late = 0
		if err := sleep(ctx, time.Until(due)); err != nil {
			return time.Time{}, 0, err
		}
	}
	return due, late, nil
}

// fillDueChunk writes the reservations and orders lo..hi of fillDue, and takes their units.
func fillDueChunk(ctx context.Context, db *sql.DB, id int64, lo, hi int, prefix string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var maxRes int64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM reservations").Scan(&maxRes); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at, published_at)
		SELECT CONCAT(?, '-', seq), ?, CONCAT(?, '-u', seq), 1, 'mysql', NOW(6), NOW(6) FROM seq_%d_to_%d`, lo, hi), prefix, id, prefix); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (order_id, reservation_id, product_id, user_id, quantity, status, created_at, expires_at)
		SELECT r.order_id, r.id, r.product_id, r.user_id, 1, 'confirmed', r.created_at, ?
		FROM reservations r WHERE r.id > ? AND r.product_id = ?`, neverDue.Format("2006-01-02 15:04:05"), maxRes, id); err != nil {
		return err
	}
	k := hi - lo + 1
	res, err := tx.ExecContext(ctx, "UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?", k, id, k)
	if err != nil {
		return err
	}
	if m, err := res.RowsAffected(); err != nil || m != 1 {
		return fmt.Errorf("take %d units of sale %d: %d rows, %v (is its stock still what the fill gave it?)", k, id, m, err)
	}
	return tx.Commit()
}

// waitReturned polls sale id until none of its orders awaits payment (expired) and its stock is n
// again (returned), both from now, or timeout passes.
func waitReturned(ctx context.Context, db *sql.DB, id int64, n int, timeout time.Duration) (expired, returned time.Duration, err error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if expired == 0 {
			var waiting int
			// ix_orders_due: the due orders, the sale's first.
			err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM orders WHERE status = 'confirmed' AND expires_at <= NOW(6) AND product_id = ?)`, id).Scan(&waiting)
			if err != nil {
				return expired, 0, err
			}
			if waiting == 0 {
				expired = time.Since(start)
			}
		}
		var stock int
		if err := db.QueryRowContext(ctx, "SELECT stock FROM products WHERE id = ?", id).Scan(&stock); err != nil {
			return expired, 0, err
		}
		if expired > 0 && stock == n {
			return expired, time.Since(start), nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return expired, 0, err
		}
	}
}

// auditExpired audits sale id after its n orders expired: every unit back, every order closed
// and returned once, nothing oversold.
func auditExpired(ctx context.Context, db *sql.DB, id int64, n int) []string {
	f, err := audit.Load(ctx, db, id)
	if err != nil {
		return []string{err.Error()}
	}
	v := f.Violations(true)
	if f.Stock != n || f.ClosedUnits != n || f.ReturnedUnits != n || f.Orders != n {
		v = append(v, fmt.Sprintf("stock %d, %d orders, %d units closed, %d returned: want %d of each", f.Stock, f.Orders, f.ClosedUnits, f.ReturnedUnits, n))
	}
	return v
}

// prober buys on its sale at rate purchases a second, a new buyer each, while asked to.
type prober struct {
	target string
	sale   int64
	rate   int
	user   string
	next   int
}

// during probes while f runs, and returns the figures of the purchases sent meanwhile.
func (p *prober) during(ctx context.Context, f func(context.Context) error) (probeFigures, error) {
	url, err := client.PurchaseURL(p.target, p.sale)
	if err != nil {
		return probeFigures{}, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		fig       probeFigures
		wg        sync.WaitGroup
	)
	stop := make(chan struct{})
	tick := time.NewTicker(time.Second / time.Duration(max(p.rate, 1)))
	defer tick.Stop()
	go func() {
		one := 1
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			p.next++
			user := fmt.Sprintf("%s-%d", p.user, p.next)
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, err := client.NewLeanPurchase(ctx, url, client.PurchaseParams{}, client.PurchaseRequest{UserID: &user, Quantity: &one})
				if err != nil {
					return
				}
				sent := time.Now()
				rsp, err := hc.Do(req)
				status := 0
				if err == nil {
					status = rsp.StatusCode
					_, _ = client.ReadPurchaseAnswer(rsp)
				}
				mu.Lock()
				defer mu.Unlock()
				latencies = append(latencies, time.Since(sent))
				fig.Sent++
				if status == 0 || status >= 500 {
					fig.Status5xx++
				}
			}()
		}
	}()
	err = f(ctx)
	close(stop)
	wg.Wait()
	pc := yardstick.Percentiles(latencies)
	fig.P50MS, fig.P99MS = pc.P50, pc.P99
	return fig, err
}

// passed reports whether every point PASSed.
func (r *expiriesReport) passed() bool {
	return !slices.ContainsFunc(r.Points, func(p expiriesPoint) bool { return p.Verdict != "PASS" })
}

func (r *expiriesReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the cost grows with the payment expiries due at once\n\nA mysql sale sold out in the database (in transactions of %s orders), its orders all given one expiry, due at once; the %d replicas' expirers and returners drain them while a probe buys on another sale at %d purchases/s. Fill: until that instant.\n\n", count(fillChunkDue), r.Replicas, r.ProbeRate)
	b.WriteString("| orders due | verdict | fill (s) | all expired (s) | all units back (s) | returned/s | replicas' CPU per 1k orders (ms) | probe p50 · p99 before (ms) | probe p50 · p99 during (ms) | admin reset of the sale after (s) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		verdict := verdictText(p.Verdict, p.Violations)
		reset := fmt.Sprintf("%.2f", p.ResetS)
		if p.ResetErr != "" {
			reset = fmt.Sprintf("failed after %.1f", p.ResetS)
		}
		fmt.Fprintf(b, "| %s | %s | %.1f | %.2f | %.2f | %.0f | %.0f | %.1f · %.1f | %.1f · %.1f | %s |\n", count(float64(p.Orders)), verdict,
			p.FillS, p.ExpiredS, p.ReturnedS, p.PerS, p.CPUMSPer1k, p.Base.P50MS, p.Base.P99MS, p.Drain.P50MS, p.Drain.P99MS, reset)
	}
	b.WriteString("\n")
}

func (r *expiriesReport) html(b *strings.Builder) {
	xs := make([]string, len(r.Points))
	for i, p := range r.Points {
		xs[i] = count(float64(p.Orders)) + " due"
	}
	line := func(name string, y func(expiriesPoint) float64) series {
		s := series{name: name}
		for _, p := range r.Points {
			s.ys = append(s.ys, y(p))
		}
		return s
	}
	chart(b, "Orders expired and returned per second", xs, []series{line("returned/s", func(p expiriesPoint) float64 { return p.PerS })})
	chart(b, "Replicas' CPU per 1,000 orders (ms)", xs, []series{line("CPU", func(p expiriesPoint) float64 { return p.CPUMSPer1k })})
	if !slices.ContainsFunc(r.Points, func(p expiriesPoint) bool { return p.ResetS <= 0 }) {
		chart(b, "The admin's reset of the drained sale (s)", xs, []series{line("reset", func(p expiriesPoint) float64 { return p.ResetS })})
	}
	chart(b, "The probe's purchase p99 (ms)", xs, []series{
		line("before", func(p expiriesPoint) float64 { return p.Base.P99MS }),
		line("during the drain", func(p expiriesPoint) float64 { return p.Drain.P99MS }),
	})
}
