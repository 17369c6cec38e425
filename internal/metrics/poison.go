package metrics

// The poison rows: what a background loop can never get through (a value MySQL
// refuses, a message the broker refuses, bytes nothing decodes) is parked and counted here, by
// loop, and the loop goes on. Any increase is an alert: a parked row is a buyer's unit waiting
// for an operator (docs/order-pipeline.md).

// poisonLoops are the loops whose series exist from the start, at 0: a rate over a series born
// at its first event misses that event. A loop not listed gets its series when it first parks.
var poisonLoops = []string{"relay", "event_relay", "consumer", "event_consumer", "persister", "expire", "settle", "return"}

// registerPoison makes seckill_poison_rows_total.
func (m *Metrics) registerPoison() {
	m.poison = factory{m.reg}.counterVec("seckill_poison_rows_total",
		"Rows or messages a background loop could never process and parked (skipped, kept for an operator), by loop. Anything above 0 needs an operator: see docs/order-pipeline.md.",
		"loop")
	for _, loop := range poisonLoops {
		m.poison.WithLabelValues(loop)
	}
}

// PoisonRows counts n rows or messages that loop parked.
func (m *Metrics) PoisonRows(loop string, n int) {
	if n > 0 {
		m.poison.WithLabelValues(loop).Add(float64(n))
	}
}

// RelayParked implements order.OutboxMetrics: the reservations' relay.
func (m *Metrics) RelayParked(n int) { m.PoisonRows("relay", n) }

// ConsumerParked implements order.GroupMetrics: the order consumer.
func (m *Metrics) ConsumerParked(n int) { m.PoisonRows("consumer", n) }

// RelayParked implements order.OutboxMetrics: the order events' relay.
func (l *Lifecycle) RelayParked(n int) { l.poison("event_relay", n) }

// ConsumerParked implements order.GroupMetrics: the order events' consumer.
func (l *Lifecycle) ConsumerParked(n int) { l.poison("event_consumer", n) }
