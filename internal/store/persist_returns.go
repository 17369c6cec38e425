package store

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// PersistReturns writes returns that another system already made (the redis-lua strategy's
// stream: its return script put the units back into the sale's stock in Redis) in one
// transaction under the product's row lock: those of orderIDs that are closed and not returned
// yet are marked returned, and exactly their units go back into the product's stock, so that
// MySQL's stock stays what the decider holds. It is idempotent on the order: a batch written twice
// (a persister that died after its commit and before its acknowledgement) gives nothing the
// second time. It returns the units it gave back, or sale.ErrSaleChanged (nothing written) when
// the product is no longer in epoch with strategy st, or its redis-lua state is no longer of
// generation gen (Redis lost the state that made these returns: their orders are still due, and
// are returned again into the rebuilt state; see ReloadSale). An order id MySQL refuses for its
// value fails the batch with sale.ErrPoison, nothing written.
func (s *Store) PersistReturns(ctx context.Context, productID int64, st sale.Strategy, epoch, gen uint64, orderIDs []string) (int, error) {
	var units int
	err := s.Purchase(ctx, func(ctx context.Context, tx *PurchaseTx) error {
		units = 0
		_, err := tx.lockLuaState(ctx, productID, st, epoch, gen)
		if err != nil {
			return err
		}
		if units, err = tx.MarkReturned(ctx, productID, orderIDs); err != nil || units == 0 {
			return err
		}
		return tx.Give(ctx, productID, st, epoch, units)
	})
	return units, err
}

// ReturnedOrders returns the ids of the product's orders whose units are back in its stock
// (returned_at set). The orders of a product are its current sale's: a reset deletes them.
func (s *Store) ReturnedOrders(ctx context.Context, productID int64) ([]string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Raw("SELECT order_id FROM orders WHERE product_id = ? AND returned_at IS NOT NULL", productID).
		Scan(&ids).Error
	return ids, classify("returned orders", err)
}
