// Package order is what the order pipeline carries, apart from how it carries it: a committed
// reservation waiting in the outbox to become an order (OutboxEntry), an order's lifecycle event
// waiting in its own outbox (LifecycleEvent), and an entry that can never be carried, parked with
// its reason (ParkedEntry). The store fills them; internal/orderqueue, the Kafka adapter, relays
// and consumes them. It imports nothing but the standard library.
package order

import "time"

// OutboxEntry is a committed reservation waiting to be published to the order queue: what the
// relay turns into an Event.
type OutboxEntry struct {
	ID        int64
	OrderID   string
	ProductID int64
	UserID    string
	Quantity  int
	Strategy  string
	CreatedAt time.Time
	// TraceParent is the W3C traceparent of the purchase that made the reservation, or empty
	// (tracing off, or the purchase not sampled): the relay carries it in the message's headers.
	TraceParent string
	// Invalid, when not empty, says why the row cannot become an event (a value beyond the
	// event's types): the relay parks it.
	Invalid string
}

// ParkedEntry is an outbox entry the relay can never publish, and why: its row cannot become a
// message, or the broker refuses the message for itself (too large for the topic, say) and not
// for an outage. Parked, it leaves the claims until an operator clears it (docs/order-pipeline.md).
type ParkedEntry struct {
	ID     int64
	Reason string
}

// LifecycleEvent is an order event of the outbox, and the message the relay publishes for it.
type LifecycleEvent struct {
	ID        int64     `json:"event_id"`
	Kind      string    `json:"kind"` // order.paid, order.expired or order.cancelled
	OrderID   string    `json:"order_id"`
	ProductID int64     `json:"product_id"`
	UserID    string    `json:"user_id"`
	Quantity  int       `json:"quantity"`
	At        time.Time `json:"at"`
	// TraceParent is the traceparent of the lifecycle change that wrote the event, or empty: the
	// relay carries it in the message's headers, never in its value.
	TraceParent string `json:"-"`
	// Invalid, when not empty, says why the row cannot become a message (OutboxEntry.Invalid).
	Invalid string `json:"-"`
}
