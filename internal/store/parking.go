package store

import "context"

// maxParkError is the length of orders.park_error.
const maxParkError = 255

// ParkOrder parks orderID on behalf of loop (the expirer, the settlement of stuck payments, the
// returns): every checkout loop skips it from now on, with cause kept as its park_error. It
// reports whether this call parked it (false: parked already, by this loop or another replica's),
// so that the caller logs and counts each parked order once.
func (s *Store) ParkOrder(ctx context.Context, orderID, loop string, cause error) (bool, error) {
	msg := loop + ": " + cause.Error()
	if len(msg) > maxParkError {
		msg = msg[:maxParkError]
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE orders SET parked_at = NOW(6), park_error = ?
		WHERE order_id = ? AND parked_at IS NULL`, msg, orderID)
	if res.Error != nil {
		return false, classify("park order", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ParkedOrder is an order a checkout loop parked.
type ParkedOrder struct {
	OrderID   string
	ProductID int64
	Status    string
	ParkError string
}

// ParkedOrders lists up to limit parked orders, for the operators (and the tests).
func (s *Store) ParkedOrders(ctx context.Context, limit int) ([]ParkedOrder, error) {
	var out []ParkedOrder
	err := s.db.WithContext(ctx).Raw(`SELECT order_id, product_id, status, park_error FROM orders
		WHERE parked_at IS NOT NULL ORDER BY parked_at LIMIT ?`, limit).Scan(&out).Error
	return out, classify("parked orders", err)
}
