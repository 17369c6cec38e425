package stock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// LockObserver is told how long purchases waited for the product's lock and when a lease was
// lost while held.
type LockObserver interface {
	ObserveLockWait(st sale.Strategy, took time.Duration)
	LockLost(st sale.Strategy)
}

// Locked deducts under a distributed lock (the `redis` and `zk` strategies, and the lock zoo's
// lock strategies: mysql-lock-table, zk-herd, zk-reentrant, …): it takes the
// product's lock, then runs the same read-check-write as `none`, with a plain write. The lock is
// what keeps two deductions out of the critical section at once; the fencing token is what keeps
// a holder whose lease ran out (a GC pause, a stalled network) from writing over a newer holder:
//
//  1. acquire the lock `<database>.product-<id>` → a lease with token T
//  2. claim the product's fence with T (its own statement: accepted only if T is larger than
//     every token the product has seen)
//  3. one transaction: read stock, give it to the batch's purchases in arrival order, reserve
//     the winners, write stock = read − taken only while the fence still holds T, commit
//  4. release the lock
//
// One lock acquisition and one fenced transaction serve a whole batch of purchases; a batch
// whose lease is lost before its write sells nothing.
//
// Why claim before reading: a fence checked only at the write lets a stale holder that read
// before a newer holder's write, and writes after the newer holder's read, through — two buyers
// on one unit. Claiming first orders every read behind the fence too.
type Locked struct {
	store    *store.Store
	strategy sale.Strategy
	locker   lock.Locker
	wait     time.Duration
	observer LockObserver
	// hold, when set (a test, a failpoint of the chaos runs), runs inside the critical section,
	// between the read and the write: a holder that stalls or dies there.
	hold func(ctx context.Context)
	// unfenced skips the fence (LockedOptions.Unfenced): the fence's negative-control test, and
	// the zoo's unsafe variants that the write-ups describe without one.
	unfenced bool
	// reentrant makes the write step take the lock again, nested, for the batch's owner
	// (LockedOptions.Reentrant); ownerPrefix and owners name those owners.
	reentrant   bool
	ownerPrefix string
	owners      atomic.Uint64
}

// LockedOptions are what a Locked strategy is made of.
type LockedOptions struct {
	// Store runs the critical section's transaction. Required.
	Store *store.Store
	// Strategy is the strategy's name, one of the registry (sale.Catalog). Required.
	Strategy sale.Strategy
	// Locker hands out the product's lock. Required.
	Locker lock.Locker
	// Wait bounds the lock wait: a purchase that waits longer gets sale.ErrLockTimeout. Required.
	Wait time.Duration
	// Observer is told of lock waits and lost leases. Required.
	Observer LockObserver
	// Unfenced makes the strategy write without claiming or checking the fence, and without
	// looking at its lease's Lost() first, as the code of the write-ups does (lock, work,
	// unlock): a holder whose lease ran out writes over the next holder's sale. Unsafe. (Looking
	// at Lost() just before the write would narrow the window, not close it: the pause can fall
	// between the look and the write. Redlock's validity time is such a look; only the fence
	// closes the window.)
	Unfenced bool
	// Reentrant makes the fenced write step take the product's lock itself, nested inside the
	// batch's acquisition and for the same owner (one lock.WithOwner per batch): the
	// zk-reentrant and redis-reentrant strategies, over a re-entrant locker.
	//
	// Why: code composed of steps that each guard themselves, as a write step that may also be
	// called alone must, takes a lock its caller already holds. With a lock that knows its
	// holder (Curator's InterProcessMutex), the nested acquisition returns at once with the
	// caller's grant and token. With one that does not, it queues behind its own caller and
	// waits for itself, here inside the purchase transaction, until the lock wait runs out: over
	// a plain locker this option sells nothing, which its test shows.
	Reentrant bool
}

// SetHold installs f to run inside the critical section of every deduction, between the read
// and the write, with the lock held (nil removes it): the tests and the chaos runs stall or kill
// a holder there.
func (l *Locked) SetHold(f func(ctx context.Context)) { l.hold = f }

var (
	_ sale.Deductor      = (*Locked)(nil)
	_ sale.BatchDeductor = (*Locked)(nil)
)

// NewLocked returns the lock strategy o.Strategy over o.Locker.
func NewLocked(o LockedOptions) (*Locked, error) {
	switch {
	case o.Store == nil || o.Locker == nil || o.Observer == nil:
		return nil, errors.New("stock: locked strategy needs a store, a locker and an observer")
	case o.Wait <= 0:
		return nil, errors.New("stock: lock wait must be positive")
	}
	if _, ok := o.Strategy.Info(); !ok {
		return nil, fmt.Errorf("stock: unknown strategy %q", o.Strategy)
	}
	l := &Locked{store: o.Store, strategy: o.Strategy, locker: o.Locker, wait: o.Wait, observer: o.Observer, unfenced: o.Unfenced}
	if o.Reentrant {
		host, err := os.Hostname()
		if err != nil {
			host = "unknown-host"
		}
		l.reentrant = true
		l.ownerPrefix = host + "/" + strconv.Itoa(os.Getpid())
	}
	return l, nil
}

// LockName is the name of a product's lock: the database's name and the product's id, since two
// deployments (the dev stack and the bench, say) may share one Redis and one ZooKeeper.
func LockName(database string, productID int64) string {
	return database + ".product-" + strconv.FormatInt(productID, 10)
}

