package store

import (
	"context"
	"errors"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// PersistReservations writes reservations that another system already decided and deducted (the
// redis-lua strategy's stream) in one transaction: those whose order id is not yet in MySQL are
// inserted, and the product's stock goes down by their units, so that MySQL's stock stays what
// the decider has deducted. It is idempotent on the order id: a batch written twice (a persister
// that died after its commit and before its acknowledgement) changes nothing the second time. It
// returns how many reservations it inserted, or sale.ErrSaleChanged (nothing written) when the
// product is no longer in epoch with strategy st: a reset cleared the sale those reservations
// belonged to.
//
// An Idempotency-Key that the same user already holds for another product (keys are unique per
// user in MySQL, while the decider keeps them per product) is not stored with the reservation:
// the unit is kept, only a replay of that key after the decider lost its state would not find it.
func (s *Store) PersistReservations(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, rs []sale.Reservation) (int, error) {
	var inserted int
	err := s.Purchase(ctx, func(ctx context.Context, tx *PurchaseTx) error {
		inserted = 0
		if _, err := tx.LockStock(ctx, productID, st, epoch); err != nil {
			return err
		}
		done, err := tx.existingOrders(ctx, rs)
		if err != nil {
			return err
		}
		fresh := make([]sale.Reservation, 0, len(rs))
		units := 0
		for _, r := range rs {
			if !done[r.OrderID] {
				fresh = append(fresh, r)
				units += r.Quantity
			}
		}
		if len(fresh) == 0 {
			return nil
		}
		err = tx.Reserve(ctx, fresh...)
		if errors.Is(err, ErrDuplicate) {
			if err = tx.dropForeignKeys(ctx, fresh); err == nil {
				err = tx.Reserve(ctx, fresh...)
			}
		}
		if err != nil {
			return err
		}
		inserted = len(fresh)
		return tx.Take(ctx, productID, units)
	})
	return inserted, err
}

// existingOrders returns which of the reservations' order ids are already stored.
func (t *PurchaseTx) existingOrders(ctx context.Context, rs []sale.Reservation) (map[string]bool, error) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
	}
	var found []string
	if err := t.tx.WithContext(ctx).Raw("SELECT order_id FROM reservations WHERE order_id IN ?", ids).Scan(&found).Error; err != nil {
		return nil, err
	}
	done := make(map[string]bool, len(found))
	for _, id := range found {
		done[id] = true
	}
	return done, nil
}

// dropForeignKeys clears, in rs, the Idempotency-Key of each reservation whose user already holds
// that key in a committed reservation.
func (t *PurchaseTx) dropForeignKeys(ctx context.Context, rs []sale.Reservation) error {
	var pairs []any
	for _, r := range rs {
		if r.IdempotencyKey != "" {
			pairs = append(pairs, []any{r.UserID, r.IdempotencyKey})
		}
	}
	if len(pairs) == 0 {
		return ErrDuplicate // not a key: a user's second reservation of the product, a decider's bug
	}
	var held []struct{ UserID, IdemKey string }
	if err := t.tx.WithContext(ctx).Raw("SELECT user_id, idem_key FROM reservations WHERE (user_id, idem_key) IN ?", pairs).
		Scan(&held).Error; err != nil {
		return err
	}
	taken := make(map[[2]string]bool, len(held))
	for _, h := range held {
		taken[[2]string{h.UserID, h.IdemKey}] = true
	}
	for i := range rs {
		if taken[[2]string{rs[i].UserID, rs[i].IdempotencyKey}] {
			rs[i].IdempotencyKey = ""
		}
	}
	return nil
}
