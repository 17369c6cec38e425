package checkout

import "time"

// The provider's side of a payment, as checkout needs it: the Provider port (checkout.go) speaks
// these types, and a provider (internal/payment's simulation, or a real one's adapter) answers
// in them. They live here, with the domain that asks, so that checkout depends on no provider.

// Outcome is what became of a charge.
type Outcome string

// The outcomes a key can have. Once recorded, a key's outcome never changes.
const (
	// Succeeded: the buyer was charged.
	Succeeded Outcome = "succeeded"
	// Declined: the provider refused the charge; nothing was charged. A new attempt needs a new key.
	Declined Outcome = "declined"
	// Voided: the key was voided before any charge was recorded under it (see Provider.Void);
	// nothing was charged and nothing will be under this key.
	Voided Outcome = "voided"
)

// Charge is the provider's record of one key.
type Charge struct {
	ID          string // the provider's id, "ch_" and 24 hex digits; what the shop stores as payment_id
	Key         string
	OrderID     string
	ProductID   int64
	AmountCents int64
	Outcome     Outcome
	CreatedAt   time.Time // UTC, microseconds
}

// Succeeded reports whether the buyer was charged.
func (c Charge) Succeeded() bool { return c.Outcome == Succeeded }

// ChargeRequest asks for one charge.
type ChargeRequest struct {
	// Key is the provider's idempotency key, printable ASCII within the provider's length limit
	// (payment.MaxKeyLen). The shop passes "<order_id>/<Idempotency-Key of the pay request>".
	Key         string
	OrderID     string // printable ASCII within the provider's limit (payment.MaxOrderIDLen)
	ProductID   int64  // > 0
	AmountCents int64  // >= 0
}
