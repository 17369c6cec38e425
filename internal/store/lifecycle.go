package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// The order lifecycle. Every change of an order's status is one conditional UPDATE on
// its row, `... WHERE status = <the status it leaves>`: a payment's claim (confirmed → paying),
// the expirer's (confirmed → expired) and the buyer's cancel (confirmed → cancelled) race on that
// one write, and the row lock and the condition let exactly one of them change it. The event of a
// change (order.paid, order.expired, order.cancelled) enters the outbox (order_events) in the
// transaction of the change, and a change that closes orders marks their products as owing
// returns in it too (return_due.go).

// defaultPaymentWindow is how long an order waits for payment when Options.PaymentWindow is 0.
const defaultPaymentWindow = 10 * time.Minute

// The kinds of order_events.
const (
	EventPaid      = "order.paid"
	EventExpired   = "order.expired"
	EventCancelled = "order.cancelled"
)

// orderState is an order's row as the lifecycle reads it; Status is empty for a purchase still
// queued (a reservation without its order).
type orderState struct {
	OrderID    string
	ProductID  int64
	UserID     string
	Quantity   int
	PriceCents int64
	// AmountCents is what the order costs: its quantity at the product's price, computed here
	// (sale.AmountCents), never by MySQL, where one product's overflow would fail every query
	// that reads it.
	AmountCents int64 `gorm:"-"`
	Status      string
	PayKey      sql.NullString
	ExpiresAt   sql.NullTime
	PaidAt      sql.NullTime
	ClosedAt    sql.NullTime
	Returned    bool
	PaymentID   sql.NullString
	Refusal     string
}

func (o orderState) domain() sale.Order {
	out := sale.Order{OrderID: o.OrderID, ProductID: o.ProductID, UserID: o.UserID, Quantity: o.Quantity,
		AmountCents: o.AmountCents, Status: sale.StatusQueued}
	if o.Status != "" {
		out.Status = sale.OrderStatus(o.Status)
	}
	out.ExpiresAt, out.PaidAt, out.ClosedAt = o.ExpiresAt.Time, o.PaidAt.Time, o.ClosedAt.Time
	out.Returned, out.PaymentID, out.Refusal = o.Returned, o.PaymentID.String, sale.Code(o.Refusal)
	return out
}

// refusal is why a change that expected status from could not be made to an order in state o.
func (o orderState) refusal() error {
	switch sale.OrderStatus(o.Status) {
	case "":
		return sale.ErrOrderNotConfirmed
	case sale.StatusPaying:
		return sale.ErrPaymentInProgress
	case sale.StatusPaid:
		return sale.ErrOrderPaid
	case sale.StatusExpired:
		return sale.ErrOrderExpired
	case sale.StatusCancelled:
		return sale.ErrOrderCancelled
	case sale.StatusRefused:
		return sale.ErrOrderRefused
	}
	// Confirmed, but the window has run out and the expirer has not come by yet.
	return sale.ErrOrderExpired
}

// orderStateQuery reads an accepted purchase by its order id: its reservation with its order, if
// it has one yet, or its refused order (which has no reservation). At most one of the two halves
// finds a row: an order id is refused only where it is not reserved (PersistReservations).
const orderStateQuery = `
	SELECT r.order_id, r.product_id, r.user_id, r.quantity, p.price_cents,
	       COALESCE(o.status, '') AS status, o.pay_key, o.expires_at, o.paid_at, o.closed_at,
	       o.returned_at IS NOT NULL AS returned, o.payment_id, '' AS refusal
	FROM reservations r JOIN products p ON p.id = r.product_id LEFT JOIN orders o ON o.reservation_id = r.id
	WHERE r.order_id = ?
	UNION ALL
	SELECT o.order_id, o.product_id, o.user_id, o.quantity, p.price_cents,
	       o.status, o.pay_key, o.expires_at, o.paid_at, o.closed_at,
	       o.returned_at IS NOT NULL, o.payment_id, COALESCE(o.refusal, '')
	FROM orders o JOIN products p ON p.id = o.product_id
	WHERE o.order_id = ? AND o.reservation_id IS NULL`

