// Package payment is the simulated payment provider that orders are paid through: a charge takes
// the provider's latency, is declined at a configured rate, and is recorded under the caller's
// idempotency key, so that a retried charge returns the first outcome and never charges twice.
//
// A real provider keeps its ledger on its own side; the simulation keeps it in MySQL, in the
// payment_charges table, so that the audit can check that every successful charge is exactly one
// paid order. That table is the provider's alone: this package must never read or write the
// shop's tables (orders, products…), and the shop must never write payment_charges, or the audit
// would be comparing the shop with itself.
package payment

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"time"

	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/pause"
)

// ErrKeyMismatch means the idempotency key is already recorded for another order, product or
// amount: a key names one charge, so reusing it for a different one is a caller's bug.
var ErrKeyMismatch = errors.New("idempotency key reused for a different charge")

// Limits of the payment_charges columns. Longer values are refused rather than truncated: a
// truncated key could collide with another.
const (
	MaxKeyLen     = 180
	MaxOrderIDLen = 40
)

// Options configures the simulation. Its zero value is an instant provider that never declines.
type Options struct {
	// Latency is the mean time a new charge takes at the provider; each waits a uniformly drawn
	// time in [Latency/2, 3·Latency/2). Zero means no wait; negative is refused. (The app's
	// default, 50 ms, lives in its config.)
	Latency time.Duration
	// FailureRate is the share of new charges declined, in [0, 1].
	FailureRate float64
	// Rand returns numbers in [0, 1). A new charge draws its latency (unless Latency is zero),
	// then its decline (declined when the draw is below FailureRate). Inject it for deterministic tests; it must
	// be safe for concurrent use. Nil means math/rand/v2's Float64.
	Rand func() float64
	// Now is the clock of created_at. Nil means time.Now.
	Now func() time.Time
}

// Provider is the simulated provider. It is safe for concurrent use, also by several processes
// sharing one database: every decision about a key is the one row that key's first INSERT makes.
type Provider struct {
	db          *sql.DB
	latency     time.Duration
	failureRate float64
	rand        func() float64
	now         func() time.Time
}

