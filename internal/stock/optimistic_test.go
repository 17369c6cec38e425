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
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

func newOptimistic(tb testing.TB, st *store.Store, wait time.Duration, obs *attempts, capped bool) *stock.Optimistic {
	tb.Helper()
	var opts []stock.OptimisticOption
	if capped {
		opts = append(opts, stock.Capped())
	}
	d, err := stock.NewOptimistic(st, wait, obs, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestOptimisticEveryWriteLost makes every versioned write lose (another writer advances the
// version between each try's read and its write): mysql-version tries until the lock wait is
// spent and answers 429 with nothing deducted; mysql-version-capped gives up after three tries
// and answers sold out with the whole stock left, the undersell in miniature.
func TestOptimisticEveryWriteLost(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	const wait = 300 * time.Millisecond
	for _, capped := range []bool{false, true} {
		strategy := sale.StrategyMySQLVersion
		if capped {
			strategy = sale.StrategyMySQLVersionCapped
		}
		t.Run(string(strategy), func(t *testing.T) {
			t.Parallel()
			obs := &attempts{}
			d := newOptimistic(t, st, wait, obs, capped)
			p := newProduct(t, st, strategy, 5)
			var tries atomic.Int64
			d.SetBeforeWrite(func(ctx context.Context) {
				tries.Add(1)
				if _, err := st.DB().ExecContext(ctx, "UPDATE products SET version = version + 1 WHERE id = ?", p.ID); err != nil {
					t.Error(err)
				}
			})
			start := time.Now()
			err := d.Deduct(t.Context(), reservation(p, "u1", 1, ""))
			took := time.Since(start)
			t.Logf("%s: %v after %d tries in %s", strategy, err, tries.Load(), took.Round(time.Millisecond))
			if capped {
				assertErr(t, err, sale.ErrSoldOut)
				if n := tries.Load(); n != 3 {
					t.Errorf("gave up after %d tries, want 3", n)
				}
			} else {
				if !errors.Is(err, sale.ErrLockTimeout) || !errors.Is(err, sale.ErrRateLimited) {
					t.Fatalf("err = %v, want sale.ErrLockTimeout (429), never sold out while stock remains", err)
				}
				if took < wait || took > wait+time.Second {
					t.Errorf("answered after %s, want the lock wait (%s)", took, wait)
				}
			}
			if won, lost := obs.won.Load(), obs.lost.Load(); won != 0 || lost != tries.Load() {
				t.Errorf("attempts: %d won, %d lost; want 0 won and every try (%d) lost", won, lost, tries.Load())
			}
			f := mustAudit(t, st, p.ID)
			if f.Stock != 5 || f.Reservations != 0 {
				t.Errorf("stock %d, %d reservations; want 5 and none: every try rolled back", f.Stock, f.Reservations)
			}
		})
	}
}

// TestOptimisticUnderContention sells 200 units to 400 buyers, in batches of 4, from two
// replicas (two deductors, each with its own connection pool) of 8 goroutines each. The shipped
// mysql-version sells exactly the stock: a buyer is told sold out only once none is left, and one
// whose lock wait ran out gets 429; most of its writes are lost, and counted. The capped variant,
// under the same load, tells buyers sold out while units remain: the undersell, and the check
// that catches it.
func TestOptimisticUnderContention(t *testing.T) {
	itest.Integration(t)
	st, dsn := itest.Store(t)
	replica, err := store.Open(t.Context(), itest.Logger(), dsn, store.Options{MaxOpenConns: 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { replica.Close() })
	const stockN, buyers, batchSize, goroutines = 200, 400, 4, 8
	for _, capped := range []bool{false, true} { // one after the other: the same machine for both
		strategy := sale.StrategyMySQLVersion
		if capped {
			strategy = sale.StrategyMySQLVersionCapped
		}
		t.Run(string(strategy), func(t *testing.T) {
			obs := &attempts{}
			replicas := []*stock.Optimistic{
				newOptimistic(t, st, 10*time.Second, obs, capped),
				newOptimistic(t, replica, 10*time.Second, obs, capped),
			}
			p := newProduct(t, st, strategy, stockN)
			batches := make(chan []sale.Reservation, buyers/batchSize)
			for b := range buyers / batchSize {
				batch := make([]sale.Reservation, batchSize)
				for i := range batch {
					batch[i] = reservation(p, fmt.Sprintf("buyer-%03d", b*batchSize+i), 1, "")
				}
				batches <- batch
			}
			close(batches)

			var accepted, soldOut, busy atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for _, d := range replicas {
				for range goroutines {
					wg.Go(func() {
						for batch := range batches {
							errs, err := d.DeductBatch(t.Context(), batch)
							if errors.Is(err, sale.ErrLockTimeout) {
								busy.Add(int64(len(batch)))
								continue
							}
							if err != nil {
								t.Errorf("batch: %v", err)
								continue
							}
							for _, err := range errs {
								switch {
								case err == nil:
									accepted.Add(1)
								case errors.Is(err, sale.ErrSoldOut):
									soldOut.Add(1)
								default:
									t.Errorf("purchase: %v", err)
								}
							}
						}
					})
				}
			}
			wg.Wait()
			took := time.Since(start)
			f := mustAudit(t, st, p.ID)
			won, lost := obs.won.Load(), obs.lost.Load()
			t.Logf("%s: %d accepted, %d sold out, %d busy (429) in %s; stock left %d; writes %d won, %d lost: %.1f wasted per won write, %.2f per unit sold",
				strategy, accepted.Load(), soldOut.Load(), busy.Load(), took.Round(time.Millisecond), f.Stock, won, lost,
				float64(lost)/float64(max(won, 1)), float64(lost)/float64(max(accepted.Load(), 1)))
			if v := f.Violations(false); len(v) > 0 || int64(f.ReservedUnits) != accepted.Load() {
				t.Fatalf("audit: reserved %d, accepted %d, violations %q", f.ReservedUnits, accepted.Load(), v)
			}
			if capped {
				if soldOut.Load() == 0 || f.Stock == 0 {
					t.Fatalf("the capped retries did not undersell (sold out %d, stock left %d): the check could not catch one", soldOut.Load(), f.Stock)
				}
				t.Logf("undersell caught: %d buyers told sold out while %d units remain", soldOut.Load(), f.Stock)
				return
			}
			// Stock only falls here (no returns): a buyer told sold out saw 0, and 0 it stays.
			if soldOut.Load() > 0 && f.Stock != 0 {
				t.Errorf("%d buyers told sold out, but %d units remain: a false sold out", soldOut.Load(), f.Stock)
			}
			if busy.Load() == 0 && (accepted.Load() != stockN || f.Stock != 0) {
				t.Errorf("accepted %d, stock left %d; want the whole stock sold", accepted.Load(), f.Stock)
			}
			if lost == 0 {
				t.Errorf("no write lost under contention: the waste is not measured")
			}
		})
	}
}