func (s *Store) orderState(ctx context.Context, db *gorm.DB, orderID string) (o orderState, err error) {
	res := db.WithContext(ctx).Raw(orderStateQuery, orderID, orderID).Scan(&o)
	if res.Error != nil {
		return orderState{}, res.Error
	}
	if res.RowsAffected == 0 {
		return orderState{}, sale.ErrNotFound
	}
	o.AmountCents, err = sale.AmountCents(o.Quantity, o.PriceCents)
	return o, err
}

// Order returns an accepted purchase: queued until the consumer has created its order, then
// where the order is in its lifecycle.
func (s *Store) Order(ctx context.Context, orderID string) (sale.Order, error) {
	o, err := s.orderState(ctx, s.db, orderID)
	if err != nil {
		return sale.Order{}, classify("order", err)
	}
	return o.domain(), nil
}

// buyersOrder reads userID's order orderID; another buyer's order is not found.
func (s *Store) buyersOrder(ctx context.Context, db *gorm.DB, orderID, userID string) (orderState, error) {
	o, err := s.orderState(ctx, db, orderID)
	if err == nil && o.UserID != userID {
		err = sale.ErrNotFound
	}
	return o, err
}

// ClaimPayment claims userID's order for a payment with Idempotency-Key key: confirmed → paying,
// while its payment window is open. This is the write that decides a payment against the
// expirer. An order in `paying` with key is claimed already, by an earlier try of this payment
// (one that timed out, say): the caller resumes it, and the provider's idempotency on key keeps
// that from charging twice. replay is true, with no claim made, when the order was paid already
// with key: the caller answers as the first payment was answered. Otherwise the refusal says why the order
// cannot be paid now (sale.ErrOrderExpired, ErrOrderCancelled, ErrOrderPaid,
// ErrPaymentInProgress, ErrOrderNotConfirmed, ErrNotFound).
func (s *Store) ClaimPayment(ctx context.Context, orderID, userID, key string) (o sale.Order, replay bool, err error) {
	// An order whose amount cannot be computed is refused before anything is claimed: a claim
	// made first would leave it in `paying` with nothing to charge.
	if _, err := s.buyersOrder(ctx, s.db, orderID, userID); errors.Is(err, sale.ErrAmountOutOfRange) {
		return sale.Order{}, false, err
	}
	// The UPDATE can deadlock with an expirer's claim of the same rows (it locks them through
	// another index): it is one statement, run again.
	var res *gorm.DB
	if err := retryConflicts(ctx, "claim payment", func() error {
		res = s.db.WithContext(ctx).Exec(`UPDATE orders SET status = 'paying', pay_key = ?, pay_started_at = NOW(6)
			WHERE order_id = ? AND user_id = ? AND status = 'confirmed' AND expires_at > NOW(6)`, key, orderID, userID)
		return res.Error
	}); err != nil {
		return sale.Order{}, false, err
	}
	st, err := s.buyersOrder(ctx, s.db, orderID, userID)
	switch {
	case err != nil:
		return sale.Order{}, false, classify("claim payment", err)
	case res.RowsAffected == 1, sale.OrderStatus(st.Status) == sale.StatusPaying && st.PayKey.String == key:
		return st.domain(), false, nil
	case sale.OrderStatus(st.Status) == sale.StatusPaid && st.PayKey.String == key:
		return st.domain(), true, nil
	}
	return st.domain(), false, st.refusal()
}

