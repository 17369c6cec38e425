package store

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// BuyerOrder returns userID's accepted purchase orderID: queued until the consumer has created
// its order, then where the order is in its lifecycle. Another buyer's order is sale.ErrNotFound,
// the answer for an absent one: whoever learns an order id (it travels in URLs and logs) learns
// nothing from it. Order, which reads any order, is for the lifecycle's own use.
func (s *Store) BuyerOrder(ctx context.Context, orderID, userID string) (sale.Order, error) {
	o, err := s.buyersOrder(ctx, s.db, orderID, userID)
	if err != nil {
		return sale.Order{}, classify("buyer order", err)
	}
	return o.domain(), nil
}
