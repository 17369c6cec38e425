package store

import (
	"context"
	"errors"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// RowFault reports whether err is a fault of the rows a statement touched rather than of the way
// to them: MySQL received the statement and refused it for what it found (a value out of range, a
// constraint, a trigger's signal), or the domain found the row unusable (an amount out of range).
// Run again, it fails again. A loop that meets one on one row of a batch parks that row (ParkOrder)
// and goes on; everything else (MySQL down, a connection lost, a lock conflict, a timeout, the
// server read-only during a failover) passes with time and is retried as it is.
func RowFault(err error) bool {
	if err == nil || errors.Is(err, sale.ErrUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, sale.ErrAmountOutOfRange) {
		return true
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errTooManyConns, errLockWaitTimeout, errDeadlock,
		1053,             // the server is shutting down
		1290, 1792, 1836, // read-only (a replica, or a failover under way)
		1317, 1927, // the query or the connection was killed
		1969, 3024: // a statement's time limit (MariaDB, MySQL)
		return false
	}
	return true
}

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