// CompletePayment records the successful charge paymentID of the payment key claimed: paying →
// paid, and the order.paid event. Done already for this key, it does nothing.
func (s *Store) CompletePayment(ctx context.Context, orderID, key, paymentID string) (sale.Order, error) {
	var out sale.Order
	err := s.inTx(ctx, "complete payment", func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE orders SET status = 'paid', paid_at = NOW(6), payment_id = ?
			WHERE order_id = ? AND status = 'paying' AND pay_key = ?`, paymentID, orderID, key)
		if res.Error != nil {
			return res.Error
		}
		st, err := s.orderState(ctx, tx, orderID)
		if err != nil {
			return err
		}
		if res.RowsAffected == 0 && (sale.OrderStatus(st.Status) != sale.StatusPaid || st.PayKey.String != key) {
			return fmt.Errorf("store: order %s is %q, not paying with this key: %w", orderID, st.Status, st.refusal())
		}
		out = st.domain()
		return s.insertEvents(ctx, tx, EventPaid, []sale.ClosedOrder{{OrderID: st.OrderID, ProductID: st.ProductID, UserID: st.UserID, Quantity: st.Quantity}})
	})
	return out, err
}

// ReleasePayment gives up the claim of payment key (the provider declined it, or recovery found
// it never charged): paying → confirmed. The order awaits payment again until its window runs
// out; past it, the expirer takes it at its next round.
func (s *Store) ReleasePayment(ctx context.Context, orderID, key string) error {
	return retryConflicts(ctx, "release payment", func() error {
		return s.db.WithContext(ctx).Exec(`UPDATE orders SET status = 'confirmed', pay_key = NULL, pay_started_at = NULL
			WHERE order_id = ? AND status = 'paying' AND pay_key = ?`, orderID, key).Error
	})
}

// CancelOrder cancels userID's order before it is paid: confirmed → cancelled, with the
// order.cancelled event. Cancelled already, it returns the order as it is.
func (s *Store) CancelOrder(ctx context.Context, orderID, userID string) (sale.Order, error) {
	var out sale.Order
	err := s.inTx(ctx, "cancel order", func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE orders SET status = 'cancelled', closed_at = NOW(6)
			WHERE order_id = ? AND user_id = ? AND status = 'confirmed'`, orderID, userID)
		if res.Error != nil {
			return res.Error
		}
		st, err := s.buyersOrder(ctx, tx, orderID, userID)
		if err != nil {
			return err
		}
		out = st.domain()
		switch {
		case res.RowsAffected == 1:
			if err := s.insertEvents(ctx, tx, EventCancelled, []sale.ClosedOrder{{OrderID: st.OrderID, ProductID: st.ProductID, UserID: st.UserID, Quantity: st.Quantity}}); err != nil {
				return err
			}
			return markOwed(tx, []int64{st.ProductID})
		case sale.OrderStatus(st.Status) == sale.StatusCancelled:
			return nil
		case st.Status == string(sale.StatusConfirmed):
			return sale.ErrOrderExpired // unreachable: the UPDATE would have taken it
		}
		return st.refusal()
	})
	return out, err
}

// ExpireDue expires up to limit orders whose payment window has run out, oldest due first:
// confirmed → expired, with their order.expired events, in one transaction. The rows are claimed
// with FOR UPDATE SKIP LOCKED: expirers in every replica take disjoint batches without waiting for
// each other, a payment that claimed an order first has moved it out of `confirmed`, and an
// expirer killed before its commit leaves nothing claimed (its transaction rolls back; the next
// round takes the orders). Parked orders are skipped. It marks their products as owing returns
// (return_due.go) and returns the orders it expired, by product, with what their return needs
// (the product's strategy and epoch), so that the caller can give their units back at once.
func (s *Store) ExpireDue(ctx context.Context, limit int) ([]sale.ReturnDue, error) {
	return s.expire(ctx, "expire orders", limit, "")
}

// ExpireOrder expires orderID alone if its window has run out (nothing, if not): what an expirer
// does order by order when a batch fails for one of its rows, to find that row.
func (s *Store) ExpireOrder(ctx context.Context, orderID string) ([]sale.ReturnDue, error) {
	return s.expire(ctx, "expire order", 1, orderID)
}

// DueOrders lists up to limit orders whose payment window has run out (unclaimed: a read).
func (s *Store) DueOrders(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	err := s.db.WithContext(ctx).Raw(`SELECT order_id FROM orders
		WHERE status = 'confirmed' AND expires_at <= NOW(6) AND parked_at IS NULL
		ORDER BY expires_at LIMIT ?`, limit).Scan(&ids).Error
	return ids, classify("due orders", err)
}

