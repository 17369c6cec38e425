package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// zooDeductor is a zoo MySQL strategy: it deducts in batches and returns.
type zooDeductor interface {
	sale.Deductor
	sale.BatchDeductor
	sale.Returner
}

func zooMySQLStrategies(tb testing.TB, st *store.Store, obs *attempts) map[sale.Strategy]zooDeductor {
	return map[sale.Strategy]zooDeductor{
		sale.StrategyMySQLForUpdate:     newForUpdate(tb, st, 30*time.Second, obs),
		sale.StrategyMySQLVersion:       newOptimistic(tb, st, 30*time.Second, obs, false),
		sale.StrategyMySQLVersionCapped: newOptimistic(tb, st, 30*time.Second, obs, true),
	}
}

// lapsedOrders buys n units of p, one per buyer, and expires their orders: what a return gives
// back.
func lapsedOrders(t *testing.T, st *store.Store, d sale.Deductor, p sale.Product, n int) sale.ReturnBatch {
	t.Helper()
	b := sale.ReturnBatch{ProductID: p.ID, Epoch: p.Epoch}
	var ids []string
	for i := range n {
		r := reservation(p, fmt.Sprint("lapsed-", i), 1, "")
		mustDeduct(t, d, r)
		ids = append(ids, r.OrderID)
		b.Orders = append(b.Orders, sale.ClosedOrder{OrderID: r.OrderID, ProductID: p.ID, UserID: r.UserID, Quantity: 1, Status: sale.StatusExpired})
	}
	if _, err := st.ConfirmOrders(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(t.Context(), "UPDATE orders SET status = 'expired', closed_at = NOW(6) WHERE product_id = ?", p.ID); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestZooMySQLReturns: the units of expired orders come back once, however many returns of them
// run at once, while buyers keep buying: no unit is lost or made up (the audit: initial − stock
// = reserved − returned).
func TestZooMySQLReturns(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for strategy, d := range zooMySQLStrategies(t, st, &attempts{}) {
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			const lapsed, buyers, returners = 10, 30, 3
			p := newProduct(t, st, strategy, 30)
			batch := lapsedOrders(t, st, d, p, lapsed)
			var returned, accepted atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range returners {
				wg.Go(func() {
					<-start
					n, err := d.Return(t.Context(), batch)
					if err != nil {
						t.Errorf("Return: %v", err)
					}
					returned.Add(int64(n))
				})
			}
			for i := range buyers {
				wg.Go(func() {
					<-start
					err := d.Deduct(t.Context(), reservation(p, fmt.Sprint("buyer-", i), 1, ""))
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, sale.ErrSoldOut):
					default:
						t.Errorf("buyer %d: %v", i, err)
					}
				})
			}
			close(start)
			wg.Wait()
			f := mustAudit(t, st, p.ID)
			t.Logf("%s: %d units returned, %d buyers accepted, stock %d", strategy, returned.Load(), accepted.Load(), f.Stock)
			if returned.Load() != lapsed || f.ReturnedUnits != lapsed {
				t.Errorf("returned %d units (the orders say %d), want %d: once each", returned.Load(), f.ReturnedUnits, lapsed)
			}
			if v := f.Violations(false); len(v) > 0 {
				t.Errorf("invariants broken: %q", v)
			}
			if n, err := d.Return(t.Context(), batch); n != 0 || err != nil {
				t.Errorf("a return run again = %d, %v; want 0 units", n, err)
			}
		})
	}
}

// TestZooMySQLReturnDuringDeduction puts a return in the middle of a deduction, between its read
// and its write, where a lost update would erase one or the other: mysql-for-update's return
// waits for the row lock the deduction holds; mysql-version's return commits, and the
// deduction's versioned write loses and runs again from the new stock. Both count.
func TestZooMySQLReturnDuringDeduction(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	obs := &attempts{}

	t.Run(string(sale.StrategyMySQLForUpdate), func(t *testing.T) {
		d := newForUpdate(t, st, 30*time.Second, obs)
		p := newProduct(t, st, sale.StrategyMySQLForUpdate, 3)
		batch := lapsedOrders(t, st, d, p, 1)
		var returned sync.WaitGroup
		var once sync.Once
		d.SetHold(func(context.Context) {
			once.Do(func() { // the buyer holds the row lock and has read 2
				returned.Go(func() {
					if n, err := d.Return(t.Context(), batch); n != 1 || err != nil {
						t.Errorf("Return = %d, %v; want 1 unit", n, err)
					}
				})
				time.Sleep(100 * time.Millisecond) // the return is waiting for the row lock
			})
		})
		mustDeduct(t, d, reservation(p, "buyer", 1, ""))
		returned.Wait()
		assertReturnedAndSold(t, st, p.ID)
	})

	t.Run(string(sale.StrategyMySQLVersion), func(t *testing.T) {
		d := newOptimistic(t, st, 30*time.Second, obs, false)
		p := newProduct(t, st, sale.StrategyMySQLVersion, 3)
		batch := lapsedOrders(t, st, d, p, 1)
		var once sync.Once
		lostBefore := obs.lost.Load()
		d.SetBeforeWrite(func(context.Context) {
			once.Do(func() { // the buyer has read 2 at version v; the return writes 3 at v+1
				if n, err := d.Return(t.Context(), batch); n != 1 || err != nil {
					t.Errorf("Return = %d, %v; want 1 unit", n, err)
				}
			})
		})
		mustDeduct(t, d, reservation(p, "buyer", 1, ""))
		if obs.lost.Load() == lostBefore {
			t.Error("the buyer's write did not lose to the return's: the test did not put the return in between")
		}
		assertReturnedAndSold(t, st, p.ID)
	})
}

// assertReturnedAndSold: of 3 units, 1 sold and returned, 1 sold: 2 in stock.
func assertReturnedAndSold(t *testing.T, st *store.Store, productID int64) {
	t.Helper()
	f := mustAudit(t, st, productID)
	if v := f.Violations(false); len(v) > 0 || f.Stock != 2 || f.ReturnedUnits != 1 {
		t.Fatalf("stock %d, returned %d, violations %q; want stock 2, 1 returned, none", f.Stock, f.ReturnedUnits, v)
	}
}
