package stock

// The optimistic lock, mysql-version (and its unsafe variant mysql-version-capped): no lock is
// taken to read; the write says which state it was computed from, and loses if that state is gone.
//
//	SELECT stock, version FROM products WHERE id = ?            -- no lock
//	UPDATE products SET stock = <read − taken>, version = version + 1
//	 WHERE id = ? AND version = <the version read>              -- 0 rows: someone wrote first
//
// A write that matches no row lost the race: the transaction (the reservations with it) is rolled
// back and runs again from the read. Two buyers can never both write stock − 1 over one read, so
// it never oversells.
//
// What breaks it, per the classic write-ups: contention. On one hot row, of N concurrent tries
// one wins and N−1 are wasted work, a read, inserts and a rollback each, so the database does
// more work the more buyers come and sells no faster. The usual fix in the write-ups is to cap
// the retries, and a capped retry that gives up and says "sold out" lies: stock remains, the
// sale undersells (mysql-version-capped, kept to show it, unsafe).
//
// What this implementation does about it: it runs again after a short jittered back-off (so that
// the losers do not collide again in step) until the lock wait (SECKILL_LOCK_WAIT) is spent, and
// then answers 429 (sale.ErrLockTimeout, nothing deducted): busy, not sold out. It says sold out
// only from a stock it read that cannot serve the purchase: a committed stock, which only
// returns ever raise, so a buyer told sold out was told the truth. A batch of purchases makes one
// try for all of them (and a replica's combiner runs one batch of a product at a time, so the
// tries collide across replicas). Every write is counted, won or lost, so the waste is on the
// dashboard.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seckill-go/seckill-go/internal/pause"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// cappedConflicts is how many lost writes mysql-version-capped takes before it gives up.
const cappedConflicts = 3

// The back-off before a try again: a random time up to 1 ms after the first lost write, twice as
// long after each next one, 32 ms at the most (full jitter).
const (
	firstBackoff = time.Millisecond
	maxBackoff   = 32 * time.Millisecond
)

// errConflict rolls back a try whose versioned write matched no row.
var errConflict = errors.New("stock: the version changed between the read and the write")

// Optimistic is the mysql-version strategy, or with Capped mysql-version-capped.
type Optimistic struct {
	store    *store.Store
	strategy sale.Strategy
	wait     time.Duration
	observer AttemptObserver
	// capped, for mysql-version-capped, gives up after cappedConflicts lost writes.
	capped bool
	// beforeWrite, when set by a test, runs in each try between the read and the write: the tests
	// make writes lose there.
	beforeWrite func(ctx context.Context)
}

var (
	_ sale.Deductor      = (*Optimistic)(nil)
	_ sale.BatchDeductor = (*Optimistic)(nil)
	_ sale.Returner      = (*Optimistic)(nil)
)

// OptimisticOption changes how the optimistic strategy works.
type OptimisticOption func(*Optimistic)

// Capped makes the strategy mysql-version-capped: it gives up after three lost writes and
// answers sold out while stock remains, as capped retries do. Unsafe: it undersells.
func Capped() OptimisticOption {
	return func(v *Optimistic) { v.capped, v.strategy = true, sale.StrategyMySQLVersionCapped }
}

// NewOptimistic returns the mysql-version strategy. wait bounds how long a purchase keeps losing
// before it gets sale.ErrLockTimeout.
func NewOptimistic(st *store.Store, wait time.Duration, obs AttemptObserver, opts ...OptimisticOption) (*Optimistic, error) {
	switch {
	case st == nil || obs == nil:
		return nil, errors.New("stock: mysql-version needs a store and an observer")
	case wait <= 0:
		return nil, errors.New("stock: lock wait must be positive")
	}
	v := &Optimistic{store: st, strategy: sale.StrategyMySQLVersion, wait: wait, observer: obs}
	for _, o := range opts {
		o(v)
	}
	return v, nil
}

// Deduct runs one purchase as a batch of its own.
func (v *Optimistic) Deduct(ctx context.Context, r sale.Reservation) error {
	return single(v.DeductBatch(ctx, []sale.Reservation{r}))
}

