// Package audit checks the invariants of seckill-go for one product straight from the database,
// with plain SQL and none of the application's code: the tests and the load test use it as the
// independent judge of whether a unit was oversold or lost. It only reads.
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Beginner starts the read-only transaction Load reads in: a *sql.DB, or a *sql.Conn whose
// session the caller has set (the running audit bounds its statements' time).
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Facts is what the database says about one product.
type Facts struct {
	ProductID    int64
	InitialStock int
	Stock        int
	PerUserLimit int
	// Reservations and ReservedUnits count accepted purchases (rows and units).
	Reservations  int
	ReservedUnits int
	// Orders and OrderUnits count orders created by the consumer: the orders of every status but
	// refused.
	Orders     int
	OrderUnits int
	// Refused and RefusedUnits count refused orders: redis-lua purchases accepted (202) that MySQL
	// then could not hold. They hold no unit: no reservation, no stock taken, no charge. Every
	// accepted purchase ends as an order or a refused order (Accepted).
	Refused      int
	RefusedUnits int
	// RefusedReserved counts refused orders whose order id has a reservation too, or that carry
	// a reservation, a payment or a return: a refusal that took a unit after all, or one the
	// consumer would skip creating the real order for.
	RefusedReserved int
	// Unpublished counts reservations the relay has not yet published.
	Unpublished int
	// UsersOverLimit counts users holding more units than PerUserLimit.
	UsersOverLimit int
	// OrphanOrders counts orders without their reservation.
	OrphanOrders int
	// The order lifecycle: units in paid orders, in expired or cancelled ones
	// (ClosedUnits), and of those the units back in stock (ReturnedUnits).
	PaidUnits     int
	ClosedUnits   int
	ReturnedUnits int
	// BadLifecycle counts orders whose columns contradict their status: returned but not closed,
	// paid without a payment id or with a close time, closed with a payment time.
	BadLifecycle int
	// ChargedUnpaid counts successful charges at the payment provider whose order is not paid
	// (money taken for a unit the buyer does not get); PaidUncharged paid orders without their
	// successful charge.
	ChargedUnpaid int
	PaidUncharged int
	// ChargedPaying counts those of ChargedUnpaid whose order is still `paying`: the provider
	// has answered and the shop has not yet written the order paid (or the payer died, and the
	// settlement of stuck payments will). Money in flight, not a unit lost, until the sale is
	// drained.
	ChargedPaying int
}

