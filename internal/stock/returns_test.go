package stock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestLockedReturnWaitsForTheLock: a lock strategy writes the stock it read (stock = read −
// taken), so a return must run under the product's lock like a deduction. A deduction stalls
// between its read and its write while a return comes: through the strategy (Locked.Return) the
// return waits for the lock and both count; the control returns with a relative increment outside
// the lock (what `mysql` does, safely, for itself), and the deduction's write erases it: the audit
// finds a unit neither in stock nor sold.
func TestLockedReturnWaitsForTheLock(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for _, strategy := range []sale.Strategy{sale.StrategyRedis, sale.StrategyZK, sale.StrategyZKHerd, sale.StrategyZKReentrant, sale.StrategyMySQLLockTable, sale.StrategyMySQLLockTableNaive} {
		for _, underLock := range []bool{true, false} {
			name := string(strategy) + "/through the strategy"
			if !underLock {
				name = string(strategy) + "/control outside the lock"
			}
			t.Run(name, func(t *testing.T) {
				var d interface {
					sale.Deductor
					sale.Returner
					SetHold(func(context.Context))
				}
				switch strategy {
				case sale.StrategyRedis:
					d = newLocked(t, st, strategy, redisLocker(t, itest.RedisAddr, 10*time.Second), 30*time.Second)
				case sale.StrategyMySQLLockTable:
					d = newLocked(t, st, strategy, lockTable(t, st.DB(), mysqllock.Options{TTL: 10 * time.Second}).Locker(), 30*time.Second)
				case sale.StrategyMySQLLockTableNaive: // returns unfenced, as it deducts
					d = newNaiveLockTable(t, st, 30*time.Second)
				default:
					d = zkLocked(t, st, strategy, 30*time.Second)
				}
				p := newProduct(t, st, strategy, 3)
				lapsed := reservation(p, "lapsed", 1, "")
				mustDeduct(t, d, lapsed)
				if _, err := st.ConfirmOrders(t.Context(), []string{lapsed.OrderID}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE orders SET status = 'expired', closed_at = NOW(6) WHERE order_id = ?", lapsed.OrderID); err != nil {
					t.Fatal(err)
				}
				batch := sale.ReturnBatch{ProductID: p.ID, Epoch: p.Epoch, Orders: []sale.ClosedOrder{{OrderID: lapsed.OrderID, ProductID: p.ID, UserID: "lapsed", Quantity: 1, Status: sale.StatusExpired}}}

				var returned sync.WaitGroup
				var once sync.Once
				d.SetHold(func(context.Context) {
					once.Do(func() { // the buyer's deduction has read the stock (2) and not written it
						returned.Go(func() {
							if underLock {
								if n, err := d.Return(t.Context(), batch); err != nil || n != 1 {
									t.Errorf("Return = %d, %v; want 1 unit", n, err)
								}
								return
							}
							err := st.Purchase(t.Context(), func(ctx context.Context, tx *store.PurchaseTx) error {
								n, err := tx.MarkReturned(ctx, p.ID, []string{lapsed.OrderID})
								if err != nil {
									return err
								}
								return tx.Give(ctx, p.ID, strategy, p.Epoch, n)
							})
							if err != nil {
								t.Errorf("the unlocked return: %v", err)
							}
						})
						if !underLock {
							returned.Wait() // the increment commits while the buyer holds its read
						} else {
							time.Sleep(100 * time.Millisecond) // the return is waiting for the lock
						}
					})
				})
				mustDeduct(t, d, reservation(p, "buyer", 1, ""))
				returned.Wait()
				f := mustAudit(t, st, p.ID)
				v := f.Violations(false)
				if underLock {
					if len(v) > 0 || f.Stock != 2 || f.ReturnedUnits != 1 {
						t.Fatalf("through the strategy: stock %d, returned %d, violations %q; want stock 2, 1 returned, none", f.Stock, f.ReturnedUnits, v)
					}
					return
				}
				if len(v) == 0 || f.Stock != 1 {
					t.Fatalf("control: stock %d, violations %q; want the return erased by the buyer's write (stock 1) and the audit to say so", f.Stock, v)
				}
				t.Logf("control caught: %q", v)
			})
		}
	}
}
