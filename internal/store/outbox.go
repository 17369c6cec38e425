package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/order"
)

// Lock order. The relay's MarkPublished takes X locks on reservation rows and the consumer's
// ConfirmOrders takes S locks on the same rows (the foreign-key check of each order it inserts)
// at the same moment: the consumer reads an event as soon as the broker acknowledged it, while
// the relay is about to mark it. Taken in different orders they deadlocked (error 1213): the
// UPDATE walked the rows by id and the INSERT … SELECT by order_id. Every statement here that
// locks several reservation rows now takes them in ascending id order, so the two wait for each
// other at worst and never in a cycle; what still loses a lock conflict is retried a few
// milliseconds later (retryLocks) instead of being left for a claim's lease to run out.
//
// The writes by id name PRIMARY: left to itself the optimizer walks ix_reservations_outbox
// (published_at, parked_at, id) for "id IN … AND published_at IS NULL", which under the autocommit
// statement's REPEATABLE READ takes next-key locks on that index, whose gaps are where every
// purchase inserts its new (NULL, id) entries.

// outbox is one outbox table as the relays drain it (reservations, order_events): its rows carry
// published_at, parked_at, claim_owner and claim_until, and the claims walk an index on
// (published_at, parked_at, id). Its statements are made once, with its names in them; the ops
// name its claim, mark and release in errors and logs.
type outbox struct {
	claimOp, markOp, releaseOp  string
	claim, lease, mark, release string
}

// newOutbox returns the outbox of table, whose claims walk index and read columns.
func newOutbox(table, index, columns, claimOp, markOp, releaseOp string) *outbox {
	return &outbox{
		claimOp: claimOp, markOp: markOp, releaseOp: releaseOp,
		claim: `SELECT ` + columns + `
			FROM ` + table + ` FORCE INDEX (` + index + `)
			WHERE published_at IS NULL AND parked_at IS NULL AND id >= ? AND (claim_until IS NULL OR claim_until < NOW(6))
			ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`,
		lease: `UPDATE ` + table + ` FORCE INDEX (PRIMARY)
			SET claim_owner = ?, claim_until = NOW(6) + INTERVAL ? MICROSECOND
			WHERE id IN ?`,
		mark: `UPDATE ` + table + ` FORCE INDEX (PRIMARY)
			SET published_at = NOW(6), claim_owner = NULL, claim_until = NULL
			WHERE id IN ? AND published_at IS NULL`,
		release: `UPDATE ` + table + ` FORCE INDEX (PRIMARY)
			SET claim_owner = NULL, claim_until = NULL
			WHERE id IN ? AND claim_owner = ? AND published_at IS NULL`,
	}
}

// reservationsOutbox is the reservations' outbox, drained by the order relay.
var reservationsOutbox = newOutbox("reservations", "ix_reservations_outbox",
	"id, order_id, product_id, user_id, quantity, strategy, created_at, trace_parent",
	"claim outbox", "mark published", "release claims")

// claimOutbox leases to owner for lease up to limit unpublished, unparked rows of o whose id is at
// least fromID and whose claim is free or has run out, oldest first, and returns them as scan
// reads them (a row of o's columns); id is a row's id.
func claimOutbox[T any](ctx context.Context, s *Store, o *outbox, owner string, lease time.Duration, limit int, fromID int64,
	scan func(*sql.Rows) (T, error), id func(T) int64) ([]T, error) {
	var out []T
	err := s.inTx(ctx, o.claimOp, func(tx *gorm.DB) error {
		// A locking read returns the latest committed row, so the columns can be read here at
		// once rather than by a second SELECT after the UPDATE. The index hint keeps the walk on
		// the unpublished entries: when this SELECT asks for whole rows the optimizer, misled by
		// statistics taken while the table was young, may read the table in id order from its
		// first row instead, locking and skipping every published one.
		out = nil
		rows, err := tx.Raw(o.claim, fromID, limit).Rows()
		if err != nil {
			return err
		}
		out, err = scanRows(rows, limit, scan)
		if err != nil || len(out) == 0 {
			return err
		}
		ids := make([]int64, len(out))
		for i, e := range out {
			ids[i] = id(e)
		}
		return tx.Exec(o.lease, owner, lease.Microseconds(), ids).Error
	})
	return out, err
}

// markOutbox records that the broker acknowledged the rows of o named by ids.
func (s *Store) markOutbox(ctx context.Context, o *outbox, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.retryLocks(ctx, o.markOp, func() error {
		return s.markOutboxOnce(ctx, o, ids)
	})
}

