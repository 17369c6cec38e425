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

// attempts counts the tries the zoo's strategies report, as the metrics do.
type attempts struct{ won, lost atomic.Int64 }

func (a *attempts) LockAttempt(_ sale.Strategy, won bool) {
	if won {
		a.won.Add(1)
	} else {
		a.lost.Add(1)
	}
}

func (a *attempts) ObserveLockWait(sale.Strategy, time.Duration) {}

func newForUpdate(tb testing.TB, st *store.Store, wait time.Duration, obs *attempts) *stock.ForUpdate {
	tb.Helper()
	d, err := stock.NewForUpdate(st, wait, obs)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// TestForUpdateStalledHolder stalls a holder of the product's row lock (between its read and its
// write) for longer than the lock wait while other buyers come: each of them is answered
// sale.ErrLockTimeout (429) after the lock wait, with nothing deducted and nothing reserved,
// instead of waiting out the server's 50 s; the holder then either commits its batch or, when
// its own time ran out during the stall, rolls it back; either way the audit holds and the sale
// goes on.
func TestForUpdateStalledHolder(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	const wait, stall, waiters = time.Second, 4 * time.Second, 4
	for _, holderCommits := range []bool{true, false} {
		name := "the holder commits after the stall"
		if !holderCommits {
			name = "the holder's time runs out during the stall"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			obs := &attempts{}
			d := newForUpdate(t, st, wait, obs)
			p := newProduct(t, st, sale.StrategyMySQLForUpdate, 10)
			holding := make(chan struct{})
			var once sync.Once
			d.SetHold(func(ctx context.Context) {
				once.Do(func() {
					close(holding)
					select {
					case <-time.After(stall):
					case <-ctx.Done():
					}
				})
			})

			holderCtx := t.Context()
			if !holderCommits {
				var cancel context.CancelFunc
				holderCtx, cancel = context.WithTimeout(t.Context(), stall/2)
				defer cancel()
			}
			var holderErr error
			var holderErrs []error
			var holder sync.WaitGroup
			holder.Go(func() {
				batch := []sale.Reservation{reservation(p, "holder-0", 1, ""), reservation(p, "holder-1", 1, "")}
				holderErrs, holderErr = d.DeductBatch(holderCtx, batch)
			})
			<-holding

			var wg sync.WaitGroup
			for i := range waiters {
				wg.Go(func() {
					start := time.Now()
					err := d.Deduct(t.Context(), reservation(p, fmt.Sprint("waiter-", i), 1, ""))
					took := time.Since(start)
					if !errors.Is(err, sale.ErrLockTimeout) || !errors.Is(err, sale.ErrRateLimited) {
						t.Errorf("waiter %d = %v after %s, want sale.ErrLockTimeout (429)", i, err, took)
					}
					if took < wait-50*time.Millisecond || took >= stall {
						t.Errorf("waiter %d answered after %s; want the lock wait, %s (the holder stalls %s)", i, took, wait, stall)
					}
				})
			}
			wg.Wait()
			holder.Wait()

			wantStock, wantReserved := 8, 2
			if holderCommits {
				if holderErr != nil || holderErrs[0] != nil || holderErrs[1] != nil {
					t.Fatalf("holder = %v %v, want its batch sold", holderErrs, holderErr)
				}
			} else {
				if !errors.Is(holderErr, context.DeadlineExceeded) {
					t.Fatalf("holder = %v %v, want its own deadline", holderErrs, holderErr)
				}
				wantStock, wantReserved = 10, 0
			}
			f := mustAudit(t, st, p.ID)
			if v := f.Violations(false); len(v) > 0 || f.Stock != wantStock || f.ReservedUnits != wantReserved || f.InitialStock-f.Stock != f.ReservedUnits {
				t.Fatalf("after the stall: stock %d, reserved %d, violations %q; want stock %d, reserved %d (the holder's), none", f.Stock, f.ReservedUnits, v, wantStock, wantReserved)
			}
			if won, lost := obs.won.Load(), obs.lost.Load(); won != 1 || lost != waiters {
				t.Errorf("attempts: %d won, %d lost; want 1 (the holder) and %d (the waiters)", won, lost, waiters)
			}
			mustDeduct(t, d, reservation(p, "after", 1, "")) // the sale goes on
			assertStock(t, st, p.ID, wantStock-1)
		})
	}
}

// BenchmarkForUpdateVsConditional sells one product with mysql-for-update (row lock, read,
// write: the lock held across round trips) and with mysql (one conditional UPDATE), batch by
// batch from 8 goroutines, for the batch sizes a combiner makes: one buyer, a few, a full batch
// of SECKILL_BATCH_MAX's default. ns/op is per batch; purchases/s is what to compare.
func BenchmarkForUpdateVsConditional(b *testing.B) {
	itest.Integration(b)
	st, _ := itest.Store(b)
	conditional, err := stock.NewMySQL(st)
	if err != nil {
		b.Fatal(err)
	}
	forUpdate := newForUpdate(b, st, 10*time.Second, &attempts{})
	for _, size := range []int{1, 16, 128} {
		for _, tc := range []struct {
			strategy sale.Strategy
			d        sale.BatchDeductor
		}{{sale.StrategyMySQL, conditional}, {sale.StrategyMySQLForUpdate, forUpdate}} {
			b.Run(fmt.Sprintf("batch=%d/%s", size, tc.strategy), func(b *testing.B) {
				p := newProduct(b, st, tc.strategy, 1<<30)
				var next atomic.Int64
				b.SetParallelism(4) // 8 goroutines on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					batch := make([]sale.Reservation, size)
					for pb.Next() {
						for i := range batch {
							batch[i] = reservation(p, fmt.Sprint("b-", next.Add(1)), 1, "")
						}
						errs, err := tc.d.DeductBatch(context.Background(), batch)
						if err == nil {
							err = errors.Join(errs...)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "purchases/s")
			})
		}
	}
}
