// Package checkout is what happens to an order after its purchase (issue #14: pay or release): the
// buyer pays it through the payment provider or cancels it, or its payment window runs out and the
// expirer expires it; the units of an expired or cancelled order go back on sale exactly once,
// through the product's strategy.
//
// The race rules:
//   - Pay, expire and cancel each change the order's status with one conditional write on its row
//     (store.ClaimPayment, ExpireDue, CancelOrder all leave `confirmed`): exactly one wins.
//   - A payment claims the order (confirmed → paying) before it charges anything, so a payment that
//     loses to the expirer or to a cancel charges nothing, and the expirer leaves a paying order
//     alone. The payer then records the provider's answer: paid, or back to confirmed if declined.
//   - A payer that dies at the provider leaves its order in `paying`; the expirer's recovery voids
//     the payment's key at the provider after StuckAfter (a charge that already succeeded stays
//     succeeded and the order becomes paid; otherwise no later charge with that key can succeed)
//     and releases the order, which then expires if its window has run out.
//   - A unit is returned once: the strategy marks the order returned in the transaction (or the
//     script) that restores its units, and skips an order marked already.
package checkout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill-go/internal/payment"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// Store is the part of *store.Store checkout uses.
type Store interface {
	Order(ctx context.Context, orderID string) (sale.Order, error)
	ClaimPayment(ctx context.Context, orderID, userID, key string) (sale.Order, bool, error)
	CompletePayment(ctx context.Context, orderID, key, paymentID string) (sale.Order, error)
	ReleasePayment(ctx context.Context, orderID, key string) error
	CancelOrder(ctx context.Context, orderID, userID string) (sale.Order, error)
	ExpireDue(ctx context.Context, limit int) ([]sale.ClosedOrder, error)
	StuckPayments(ctx context.Context, olderThan time.Duration, limit int) ([]store.StuckPayment, error)
	Unreturned(ctx context.Context, limit int) ([]store.ReturnDue, error)
}

// Provider is the payment provider (*payment.Provider).
type Provider interface {
	Charge(ctx context.Context, r payment.ChargeRequest) (payment.Charge, error)
	Void(ctx context.Context, key, orderID string, productID, amountCents int64) (payment.Charge, error)
}

// Options tunes the service.
type Options struct {
	// ChargeTimeout bounds one call to the provider; a payment whose charge times out is answered
	// 503 and stays claimed, for a retry with the same key (or the recovery) to settle.
	ChargeTimeout time.Duration
	// StuckAfter is how long an order may stay in `paying` before the recovery settles it: well
	// beyond ChargeTimeout, so that it never races a payer still waiting for its answer.
	StuckAfter time.Duration
	// Batch bounds the orders one expiry or return round takes.
	Batch int
	// Log receives what the rounds could not do.
	Log *slog.Logger
	// Metrics counts payments, expiries and returns; optional.
	Metrics Metrics
}

// Metrics counts what the service does (*metrics.Checkout).
type Metrics interface {
	Payment(err error)
	OrdersExpired(n int)
	UnitsReturned(st sale.Strategy, n int)
}

type nopMetrics struct{}

func (nopMetrics) Payment(error)                    {}
func (nopMetrics) OrdersExpired(int)                {}
func (nopMetrics) UnitsReturned(sale.Strategy, int) {}

// Service pays, cancels, expires and returns.
type Service struct {
	store     Store
	provider  Provider
	returners map[sale.Strategy]sale.Returner
	feed      sale.ChangeFeed
	o         Options
	// afterExpire, a test hook, runs in each expiry round after its orders expired (committed)
	// and before their units are returned.
	afterExpire func([]sale.ClosedOrder)
}

