package store

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"time"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/order"
)

// The order events' outbox (order_events, written by the lifecycle in the transaction of each
// status change) as the event relay drains it, and the tallies the event consumer keeps. The
// claim, mark and release are the reservation outbox's (outbox.go), over order_events: the same
// leases, SKIP LOCKED claims and writes by id in ascending order.

// eventsOutbox is the order events' outbox, drained by the event relay.
var eventsOutbox = newOutbox("order_events", "ix_order_events_outbox",
	"id, kind, order_id, product_id, user_id, quantity, created_at, trace_parent",
	"claim order events", "mark order events published", "release order event claims")

// ClaimEvents leases up to limit unpublished order events whose id is at least fromID to owner
// for lease, oldest first: ClaimOutboxFrom for order_events.
func (s *Store) ClaimEvents(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]order.LifecycleEvent, error) {
	return claimOutbox(ctx, s, eventsOutbox, owner, lease, limit, fromID, scanEvent,
		func(e order.LifecycleEvent) int64 { return e.ID })
}

// scanEvent reads a row of eventsOutbox's columns; a product id beyond an event's range comes
// back Invalid (see scanOutboxEntry).
func scanEvent(rows *sql.Rows) (order.LifecycleEvent, error) {
	var e order.LifecycleEvent
	var productID uint64
	var traceParent sql.NullString
	if err := rows.Scan(&e.ID, &e.Kind, &e.OrderID, &productID, &e.UserID, &e.Quantity, &e.At, &traceParent); err != nil {
		return order.LifecycleEvent{}, err
	}
	e.ProductID, e.Invalid = eventProductID(productID)
	e.TraceParent = traceParent.String
	return e, nil
}

// MarkEventsPublished records that the broker acknowledged the order events.
func (s *Store) MarkEventsPublished(ctx context.Context, ids []int64) error {
	return s.markOutbox(ctx, eventsOutbox, ids)
}

// ReleaseEventClaims gives owner's unpublished claims of order events back at once.
func (s *Store) ReleaseEventClaims(ctx context.Context, owner string, ids []int64) error {
	return s.releaseOutbox(ctx, eventsOutbox, owner, ids)
}

// EventBacklog counts order events waiting to be published (not the parked ones).
func (s *Store) EventBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM order_events WHERE published_at IS NULL AND parked_at IS NULL").Scan(&n).Error
	return n, classify("order event backlog", err)
}

// TallyEvents counts the order events named by eventIDs into their products' tallies and returns
// how many it counted: those not counted before. Safe to repeat, and to run in several consumers
// at once: the consumed ids and the counters are written in one transaction, and an id recorded
// already (a redelivery, or an id twice in eventIDs) counts nothing. An event is counted from its
// outbox row, never from the message, so an id whose event a product reset deleted counts
// nothing either.
func (s *Store) TallyEvents(ctx context.Context, eventIDs []int64) (int64, error) {
	if len(eventIDs) == 0 {
		return 0, nil
	}
	var counted int64
	err := s.inTx(ctx, "tally order events", func(tx *gorm.DB) error {
		// The rows this transaction inserts carry token; IGNORE skips the ids consumed already,
		// and waits for a consumer inserting the same id to commit or roll back first. The shared
		// locks on the events make a product reset, which deletes them and then the tallies, wait
		// for this transaction or run wholly before it: otherwise an event read just before a
		// reset would be counted into the tallies of the sale after it.
		token := rand.Int64()
		res := tx.Exec(`INSERT IGNORE INTO order_events_consumed (event_id, product_id, kind, quantity, batch_token, consumed_at)
			SELECT id, product_id, kind, quantity, ?, NOW(6) FROM order_events FORCE INDEX (PRIMARY)
			WHERE id IN ? ORDER BY id LOCK IN SHARE MODE`, token, eventIDs)
		if res.Error != nil {
			return res.Error
		}
		if counted = res.RowsAffected; counted == 0 {
			return nil
		}
		return tx.Exec(`INSERT INTO order_event_tallies (product_id, paid_units, expired_units, cancelled_units, events, updated_at)
			SELECT product_id,
			       SUM(CASE WHEN kind = ? THEN quantity ELSE 0 END),
			       SUM(CASE WHEN kind = ? THEN quantity ELSE 0 END),
			       SUM(CASE WHEN kind = ? THEN quantity ELSE 0 END),
			       COUNT(*), NOW(6)
			FROM order_events_consumed WHERE event_id IN ? AND batch_token = ?
			GROUP BY product_id ORDER BY product_id
			ON DUPLICATE KEY UPDATE paid_units = paid_units + VALUES(paid_units),
			    expired_units = expired_units + VALUES(expired_units),
			    cancelled_units = cancelled_units + VALUES(cancelled_units),
			    events = events + VALUES(events), updated_at = VALUES(updated_at)`,
			EventPaid, EventExpired, EventCancelled, eventIDs, token).Error
	})
	return counted, err
}

// EventTally is what the event consumer has counted for a product: units by the kind of event
// that reported them, and the events.
type EventTally struct {
	ProductID      int64
	PaidUnits      int64
	ExpiredUnits   int64
	CancelledUnits int64
	Events         int64
}

// EventTallies returns productID's tally; a product no event was counted for has a zero one.
func (s *Store) EventTallies(ctx context.Context, productID int64) (EventTally, error) {
	t := EventTally{ProductID: productID}
	err := s.db.WithContext(ctx).Raw(`SELECT paid_units, expired_units, cancelled_units, events
		FROM order_event_tallies WHERE product_id = ?`, productID).Row().
		Scan(&t.PaidUnits, &t.ExpiredUnits, &t.CancelledUnits, &t.Events)
	if errors.Is(err, sql.ErrNoRows) {
		return t, nil
	}
	return t, classify("order event tallies", err)
}
