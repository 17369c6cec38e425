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
// replicas. Its ceiling is the hot row: purchases of one product commit one after another.
type MySQL struct {
	store *store.Store
}

var _ sale.Deductor = (*MySQL)(nil)

// NewMySQL returns the mysql strategy.
func NewMySQL(st *store.Store) (*MySQL, error) {
	if st == nil {
		return nil, errors.New("stock: nil store")
	}
	return &MySQL{store: st}, nil
}

// Deduct reserves first and updates the hot row last, so that the row lock is held only for the
// UPDATE and the commit, not for the inserts.
func (m *MySQL) Deduct(ctx context.Context, r sale.Reservation) error {
	return m.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		if err := tx.Reserve(ctx, r); err != nil {
			return err
		}
		return tx.DecrementIfAvailable(ctx, r.ProductID, r.Quantity, sale.StrategyMySQL)
	})
}