// markOutboxOnce is one attempt of markOutbox. The IN list is walked in ascending id order
// whatever order ids are in.
func (s *Store) markOutboxOnce(ctx context.Context, o *outbox, ids []int64) error {
	return s.db.WithContext(ctx).Exec(o.mark, ids).Error
}

// releaseOutbox gives owner's unpublished claims of the rows of o named by ids back at once.
func (s *Store) releaseOutbox(ctx context.Context, o *outbox, owner string, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	return s.retryLocks(ctx, o.releaseOp, func() error {
		return s.db.WithContext(ctx).Exec(o.release, ids, owner).Error
	})
}

// ClaimOutbox leases up to limit unpublished reservations to owner for lease, oldest first.
// Relays in several processes may call it at once: SKIP LOCKED hands each of them different rows
// and never waits for a purchase still inserting, and a claim whose owner died expires after
// lease so another relay takes the rows over.
func (s *Store) ClaimOutbox(ctx context.Context, owner string, lease time.Duration, limit int) ([]order.OutboxEntry, error) {
	return s.ClaimOutboxFrom(ctx, owner, lease, limit, 0)
}

// ClaimOutboxFrom is ClaimOutbox for entries whose id is at least fromID. The bound is a range
// on the outbox index, so the claim does not walk the entries published before it, which linger
// as delete-marked records until InnoDB purges them.
func (s *Store) ClaimOutboxFrom(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]order.OutboxEntry, error) {
	return claimOutbox(ctx, s, reservationsOutbox, owner, lease, limit, fromID, scanOutboxEntry,
		func(e order.OutboxEntry) int64 { return e.ID })
}