// Deduct runs one purchase as a batch of its own.
func (l *Locked) Deduct(ctx context.Context, r sale.Reservation) error {
	return single(l.DeductBatch(ctx, []sale.Reservation{r}))
}

// DeductBatch runs the critical section once, under the product's lock, for the whole batch.
func (l *Locked) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if err := checkBatch(batch, l.strategy); err != nil {
		return nil, err
	}
	r0 := batch[0]
	ctx = l.withOwner(ctx, "batch")
	lease, err := l.acquire(ctx, r0.ProductID)
	if err != nil {
		return nil, err
	}
	defer l.release(ctx, lease)

	if !l.unfenced {
		if err := l.store.ClaimFence(ctx, r0.ProductID, l.strategy, r0.Epoch, fenceOf(lease)); err != nil {
			return nil, err
		}
	}
	var o outcomes
	err = l.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		o = make(outcomes, len(batch))
		stock, err := tx.Stock(ctx, r0.ProductID, l.strategy, r0.Epoch)
		if err != nil {
			return err
		}
		if stock < minQuantity(batch) {
			o.allocate(batch, o.open(), stock, false) // nothing fits: all sold out, nothing to write
			return nil
		}
		reserved, err := o.reserve(ctx, tx, batch, o.open())
		if err != nil {
			return err
		}
		winners, taken := o.allocate(batch, reserved, stock, true)
		if taken == 0 {
			return errNothingTaken
		}
		if err := tx.Unreserve(ctx, pick(batch, losers(reserved, winners))); err != nil {
			return err
		}
		return l.write(ctx, tx, lease, r0, stock-taken)
	})
	if err != nil && !errors.Is(err, errNothingTaken) {
		return nil, err
	}
	return o, nil
}

// write is the end of the critical section: the new stock, fenced. With Reentrant it takes the
// product's lock itself, as a step that may be called alone would; the batch's owner holds it,
// so that re-enters at once, with the batch's token and Lost().
func (l *Locked) write(ctx context.Context, tx *store.PurchaseTx, lease lock.Lease, r0 sale.Reservation, stock int) error {
	if l.reentrant {
		nested, err := l.lockProduct(ctx, r0.ProductID)
		if err != nil {
			return err
		}
		// Released before the batch's own lease: the lock stays held until that one goes.
		// A loss shows in Lost(), checked below, and is counted by the batch's release.
		defer func() { _ = nested.Release(context.WithoutCancel(ctx)) }()
		lease = nested
	}
	if l.hold != nil {
		l.hold(ctx)
	}
	if l.unfenced {
		return tx.SetStock(ctx, r0.ProductID, l.strategy, r0.Epoch, stock)
	}
	select {
	case <-lease.Lost():
		// The fence would refuse the write anyway; stop before trying.
		return fmt.Errorf("%w: lease lost during the critical section", sale.ErrFenced)
	default:
	}
	return tx.SetStockFenced(ctx, r0.ProductID, l.strategy, r0.Epoch, fenceOf(lease), stock)
}

// fenceOf is what a holder of lease claims and writes under: its token, and the data that
// counted it (a ZooKeeper ensemble's identity), so that a new ensemble's lower tokens move the
// fence on instead of being refused (store.Fence).
func fenceOf(lease lock.Lease) store.Fence {
	return store.Fence{Issuer: lock.IssuerOf(lease), Token: lease.Token()}
}

// withOwner names, for Reentrant, the owner of what ctx acquires: host, process and a number of
// its own, which the lock node shows an operator. Without Reentrant, ctx is returned unchanged.
func (l *Locked) withOwner(ctx context.Context, what string) context.Context {
	if !l.reentrant {
		return ctx
	}
	return lock.WithOwner(ctx, fmt.Sprintf("%s/%s-%d", l.ownerPrefix, what, l.owners.Add(1)))
}

// acquire takes the product's lock and observes how long that took.
func (l *Locked) acquire(ctx context.Context, productID int64) (lock.Lease, error) {
	start := time.Now()
	lease, err := l.lockProduct(ctx, productID)
	l.observer.ObserveLockWait(l.strategy, time.Since(start))
	return lease, err
}

// lockProduct takes the product's lock within the lock wait.
func (l *Locked) lockProduct(ctx context.Context, productID int64) (lock.Lease, error) {
	wctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	lease, err := l.locker.Acquire(wctx, LockName(l.store.Name(), productID))
	switch {
	case err == nil:
		return lease, nil
	case ctx.Err() != nil:
		return nil, ctx.Err() // the batch's own time ran out
	case errors.Is(err, lock.ErrUnavailable):
		return nil, fmt.Errorf("%w: %s lock service unreachable: %w", sale.ErrUnavailable, l.strategy, err)
	case errors.Is(err, lock.ErrTimeout):
		return nil, fmt.Errorf("%w: %s lock of product %d after %s", sale.ErrLockTimeout, l.strategy, productID, l.wait)
	}
	return nil, fmt.Errorf("%w: %s lock: %w", sale.ErrUnavailable, l.strategy, err)
}

// release gives the lock back even when the purchase's ctx has ended, and counts a lease that
// was lost on the way.
func (l *Locked) release(ctx context.Context, lease lock.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := lease.Release(rctx)
	select {
	case <-lease.Lost():
		l.observer.LockLost(l.strategy)
		return
	default:
	}
	if errors.Is(err, lock.ErrNotHeld) {
		l.observer.LockLost(l.strategy)
	}
}