// DeductBatch tries the batch's read-check-write until a try's write wins, or its stock read
// decides the batch without a write (sold out), or the lock wait is spent.
func (v *Optimistic) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if err := checkBatch(batch, v.strategy); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(v.wait)
	for lost := 0; ; lost++ {
		o, err := v.try(ctx, batch)
		if !errors.Is(err, errConflict) {
			return o, err
		}
		if v.capped && lost+1 >= cappedConflicts {
			return giveUp(o, lost+1), nil
		}
		if time.Until(deadline) <= 0 {
			return nil, fmt.Errorf("%w: %s write of product %d lost %d times in %s", sale.ErrLockTimeout, v.strategy, batch[0].ProductID, lost+1, v.wait)
		}
		if err := backOff(ctx, lost, deadline); err != nil {
			return nil, err
		}
	}
}

// try is one transaction: read stock and version, reserve, allocate, write if the version is
// unchanged. It returns errConflict when the write lost.
func (v *Optimistic) try(ctx context.Context, batch []sale.Reservation) (outcomes, error) {
	r0 := batch[0]
	var o outcomes
	err := v.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		o = make(outcomes, len(batch))
		stock, version, err := tx.VersionedStock(ctx, r0.ProductID, v.strategy, r0.Epoch)
		if err != nil {
			return err
		}
		if stock < minQuantity(batch) {
			o.allocate(batch, o.open(), stock, false) // a committed stock that serves none: truly sold out
			return nil
		}
		reserved, err := o.reserve(ctx, tx, batch, o.open())
		if err != nil || len(reserved) == 0 {
			return err
		}
		winners, taken := o.allocate(batch, reserved, stock, true)
		if taken == 0 {
			return errNothingTaken
		}
		if err := tx.Unreserve(ctx, pick(batch, losers(reserved, winners))); err != nil {
			return err
		}
		if v.beforeWrite != nil {
			v.beforeWrite(ctx)
		}
		return v.write(ctx, tx, r0.ProductID, r0.Epoch, version, stock-taken)
	})
	switch {
	case errors.Is(err, errConflict):
		return o, err
	case err != nil && !errors.Is(err, errNothingTaken):
		return nil, err
	}
	return o, nil
}

// Return gives the units back with the same versioned write, the orders marked returned in its
// transaction (a lost write un-marks them with it), and runs again on a lost write for as long
// as ctx allows, with no cap: no buyer waits to be told busy, and the units belong back on sale
// now, not at the expirer's next round.
func (v *Optimistic) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	for lost := 0; ; lost++ {
		var units int
		err := v.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
			units = 0
			stock, version, err := tx.VersionedStock(ctx, b.ProductID, v.strategy, b.Epoch)
			if err != nil {
				return err
			}
			if units, err = tx.MarkReturned(ctx, b.ProductID, orderIDs(b)); err != nil || units == 0 {
				return err
			}
			return v.write(ctx, tx, b.ProductID, b.Epoch, version, stock+units)
		})
		if !errors.Is(err, errConflict) {
			return units, err
		}
		if err := backOff(ctx, lost, time.Time{}); err != nil {
			return 0, err
		}
	}
}

// write is the versioned write, counted won or lost.
func (v *Optimistic) write(ctx context.Context, tx *store.PurchaseTx, productID int64, epoch, version uint64, stock int) error {
	won, err := tx.SetStockIfVersion(ctx, productID, v.strategy, epoch, version, stock)
	if err != nil {
		return err
	}
	v.observer.LockAttempt(v.strategy, won)
	if !won {
		return errConflict
	}
	return nil
}

// giveUp is mysql-version-capped's answer after its last lost write: every purchase of the batch
// still open is told sold out, whatever the stock. (Those refused as duplicates of committed
// purchases keep that answer: it is true whatever the stock.)
func giveUp(o outcomes, lost int) []error {
	for i, err := range o {
		if err == nil || errors.Is(err, sale.ErrSoldOut) {
			o[i] = fmt.Errorf("%w: gave up after %d conflicting writes", sale.ErrSoldOut, lost)
		}
	}
	return o
}

// backOff sleeps before the try after lost+1 lost writes: full jitter, so that the losers of one
// round do not collide again in step. It returns ctx's error if ctx ends first; it never sleeps
// past deadline (unless zero).
func backOff(ctx context.Context, lost int, deadline time.Time) error {
	d := rand.N(min(maxBackoff, firstBackoff<<min(lost, 10)) + 1)
	if !deadline.IsZero() {
		d = min(d, max(0, time.Until(deadline)))
	}
	return pause.For(ctx, d)
}
