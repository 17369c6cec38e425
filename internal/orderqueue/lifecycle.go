package orderqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/order"
)

// The order lifecycle's events. Each change of an order's status after its creation (paid,
// expired, cancelled) enters an outbox of its own (order_events) in the transaction of the
// change; an event relay publishes it to the lifecycle topic, keyed by order id so that the
// events of one order keep their order, and the event consumer counts it into per-product
// tallies, once however often it is delivered.

// EventOutbox is the order events' outbox as the relay sees it: Outbox's claim, mark, release
// and park over order_events. ClaimEvents claims only events whose id is at least fromID (0:
// all), and never a parked one.
type EventOutbox interface {
	ClaimEvents(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]order.LifecycleEvent, error)
	MarkEventsPublished(ctx context.Context, ids []int64) error
	ReleaseEventClaims(ctx context.Context, owner string, ids []int64) error
	ParkEvents(ctx context.Context, entries []order.ParkedEntry) ([]int64, error)
	EventBacklog(ctx context.Context) (int64, error)
}

// EventTallier counts order events into their product's tallies, each event once however often
// it is given, and returns how many it counted; it parks the messages that can never be counted
// (MessageParker).
type EventTallier interface {
	TallyEvents(ctx context.Context, eventIDs []int64) (int64, error)
	MessageParker
}

// EventConsumerMetrics receives the event consumer's counters.
type EventConsumerMetrics interface {
	GroupMetrics
	EventsTallied(n int64)
}

// lifecycleSuffix names the lifecycle topic and its consumer group after the order topic's.
const lifecycleSuffix = ".lifecycle"

// Lifecycle returns the config of the lifecycle topic: the order topic's name and group with
// ".lifecycle" appended, on the same brokers, with as many partitions.
func (c KafkaConfig) Lifecycle() KafkaConfig {
	c.Topic += lifecycleSuffix
	c.GroupID += lifecycleSuffix
	return c
}

// events is the order events' outbox as a relay source: each event is published as its JSON,
// keyed by order id.
type events struct{ EventOutbox }

func (o events) claim(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) (claimed, error) {
	evs, err := o.ClaimEvents(ctx, owner, lease, limit, fromID)
	if err != nil || len(evs) == 0 {
		return claimed{}, err
	}
	c := claimed{ids: make([]int64, 0, len(evs)), msgs: make([]kafka.Message, 0, len(evs))}
	for _, e := range evs {
		e.At = e.At.UTC()
		value, err := json.Marshal(e)
		c.add(e.ID, e.OrderID, value, e.TraceParent, e.Invalid, err)
	}
	return c, nil
}

func (o events) park(ctx context.Context, entries []order.ParkedEntry) ([]int64, error) {
	return o.ParkEvents(ctx, entries)
}

func (o events) MarkPublished(ctx context.Context, ids []int64) error {
	return o.MarkEventsPublished(ctx, ids)
}

func (o events) ReleaseClaims(ctx context.Context, owner string, ids []int64) error {
	return o.ReleaseEventClaims(ctx, owner, ids)
}

func (o events) OutboxBacklog(ctx context.Context) (int64, error) { return o.EventBacklog(ctx) }

// NewEventRelay returns the relay of the order events to the lifecycle topic, w's; call Run to
// start it. Nothing requeues its events: no later state tells that one was lost by the broker.
func NewEventRelay(log *slog.Logger, outbox EventOutbox, w MessageWriter, m OutboxMetrics, cfg RelayConfig) (*Relay, error) {
	if outbox == nil || m == nil {
		return nil, errRelayDeps
	}
	return newRelay(log, events{outbox}, w, m, cfg)
}

// NewEventConsumer returns the consumer that tallies the order events of cfg.Topic (the
// lifecycle topic, KafkaConfig.Lifecycle), in group cfg.GroupID; call Run to start it.
func NewEventConsumer(log *slog.Logger, cfg KafkaConfig, t EventTallier, m EventConsumerMetrics) (*Consumer, error) {
	if t == nil || m == nil {
		return nil, errConsumerDeps
	}
	c, err := newConsumer(log, cfg, m)
	if err != nil {
		return nil, err
	}
	c.loop, c.parker = "event_consumer", t
	c.apply = c.tallyEvents(t, m)
	return c, nil
}

// tallyEvents is the event consumer's apply: it counts a batch's events into the tallies.
func (c *Consumer) tallyEvents(t EventTallier, m EventConsumerMetrics) func(context.Context, []kafka.Message) bool {
	return func(ctx context.Context, batch []kafka.Message) bool {
		return applyBatch(ctx, c, "tally order events", batch, decodeEventID, func(ctx context.Context, ids []int64) error {
			n, err := t.TallyEvents(ctx, ids)
			if err == nil {
				m.EventsTallied(n)
			}
			return err
		})
	}
}

// decodeEventID returns the only field of an order event the consumer uses: the tally counts
// the outbox row the id names, not the message, as the order consumer builds an order from its
// reservation row.
func decodeEventID(value []byte) (int64, error) {
	var e struct {
		ID int64 `json:"event_id"`
	}
	if err := json.Unmarshal(value, &e); err != nil {
		return 0, fmt.Errorf("order event: %w", err)
	}
	if e.ID <= 0 {
		return 0, errors.New("order event: no event id")
	}
	return e.ID, nil
}