// scanRows reads and closes rows, each with scan. Scanning by hand costs a fraction of gorm's
// reflection, which was the relay's largest CPU cost after the network.
func scanRows[T any](rows *sql.Rows, capacity int, scan func(*sql.Rows) (T, error)) ([]T, error) {
	defer rows.Close()
	out := make([]T, 0, min(capacity, 256))
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanOutboxEntry reads a row of reservationsOutbox's columns. A row whose product id is beyond
// the event's int64 (the column is unsigned, and nothing but the purchase path's own checks keeps
// it lower) comes back Invalid rather than failing the scan: a scan error would fail every claim
// that reaches the row, and stall the relay behind it.
func scanOutboxEntry(rows *sql.Rows) (order.OutboxEntry, error) {
	var e order.OutboxEntry
	var productID uint64
	var traceParent sql.NullString
	if err := rows.Scan(&e.ID, &e.OrderID, &productID, &e.UserID, &e.Quantity, &e.Strategy, &e.CreatedAt, &traceParent); err != nil {
		return order.OutboxEntry{}, err
	}
	e.ProductID, e.Invalid = eventProductID(productID)
	e.TraceParent = traceParent.String
	return e, nil
}

// eventProductID returns a product id column's value as an event's, or why it cannot be one.
func eventProductID(v uint64) (int64, string) {
	if v > math.MaxInt64 {
		return 0, fmt.Sprintf("product_id %d is beyond an event's range", v)
	}
	return int64(v), ""
}

// MarkPublished records that the broker acknowledged the entries.
func (s *Store) MarkPublished(ctx context.Context, ids []int64) error {
	return s.markOutbox(ctx, reservationsOutbox, ids)
}

// ReleaseClaims gives owner's unpublished claims back at once, so that a retry need not wait for
// the lease to run out.
func (s *Store) ReleaseClaims(ctx context.Context, owner string, ids []int64) error {
	return s.releaseOutbox(ctx, reservationsOutbox, owner, ids)
}

// retryLocks runs a single-statement write, and runs it again, up to four times in all, when it
// lost a deadlock (1213) or a lock wait (1205): retryConflicts, with each conflict logged.
func (s *Store) retryLocks(ctx context.Context, op string, write func() error) error {
	attempt := 0
	return retryConflicts(ctx, op, func() error {
		attempt++
		err := write()
		if retryable(err) {
			s.log.Debug("outbox: lock conflict; retrying", "op", op, "attempt", attempt, "err", err)
		}
		return err
	})
}

// OutboxBacklog counts reservations waiting to be published (not the parked ones).
func (s *Store) OutboxBacklog(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM reservations WHERE published_at IS NULL AND parked_at IS NULL").Scan(&n).Error
	return n, classify("outbox backlog", err)
}

// RequeueUnconfirmed marks for publishing again, in batches of at most limit, reservations that
// were published more than minAge ago, after since and at most maxAge ago, and still have no
// order: the safety net for a broker that lost acknowledged messages. A redelivered event is
// harmless (ConfirmOrders is idempotent), so a generous minAge is the only tuning. A reservation
// whose event a consumer parked is left alone: published again, it would only be parked again,
// and logged again.
//
// It returns the instant (the database's clock) up to which every reservation is now accounted
// for: pass it as the next call's since, so that each call looks only at what was published
// since the last one (an order, once made, stays). Looking a whole maxAge back on every call
// examined every reservation of the day each minute (make scale: 50,000 rows per call after a
// sale of 50,000). When the batch was full, it returns since again: the requeued ones have left
// the range, and the next call finds the rest.
func (s *Store) RequeueUnconfirmed(ctx context.Context, since time.Time, minAge, maxAge time.Duration, limit int) (requeued int64, upTo time.Time, err error) {
	var bounds struct{ Lower, Upper time.Time }
	if err := s.db.WithContext(ctx).Raw(`SELECT GREATEST(?, NOW(6) - INTERVAL ? MICROSECOND) AS lower, NOW(6) - INTERVAL ? MICROSECOND AS upper`,
		since.UTC(), maxAge.Microseconds(), minAge.Microseconds()).Scan(&bounds).Error; err != nil {
		return 0, since, classify("find unconfirmed", err)
	}
	var ids []int64
	err = s.db.WithContext(ctx).Raw(`
		SELECT r.id FROM reservations r LEFT JOIN orders o ON o.reservation_id = r.id
		WHERE r.published_at > ? AND r.published_at <= ?
		  AND o.id IS NULL
		  AND NOT EXISTS (SELECT 1 FROM parked_messages pm WHERE pm.order_id = r.order_id)
		LIMIT ?`, bounds.Lower, bounds.Upper, limit).Scan(&ids).Error
	if err != nil {
		return 0, since, classify("find unconfirmed", err)
	}
	if len(ids) == 0 {
		return 0, bounds.Upper, nil
	}
	err = s.retryLocks(ctx, "requeue unconfirmed", func() error {
		res := s.db.WithContext(ctx).Exec(`UPDATE reservations FORCE INDEX (PRIMARY) SET published_at = NULL
			WHERE id IN ? AND published_at IS NOT NULL`, ids)
		requeued = res.RowsAffected
		return res.Error
	})
	if err != nil || len(ids) >= limit {
		return requeued, since, err
	}
	return requeued, bounds.Upper, nil
}

// ConfirmOrders creates the order of each reservation named by orderIDs that has none yet and
// returns how many it created. The order is built from the reservation row, never from the event,
// so an event for a reservation that an admin reset deleted creates nothing. Safe to repeat.
// IGNORE cannot cover an order id MySQL cannot even compare with the column (one outside its
// ASCII: an illegal mix of collations, 1267-1271): the batch then fails with sale.ErrPoison, for
// the consumer to find the id.
func (s *Store) ConfirmOrders(ctx context.Context, orderIDs []string) (int64, error) {
	if len(orderIDs) == 0 {
		return 0, nil
	}
	var created int64
	err := s.inTx(ctx, "confirm orders", func(tx *gorm.DB) error {
		var err error
		created, err = confirmOrders(tx, orderIDs, s.window)
		return err
	})
	return created, err
}

// confirmOrders is one attempt of ConfirmOrders, in tx; each order waits for payment for window
// from now (expires_at). IGNORE skips the duplicates of a
// redelivery and a reservation deleted between the SELECT and the foreign-key check; the source
// row's types are the target's, so nothing else can be ignored. ORDER BY id makes the
// foreign-key checks lock the reservation rows in the order MarkPublished does.
func confirmOrders(tx *gorm.DB, orderIDs []string, window time.Duration) (int64, error) {
	res := tx.Exec(`INSERT IGNORE INTO orders (order_id, reservation_id, product_id, user_id, quantity, status, created_at, expires_at)
		SELECT order_id, id, product_id, user_id, quantity, 'confirmed', NOW(6), NOW(6) + INTERVAL ? MICROSECOND FROM reservations
		WHERE order_id IN ? ORDER BY id`, window.Microseconds(), orderIDs)
	return res.RowsAffected, res.Error
}
