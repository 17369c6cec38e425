// Package audit checks the invariants of seckill-go for one product straight from the database,
// with plain SQL and none of the application's code: the tests and the load test use it as the
// independent judge of whether a unit was oversold or lost. It only reads.
package audit

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"
)

// Facts is what the database says about one product.
type Facts struct {
	ProductID    int64
	InitialStock int
	Stock        int
	PerUserLimit int
	// Reservations and ReservedUnits count accepted purchases (rows and units).
	Reservations  int
	ReservedUnits int
	// Orders and OrderUnits count orders created by the consumer.
	Orders     int
	OrderUnits int
	// Unpublished counts reservations the relay has not yet published.
	Unpublished int
	// UsersOverLimit counts users holding more units than PerUserLimit.
	UsersOverLimit int
	// OrphanOrders counts orders without their reservation.
	OrphanOrders int
}

// Load reads the facts of one product.
func Load(ctx context.Context, db *sql.DB, productID int64) (Facts, error) {
	f := Facts{ProductID: productID}
	err := db.QueryRowContext(ctx, `
		SELECT p.initial_stock, p.stock, p.per_user_limit,
		       (SELECT COUNT(*) FROM reservations r WHERE r.product_id = p.id),
		       (SELECT COALESCE(SUM(r.quantity), 0) FROM reservations r WHERE r.product_id = p.id),
		       (SELECT COUNT(*) FROM orders o WHERE o.product_id = p.id),
		       (SELECT COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.product_id = p.id),
		       (SELECT COUNT(*) FROM reservations r WHERE r.product_id = p.id AND r.published_at IS NULL),
		       (SELECT COUNT(*) FROM orders o LEFT JOIN reservations r ON r.id = o.reservation_id
		        WHERE o.product_id = p.id AND (r.id IS NULL OR r.order_id <> o.order_id))
		FROM products p WHERE p.id = ?`, productID).Scan(
		&f.InitialStock, &f.Stock, &f.PerUserLimit, &f.Reservations, &f.ReservedUnits,
		&f.Orders, &f.OrderUnits, &f.Unpublished, &f.OrphanOrders)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d: %w", productID, err)
	}
	err = db.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM (
		    SELECT user_id FROM reservations WHERE product_id = ?
		    GROUP BY user_id HAVING SUM(quantity) > ?) over_limit`, productID, f.PerUserLimit).Scan(&f.UsersOverLimit)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d per-user limit: %w", productID, err)
	}
	return f, nil
}

// Oversold returns the units handed out beyond the initial stock.
func (f Facts) Oversold() int {
	return max(0, f.ReservedUnits-f.InitialStock, f.OrderUnits-f.InitialStock, -f.Stock)
}

// Drained reports whether every reservation has become an order.
func (f Facts) Drained() bool { return f.Orders == f.Reservations && f.OrderUnits == f.ReservedUnits }

// Violations lists every broken invariant, in words; empty means the product is sound. Pass
// drained=true once the order queue should be empty: then a reservation without its order is a
// violation too (invariant 2).
func (f Facts) Violations(drained bool) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if n := f.Oversold(); n > 0 {
		add("OVERSOLD by %d units: initial stock %d, stock %d, reserved %d, ordered %d",
			n, f.InitialStock, f.Stock, f.ReservedUnits, f.OrderUnits)
	}
	if f.Stock < 0 {
		add("stock is negative: %d", f.Stock)
	}
	if got := f.InitialStock - f.Stock; got != f.ReservedUnits {
		add("stock and reservations disagree: initial-stock = %d units taken, but %d units reserved", got, f.ReservedUnits)
	}
	if f.UsersOverLimit > 0 {
		add("%d users hold more than the per-user limit of %d", f.UsersOverLimit, f.PerUserLimit)
	}
	if f.OrphanOrders > 0 {
		add("%d orders have no matching reservation", f.OrphanOrders)
	}
	if f.Orders > f.Reservations {
		add("more orders (%d) than reservations (%d)", f.Orders, f.Reservations)
	}
	if drained && !f.Drained() {
		add("LOST: %d reservations (%d units) but %d orders (%d units) after the queue drained",
			f.Reservations, f.ReservedUnits, f.Orders, f.OrderUnits)
	}
	return v
}

// WaitDrained polls until MySQL holds at least accepted reservations of the product and every
// reservation has its order, or ctx ends, and returns the last facts seen (with ctx's error if it
// ended first). accepted is how many purchases the caller saw accepted, 0 if it does not know: a
// redis-lua purchase is answered before its reservation reaches MySQL (its persister holds off
// during a burst), so without it a queue can look drained before the last of them arrive.
func WaitDrained(ctx context.Context, db *sql.DB, productID int64, accepted int, poll time.Duration) (Facts, error) {
	for {
		f, err := Load(ctx, db, productID)
		if err == nil && f.Reservations >= accepted && f.Drained() {
			return f, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return f, err
		case <-time.After(poll):
		}
	}
}

// CompareAccepted checks the orders of a product against the order ids the clients were told
// were accepted: missing are accepted ids with no order, unexpected are orders nobody was told of.
func CompareAccepted(ctx context.Context, db *sql.DB, productID int64, accepted []string) (missing, unexpected []string, err error) {
	rows, err := db.QueryContext(ctx, "SELECT order_id FROM orders WHERE product_id = ?", productID)
	if err != nil {
		return nil, nil, fmt.Errorf("audit orders: %w", err)
	}
	defer rows.Close()
	inDB := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, nil, err
		}
		inDB[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	told := map[string]bool{}
	for _, id := range accepted {
		told[id] = true
		if !inDB[id] {
			missing = append(missing, id)
		}
	}
	for id := range inDB {
		if !told[id] {
			unexpected = append(unexpected, id)
		}
	}
	slices.Sort(missing)
	slices.Sort(unexpected)
	return missing, unexpected, nil
}
