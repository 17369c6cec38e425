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
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestZKEnsembleWipedMidSale wipes the data of a ZooKeeper ensemble of the test's own in the
// middle of a zk sale: every server SIGKILLed, its snapshots and logs deleted, started again.
// The new data counts its czxids (the tokens) from zero, far below the fence MySQL kept.
//
// Holder A took the product's lock on the old data and read the stock; it stalls across the
// wipe, unaware that its lease is gone. Buyers on two other sessions wait for the lock, find
// ZooKeeper gone, come back on the new data, and sell again without an admin reset: the first
// claim of the new ensemble moved the fence onto it. Then A resumes and writes with its old,
// high token: refused. The sale ends sold out, every unit sold once (audit).
//
// The control is a second product sold through a locker that hides the issuer, i.e. the fence
// rule without ensembles: after the wipe its purchases are refused (503), every one of them,
// which is what a zk sale met before the fence knew ensembles.
func TestZKEnsembleWipedMidSale(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	e := itest.ZKEnsemble(t)
	// A second leader moves the old data's zxids to epoch 2 (the high 32 bits): every token it
	// grants is above every one the wiped ensemble grants in its first epoch, as after any
	// ensemble's first failover, so that the control's refusals do not depend on how many
	// writes either data saw.
	leader := e.Leader()
	leader.Kill()
	e.WaitQuorum()
	leader.Start()
	e.WaitQuorum()
	const units, before = 30, 5
	p := newProduct(t, st, sale.StrategyZK, units)
	q := newProduct(t, st, sale.StrategyZK, units) // the control
	a := newLocked(t, st, sale.StrategyZK, unaware{zkLocker(t, e.Servers())}, 30*time.Second)
	buyers := []sale.Deductor{
		newLocked(t, st, sale.StrategyZK, zkLocker(t, e.Servers()), 30*time.Second),
		newLocked(t, st, sale.StrategyZK, zkLocker(t, e.Servers()), 30*time.Second),
	}
	control := newLocked(t, st, sale.StrategyZK, issuerless{zkLocker(t, e.Servers())}, 30*time.Second)
	for i := range before {
		mustDeduct(t, buyers[i%2], reservation(p, fmt.Sprintf("before-%d", i), 1, ""))
		mustDeduct(t, control, reservation(q, fmt.Sprintf("before-%d", i), 1, ""))
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var (
		sold, fenced atomic.Int64
		lastErr      atomic.Value // the last error a buyer retried, for the failure message
		wg           sync.WaitGroup
		buyErrs      = make(chan error, 4)
		once         sync.Once
		back         time.Time // when the wiped ensemble had a quorum again
		resumed      time.Duration
	)
	a.SetHold(func(context.Context) {
		once.Do(func() {
			// A holds the lock and has read the stock. The buyers queue behind it.
			for i := range 4 {
				wg.Go(func() {
					buyErrs <- buyUntilSoldOut(ctx, buyers[i%2], p, fmt.Sprintf("buyer%d", i), &sold, &fenced, &lastErr)
				})
			}
			time.Sleep(300 * time.Millisecond)
			wiped := time.Now()
			e.Wipe()
			back = time.Now()
			t.Logf("ensemble wiped and back with a quorum in %s", back.Sub(wiped).Round(time.Millisecond))
			itest.Eventually(t, 2*time.Minute, func() (bool, string) {
				return sold.Load() > 0, fmt.Sprintf("no sale on the new data yet; last error: %v", lastErr.Load())
			})
			resumed = time.Since(back)
		})
	})
	aErr := a.Deduct(ctx, reservation(p, "stale-a", 1, ""))
	wg.Wait()
	close(buyErrs)
	for err := range buyErrs {
		if err != nil {
			t.Fatalf("buyer: %v", err)
		}
	}
	t.Logf("selling resumed %s after the wiped ensemble's quorum; %d purchases refused by the fence on the way", resumed.Round(time.Millisecond), fenced.Load())
	if !errors.Is(aErr, sale.ErrFenced) {
		t.Fatalf("A's write with its token of the old data = %v, want refused (%v)", aErr, sale.ErrFenced)
	}
	f := mustAudit(t, st, p.ID)
	if v := f.Violations(false); len(v) > 0 || sold.Load() != units-before || f.Stock != 0 || f.ReservedUnits != units {
		t.Fatalf("after the wipe: %d sold, audit %+v %q; want %d sold, stock 0, %d reserved", sold.Load(), f, v, units-before, units)
	}

	// The control: the same locks, the fence without issuers.
	err := retryUnavailable(ctx, func() error { return control.Deduct(ctx, reservation(q, "after-0", 1, "")) })
	for i := 1; i < 3 && errors.Is(err, sale.ErrFenced); i++ {
		err = control.Deduct(ctx, reservation(q, fmt.Sprintf("after-%d", i), 1, ""))
	}
	if !errors.Is(err, sale.ErrFenced) {
		t.Fatalf("control: a purchase after the wipe without issuers = %v, want refused by the fence", err)
	}
	assertStock(t, st, q.ID, units-before)
	t.Logf("control: without issuers, purchases after the wipe are refused: %v", err)
}

// buyUntilSoldOut buys one unit per buyer until the product is sold out, retrying a buyer whose
// purchase found ZooKeeper unreachable, waited too long for the lock or was refused by the
// fence (nothing was written then).
func buyUntilSoldOut(ctx context.Context, d sale.Deductor, p sale.Product, prefix string, sold, fenced *atomic.Int64, lastErr *atomic.Value) error {
	for i := 0; ; i++ {
		r := reservation(p, fmt.Sprintf("%s-%d", prefix, i), 1, "")
		if err := retryUnavailable(ctx, func() error {
			err := d.Deduct(ctx, r)
			if err != nil {
				lastErr.Store(err.Error())
			}
			if errors.Is(err, sale.ErrFenced) {
				fenced.Add(1)
				return sale.ErrLockTimeout // try again
			}
			return err
		}); err != nil {
			if errors.Is(err, sale.ErrSoldOut) {
				return nil
			}
			return err
		}
		sold.Add(1)
	}
}

// retryUnavailable runs f again while it fails because the lock service is unreachable (but
// not refused by the fence) or the lock wait ran out.
func retryUnavailable(ctx context.Context, f func() error) error {
	for {
		err := f()
		retry := errors.Is(err, sale.ErrLockTimeout) || (errors.Is(err, sale.ErrUnavailable) && !errors.Is(err, sale.ErrFenced))
		if !retry {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// issuerless hides the issuer of its leases: the fence compares their tokens as numbers, as it
// did before it knew ensembles.
type issuerless struct{ lock.Locker }

func (u issuerless) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	l, err := u.Locker.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return plainLease{l}, nil
}

// plainLease is a Lease and nothing more.
type plainLease struct{ lock.Lease }
