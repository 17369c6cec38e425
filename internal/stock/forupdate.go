package stock

// The pessimistic lock, mysql-for-update: the textbook flash-sale transaction.
//
//	BEGIN; SELECT stock FROM products WHERE id = ? FOR UPDATE; -- check in the application
//	UPDATE products SET stock = <read − taken> WHERE id = ?; COMMIT
//
// The row lock that FOR UPDATE takes is the mutual exclusion: every other deduction of the
// product queues on it until COMMIT, so the stock it read cannot go stale before its write, and
// it never oversells, whatever the number of replicas. Unlike the conditional UPDATE of `mysql`,
// whose lock lives for one statement and the commit, this one is held across round trips between
// the application and the database.
//
// What breaks it, per the classic write-ups: a holder that stalls with the lock (a GC pause, a
// slow network, a swapped-out process) stalls every buyer of the product, who wait up to
// innodb_lock_wait_timeout (50 s by default) and then fail; and the round trips made with the
// lock held cap the product's sales (FACTS.md: ~580–1,180 such transactions a second here, a
// third of the conditional UPDATE's).
//
// What this implementation does about it: the wait is bounded by the app's lock wait
// (SECKILL_LOCK_WAIT), per transaction, and a wait that runs out is answered 429
// (sale.ErrLockTimeout), with nothing deducted and nothing reserved, never retried into a longer
// one (store.PurchaseLockWait). A batch of purchases takes the lock once. A holder that dies
// loses its connection and MySQL rolls its transaction back, releasing the lock; a holder that
// stalls and resumes still holds its lock, so its write is sound: no fence is needed, the lock
// cannot expire under it. What it leaves alone: a stalled or partitioned holder keeps the lock
// until it resumes or the server drops its connection, and every buyer of the product is
// answered 429 meanwhile.

import (
	"context"
	"errors"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// AttemptObserver counts the tries of a lock or of an optimistic write: won, or lost (a wasted
// try: a lock wait that ran out, a write that found another version).
type AttemptObserver interface {
	LockAttempt(st sale.Strategy, won bool)
}

// RowLockObserver is told how each try of the product's row lock went and how long it waited.
type RowLockObserver interface {
	AttemptObserver
	ObserveLockWait(st sale.Strategy, took time.Duration)
}

// ForUpdate is the mysql-for-update strategy: SELECT … FOR UPDATE, check, UPDATE, commit.
type ForUpdate struct {
	store    *store.Store
	wait     time.Duration
	observer RowLockObserver
	// hold, when set (a test, a failpoint of the chaos runs), runs with the row lock held, between
	// the read and the write.
	hold func(ctx context.Context)
}

var (
	_ sale.Deductor      = (*ForUpdate)(nil)
	_ sale.BatchDeductor = (*ForUpdate)(nil)
	_ sale.Returner      = (*ForUpdate)(nil)
)

// NewForUpdate returns the mysql-for-update strategy. wait bounds every row-lock wait; a
// purchase that waits longer gets sale.ErrLockTimeout.
func NewForUpdate(st *store.Store, wait time.Duration, obs RowLockObserver) (*ForUpdate, error) {
	switch {
	case st == nil || obs == nil:
		return nil, errors.New("stock: mysql-for-update needs a store and an observer")
	case wait <= 0:
		return nil, errors.New("stock: lock wait must be positive")
	}
	return &ForUpdate{store: st, wait: wait, observer: obs}, nil
}

// SetHold installs f to run with the row lock held, between the read and the write of every
// deduction (nil removes it): the tests and the chaos runs stall or kill a holder there.
func (f *ForUpdate) SetHold(h func(ctx context.Context)) { f.hold = h }

// Deduct runs one purchase as a batch of its own.
func (f *ForUpdate) Deduct(ctx context.Context, r sale.Reservation) error {
	return single(f.DeductBatch(ctx, []sale.Reservation{r}))
}

// DeductBatch reserves first and locks last, so that the lock is not held for the INSERTs:
//
//  1. insert the batch's reservations (a purchase that collides with a committed one is
//     refused, the others inserted again)
//  2. SELECT stock … FOR UPDATE: wait for the row lock, at most the lock wait
//  3. give the stock to the earliest purchases that fit, delete the others' reservations
//  4. UPDATE stock = read − taken, and commit, which releases the lock
func (f *ForUpdate) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if err := checkBatch(batch, sale.StrategyMySQLForUpdate); err != nil {
		return nil, err
	}
	r0 := batch[0]
	var o outcomes
	err := f.store.PurchaseLockWait(ctx, f.wait, func(ctx context.Context, tx *store.PurchaseTx) error {
		o = make(outcomes, len(batch))
		reserved, err := o.reserve(ctx, tx, batch, o.open())
		if err != nil || len(reserved) == 0 {
			return err
		}
		stock, err := f.lock(ctx, tx, r0.ProductID, r0.Epoch)
		if err != nil {
			return err
		}
		if f.hold != nil {
			f.hold(ctx)
		}
		winners, taken := o.allocate(batch, reserved, stock, true)
		if taken == 0 {
			return errNothingTaken
		}
		if err := tx.Unreserve(ctx, pick(batch, losers(reserved, winners))); err != nil {
			return err
		}
		return tx.SetStock(ctx, r0.ProductID, sale.StrategyMySQLForUpdate, r0.Epoch, stock-taken)
	})
	if err != nil && !errors.Is(err, errNothingTaken) {
		f.countTimeout(err)
		return nil, err
	}
	return o, nil
}

// Return gives the units back under the same row lock: lock, mark the orders returned, write
// stock + units.
func (f *ForUpdate) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	var units int
	err := f.store.PurchaseLockWait(ctx, f.wait, func(ctx context.Context, tx *store.PurchaseTx) error {
		units = 0
		stock, err := f.lock(ctx, tx, b.ProductID, b.Epoch)
		if err != nil {
			return err
		}
		if units, err = tx.MarkReturned(ctx, b.ProductID, orderIDs(b)); err != nil || units == 0 {
			return err
		}
		return tx.SetStock(ctx, b.ProductID, sale.StrategyMySQLForUpdate, b.Epoch, stock+units)
	})
	f.countTimeout(err)
	return units, err
}

// lock takes the product's row lock and reads its stock, and counts a grant.
func (f *ForUpdate) lock(ctx context.Context, tx *store.PurchaseTx, productID int64, epoch uint64) (int, error) {
	start := time.Now()
	stock, err := tx.LockStock(ctx, productID, sale.StrategyMySQLForUpdate, epoch)
	f.observer.ObserveLockWait(sale.StrategyMySQLForUpdate, time.Since(start))
	if err == nil {
		f.observer.LockAttempt(sale.StrategyMySQLForUpdate, true)
	}
	return stock, err
}

// countTimeout counts a transaction that gave up waiting for a lock as a lost try.
func (f *ForUpdate) countTimeout(err error) {
	if errors.Is(err, sale.ErrLockTimeout) {
		f.observer.LockAttempt(sale.StrategyMySQLForUpdate, false)
	}
}