func (s *Store) expire(ctx context.Context, op string, limit int, orderID string) ([]sale.ReturnDue, error) {
	var out []sale.ReturnDue
	err := s.inTx(ctx, op, func(tx *gorm.DB) error {
		out = nil
		var expired []sale.ClosedOrder
		q := `SELECT order_id, product_id, user_id, quantity FROM orders
			WHERE status = 'confirmed' AND expires_at <= NOW(6) AND parked_at IS NULL`
		args := []any{}
		if orderID != "" {
			q += " AND order_id = ?"
			args = append(args, orderID)
		}
		args = append(args, limit)
		if err := tx.Raw(q+" ORDER BY expires_at LIMIT ? FOR UPDATE SKIP LOCKED", args...).Scan(&expired).Error; err != nil || len(expired) == 0 {
			return err
		}
		ids := make([]string, len(expired))
		for i := range expired {
			expired[i].Status = sale.StatusExpired
			ids[i] = expired[i].OrderID
		}
		if err := tx.Exec(`UPDATE orders SET status = 'expired', closed_at = NOW(6)
			WHERE order_id IN ? AND status = 'confirmed'`, ids).Error; err != nil {
			return err
		}
		if err := s.insertEvents(ctx, tx, EventExpired, expired); err != nil {
			return err
		}
		var err error
		if out, err = byProduct(ctx, tx, expired); err != nil {
			return err
		}
		products := make([]int64, len(out))
		for i, d := range out {
			products[i] = d.ProductID
		}
		return markOwed(tx, products)
	})
	return out, err
}

// ReturnTarget is what a return of a product's units needs to know of the product.
type returnTarget struct {
	ID        int64
	Strategy  string
	SaleEpoch uint64
}

// byProduct groups closed orders by product, in the order of their first appearance, with each
// product's strategy and epoch (a plain read of the product rows: no lock on them, which every
// purchase of a mysql sale takes).
func byProduct(ctx context.Context, db *gorm.DB, orders []sale.ClosedOrder) ([]sale.ReturnDue, error) {
	var out []sale.ReturnDue
	at := map[int64]int{}
	for _, o := range orders {
		i, ok := at[o.ProductID]
		if !ok {
			i = len(out)
			at[o.ProductID] = i
			out = append(out, sale.ReturnDue{ReturnBatch: sale.ReturnBatch{ProductID: o.ProductID}})
		}
		out[i].Orders = append(out[i].Orders, o)
	}
	if len(out) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(out))
	for i, d := range out {
		ids[i] = d.ProductID
	}
	var targets []returnTarget
	if err := db.WithContext(ctx).Raw("SELECT id, strategy, sale_epoch FROM products WHERE id IN ?", ids).Scan(&targets).Error; err != nil {
		return nil, err
	}
	for _, t := range targets {
		out[at[t.ID]].Strategy, out[at[t.ID]].Epoch = sale.Strategy(t.Strategy), t.SaleEpoch
	}
	return out, nil
}

// ReturnsOf groups closed orders by product with what their return needs (see ReturnDue): a
// cancel's one order, returned at once.
func (s *Store) ReturnsOf(ctx context.Context, orders []sale.ClosedOrder) ([]sale.ReturnDue, error) {
	out, err := byProduct(ctx, s.db, orders)
	return out, classify("returns of orders", err)
}

