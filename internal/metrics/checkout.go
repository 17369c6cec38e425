package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Checkout are the metrics of what happens to orders after their purchase (internal/checkout):
// payments by their answer, orders expired, units returned to the sale.
type Checkout struct {
	payments *prometheus.CounterVec
	expired  prometheus.Counter
	returned *prometheus.CounterVec
	parked   *prometheus.CounterVec
}

// RegisterCheckout registers the checkout metrics on m's registry. Call it once per Metrics.
func (m *Metrics) RegisterCheckout() *Checkout {
	f := factory{m.reg}
	c := &Checkout{
		payments: f.counterVec("seckill_payments_total",
			"Payments answered, by code: paid (a replay included), payment_declined, order_expired, order_cancelled, order_already_paid, payment_in_progress, order_not_confirmed, not_found, unavailable.", "code"),
		expired: f.counter("seckill_orders_expired_total",
			"Orders this process's expirer expired (their payment window ran out)."),
		returned: f.counterVec("seckill_units_returned_total",
			"Units of expired or cancelled orders this process returned to their sale, by strategy.", "strategy"),
		// The orders the checkout's loops park count with every loop's poison rows: one
		// series name for every alert.
		parked: m.poison,
	}
	// Every series from the start, at 0: a rate over a series that appears only at its first
	// event misses that event, and a dashboard shows nothing rather than 0 before it.
	c.payments.WithLabelValues("paid")
	c.payments.WithLabelValues(string(sale.CodePaymentDeclined))
	for _, st := range sale.Strategies {
		c.returned.WithLabelValues(string(st))
	}
	return c
}

// Payment counts one payment's answer (nil: paid).
func (c *Checkout) Payment(err error) {
	code := "paid"
	if err != nil {
		code = string(sale.CodeOf(err))
	}
	c.payments.WithLabelValues(code).Inc()
}

// OrdersExpired counts orders the expirer expired.
func (c *Checkout) OrdersExpired(n int) { c.expired.Add(float64(n)) }

// UnitsReturned counts units returned to a sale of strategy st.
func (c *Checkout) UnitsReturned(st sale.Strategy, n int) {
	c.returned.WithLabelValues(string(st)).Add(float64(n))
}

// OrderParked counts an order parked by loop.
func (c *Checkout) OrderParked(loop string) { c.parked.WithLabelValues(loop).Inc() }
