package store

import (
	"context"
	"database/sql"
	"errors"

	"gorm.io/gorm"

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

// SaleReservations reads, in one consistent snapshot, the product and every reservation of its
// current sale (a reset deletes the earlier ones), keyed or not: what the redis-lua strategy
// rebuilds its Redis state from.
func (s *Store) SaleReservations(ctx context.Context, productID int64) (sale.Product, []sale.KeyedReceipt, error) {
	var (
		p   sale.Product
		out []sale.KeyedReceipt
	)
	// REPEATABLE READ: the second statement sees exactly what the first one saw.
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row productRow
		if err := tx.Take(&row, productID).Error; err != nil {
			return err
		}
		p = row.domain()
		var rows []keyedRow // idem_key NULL scans as ""
		err := tx.Raw(`SELECT order_id, product_id, user_id, COALESCE(idem_key, '') AS idem_key, quantity, strategy
			FROM reservations WHERE product_id = ?`, productID).Scan(&rows).Error
		if err != nil {
			return err
		}
		out = make([]sale.KeyedReceipt, len(rows))
		for i, r := range rows {
			out[i] = sale.KeyedReceipt{Key: r.IdemKey, Receipt: r.receipt()}
		}
		return nil
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return p, out, classify("sale reservations", err)
}
