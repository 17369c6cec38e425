package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
	"github.com/seckill-go/seckill-go/migrations"
)

// bought buys one unit of p (a mysql sale) for each of n buyers named prefix0, prefix1, … and
// has their orders created; it returns the purchases.
func bought(t testing.TB, st *store.Store, p sale.Product, prefix string, n int) []sale.Reservation {
	t.Helper()
	d, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	rs := make([]sale.Reservation, n)
	ids := make([]string, n)
	for i := range rs {
		rs[i] = decided(p, fmt.Sprint(prefix, i), "")
		if err := d.Deduct(t.Context(), rs[i]); err != nil {
			t.Fatal(err)
		}
		ids[i] = rs[i].OrderID
	}
	if _, err := st.ConfirmOrders(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	return rs
}

// lapse ends the payment window of the orders: the expirer's next round takes them.
func lapse(t testing.TB, db *sql.DB, orderIDs ...string) {
	t.Helper()
	for _, id := range orderIDs {
		if _, err := db.ExecContext(t.Context(), "UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
}

// mark is a product's row of return_due; Seq is 0 when it has none.
type mark struct {
	Seq   uint64
	Owing bool
}

func markOf(t testing.TB, db *sql.DB, productID int64) mark {
	t.Helper()
	var m mark
	err := db.QueryRowContext(t.Context(), "SELECT seq, owing FROM return_due WHERE product_id = ?", productID).Scan(&m.Seq, &m.Owing)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return m
}

// dueOrders is what Unreturned finds due, product by product.
func dueOrders(t testing.TB, st *store.Store) map[int64][]string {
	t.Helper()
	due, err := st.Unreturned(t.Context(), 100, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for _, d := range due {
		for _, o := range d.Orders {
			out[d.ProductID] = append(out[d.ProductID], o.OrderID)
		}
	}
	return out
}

// TestReturnsOwedAreMarked: a cancel and an expiry mark their product in return_due, a replayed
// cancel does not; the product stays marked while it owes and is unmarked by the first look that
// finds nothing due (its units returned, its due order parked, its orders gone with a reset);
// an operator's un-park as docs/lifecycle.md says marks it again.
func TestReturnsOwedAreMarked(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := t.Context()
	db := st.DB()
	p := product(t, st, 5, sale.StrategyMySQL)
	idle := product(t, st, 5, sale.StrategyMySQL)
	rs := bought(t, st, p, "a", 4)
	bought(t, st, idle, "i", 2)
	check := func(step string, id int64, want mark) {
		t.Helper()
		if diff := cmp.Diff(want, markOf(t, db, id)); diff != "" {
			t.Errorf("%s: mark of product %d (-want +got):\n%s", step, id, diff)
		}
	}
	check("orders awaiting payment", p.ID, mark{})

	if _, err := st.CancelOrder(ctx, rs[0].OrderID, rs[0].UserID); err != nil {
		t.Fatal(err)
	}
	check("a cancel", p.ID, mark{Seq: 1, Owing: true})
	lapse(t, db, rs[1].OrderID)
	if closed, err := st.ExpireDue(ctx, 10); err != nil || sale.OrdersIn(closed) != 1 {
		t.Fatalf("ExpireDue = %d orders, %v; want 1", sale.OrdersIn(closed), err)
	}
	check("an expiry", p.ID, mark{Seq: 2, Owing: true})
	if _, err := st.CancelOrder(ctx, rs[0].OrderID, rs[0].UserID); err != nil {
		t.Fatal(err)
	}
	check("the cancel again", p.ID, mark{Seq: 2, Owing: true})

	want := map[int64][]string{p.ID: {rs[0].OrderID, rs[1].OrderID}}
	if diff := cmp.Diff(want, dueOrders(t, st)); diff != "" {
		t.Fatalf("due (-want +got):\n%s", diff)
	}
	check("a look that finds them due", p.ID, mark{Seq: 2, Owing: true})
	mysql, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	due, err := st.Unreturned(ctx, 100, 1000, 0)
	if err != nil || len(due) != 1 {
		t.Fatalf("Unreturned = %+v, %v; want p's", due, err)
	}
	if n, err := mysql.Return(ctx, due[0].ReturnBatch); err != nil || n != 2 {
		t.Fatalf("Return = %d, %v; want 2 units", n, err)
	}
	if diff := cmp.Diff(map[int64][]string{}, dueOrders(t, st)); diff != "" {
		t.Fatalf("due after the return (-want +got):\n%s", diff)
	}
	check("returned", p.ID, mark{Seq: 2, Owing: false})
	check("never closed", idle.ID, mark{})
	if s, _ := stockOf(t, st, p.ID); s != 5-4+2 {
		t.Errorf("stock %d, want 3", s)
	}

	// A due order parked: nothing due, unmarked. Un-parked as the operators do: marked, due.
	if _, err := st.CancelOrder(ctx, rs[2].OrderID, rs[2].UserID); err != nil {
		t.Fatal(err)
	}
	if parked, err := st.ParkOrder(ctx, rs[2].OrderID, "return", errors.New("test")); err != nil || !parked {
		t.Fatalf("ParkOrder = %v, %v", parked, err)
	}
	if diff := cmp.Diff(map[int64][]string{}, dueOrders(t, st)); diff != "" {
		t.Fatalf("due with the order parked (-want +got):\n%s", diff)
	}
	check("parked", p.ID, mark{Seq: 3, Owing: false})
	for _, q := range []string{
		"UPDATE orders SET parked_at = NULL WHERE order_id = ?",
		`INSERT INTO return_due (product_id, seq, owing) SELECT product_id, 1, TRUE FROM orders WHERE order_id = ?
			ON DUPLICATE KEY UPDATE seq = seq + 1, owing = TRUE`,
	} {
		if _, err := db.ExecContext(ctx, q, rs[2].OrderID); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[int64][]string{p.ID: {rs[2].OrderID}}, dueOrders(t, st)); diff != "" {
		t.Fatalf("due after the un-park (-want +got):\n%s", diff)
	}

	// A reset deletes the orders and leaves the mark: the next look finds nothing and unmarks.
	if _, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 5}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	check("reset", p.ID, mark{Seq: 4, Owing: true})
	if diff := cmp.Diff(map[int64][]string{}, dueOrders(t, st)); diff != "" {
		t.Fatalf("due after the reset (-want +got):\n%s", diff)
	}
	check("after the reset", p.ID, mark{Seq: 4, Owing: false})
}

// TestMigrationMarksTheReturnsOwed: the migration that brings return_due marks every product
// that owes returns when it runs, and none other: an upgrade loses none.
func TestMigrationMarksTheReturnsOwed(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := t.Context()
	db := st.DB()
	owes := product(t, st, 5, sale.StrategyMySQL)
	parked := product(t, st, 5, sale.StrategyMySQL)
	returned := product(t, st, 5, sale.StrategyMySQL)
	unpaid := product(t, st, 5, sale.StrategyMySQL)
	for _, c := range []struct {
		p      sale.Product
		cancel int
	}{{owes, 2}, {parked, 1}, {returned, 1}, {unpaid, 0}} {
		rs := bought(t, st, c.p, "m", 2)
		for _, r := range rs[:c.cancel] {
			if _, err := st.CancelOrder(ctx, r.OrderID, r.UserID); err != nil {
				t.Fatal(err)
			}
		}
		switch c.p.ID {
		case parked.ID:
			if _, err := st.ParkOrder(ctx, rs[0].OrderID, "return", errors.New("test")); err != nil {
				t.Fatal(err)
			}
		case returned.ID:
			mysql, _ := stock.NewMySQL(st)
			b := sale.ReturnBatch{ProductID: c.p.ID, Epoch: c.p.Epoch, Orders: []sale.ClosedOrder{{OrderID: rs[0].OrderID}}}
			if n, err := mysql.Return(ctx, b); err != nil || n != 1 {
				t.Fatalf("Return = %d, %v", n, err)
			}
		}
	}
	p, err := goose.NewProvider(goose.DialectMySQL, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Down(ctx); err != nil {
		t.Fatal(err)
	} else if r.Source.Version != 16 {
		t.Fatalf("down undid %d; want 16, return_due (update this test when it is not the last)", r.Source.Version)
	}
	if err := store.Migrate(ctx, itest.Logger(), db); err != nil {
		t.Fatal(err)
	}
	got := map[int64]mark{}
	for _, q := range []sale.Product{owes, parked, returned, unpaid} {
		if m := markOf(t, db, q.ID); m != (mark{}) {
			got[q.ID] = m
		}
	}
	if diff := cmp.Diff(map[int64]mark{owes.ID: {Seq: 1, Owing: true}}, got); diff != "" {
		t.Errorf("marks after the migration (-want +got):\n%s", diff)
	}
}

// sessionCounters reads the counters of conn's session that say what its statements did: how
// many of each kind, and the rows the storage engine read (Handler_read_*).
func sessionCounters(t testing.TB, conn *sql.Conn) map[string]int64 {
	t.Helper()
	rows, err := conn.QueryContext(t.Context(), "SHOW SESSION STATUS WHERE Variable_name IN ('Com_select', 'Com_update', 'Com_insert', 'Com_delete') OR Variable_name LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOwedReturnsCostNothingWhenNothingIsOwed (issue #34): with 1,000 idle sales, one of them
// with an order cancelled and returned, a look for the returns owed is one statement that reads
// no product and probes no order. (It read every product and probed each.)
func TestOwedReturnsCostNothingWhenNothingIsOwed(t *testing.T) {
	t.Parallel()
	st, dsn := itest.Store(t)
	ctx := t.Context()
	const products = 1000
	var last sale.Product
	for range products {
		last = product(t, st, 5, sale.StrategyMySQL)
	}
	rs := bought(t, st, last, "b", 1)
	if _, err := st.CancelOrder(ctx, rs[0].OrderID, rs[0].UserID); err != nil {
		t.Fatal(err)
	}
	mysql, _ := stock.NewMySQL(st)
	if n, err := mysql.Return(ctx, sale.ReturnBatch{ProductID: last.ID, Epoch: last.Epoch, Orders: []sale.ClosedOrder{{OrderID: rs[0].OrderID}}}); err != nil || n != 1 {
		t.Fatalf("Return = %d, %v", n, err)
	}

	// A replica of its own, on one connection, whose session's counters say what a look did.
	one, err := store.Open(ctx, itest.Logger(), dsn, store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	look := func() (map[string]int64, error) {
		conn, err := one.DB().Conn(ctx)
		if err != nil {
			return nil, err
		}
		before := sessionCounters(t, conn)
		idle := sessionCounters(t, conn)     // what the reading of the counters costs
		if err := conn.Close(); err != nil { // back to the pool, for Unreturned's statements
			return nil, err
		}
		due, err := one.Unreturned(ctx, 100, 64, 0)
		if err != nil || len(due) != 0 {
			return nil, fmt.Errorf("Unreturned = %+v, %v; want nothing", due, err)
		}
		conn, err = one.DB().Conn(ctx)
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		after := sessionCounters(t, conn)
		out := map[string]int64{}
		for k := range after {
			if d := (after[k] - idle[k]) - (idle[k] - before[k]); d != 0 {
				out[k] = d
			}
		}
		return out, nil
	}
	// The first look probes the returned product, whose mark its cancel left, and unmarks it.
	if _, err := look(); err != nil {
		t.Fatal(err)
	}
	got, err := look()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a look with %d idle sales: %v", products, got)
	var read int64
	for k, n := range got {
		if len(k) > len("Handler_read") && k[:len("Handler_read")] == "Handler_read" && k != "Handler_read_key" {
			read += n
		}
	}
	if got["Com_select"] != 1 || got["Com_update"] != 0 || read != 0 || got["Handler_read_key"] > 1 {
		t.Errorf("a look = %v; want one SELECT that reads no row (one index lookup at most)", got)
	}
}

// TestNoReturnLostToAConcurrentClose: closes (a cancel, an expiry of one order, an expiry
// round) race the return sweeps of several replicas (Unreturned, then the mysql strategy's
// Return), which unmark the products they find owing nothing. Each product has its orders closed
// one after the other, the next a moment after the last was returned: when its sweep has just
// read the product marked and probed it empty, and is about to unmark it. The closes do not
// return their units themselves, so a close whose mark a sweep wiped would stay unreturned for
// good (the product's last close: nothing marks it again). At the end every closed order is
// returned, once: each product's stock is its initial stock less the units of its orders still
// open.
func TestNoReturnLostToAConcurrentClose(t *testing.T) {
	t.Parallel()
	st, dsn := itest.Store(t)
	ctx := t.Context()
	const products, closes, sweepers = 200, 3, 3
	ps := make([]sale.Product, products)
	orders := make([][]sale.Reservation, products)
	for i := range ps {
		ps[i] = product(t, st, closes+1, sale.StrategyMySQL)
		orders[i] = bought(t, st, ps[i], "b", closes+1) // the last stays open
	}

	var closing atomic.Bool
	closing.Store(true)
	var sweeps, returned atomic.Int64
	var wg sync.WaitGroup
	for r := range sweepers {
		replica, err := store.Open(ctx, itest.Logger(), dsn, store.Options{MaxOpenConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer replica.Close()
		mysql, _ := stock.NewMySQL(replica)
		wg.Go(func() {
			// Once the closes are over, sweep until a look finds nothing: what is left then
			// would never be found.
			for i := r; ; i++ {
				still := closing.Load()
				due, err := replica.Unreturned(ctx, 5, 64, i*64)
				if err != nil {
					t.Error(err)
					return
				}
				sweeps.Add(1)
				if len(due) == 0 && !still {
					return
				}
				for _, d := range due {
					n, err := mysql.Return(ctx, d.ReturnBatch)
					if err != nil {
						t.Error(err)
						return
					}
					returned.Add(int64(n))
				}
			}
		})
	}
	var closed atomic.Int64
	closeOne := func(how int, r sale.Reservation) error {
		if how == 0 {
			closed.Add(1)
			_, err := st.CancelOrder(ctx, r.OrderID, r.UserID)
			return err
		}
		if _, err := st.DB().ExecContext(ctx, "UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id = ?", r.OrderID); err != nil {
			return err
		}
		var due []sale.ReturnDue
		var err error
		if how == 1 {
			due, err = st.ExpireOrder(ctx, r.OrderID)
		} else {
			due, err = st.ExpireDue(ctx, 3) // this one, or others lapsed meanwhile
		}
		closed.Add(int64(sale.OrdersIn(due)))
		return err
	}
	returnedYet := func(orderID string) (bool, error) {
		var done bool
		err := st.DB().QueryRowContext(ctx, "SELECT returned_at IS NOT NULL FROM orders WHERE order_id = ?", orderID).Scan(&done)
		return done, err
	}
	var cwg sync.WaitGroup
	for i := range ps {
		cwg.Go(func() {
			for k, r := range orders[i][:closes] {
				if err := closeOne((i+k)%3, r); err != nil {
					t.Error(err)
					return
				}
				// Wait for its return (an expiry round may have taken it after this order's
				// own call), then close the next a moment later.
				for deadline := time.Now().Add(20 * time.Second); ; {
					done, err := returnedYet(r.OrderID)
					if err != nil {
						t.Error(err)
						return
					}
					if done {
						break
					}
					if time.Now().After(deadline) {
						return // lost: the check below says so
					}
					time.Sleep(time.Millisecond)
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			}
		})
	}
	cwg.Wait()
	// The lapsed orders an expiry round did not take yet.
	for {
		due, err := st.ExpireDue(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		closed.Add(int64(sale.OrdersIn(due)))
	}
	closing.Store(false)
	wg.Wait()
	t.Logf("%d orders closed, %d units returned in %d sweeps", closed.Load(), returned.Load(), sweeps.Load())

	var lost, open int
	if err := st.DB().QueryRowContext(ctx, `SELECT
		COUNT(CASE WHEN closed_at IS NOT NULL AND returned_at IS NULL THEN 1 END),
		COUNT(CASE WHEN closed_at IS NULL THEN 1 END) FROM orders`).Scan(&lost, &open); err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Errorf("%d closed orders never returned: their product's mark was lost", lost)
	}
	if want := products * closes; open != products || int(closed.Load()) != want || returned.Load() != int64(want) {
		t.Errorf("closed %d, returned %d units, %d open; want %d, %d, %d", closed.Load(), returned.Load(), open, want, want, products)
	}
	for _, p := range ps {
		var s, stillOpen int
		if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT stock FROM products WHERE id = ?),
			(SELECT COUNT(*) FROM orders WHERE product_id = ? AND closed_at IS NULL)`, p.ID, p.ID).Scan(&s, &stillOpen); err != nil {
			t.Fatal(err)
		}
		if s != closes+1-stillOpen {
			t.Errorf("product %d: stock %d, want %d − %d open", p.ID, s, closes+1, stillOpen)
		}
	}
}