// insertEvents writes one order event of kind per order into the outbox, in tx (of ctx). An event
// of that kind written already for an order (a repeated completion) is left as it was. With
// tracing on, the change is a span of its own (Options.TraceEvents), made of the orders'
// purchases' traceparents, and the events carry its traceparent to the event relay; off, it
// reads and writes none.
func (s *Store) insertEvents(ctx context.Context, tx *gorm.DB, kind string, orders []sale.ClosedOrder) (err error) {
	if len(orders) == 0 {
		return nil
	}
	tp := ""
	if s.traceEvents != nil {
		purchases, err := purchaseTraces(tx, orders)
		if err != nil {
			return err
		}
		var end func(error)
		ctx, tp, end = s.traceEvents(ctx, kind, purchases)
		defer func() { end(err) }()
		tx = tx.WithContext(ctx)
	}
	cols, insert := 5, "INSERT IGNORE INTO order_events (order_id, product_id, user_id, kind, quantity, created_at) VALUES "
	if tp != "" {
		cols, insert = 6, "INSERT IGNORE INTO order_events (order_id, product_id, user_id, kind, quantity, trace_parent, created_at) VALUES "
	}
	rows := make([]any, 0, cols*len(orders))
	for _, o := range orders {
		rows = append(rows, o.OrderID, o.ProductID, o.UserID, kind, o.Quantity)
		if tp != "" {
			rows = append(rows, tp)
		}
	}
	return tx.Exec(insert+valuesNow(len(orders), cols), rows...).Error
}

// purchaseTraces returns the traceparents of the orders' purchases, as their reservations keep
// them ("" for one untraced), in no particular order: a plain read, which locks nothing.
func purchaseTraces(tx *gorm.DB, orders []sale.ClosedOrder) ([]string, error) {
	ids := make([]string, len(orders))
	for i, o := range orders {
		ids[i] = o.OrderID
	}
	var tps []string
	err := tx.Raw("SELECT trace_parent FROM reservations WHERE order_id IN ? AND trace_parent IS NOT NULL", ids).Scan(&tps).Error
	return tps, err
}

// valuesNow is placeholders for rows of cols values and NOW(6).
func valuesNow(rows, cols int) string {
	group := "(" + strings.Repeat("?,", cols) + "NOW(6))"
	b := make([]byte, 0, rows*(len(group)+1))
	for i := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, group...)
	}
	return string(b)
}

// stuckRow is a stuck payment as StuckPayments reads it: its amount is computed here, never by
// MySQL (see orderState).
type stuckRow struct {
	OrderID    string
	ProductID  int64
	UserID     string
	Quantity   int
	PriceCents int64
	PayKey     string
}

// StuckPayments returns up to limit orders in `paying` whose claim is older than olderThan,
// parked ones aside. A row whose amount cannot be computed comes with its AmountErr: it fails
// alone, not the read of every other.
func (s *Store) StuckPayments(ctx context.Context, olderThan time.Duration, limit int) ([]sale.StuckPayment, error) {
	var rows []stuckRow
	err := s.db.WithContext(ctx).Raw(`
		SELECT o.order_id, o.product_id, o.user_id, o.quantity, p.price_cents, o.pay_key
		FROM orders o JOIN products p ON p.id = o.product_id
		WHERE o.status = 'paying' AND o.pay_started_at < NOW(6) - INTERVAL ? MICROSECOND AND o.parked_at IS NULL
		LIMIT ?`,
		olderThan.Microseconds(), limit).Scan(&rows).Error
	out := make([]sale.StuckPayment, len(rows))
	for i, r := range rows {
		out[i] = sale.StuckPayment{OrderID: r.OrderID, ProductID: r.ProductID, UserID: r.UserID, Quantity: r.Quantity, PayKey: r.PayKey}
		out[i].AmountCents, out[i].AmountErr = sale.AmountCents(r.Quantity, r.PriceCents)
	}
	return out, classify("stuck payments", err)
}

