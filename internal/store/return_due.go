package store

import (
	"context"
	"slices"
	"strings"

	"gorm.io/gorm"
)

// Returns owed. The returner of every replica asks each second which products have closed orders
// whose units are not back in stock yet (Unreturned). return_due (migration 00016) keeps the
// answer's candidates, so that the question costs what the products that may owe cost, not what
// every product costs: one row per product that ever had an order made due for a return, with
// owing (the product may owe) and seq (how many marks it has had).
//
//   - Mark: a transaction that makes orders due for a return (an expiry, a cancel) marks their
//     products in the same transaction, once each, as its last statement (markOwed): owing =
//     TRUE, seq + 1; a product's first mark inserts seq 1. (An operator who un-parks an order
//     marks its product after the un-park, docs/lifecycle.md: an unmark between the two is
//     undone by the mark, while a mark before the un-park could be undone by a look that did
//     not see the un-park yet.)
//     seq changes nowhere else, only upwards and under the row's lock, so the order of a
//     product's seqs is the order in which its marks committed.
//   - Read: owedReturns reads the products marked owing with their seq (statement A), probes
//     ix_orders_return_due for each (statements B), and unmarks each whose probe found nothing
//     due, if its seq is still the one A read (statement C: owing = FALSE WHERE product_id = ?
//     AND seq = ?). A product that owes stays marked: its mark goes when its orders are back.
//   - A row is never deleted, so a product's seq never starts again. (With DELETE ... AND seq = ?,
//     a mark deleted by one replica and inserted afresh by a close would be at seq 1 again, and
//     another replica that had read seq 1 before both would delete the fresh mark of a close its
//     probe did not see.)
//   - ResetProduct deletes a product's orders and leaves its mark: a stale mark is harmless, its
//     probe finds nothing and unmarks it.
//
// Nothing is lost: when C unmarks product p, no order of p is due. Suppose order o of p is due
// when C commits, and let T be the last transaction before that which made o due. T marked p
// and committed before C. C is an UPDATE: it reads p's row as last committed, after waiting for
// a transaction that holds the row's lock (one that marked p and has not committed), so it saw
// T's mark or a later one; it matched the seq that A read, s, and seqs only grow, so T's seq is
// at most s: T committed no later than the mark that wrote s, which A's snapshot holds. B's
// snapshot is no older than A's: B starts after A has returned, and each statement here takes a
// snapshot of its own (the pool's connections are READ COMMITTED, and these statements run
// outside any transaction). o was due all along from T's commit to C's (a return ends that for
// good; a park, until an un-park, which would be a later T), so B saw o due and found it, and
// C did not run for p. The argument needs only that B's snapshot be no older than what A read:
// under REPEATABLE READ, A and B in one transaction whose snapshot A's read takes would do too;
// a B whose snapshot predates A's read would not (a transaction that read something before A,
// or an A that read the latest rows with FOR UPDATE, beyond the transaction's snapshot).

// probeChunk is how many products one statement of owedReturns probes, or unmarks.
const probeChunk = 500

// markOwed marks productIDs in return_due, in tx: their orders closed (or un-parked) in tx may
// owe returns. Each product once, in id order, so that two transactions marking the same
// products lock their rows in one order. Call it last in tx: the rows stay locked until the
// commit, and every other close of those products waits for them.
func markOwed(tx *gorm.DB, productIDs []int64) error {
	ids := slices.Compact(slices.Sorted(slices.Values(productIDs)))
	if len(ids) == 0 {
		return nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return tx.Exec("INSERT INTO return_due (product_id, seq, owing) VALUES "+
		strings.TrimSuffix(strings.Repeat("(?, 1, TRUE),", len(ids)), ",")+
		" ON DUPLICATE KEY UPDATE seq = seq + 1, owing = TRUE", args...).Error
}

// markedProduct is a product marked owing, as owedReturns reads it.
type markedProduct struct {
	ID        int64
	Strategy  string
	SaleEpoch uint64
	Seq       uint64
}

// owedReturns returns the products that have closed orders whose units are not back yet, parked
// ones aside, in id order, and unmarks the marked products that have none (see the comment at
// the top of the file). It reads the range owing = TRUE of ix_return_due_owing, then probes
// ix_orders_return_due once per marked product, a range over its three columns that reads at
// most one entry, named because left to itself the optimizer walks every order of the product
// (docs/scaling.md). The cost grows with the marked products: none, when no order awaits its
// return and none has closed since the last call.
func (s *Store) owedReturns(ctx context.Context) ([]returnTarget, error) {
	db := s.db.WithContext(ctx)
	var marked []markedProduct
	if err := db.Raw(`SELECT d.product_id AS id, p.strategy, p.sale_epoch, d.seq
		FROM return_due d JOIN products p ON p.id = d.product_id
		WHERE d.owing = TRUE ORDER BY d.product_id`).Scan(&marked).Error; err != nil || len(marked) == 0 {
		return nil, classify("unreturned orders", err)
	}
	owing := map[int64]bool{}
	for chunk := range slices.Chunk(marked, probeChunk) {
		parts := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, p := range chunk {
			parts[i] = `(SELECT product_id FROM orders FORCE INDEX (ix_orders_return_due)
				WHERE product_id = ? AND returned_at IS NULL AND closed_at IS NOT NULL AND parked_at IS NULL LIMIT 1)`
			args[i] = p.ID
		}
		var ids []int64
		if err := db.Raw(strings.Join(parts, " UNION ALL "), args...).Scan(&ids).Error; err != nil {
			return nil, classify("unreturned orders", err)
		}
		for _, id := range ids {
			owing[id] = true
		}
	}
	var out []returnTarget
	var settled []markedProduct
	for _, p := range marked {
		if owing[p.ID] {
			out = append(out, returnTarget{ID: p.ID, Strategy: p.Strategy, SaleEpoch: p.SaleEpoch})
		} else {
			settled = append(settled, p)
		}
	}
	// A mark left by a failed unmark costs the next call a probe, nothing more: the products
	// that owe are answered all the same.
	if err := unmark(ctx, db, settled); err != nil && ctx.Err() == nil {
		s.log.WarnContext(ctx, "store: unmark products that owe no returns", "products", len(settled), "err", err)
	}
	return out, nil
}

// unmark sets owing = FALSE on the products whose probe found nothing due, each only while its
// seq is the one read with it: a mark committed since (seq + 1) keeps it owing. One statement
// per probeChunk products, a range of the primary key.
func unmark(ctx context.Context, db *gorm.DB, settled []markedProduct) error {
	for chunk := range slices.Chunk(settled, probeChunk) {
		parts := make([]string, len(chunk))
		args := make([]any, 0, 2*len(chunk))
		for i, p := range chunk {
			parts[i] = "(product_id = ? AND seq = ?)"
			args = append(args, p.ID, p.Seq)
		}
		if err := retryConflicts(ctx, "unmark returns", func() error {
			return db.Exec("UPDATE return_due SET owing = FALSE WHERE "+strings.Join(parts, " OR "), args...).Error
		}); err != nil {
			return err
		}
	}
	return nil
}