// Load reads the facts of one product, from one consistent snapshot of the database: its
// queries run in one read-only REPEATABLE READ transaction, so that a sale that goes on meanwhile
// (an expirer returning units between the read of the stock and the read of the orders) cannot
// make the facts disagree with each other.
func Load(ctx context.Context, db Beginner, productID int64) (_ Facts, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d: %w", productID, err)
	}
	defer func() { _ = tx.Rollback() }() // read only: nothing to commit
	f := Facts{ProductID: productID}
	err = tx.QueryRowContext(ctx, `
		SELECT p.initial_stock, p.stock, p.per_user_limit,
		       (SELECT COUNT(*) FROM reservations r WHERE r.product_id = p.id),
		       (SELECT COALESCE(SUM(r.quantity), 0) FROM reservations r WHERE r.product_id = p.id),
		       (SELECT COUNT(*) FROM orders o WHERE o.product_id = p.id AND o.status <> 'refused'),
		       (SELECT COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.product_id = p.id AND o.status <> 'refused'),
		       (SELECT COUNT(*) FROM reservations r WHERE r.product_id = p.id AND r.published_at IS NULL),
		       (SELECT COUNT(*) FROM orders o LEFT JOIN reservations r ON r.id = o.reservation_id
		        WHERE o.product_id = p.id AND o.status <> 'refused' AND (r.id IS NULL OR r.order_id <> o.order_id)),
		       (SELECT COUNT(*) FROM orders o WHERE o.product_id = p.id AND o.status = 'refused'),
		       (SELECT COALESCE(SUM(o.quantity), 0) FROM orders o WHERE o.product_id = p.id AND o.status = 'refused'),
		       (SELECT COUNT(*) FROM orders o WHERE o.product_id = p.id AND o.status = 'refused'
		        AND (o.reservation_id IS NOT NULL OR o.pay_key IS NOT NULL OR o.paid_at IS NOT NULL
		             OR o.closed_at IS NOT NULL OR o.returned_at IS NOT NULL
		             OR EXISTS (SELECT 1 FROM reservations r WHERE r.order_id = o.order_id)))
		FROM products p WHERE p.id = ?`, productID).Scan(
		&f.InitialStock, &f.Stock, &f.PerUserLimit, &f.Reservations, &f.ReservedUnits,
		&f.Orders, &f.OrderUnits, &f.Unpublished, &f.OrphanOrders, &f.Refused, &f.RefusedUnits, &f.RefusedReserved)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d: %w", productID, err)
	}
	err = tx.QueryRowContext(ctx, `
		SELECT COALESCE(SUM(CASE WHEN status = 'paid' THEN quantity END), 0),
		       COALESCE(SUM(CASE WHEN status IN ('expired', 'cancelled') THEN quantity END), 0),
		       COALESCE(SUM(CASE WHEN returned_at IS NOT NULL THEN quantity END), 0),
		       COUNT(CASE WHEN (returned_at IS NOT NULL AND status NOT IN ('expired', 'cancelled'))
		                    OR (status = 'paid' AND (payment_id IS NULL OR closed_at IS NOT NULL))
		                    OR (status IN ('expired', 'cancelled') AND paid_at IS NOT NULL) THEN 1 END)
		FROM orders WHERE product_id = ?`, productID).Scan(&f.PaidUnits, &f.ClosedUnits, &f.ReturnedUnits, &f.BadLifecycle)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d lifecycle: %w", productID, err)
	}
	err = tx.QueryRowContext(ctx, `
		SELECT (SELECT COUNT(*) FROM payment_charges c LEFT JOIN orders o ON o.order_id = c.order_id
		        WHERE c.product_id = ? AND c.outcome = 'succeeded'
		          AND (o.id IS NULL OR o.status <> 'paid' OR o.payment_id <> c.charge_id)),
		       (SELECT COUNT(*) FROM orders o LEFT JOIN payment_charges c
		          ON c.charge_id = o.payment_id AND c.outcome = 'succeeded' AND c.order_id = o.order_id
		        WHERE o.product_id = ? AND o.status = 'paid' AND c.charge_key IS NULL),
		       (SELECT COUNT(*) FROM payment_charges c JOIN orders o ON o.order_id = c.order_id
		        WHERE c.product_id = ? AND c.outcome = 'succeeded' AND o.status = 'paying')`,
		productID, productID, productID).Scan(&f.ChargedUnpaid, &f.PaidUncharged, &f.ChargedPaying)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d payments: %w", productID, err)
	}
	err = tx.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM (
		    SELECT user_id FROM reservations WHERE product_id = ?
		    GROUP BY user_id HAVING SUM(quantity) > ?) over_limit`, productID, f.PerUserLimit).Scan(&f.UsersOverLimit)
	if err != nil {
		return Facts{}, fmt.Errorf("audit product %d per-user limit: %w", productID, err)
	}
	return f, nil
}

// Accepted returns the purchases that ended as an order of any status: the consumer's orders and
// the refused ones. Once the queue drains, it is every purchase the buyers were told was accepted.
func (f Facts) Accepted() int { return f.Orders + f.Refused }

// Sold returns the units sold and not given back: reserved, less those of expired and cancelled
// orders that went back into the stock.
func (f Facts) Sold() int { return f.ReservedUnits - f.ReturnedUnits }

// Oversold returns the units handed out beyond the initial stock.
func (f Facts) Oversold() int {
	return max(0, f.Sold()-f.InitialStock, f.OrderUnits-f.ReturnedUnits-f.InitialStock, -f.Stock)
}

// Drained reports whether every reservation has become an order and every expired or cancelled
// order's units are back in stock.
func (f Facts) Drained() bool {
	return f.Orders == f.Reservations && f.OrderUnits == f.ReservedUnits && f.ReturnedUnits == f.ClosedUnits
}

// Violations lists every broken invariant, in words; empty means the product is sound. Pass
// drained=true once the order queue should be empty: then a reservation without its order is a
// violation too (invariant 2).
func (f Facts) Violations(drained bool) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	if n := f.Oversold(); n > 0 {
		add("OVERSOLD by %d units: initial stock %d, stock %d, reserved %d, returned %d, ordered %d",
			n, f.InitialStock, f.Stock, f.ReservedUnits, f.ReturnedUnits, f.OrderUnits)
	}
	if f.Stock < 0 {
		add("stock is negative: %d", f.Stock)
	}
	if got := f.InitialStock - f.Stock; got != f.Sold() {
		add("stock and reservations disagree: initial-stock = %d units taken, but %d units reserved and %d returned", got, f.ReservedUnits, f.ReturnedUnits)
	}
	if f.ReturnedUnits > f.ClosedUnits {
		add("%d units returned, more than the %d of expired and cancelled orders", f.ReturnedUnits, f.ClosedUnits)
	}
	if f.BadLifecycle > 0 {
		add("%d orders contradict their status (paid and closed, returned but not closed, or paid without a charge id)", f.BadLifecycle)
	}
	// A charge whose order is still paying is a payment in flight while the sale goes on (the
	// running audit, drained false); once drained, it is one the settlement should have ended.
	n := f.ChargedUnpaid
	if !drained {
		n -= f.ChargedPaying
	}
	if n > 0 {
		add("%d successful charges are not a paid order: money taken for a unit not sold", n)
	}
	if f.PaidUncharged > 0 {
		add("%d paid orders have no successful charge", f.PaidUncharged)
	}
	if f.UsersOverLimit > 0 {
		add("%d users hold more than the per-user limit of %d", f.UsersOverLimit, f.PerUserLimit)
	}
	if f.RefusedReserved > 0 {
		add("%d refused orders hold a reservation, a payment or a return: a refusal took a unit, or hides the order the consumer owes", f.RefusedReserved)
	}
	if f.OrphanOrders > 0 {
		add("%d orders have no matching reservation", f.OrphanOrders)
	}
	if f.Orders > f.Reservations {
		add("more orders (%d) than reservations (%d)", f.Orders, f.Reservations)
	}
	if drained && (f.Orders != f.Reservations || f.OrderUnits != f.ReservedUnits) {
		add("LOST: %d reservations (%d units) but %d orders (%d units) after the queue drained",
			f.Reservations, f.ReservedUnits, f.Orders, f.OrderUnits)
	}
	if drained && f.ReturnedUnits != f.ClosedUnits {
		add("NOT RETURNED: %d units of expired or cancelled orders, %d back in stock", f.ClosedUnits, f.ReturnedUnits)
	}
	return v
}

// WaitDrained polls until MySQL holds at least accepted reservations and refused orders of the
// product and every reservation has its order, or ctx ends, and returns the last facts read (with
// ctx's error if it ended first). accepted is how many purchases the caller saw accepted, 0 if it
// does not know: a redis-lua purchase is answered before its reservation reaches MySQL (its
// persister holds off during a burst), so without it a queue can look drained before the last of
// them arrive.
func WaitDrained(ctx context.Context, db *sql.DB, productID int64, accepted int, poll time.Duration) (Facts, error) {
	var last Facts // the last facts read: a read cut short by ctx's end must not replace them
	for {
		f, err := Load(ctx, db, productID)
		if err == nil {
			if f.Reservations+f.Refused >= accepted && f.Drained() {
				return f, nil
			}
			last = f
		}
		select {
		case <-ctx.Done():
			if err != nil && !errors.Is(err, ctx.Err()) {
				return last, fmt.Errorf("%w (the last read failed: %v)", ctx.Err(), err)
			}
			return last, ctx.Err()
		case <-time.After(poll):
		}
	}
}

// CompareAccepted checks the orders of a product, of every status (refused ones included: the
// buyer reads what happened), against the order ids the clients were told were accepted: missing
// are accepted ids with no order, unexpected are orders nobody was told of.
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
