package sale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// The statuses of an order after its creation (pay or release). An order is confirmed
// when the consumer creates it, and waits for payment until its ExpiresAt. Each change of status
// is one conditional write on the order's row, so the payer, the expirer and the buyer's cancel
// race on that one write and exactly one of them wins.
const (
	// StatusPaying: a payment claimed the order (confirmed → paying) and is at the provider. The
	// expirer leaves it alone; it ends paid, or back to confirmed if the charge was declined.
	StatusPaying OrderStatus = "paying"
	// StatusPaid: the charge succeeded. Final.
	StatusPaid OrderStatus = "paid"
	// StatusExpired: the payment window ran out. Final; its units go back on sale (Returned).
	StatusExpired OrderStatus = "expired"
	// StatusCancelled: the buyer cancelled before paying. Final; its units go back on sale.
	StatusCancelled OrderStatus = "cancelled"
	// StatusRefused: a redis-lua purchase its Lua script accepted (answered 202) that MySQL then
	// could not hold (Order.Refusal says why): the Redis state had gone backwards. Final from the
	// start: it holds no unit, is never charged, and never expires or returns anything.
	StatusRefused OrderStatus = "refused"
)

// Closed reports whether the order ended without payment: its units go back on sale.
func (s OrderStatus) Closed() bool { return s == StatusExpired || s == StatusCancelled }

// The errors of the order lifecycle, each answered 409 (ErrPaymentDeclined 402) with its own code.
var (
	// ErrOrderNotConfirmed: the order is still queued (its reservation is on its way through
	// Kafka); it cannot be paid or cancelled yet. The caller may retry shortly.
	ErrOrderNotConfirmed = errors.New("the order is not confirmed yet")
	// ErrOrderExpired: the payment window ran out; nothing was charged.
	ErrOrderExpired = errors.New("the order expired")
	// ErrOrderCancelled: the buyer cancelled the order; nothing was charged.
	ErrOrderCancelled = errors.New("the order was cancelled")
	// ErrOrderRefused: the purchase was accepted, then refused when it was recorded (see
	// StatusRefused); there is nothing to pay or cancel, and nothing will be charged.
	ErrOrderRefused = errors.New("the order was refused after it was accepted; nothing will be charged")
	// ErrOrderPaid: the order was paid already (by a payment with another Idempotency-Key), so it
	// cannot be paid again or cancelled.
	ErrOrderPaid = errors.New("the order is paid already")
	// ErrPaymentInProgress: another payment of the order is at the provider now.
	ErrPaymentInProgress = errors.New("a payment of this order is in progress")
	// ErrPaymentDeclined: the provider declined the charge. The order still awaits payment: pay
	// again with a new Idempotency-Key.
	ErrPaymentDeclined = errors.New("the payment was declined")
	// ErrAmountOutOfRange: the order's amount (its quantity at the product's price) does not fit
	// in 64 bits. The product limits keep any new product from it (MaxStock × MaxPriceCents fits);
	// a row stored before them can still hold one, and it is refused alone, never computed by
	// MySQL into an error that stops a whole query.
	ErrAmountOutOfRange = errors.New("the order's amount is out of range: it cannot be charged")
)

// AmountCents is what quantity units at priceCents each cost, or ErrAmountOutOfRange when that
// does not fit in an int64 (or either is negative).
func AmountCents(quantity int, priceCents int64) (int64, error) {
	q := int64(quantity)
	if q < 0 || priceCents < 0 || (q > 0 && priceCents > math.MaxInt64/q) {
		return 0, fmt.Errorf("%d × %d cents: %w", quantity, priceCents, ErrAmountOutOfRange)
	}
	return q * priceCents, nil
}

// Lifecycle details of an order, beyond its purchase.
type OrderTimes struct {
	// ExpiresAt is the end of the payment window (zero while queued).
	ExpiresAt time.Time
	// PaidAt and ClosedAt (expired or cancelled) are zero until then.
	PaidAt, ClosedAt time.Time
	// Returned: the order's units are back in the product's stock.
	Returned bool
	// PaymentID is the provider's id of the successful charge.
	PaymentID string
}

// ClosedOrder is an expired or cancelled order whose units are to go back on sale.
type ClosedOrder struct {
	OrderID   string
	ProductID int64
	UserID    string
	Quantity  int
	Status    OrderStatus
}

// ReturnBatch is what a Returner gives back: closed orders of one product, in its sale Epoch.
type ReturnBatch struct {
	ProductID int64
	Epoch     uint64
	Orders    []ClosedOrder
}

// ReturnDue is a batch of closed orders of one product whose units are to go back, with the
// product's strategy: the Returner that takes it.
type ReturnDue struct {
	ReturnBatch
	Strategy Strategy
}

// OrdersIn counts the orders of batches.
func OrdersIn(due []ReturnDue) int {
	n := 0
	for _, d := range due {
		n += len(d.Orders)
	}
	return n
}

// StuckPayment is an order left in `paying` longer than a payment can take: its payer died
// between its claim and its outcome.
type StuckPayment struct {
	OrderID   string
	ProductID int64
	UserID    string
	Quantity  int
	// AmountCents is what the order costs; 0, with AmountErr set, when it is out of range.
	AmountCents int64
	AmountErr   error
	PayKey      string
}

// RowFault reports whether err is a fault of the row an operation touched (ErrPoison: the store
// refused the values it holds; ErrAmountOutOfRange) rather than of the way to it: run again, it
// fails again, so a background loop parks that row and goes on. Anything else (a dependency
// down, a conflict, a timeout) passes with time and is retried.
func RowFault(err error) bool {
	return errors.Is(err, ErrPoison) || errors.Is(err, ErrAmountOutOfRange)
}

// Returner is the strategy operation that undoes a deduction: it gives the units of closed orders
// back to their product's stock, exactly once per order, the way the strategy deducts (mysql:
// one conditional increment; a lock strategy: under its lock, with its fence; redis-lua: in its
// script, and to MySQL through its persister). It marks each order returned in the same
// transaction that restores its units, and skips an order marked already, so running it again
// for the same orders returns nothing twice. It returns the units it returned now.
type Returner interface {
	Return(ctx context.Context, b ReturnBatch) (int, error)
}