// New returns a provider that records charges in db's payment_charges table (migration 00007).
// db must scan DATETIME into time.Time (parseTime=true, as store.Open's pool does).
func New(db *sql.DB, o Options) (*Provider, error) {
	if db == nil {
		return nil, errors.New("payment: no database")
	}
	if o.Latency < 0 {
		return nil, fmt.Errorf("payment: latency %s: must not be negative", o.Latency)
	}
	if !(o.FailureRate >= 0 && o.FailureRate <= 1) { // also refuses NaN
		return nil, fmt.Errorf("payment: failure rate %v: must be in [0, 1]", o.FailureRate)
	}
	p := &Provider{db: db, latency: o.Latency, failureRate: o.FailureRate, rand: o.Rand, now: o.Now}
	if p.rand == nil {
		p.rand = randv2.Float64
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p, nil
}

// Charge charges r.AmountCents for r.OrderID under r.Key, once. A key already recorded returns
// its recorded charge at once, whatever its outcome (a declined key stays declined; a voided one
// returns Voided and charges nothing), or ErrKeyMismatch if r differs from it. A new key waits
// the provider's latency, is decided, and is recorded; when concurrent calls race on one key,
// the first recorded decision is every caller's answer and the others' are dropped.
//
// Declined and Voided are outcomes, not errors. Any error but ErrKeyMismatch or an invalid
// request means the outcome is unknown to the caller: if ctx ends during the wait, nothing is recorded and ctx's error is returned; an error
// after that (ctx ending during the INSERT, a database failure) may or may not have recorded the
// charge, so the caller retries with the same key, or calls Void, to learn it.
func (p *Provider) Charge(ctx context.Context, r checkout.ChargeRequest) (checkout.Charge, error) {
	if err := validate(r); err != nil {
		return checkout.Charge{}, err
	}
	c, ok, err := p.Lookup(ctx, r.Key)
	if err != nil {
		return checkout.Charge{}, err
	}
	if ok {
		if err := checkSame(c, r); err != nil {
			return checkout.Charge{}, err
		}
		return c, nil
	}

	if err := p.wait(ctx); err != nil {
		return checkout.Charge{}, err
	}
	outcome := checkout.Succeeded
	if p.rand() < p.failureRate {
		outcome = checkout.Declined
	}
	return p.record(ctx, r, outcome)
}

// Lookup returns the charge recorded under key, if any.
func (p *Provider) Lookup(ctx context.Context, key string) (checkout.Charge, bool, error) {
	var c checkout.Charge
	var outcome string
	err := p.db.QueryRowContext(ctx, `SELECT charge_id, charge_key, order_id, product_id, amount_cents, outcome, created_at
		FROM payment_charges WHERE charge_key = ?`, key).
		Scan(&c.ID, &c.Key, &c.OrderID, &c.ProductID, &c.AmountCents, &outcome, &c.CreatedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return checkout.Charge{}, false, nil
	case err != nil:
		return checkout.Charge{}, false, fmt.Errorf("payment: look up key %q: %w", key, err)
	}
	c.Outcome = checkout.Outcome(outcome)
	c.CreatedAt = c.CreatedAt.UTC()
	return c, true, nil
}

// Void settles a key whose charge's fate is unknown: the recovery of an order left paying by a
// payer that died. If the key has no record yet, Void records it Voided, so that a charge still
// under way, or a late retry, with that key returns Voided and charges nothing. It returns the
// key's record as it now stands: Succeeded if the charge got there first (the order is paid),
// otherwise Declined or Voided (nothing was charged). A record for a different order, product
// or amount is ErrKeyMismatch.
func (p *Provider) Void(ctx context.Context, key, orderID string, productID, amountCents int64) (checkout.Charge, error) {
	r := checkout.ChargeRequest{Key: key, OrderID: orderID, ProductID: productID, AmountCents: amountCents}
	if err := validate(r); err != nil {
		return checkout.Charge{}, err
	}
	return p.record(ctx, r, checkout.Voided)
}

// record inserts r with outcome unless its key has a row already, and returns the key's row.
// INSERT IGNORE, not ON DUPLICATE KEY UPDATE: callers that find the key taken only read it, so
// concurrent ones take shared locks and never deadlock upgrading them. IGNORE would also turn a
// bad value into a warning and a mangled row; validate refuses those values beforehand.
func (p *Provider) record(ctx context.Context, r checkout.ChargeRequest, outcome checkout.Outcome) (checkout.Charge, error) {
	now := p.now().UTC().Truncate(time.Microsecond)
	if _, err := p.db.ExecContext(ctx, `INSERT IGNORE INTO payment_charges
		(charge_key, charge_id, order_id, product_id, amount_cents, outcome, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		r.Key, newChargeID(), r.OrderID, r.ProductID, r.AmountCents, string(outcome), now); err != nil {
		return checkout.Charge{}, fmt.Errorf("payment: record key %q: %w", r.Key, err)
	}
	c, ok, err := p.Lookup(ctx, r.Key)
	if err != nil {
		return checkout.Charge{}, err
	}
	if !ok { // only a charge_id collision, 96 random bits, could leave no row
		return checkout.Charge{}, fmt.Errorf("payment: record key %q: no row after insert", r.Key)
	}
	if err := checkSame(c, r); err != nil {
		return checkout.Charge{}, err
	}
	return c, nil
}

// wait is the provider's latency, cut short by ctx.
func (p *Provider) wait(ctx context.Context) error {
	if p.latency == 0 {
		return ctx.Err()
	}
	return pause.For(ctx, time.Duration(float64(p.latency)*(0.5+p.rand())))
}

func checkSame(c checkout.Charge, r checkout.ChargeRequest) error {
	if c.OrderID != r.OrderID || c.ProductID != r.ProductID || c.AmountCents != r.AmountCents {
		return fmt.Errorf("payment: key %q is order %s, product %d, %d cents; asked for order %s, product %d, %d cents: %w",
			r.Key, c.OrderID, c.ProductID, c.AmountCents, r.OrderID, r.ProductID, r.AmountCents, ErrKeyMismatch)
	}
	return nil
}

func validate(r checkout.ChargeRequest) error {
	switch {
	case !printable(r.Key, MaxKeyLen):
		return fmt.Errorf("payment: key %q: must be 1 to %d printable ASCII characters", r.Key, MaxKeyLen)
	case !printable(r.OrderID, MaxOrderIDLen):
		return fmt.Errorf("payment: order id %q: must be 1 to %d printable ASCII characters", r.OrderID, MaxOrderIDLen)
	case r.ProductID <= 0:
		return fmt.Errorf("payment: product id %d: must be positive", r.ProductID)
	case r.AmountCents < 0:
		return fmt.Errorf("payment: amount %d cents: must not be negative", r.AmountCents)
	}
	return nil
}

// printable reports whether s is 1 to maxLen characters of printable ASCII without spaces, the
// alphabet of the ascii columns it goes into.
func printable(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := range len(s) {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

func newChargeID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return "ch_" + hex.EncodeToString(b)
}