// New returns the service. returners are the strategies' Returners; a closed order of a product
// whose strategy has none here is left for a process that has it. feed tells every replica that
// units came back (sale.ChangeRestocked), so that a product sold out in their memory is read
// afresh.
func New(st Store, p Provider, returners map[sale.Strategy]sale.Returner, feed sale.ChangeFeed, o Options) (*Service, error) {
	if st == nil || p == nil || feed == nil {
		return nil, errors.New("checkout: needs a store, a payment provider and a change feed")
	}
	if o.ChargeTimeout <= 0 {
		o.ChargeTimeout = 10 * time.Second
	}
	if o.StuckAfter <= 0 {
		o.StuckAfter = 3 * o.ChargeTimeout
	}
	if o.Batch <= 0 {
		o.Batch = 500
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	return &Service{store: st, provider: p, returners: returners, feed: feed, o: o}, nil
}

// SetAfterExpire installs a test hook that runs in each expiry round between the commit of its
// expired orders and the return of their units (the chaos run's failpoint kills the process
// there). Call it before Run.
func (s *Service) SetAfterExpire(f func([]sale.ClosedOrder)) { s.afterExpire = f }

// chargeKey is the provider's idempotency key of a payment: one per order and pay request key.
func chargeKey(orderID, key string) string { return orderID + "/" + key }

// Pay pays userID's order with Idempotency-Key key. It claims the order first (nothing is charged
// for an order that expired, was cancelled or is being paid), then charges it, then records the
// outcome: the paid order, or sale.ErrPaymentDeclined with the order awaiting payment again. A
// repeat with key answers as the first payment did once it has ended; a charge whose outcome is
// unknown (the provider timed out) is answered sale.ErrUnavailable and settled by a retry with
// the same key.
func (s *Service) Pay(ctx context.Context, orderID, userID, key string) (o sale.Order, err error) {
	defer func() { s.o.Metrics.Payment(err) }()
	o, replay, err := s.store.ClaimPayment(ctx, orderID, userID, key)
	if err != nil || replay {
		return o, err
	}
	cctx, cancel := context.WithTimeout(ctx, s.o.ChargeTimeout)
	defer cancel()
	ch, err := s.provider.Charge(cctx, payment.ChargeRequest{Key: chargeKey(orderID, key), OrderID: orderID,
		ProductID: o.ProductID, AmountCents: o.AmountCents})
	if err != nil {
		return sale.Order{}, fmt.Errorf("%w: payment of order %s: %w", sale.ErrUnavailable, orderID, err)
	}
	return s.settle(ctx, o, key, ch)
}

// settle records a charge's outcome for the payment key that claimed o.
func (s *Service) settle(ctx context.Context, o sale.Order, key string, ch payment.Charge) (sale.Order, error) {
	if ch.Succeeded() {
		return s.store.CompletePayment(ctx, o.OrderID, key, ch.ID)
	}
	if err := s.store.ReleasePayment(ctx, o.OrderID, key); err != nil {
		return sale.Order{}, err
	}
	return sale.Order{}, sale.ErrPaymentDeclined
}

// Cancel cancels userID's order before it is paid, and returns its units at once when it can
// (the expirer's return round does it otherwise).
func (s *Service) Cancel(ctx context.Context, orderID, userID string) (sale.Order, error) {
	o, err := s.store.CancelOrder(ctx, orderID, userID)
	if err != nil || o.Returned {
		return o, err
	}
	if n, _ := s.returnBatch(ctx); n > 0 {
		if fresh, err := s.store.Order(ctx, orderID); err == nil {
			return fresh, nil
		}
	}
	return o, nil
}

// Run expires, settles and returns every `every` until ctx ends. Any number of processes may run
// it at once: each round's claims are disjoint (SKIP LOCKED) or idempotent.
func (s *Service) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round is one pass of Run: it expires the orders due (all of them, a batch at a time), settles
// the stuck payments, and returns the units of closed orders. It reports how many orders it
// expired and how many units it returned.
func (s *Service) Round(ctx context.Context) (expired, returned int) {
	for ctx.Err() == nil {
		batch, err := s.store.ExpireDue(ctx, s.o.Batch)
		if err != nil {
			s.o.Log.Warn("checkout: expire orders", "err", err)
			break
		}
		expired += len(batch)
		s.o.Metrics.OrdersExpired(len(batch))
		if len(batch) > 0 && s.afterExpire != nil {
			s.afterExpire(batch)
		}
		if len(batch) < s.o.Batch {
			break
		}
	}
	s.settleStuck(ctx)
	for ctx.Err() == nil {
		n, full := s.returnBatch(ctx)
		returned += n
		if n == 0 || !full {
			break
		}
	}
	return expired, returned
}

// settleStuck settles the payments whose payer died at the provider (see the package comment).
func (s *Service) settleStuck(ctx context.Context) {
	stuck, err := s.store.StuckPayments(ctx, s.o.StuckAfter, s.o.Batch)
	if err != nil {
		s.o.Log.Warn("checkout: stuck payments", "err", err)
		return
	}
	for _, p := range stuck {
		o := sale.Order{OrderID: p.OrderID, ProductID: p.ProductID, UserID: p.UserID, Quantity: p.Quantity}
		ch, err := s.provider.Void(ctx, chargeKey(p.OrderID, p.PayKey), p.OrderID, p.ProductID, p.AmountCents)
		if err == nil {
			_, err = s.settle(ctx, o, p.PayKey, ch)
		}
		if err != nil && !errors.Is(err, sale.ErrPaymentDeclined) {
			s.o.Log.Warn("checkout: settle a stuck payment", "order_id", p.OrderID, "err", err)
		}
	}
}

// returnBatch returns the units of a batch of closed orders not returned yet, through each
// product's strategy, and tells every replica of each product that got units back. It returns the
// units returned, and whether the batch was full (more may be due).
func (s *Service) returnBatch(ctx context.Context) (int, bool) {
	due, err := s.store.Unreturned(ctx, s.o.Batch)
	if err != nil {
		s.o.Log.Warn("checkout: orders to return", "err", err)
		return 0, false
	}
	selected := 0
	for _, d := range due {
		selected += len(d.Orders)
	}
	total := 0
	for _, d := range due {
		r, ok := s.returners[d.Strategy]
		if !ok {
			continue // a strategy not served here: a process that serves it returns them
		}
		n, err := r.Return(ctx, d.ReturnBatch)
		if err != nil {
			s.o.Log.Warn("checkout: return units", "product_id", d.ProductID, "strategy", d.Strategy, "orders", len(d.Orders), "err", err)
			continue
		}
		if n > 0 {
			total += n
			s.o.Metrics.UnitsReturned(d.Strategy, n)
			s.feed.Publish(context.WithoutCancel(ctx), sale.Change{Kind: sale.ChangeRestocked, ProductID: d.ProductID, Epoch: d.Epoch})
		}
	}
	return total, selected == s.o.Batch
}
