// Package checkout is what happens to an order after its purchase (pay or release): the
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
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Store is the part of *store.Store checkout uses.
type Store interface {
	Order(ctx context.Context, orderID string) (sale.Order, error)
	ClaimPayment(ctx context.Context, orderID, userID, key string) (sale.Order, bool, error)
	CompletePayment(ctx context.Context, orderID, key, paymentID string) (sale.Order, error)
	ReleasePayment(ctx context.Context, orderID, key string) error
	CancelOrder(ctx context.Context, orderID, userID string) (sale.Order, error)
	ExpireDue(ctx context.Context, limit int) ([]sale.ReturnDue, error)
	DueOrders(ctx context.Context, limit int) ([]string, error)
	ExpireOrder(ctx context.Context, orderID string) ([]sale.ReturnDue, error)
	StuckPayments(ctx context.Context, olderThan time.Duration, limit int) ([]sale.StuckPayment, error)
	Unreturned(ctx context.Context, perProduct, maxProducts, from int) ([]sale.ReturnDue, error)
	ReturnsOf(ctx context.Context, orders []sale.ClosedOrder) ([]sale.ReturnDue, error)
	ParkOrder(ctx context.Context, orderID, loop string, cause error) (bool, error)
}

// Provider is the payment provider (*payment.Provider).
type Provider interface {
	Charge(ctx context.Context, r ChargeRequest) (Charge, error)
	Void(ctx context.Context, key, orderID string, productID, amountCents int64) (Charge, error)
}

// Options tunes the service.
type Options struct {
	// ChargeTimeout bounds one call to the provider; a payment whose charge times out is answered
	// 503 and stays claimed, for a retry with the same key (or the recovery) to settle.
	ChargeTimeout time.Duration
	// StuckAfter is how long an order may stay in `paying` before the recovery settles it: well
	// beyond ChargeTimeout, so that it never races a payer still waiting for its answer.
	StuckAfter time.Duration
	// Batch bounds the orders one expiry takes, and those of one product one return takes.
	Batch int
	// Products bounds the products one return round serves [64]; the next round starts where it
	// stopped.
	Products int
	// Log receives what the rounds could not do.
	Log *slog.Logger
	// Metrics counts payments, expiries and returns; optional.
	Metrics Metrics
	// Queues is told of the units that come back, so that a waiting-room sale's queue admits
	// the next in line for them; optional (nil: no sale's queue is told).
	Queues Queues
}

// Queues is told of the units that come back to a sale (*waitroom.Returns): it credits the
// sale's waiting room, if the sale has one, with that many admissions of the next in line once
// the sale is sold out.
//
// The credit is a counter, so the Service calls Returned exactly once per batch whose units it
// gave back (n > 0, after the return committed), and never again for the same units: a replayed
// return gives back nothing and calls nothing. The call is not retried: after a failure whose
// outcome is unknown (a timeout after Redis applied it), a retry could credit twice and let a
// visitor in to find the sale sold out. A lost call (Redis away, the process killed between the
// return's commit and the call) costs the queue those n admissions, not the units: they are back
// in stock and sell to whoever buys first with a valid pass (a visitor admitted before the
// sell-out whose session still runs), and the next in line stay told sold out for them.
type Queues interface {
	Returned(ctx context.Context, productID int64, epoch uint64, n int) error
}

// Metrics counts what the service does (*metrics.Checkout).
type Metrics interface {
	Payment(err error)
	OrdersExpired(n int)
	UnitsReturned(st sale.Strategy, n int)
	OrderParked(loop string)
}

type nopMetrics struct{}

func (nopMetrics) Payment(error)                    {}
func (nopMetrics) OrdersExpired(int)                {}
func (nopMetrics) UnitsReturned(sale.Strategy, int) {}
func (nopMetrics) OrderParked(string)               {}

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
	// next is the product the next return sweep starts at (see Store.Unreturned).
	next atomic.Int64
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
	if o.Products <= 0 {
		o.Products = 64
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	s := &Service{store: st, provider: p, returners: returners, feed: feed, o: o}
	s.next.Store(rand.Int64N(1 << 20)) // replicas start their sweeps on different products
	return s, nil
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
	ch, err := s.provider.Charge(cctx, ChargeRequest{Key: chargeKey(orderID, key), OrderID: orderID,
		ProductID: o.ProductID, AmountCents: o.AmountCents})
	if err != nil {
		return sale.Order{}, fmt.Errorf("%w: payment of order %s: %w", sale.ErrUnavailable, orderID, err)
	}
	return s.settle(ctx, o, key, ch)
}