// Unreturned returns expired or cancelled orders whose units are not back in stock yet, parked
// ones aside: up to perProduct of each product, the oldest closed first, for up to maxProducts
// products, starting at the from-th (modulo their number) of the products that have some. A
// product with a crowd of due orders takes one batch's turn like any other, so that a fresh
// cancel on another waits for no one; from lets replicas start on different products.
func (s *Store) Unreturned(ctx context.Context, perProduct, maxProducts, from int) ([]sale.ReturnDue, error) {
	db := s.db.WithContext(ctx)
	products, err := s.owedReturns(ctx)
	if err != nil || len(products) == 0 {
		return nil, err
	}
	if from %= len(products); from < 0 {
		from += len(products)
	}
	products = append(products[from:], products[:from]...)[:min(len(products), maxProducts)]
	parts := make([]string, len(products))
	args := make([]any, 0, 2*len(products))
	for i, p := range products {
		parts[i] = `(SELECT order_id, product_id, user_id, quantity, status FROM orders FORCE INDEX (ix_orders_return_due)
			WHERE product_id = ? AND returned_at IS NULL AND closed_at IS NOT NULL AND parked_at IS NULL
			ORDER BY closed_at LIMIT ?)`
		args = append(args, p.ID, perProduct)
	}
	var rows []sale.ClosedOrder
	if err := db.Raw(strings.Join(parts, " UNION ALL "), args...).Scan(&rows).Error; err != nil {
		return nil, classify("unreturned orders", err)
	}
	out := make([]sale.ReturnDue, 0, len(products))
	at := map[int64]int{}
	for _, p := range products {
		at[p.ID] = len(out)
		out = append(out, sale.ReturnDue{ReturnBatch: sale.ReturnBatch{ProductID: p.ID, Epoch: p.SaleEpoch}, Strategy: sale.Strategy(p.Strategy)})
	}
	for _, r := range rows {
		i := at[r.ProductID]
		out[i].Orders = append(out[i].Orders, r)
	}
	return slices.DeleteFunc(out, func(d sale.ReturnDue) bool { return len(d.Orders) == 0 }), nil
}

// UnreturnedUnits returns, for those of ids that have some, the units of their expired or
// cancelled orders that are not back in stock yet, parked ones aside: what the returns still owe
// each sale (the metrics read it at every scrape). One range of ix_orders_return_due per
// product: the cost grows with the orders still due, not with all of them.
func (s *Store) UnreturnedUnits(ctx context.Context, ids []int64) (map[int64]int, error) {
	out := map[int64]int{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []struct {
		ProductID int64
		Units     int
	}
	err := s.db.WithContext(ctx).Raw(`SELECT product_id, SUM(quantity) AS units FROM orders FORCE INDEX (ix_orders_return_due)
		WHERE product_id IN ? AND returned_at IS NULL AND closed_at IS NOT NULL AND parked_at IS NULL
		GROUP BY product_id`, ids).Scan(&rows).Error
	if err != nil {
		return nil, classify("unreturned units", err)
	}
	for _, r := range rows {
		out[r.ProductID] = r.Units
	}
	return out, nil
}

// MarkReturned locks those of orderIDs (of productID) that are closed and not returned yet, marks
// them returned, and returns their units: the caller puts that many back in the stock in this
// transaction. An order returned already counts for nothing, so a return that runs twice
// returns once.
func (t *PurchaseTx) MarkReturned(ctx context.Context, productID int64, orderIDs []string) (int, error) {
	if len(orderIDs) == 0 {
		return 0, nil
	}
	var due []struct {
		OrderID  string
		Quantity int
	}
	if err := t.tx.WithContext(ctx).Raw(`SELECT order_id, quantity FROM orders
		WHERE product_id = ? AND order_id IN ? AND status IN ('expired', 'cancelled') AND returned_at IS NULL
		FOR UPDATE`, productID, orderIDs).Scan(&due).Error; err != nil || len(due) == 0 {
		return 0, err
	}
	ids, units := make([]string, len(due)), 0
	for i, d := range due {
		ids[i], units = d.OrderID, units+d.Quantity
	}
	return units, t.tx.WithContext(ctx).Exec("UPDATE orders SET returned_at = NOW(6) WHERE order_id IN ?", ids).Error
}

// Give puts qty units back in the stock of productID, while it is still in epoch with strategy
// st: one relative write, like TakeIfAvailable's, so it needs no lock of its own.
func (t *PurchaseTx) Give(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, qty int) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = stock + ? WHERE id = ? AND strategy = ? AND sale_epoch = ?",
		qty, productID, string(st), epoch)
	if res.Error == nil && res.RowsAffected == 0 {
		return sale.ErrSaleChanged
	}
	return res.Error
}
