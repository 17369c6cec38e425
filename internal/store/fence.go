package store

import (
	"context"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Fence is what a lock holder claims a product's fence with and writes under: its lease's
// fencing token, and the issuer of that token (lock.IssuerOf: for ZooKeeper the identity of the
// ensemble's data; "" for a lock whose tokens never go back).
type Fence struct {
	Issuer string
	Token  uint64
}

// A product's fence is the pair (products.fence_issuer, products.fence_token), compared in that
// order. fence_issuer is the id of the issuer's row in lock_issuers, given out in the order this
// database first saw each issuer; 0 stands for "no issuer": the locks whose tokens never go back,
// and the rows claimed before issuers were recorded.
//
// Why a pair: tokens of one issuer increase with every grant, but ZooKeeper counts its czxids
// from its data, and an ensemble whose data was wiped starts again below the fence. Its identity
// is new (zklock.Options.EnsembleNode), hence seen after the old one, hence a larger
// fence_issuer: its first claim moves the fence onto the new data, whatever its token. From then
// on, every holder of an old-data token is refused: at its claim (a smaller pair), and at its
// write, which compares both columns with the pair it claimed. An issuer's id never changes, so
// the fence cannot move back onto data it left, even while both ensembles answer. docs/locks.md
// gives the whole argument.

// ClaimFence records f as the product's fence, in its own statement and before the purchase
// transaction, if it is larger than the fence the product holds (a later issuer, or the same one
// with a larger token); otherwise it returns sale.ErrFenced and the caller must not touch the
// stock. Claiming before reading is what makes the fence sound for a read-check-write: a holder
// whose lease ran out between its claim and its write finds a newer pair in place and its write
// (SetStockFenced) does nothing.
func (s *Store) ClaimFence(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, f Fence) error {
	issuer, err := s.issuerID(ctx, f.Issuer)
	if err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE products SET fence_issuer = ?, fence_token = ?
		WHERE id = ? AND strategy = ? AND sale_epoch = ?
		  AND (fence_issuer < ? OR (fence_issuer = ? AND fence_token < ?))`,
		issuer, f.Token, productID, string(st), epoch, issuer, issuer, f.Token)
	if res.Error != nil {
		return classify("claim fence", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var row struct {
		Strategy    string
		SaleEpoch   uint64
		FenceIssuer uint64
		FenceToken  uint64
	}
	err = s.db.WithContext(ctx).Raw("SELECT strategy, sale_epoch, fence_issuer, fence_token FROM products WHERE id = ?", productID).Scan(&row).Error
	switch {
	case err != nil:
		return classify("claim fence", err)
	case row.Strategy == "":
		return sale.ErrNotFound
	case row.Strategy != string(st):
		return sale.ErrStrategyChanged
	case row.SaleEpoch != epoch:
		return sale.ErrSaleChanged
	case row.FenceIssuer > issuer:
		return fmt.Errorf("%w: token %d of lock issuer #%d (%s), but the product's fence moved on to the later issuer #%d (its lock service's data was replaced; this holder's lock service is the old one)",
			sale.ErrFenced, f.Token, issuer, f.Issuer, row.FenceIssuer)
	}
	if issuer > 0 {
		// Behind a newer holder of the same data, or behind tokens this data issued before a
		// restore from a backup made it count them again: then it needs a new identity.
		return fmt.Errorf("%w: token %d of lock issuer #%d, product already accepted %d (if that ZooKeeper was restored from a backup, delete its ensemble node: docs/locks.md)",
			sale.ErrFenced, f.Token, issuer, row.FenceToken)
	}
	return fmt.Errorf("%w: token %d, product already accepted %d", sale.ErrFenced, f.Token, row.FenceToken)
}

// SetStockFenced writes stock only while the product's fence still holds f, issuer and token
// both (see ClaimFence).
func (t *PurchaseTx) SetStockFenced(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, f Fence, stock int) error {
	issuer, err := t.s.issuerID(ctx, f.Issuer)
	if err != nil {
		return err
	}
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ? WHERE id = ? AND strategy = ? AND sale_epoch = ? AND fence_issuer = ? AND fence_token = ?",
		stock, productID, string(st), epoch, issuer, f.Token)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: token %d of lock issuer #%d was superseded before the write", sale.ErrFenced, f.Token, issuer)
	}
	return nil
}

// maxIssuer is the width of lock_issuers.issuer.
const maxIssuer = 128

// issuerID returns the id of issuer in lock_issuers, registering it the first time any process
// on this database sees it: ids follow first sight. "" is 0. Ids never change, so each process
// remembers them.
func (s *Store) issuerID(ctx context.Context, issuer string) (uint64, error) {
	if issuer == "" {
		return 0, nil
	}
	if len(issuer) > maxIssuer {
		return 0, fmt.Errorf("lock issuer %q: longer than %d bytes", issuer, maxIssuer)
	}
	if id, ok := s.issuers.Load(issuer); ok {
		return id.(uint64), nil
	}
	db := s.db.WithContext(ctx)
	// ON DUPLICATE KEY rather than INSERT IGNORE, which would hide every other error too.
	if err := db.Exec(`INSERT INTO lock_issuers (issuer, first_seen) VALUES (?, UTC_TIMESTAMP(6))
		ON DUPLICATE KEY UPDATE issuer = issuer`, issuer).Error; err != nil {
		return 0, classify("register lock issuer", err)
	}
	var id uint64
	if err := db.Raw("SELECT id FROM lock_issuers WHERE issuer = ?", issuer).Scan(&id).Error; err != nil {
		return 0, classify("lock issuer", err)
	}
	if id == 0 {
		return 0, fmt.Errorf("lock issuer %q: registered but not found", issuer)
	}
	s.issuers.Store(issuer, id)
	return id, nil
}
