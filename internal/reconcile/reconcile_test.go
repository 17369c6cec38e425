package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/reconcile"
)

// recorder keeps what the loop reported.
type recorder struct {
	mu      sync.Mutex
	checked map[int64][]int // product → violations of each check, in order
	over    map[int64]int   // product → units oversold at its last check
	live    []int64
	runs    int
	failed  int
}

func (r *recorder) Checked(id int64, _ string, violations, oversold int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checked[id] = append(r.checked[id], violations)
	r.over[id] = oversold
}

func (r *recorder) Live(ids []int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live = slices.Clone(ids)
}

func (r *recorder) Ran(_ time.Duration, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	if failed {
		r.failed++
	}
}

func product(t *testing.T, db *sql.DB, name string, stock int, ends string) int64 {
	t.Helper()
	res, err := db.ExecContext(t.Context(), `INSERT INTO products
		(name, price_cents, stock, initial_stock, strategy, sale_starts_at, sale_ends_at, per_user_limit, created_at, updated_at)
		VALUES (?, 100, ?, ?, 'mysql', NOW(6) - INTERVAL 2 DAY, `+ends+`, 1, NOW(6), NOW(6))`, name, stock, stock)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// reserve records a purchase of one unit as the purchase path does: the reservation and the
// stock deduction in one transaction, unless takeStock is false (a planted drift).
func reserve(t *testing.T, db *sql.DB, id int64, user string, takeStock bool) {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(t.Context(), `INSERT INTO reservations (order_id, product_id, user_id, idem_key, quantity, strategy, created_at)
		VALUES (?, ?, ?, ?, 1, 'mysql', NOW(6))`, fmt.Sprintf("o-%d-%s", id, user), id, user, "k-"+user); err != nil {
		t.Fatal(err)
	}
	if takeStock {
		if _, err := tx.ExecContext(t.Context(), `UPDATE products SET stock = stock - 1 WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestReconcileReportsDrift: sound sales are reported sound, every live sale is checked in turn
// (two a run of three), an ended one is not; a drift planted by hand in the database (a unit
// taken from the stock with no reservation; a reservation with no unit taken, which oversells)
// is reported within two runs, and only for its sale.
func TestReconcileReportsDrift(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	db := st.DB()
	a := product(t, db, "a", 5, "NOW(6) + INTERVAL 1 HOUR")
	b := product(t, db, "b", 1, "NOW(6) + INTERVAL 1 HOUR")
	c := product(t, db, "c", 3, "NOW(6) + INTERVAL 1 YEAR")
	ended := product(t, db, "ended", 3, "NOW(6) - INTERVAL 1 DAY")
	reserve(t, db, a, "alice", true)
	reserve(t, db, b, "bob", true)

	rec := &recorder{checked: map[int64][]int{}, over: map[int64]int{}}
	loop, err := reconcile.New(db, rec, reconcile.Options{Every: time.Hour, PerRun: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		for _, f := range loop.Once(ctx) {
			if len(f.Violations) > 0 {
				t.Fatalf("a sound sale reported: %+v", f)
			}
		}
	}
	if !slices.Equal(rec.live, []int64{a, b, c}) || rec.runs != 2 || rec.failed != 0 {
		t.Fatalf("live %v after %d runs (%d failed), want [%d %d %d] after 2", rec.live, rec.runs, rec.failed, a, b, c)
	}
	for _, id := range []int64{a, b, c} {
		if len(rec.checked[id]) == 0 {
			t.Fatalf("sale %d not checked in two runs of two out of three", id)
		}
	}
	if len(rec.checked[ended]) > 0 {
		t.Fatal("a sale ended a day ago was checked")
	}

	// The drifts: a unit of a gone from its stock with no reservation; a reservation of b's one
	// unit more, with none left to take (two units out of one: oversold by one).
	if _, err := db.ExecContext(ctx, `UPDATE products SET stock = stock - 1 WHERE id = ?`, a); err != nil {
		t.Fatal(err)
	}
	reserve(t, db, b, "bart", false)
	seen := map[int64]bool{}
	for range 2 {
		for _, f := range loop.Once(ctx) {
			if len(f.Violations) > 0 {
				seen[f.Sale.ProductID] = true
			}
		}
	}
	if !seen[a] || !seen[b] || seen[c] {
		t.Fatalf("drift reported for %v within two runs, want %d and %d only", seen, a, b)
	}
	if rec.over[b] != 1 || rec.over[a] != 0 {
		t.Fatalf("oversold: a %d, b %d; want 0 and 1", rec.over[a], rec.over[b])
	}
}

// TestReconcileSkipsASaleTooLargeForItsBound: a sale whose check outlasts StatementLimit is
// skipped, not failed, and not reported; a small sale of the same run is checked; the pool's
// connections come back without the bound (a plain statement that outlasts it still runs).
func TestReconcileSkipsASaleTooLargeForItsBound(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	db := st.DB()
	ctx := context.Background()
	small := product(t, db, "small", 5, "NOW(6) + INTERVAL 1 HOUR")
	big := product(t, db, "big", 200_000, "NOW(6) + INTERVAL 1 HOUR")
	reserve(t, db, small, "alice", true)
	if _, err := db.ExecContext(ctx, `INSERT INTO reservations (order_id, product_id, user_id, idem_key, quantity, strategy, created_at)
		SELECT CONCAT('big-', seq), ?, CONCAT('u-', seq), CONCAT('k-', seq), 1, 'mysql', NOW(6) FROM seq_1_to_200000`, big); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE products SET stock = 0 WHERE id = ?`, big); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{checked: map[int64][]int{}, over: map[int64]int{}}
	loop, err := reconcile.New(db, rec, reconcile.Options{Every: time.Hour, StatementLimit: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	loop.Once(ctx)
	if len(rec.checked[big]) != 0 || len(rec.checked[small]) != 1 || rec.failed != 0 {
		t.Fatalf("checked big %v, small %v, %d failed runs: want big skipped, small checked once, no failure", rec.checked[big], rec.checked[small], rec.failed)
	}
	for range 4 { // more than the connections the loop used
		if _, err := db.ExecContext(ctx, "SELECT SLEEP(0.05)"); err != nil {
			t.Fatalf("a statement of 50 ms after the run: %v (the bound stayed on a pooled connection)", err)
		}
	}
}

// TestReconcileLeavesAPaymentInFlight: a charge the provider has recorded as succeeded while the
// shop has not yet written its order paid (the order still `paying`) is a payment in flight, not
// drift: the running audit says nothing of it. The same charge beside an order that has left
// `paying` unpaid is money taken for a unit not sold, and is reported.
func TestReconcileLeavesAPaymentInFlight(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	db := st.DB()
	ctx := t.Context()
	id := product(t, db, "paying", 2, "NOW(6) + INTERVAL 1 HOUR")
	reserve(t, db, id, "alice", true)
	orderID := fmt.Sprintf("o-%d-alice", id)
	if _, err := db.ExecContext(ctx, `INSERT INTO orders (order_id, reservation_id, product_id, user_id, quantity, status, created_at, expires_at, pay_key, pay_started_at)
		SELECT order_id, id, product_id, user_id, quantity, 'paying', NOW(6), NOW(6) + INTERVAL 10 MINUTE, 'pk', NOW(6) FROM reservations WHERE order_id = ?`, orderID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO payment_charges (charge_key, charge_id, order_id, product_id, amount_cents, outcome, created_at)
		VALUES (?, ?, ?, ?, 100, 'succeeded', NOW(6))`, "ck-"+orderID, "ch-"+orderID, orderID, id); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{checked: map[int64][]int{}, over: map[int64]int{}}
	loop, err := reconcile.New(db, rec, reconcile.Options{Every: time.Hour, PerRun: 10})
	if err != nil {
		t.Fatal(err)
	}
	violations := func() []string {
		for _, f := range loop.Once(ctx) {
			if f.Sale.ProductID == id {
				return f.Violations
			}
		}
		t.Fatalf("sale %d not checked", id)
		return nil
	}
	if v := violations(); len(v) > 0 {
		t.Fatalf("a payment in flight reported as drift: %q", v)
	}
	// The order falls back to confirmed, unpaid, with the charge kept: money taken.
	if _, err := db.ExecContext(ctx, `UPDATE orders SET status = 'confirmed', pay_key = NULL, pay_started_at = NULL WHERE order_id = ?`, orderID); err != nil {
		t.Fatal(err)
	}
	if v := violations(); len(v) != 1 {
		t.Fatalf("a successful charge of an unpaid order: violations %q, want the charge's one", v)
	}
}