// settle records a charge's outcome for the payment key that claimed o.
func (s *Service) settle(ctx context.Context, o sale.Order, key string, ch Charge) (sale.Order, error) {
	if ch.Succeeded() {
		return s.store.CompletePayment(ctx, o.OrderID, key, ch.ID)
	}
	if err := s.store.ReleasePayment(ctx, o.OrderID, key); err != nil {
		return sale.Order{}, err
	}
	return sale.Order{}, sale.ErrPaymentDeclined
}

// Cancel cancels userID's order before it is paid, and returns its units before it answers: the
// order says returned, unless its strategy is not served here or the return failed (the
// expirer's return sweep takes it then, within a round).
func (s *Service) Cancel(ctx context.Context, orderID, userID string) (sale.Order, error) {
	o, err := s.store.CancelOrder(ctx, orderID, userID)
	if err != nil || o.Returned {
		return o, err
	}
	due, err := s.store.ReturnsOf(ctx, []sale.ClosedOrder{{OrderID: o.OrderID, ProductID: o.ProductID,
		UserID: o.UserID, Quantity: o.Quantity, Status: sale.StatusCancelled}})
	if err != nil {
		s.o.Log.Warn("checkout: return a cancelled order", "order_id", orderID, "err", err)
		return o, nil
	}
	if _, done := s.returnAll(ctx, due); done == 1 {
		o.Returned = true
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

// Round is one pass of Run: it expires the orders due, a batch at a time, and gives each batch's
// units back at once (one return per product of the batch); then it settles the stuck payments
// and sweeps what is still to return (a return that failed, a process that died between an
// expiry and its return, a cancel whose return failed), fair across products. It reports how
// many orders it expired and how many units it returned. A row that fails for what it holds is
// parked (Store.ParkOrder) and the round goes on for the others.
func (s *Service) Round(ctx context.Context) (expired, returned int) {
	for ctx.Err() == nil {
		batch, full := s.expireBatch(ctx)
		n := sale.OrdersIn(batch)
		expired += n
		s.o.Metrics.OrdersExpired(n)
		if n > 0 && s.afterExpire != nil {
			s.afterExpire(closedOrders(batch))
		}
		units, _ := s.returnAll(ctx, batch)
		returned += units
		if !full {
			break
		}
	}
	s.settleStuck(ctx)
	for ctx.Err() == nil {
		n, more := s.returnSweep(ctx)
		returned += n
		if n == 0 || !more {
			break
		}
	}
	return expired, returned
}

// expireBatch expires a batch of the orders due, and reports whether it was full (more may be
// due). A batch that fails for one of its rows is done order by order, and the row that fails
// alone is parked.
func (s *Service) expireBatch(ctx context.Context) ([]sale.ReturnDue, bool) {
	batch, err := s.store.ExpireDue(ctx, s.o.Batch)
	if err == nil {
		return batch, sale.OrdersIn(batch) == s.o.Batch
	}
	if !sale.RowFault(err) {
		s.o.Log.Warn("checkout: expire orders", "err", err)
		return nil, false
	}
	ids, err := s.store.DueOrders(ctx, s.o.Batch)
	if err != nil {
		s.o.Log.Warn("checkout: expire orders", "err", err)
		return nil, false
	}
	var out []sale.ReturnDue
	for _, id := range ids {
		one, err := s.store.ExpireOrder(ctx, id)
		switch {
		case err == nil:
			out = append(out, one...)
		case sale.RowFault(err):
			s.park(ctx, "expire", id, err)
		default:
			s.o.Log.Warn("checkout: expire an order", "order_id", id, "err", err)
			return out, false
		}
	}
	return out, len(ids) == s.o.Batch
}

// park parks orderID for loop and, the first time, logs it and counts it.
func (s *Service) park(ctx context.Context, loop, orderID string, cause error) {
	parked, err := s.store.ParkOrder(context.WithoutCancel(ctx), orderID, loop, cause)
	if err != nil {
		s.o.Log.Warn("checkout: park an order", "loop", loop, "order_id", orderID, "cause", cause, "err", err)
		return
	}
	if parked {
		s.o.Metrics.OrderParked(loop)
		s.o.Log.Error("checkout: order parked: it fails for what it holds, the loop goes on without it",
			"loop", loop, "order_id", orderID, "err", cause)
	}
}

// settleStuck settles the payments whose payer died at the provider (see the package comment).
func (s *Service) settleStuck(ctx context.Context) {
	stuck, err := s.store.StuckPayments(ctx, s.o.StuckAfter, s.o.Batch)
	if err != nil {
		s.o.Log.Warn("checkout: stuck payments", "err", err)
		return
	}
	for _, p := range stuck {
		err := p.AmountErr
		if err == nil {
			o := sale.Order{OrderID: p.OrderID, ProductID: p.ProductID, UserID: p.UserID, Quantity: p.Quantity}
			var ch Charge
			if ch, err = s.provider.Void(ctx, chargeKey(p.OrderID, p.PayKey), p.OrderID, p.ProductID, p.AmountCents); err == nil {
				_, err = s.settle(ctx, o, p.PayKey, ch)
			}
		}
		switch {
		case err == nil, errors.Is(err, sale.ErrPaymentDeclined):
		case sale.RowFault(err):
			s.park(ctx, "settle", p.OrderID, err)
		default:
			s.o.Log.Warn("checkout: settle a stuck payment", "order_id", p.OrderID, "err", err)
		}
	}
}

// returnSweep returns a batch of each product with closed orders not returned yet (up to
// Options.Products of them, from where the last sweep stopped). It returns the units returned,
// and whether more may be due.
func (s *Service) returnSweep(ctx context.Context) (int, bool) {
	from := int(s.next.Add(int64(s.o.Products)) - int64(s.o.Products))
	due, err := s.store.Unreturned(ctx, s.o.Batch, s.o.Products, from)
	if err != nil {
		s.o.Log.Warn("checkout: orders to return", "err", err)
		return 0, false
	}
	more := len(due) == s.o.Products
	for _, d := range due {
		more = more || len(d.Orders) == s.o.Batch
	}
	units, _ := s.returnAll(ctx, due)
	return units, more
}

// returnAll gives the units of each product's closed orders back through the product's strategy,
// one return per product, and tells every replica of a product that got units back. It returns
// the units returned and the orders done (returned now or before). A product whose return fails
// for what one of its orders holds is returned order by order, and the order that fails alone is
// parked; one that fails otherwise (its lock service down, say) is left for the next round.
func (s *Service) returnAll(ctx context.Context, due []sale.ReturnDue) (units, done int) {
	for _, d := range due {
		r, ok := s.returners[d.Strategy]
		if !ok {
			continue // a strategy not served here: a process that serves it returns them
		}
		n, err := r.Return(ctx, d.ReturnBatch)
		returned := len(d.Orders)
		if err != nil && sale.RowFault(err) && len(d.Orders) > 1 {
			n, returned, err = s.returnOneByOne(ctx, r, d)
		}
		if err != nil {
			if sale.RowFault(err) {
				s.park(ctx, "return", d.Orders[0].OrderID, err)
			} else {
				s.o.Log.Warn("checkout: return units", "product_id", d.ProductID, "strategy", d.Strategy, "orders", len(d.Orders), "err", err)
			}
			continue
		}
		done += returned
		if n > 0 {
			units += n
			s.o.Metrics.UnitsReturned(d.Strategy, n)
			s.feed.Publish(context.WithoutCancel(ctx), sale.Change{Kind: sale.ChangeRestocked, ProductID: d.ProductID, Epoch: d.Epoch})
			s.tellQueue(ctx, d, n)
		}
	}
	return units, done
}

// queueTimeout bounds one call to Queues.
const queueTimeout = 2 * time.Second

// tellQueue tells the sale's waiting room, if it has one, that n units of d came back: once, and
// a failure is logged, not retried (see Queues for what a lost call costs).
func (s *Service) tellQueue(ctx context.Context, d sale.ReturnDue, n int) {
	if s.o.Queues == nil {
		return
	}
	// The units are back whatever ctx does now: the call is made even if it ended, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueTimeout)
	defer cancel()
	if err := s.o.Queues.Returned(ctx, d.ProductID, d.Epoch, n); err != nil {
		s.o.Log.Warn("checkout: tell the waiting room of returned units; its next in line are not admitted for them",
			"product_id", d.ProductID, "epoch", d.Epoch, "units", n, "err", err)
	}
}

// returnOneByOne returns d's orders one at a time, parking those that fail for what they hold;
// it reports the units and the orders returned. It stops at the first other failure, which it
// returns.
func (s *Service) returnOneByOne(ctx context.Context, r sale.Returner, d sale.ReturnDue) (units, done int, err error) {
	for _, o := range d.Orders {
		one := d.ReturnBatch
		one.Orders = []sale.ClosedOrder{o}
		n, err := r.Return(ctx, one)
		switch {
		case err == nil:
			units, done = units+n, done+1
		case sale.RowFault(err):
			s.park(ctx, "return", o.OrderID, err)
		default:
			return units, done, err
		}
	}
	return units, done, nil
}

func closedOrders(due []sale.ReturnDue) []sale.ClosedOrder {
	var out []sale.ClosedOrder
	for _, d := range due {
		out = append(out, d.Orders...)
	}
	return out
}
