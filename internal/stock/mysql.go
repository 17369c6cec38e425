package stock

import (
	"context"
	"errors"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// MySQL deducts with one conditional UPDATE (`... WHERE id = ? AND stock >= ?`) inside the
// purchase transaction. The database's row lock is the mutual exclusion and the condition is the
// check, evaluated on the latest committed stock: it cannot oversell, whatever the number of
// replicas. Its ceiling is the hot row: deductions of one product commit one after another,
// which is why a batch of purchases takes its units with one UPDATE.
type MySQL struct {
	store *store.Store
	// afterReserve and beforeCommit, when set by a test, run in each transaction attempt after
	// the INSERTs and at its end: the tests provoke deadlocks and failed commits there.
	afterReserve, beforeCommit func(ctx context.Context, tx *store.PurchaseTx) error
}

var (
	_ sale.Deductor      = (*MySQL)(nil)
	_ sale.BatchDeductor = (*MySQL)(nil)
)

// NewMySQL returns the mysql strategy.
func NewMySQL(st *store.Store) (*MySQL, error) {
	if st == nil {
		return nil, errors.New("stock: nil store")
	}
	return &MySQL{store: st}, nil
}

// Deduct runs one purchase as a batch of its own.
func (m *MySQL) Deduct(ctx context.Context, r sale.Reservation) error {
	return single(m.DeductBatch(ctx, []sale.Reservation{r}))
}

// DeductBatch reserves first and updates the hot row last, so that the row lock is held only
// for the UPDATE and the commit, not for the inserts:
//
//  1. insert the batch's reservations, with their idempotency keys: one multi-row INSERT (a
//     purchase that collides with a committed one is refused and the others inserted again)
//  2. UPDATE stock = stock - <the batch's units> WHERE stock >= <the batch's units>
//  3. if that took nothing (fewer units left than the batch wants): lock the row, read the
//     stock, give it to the earliest purchases that fit, delete the others' reservations, and
//     take what the winners got
//  4. commit
func (m *MySQL) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if err := checkBatch(batch, sale.StrategyMySQL); err != nil {
		return nil, err
	}
	r0 := batch[0]
	var o outcomes
	err := m.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		o = make(outcomes, len(batch))
		reserved, err := o.reserve(ctx, tx, batch, o.open())
		if err != nil || len(reserved) == 0 {
			return err
		}
		if m.afterReserve != nil {
			if err := m.afterReserve(ctx, tx); err != nil {
				return err
			}
		}
		ok, err := tx.TakeIfAvailable(ctx, r0.ProductID, sale.StrategyMySQL, r0.Epoch, units(batch, reserved))
		if err != nil {
			return err
		}
		if !ok {
			if err := m.takeWhatIsLeft(ctx, tx, batch, o, reserved); err != nil {
				return err
			}
		}
		if m.beforeCommit != nil {
			return m.beforeCommit(ctx, tx)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNothingTaken) {
		return nil, err
	}
	return o, nil
}

// takeWhatIsLeft is step 3: the batch wants more than is left.
func (m *MySQL) takeWhatIsLeft(ctx context.Context, tx *store.PurchaseTx, batch []sale.Reservation, o outcomes, reserved []int) error {
	r0 := batch[0]
	stock, err := tx.LockStock(ctx, r0.ProductID, sale.StrategyMySQL, r0.Epoch)
	if err != nil {
		return err
	}
	winners, taken := o.allocate(batch, reserved, stock, true)
	if taken == 0 {
		return errNothingTaken // roll the reservations back
	}
	if err := tx.Unreserve(ctx, pick(batch, losers(reserved, winners))); err != nil {
		return err
	}
	return tx.Take(ctx, r0.ProductID, taken)
}
