package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/sale"
)

type reservationRow struct {
	ID         int64 `gorm:"primaryKey"`
	OrderID    string
	ProductID  int64
	UserID     string
	Quantity   int
	Strategy   string
	CreatedAt  time.Time
	ClaimOwner *string
	ClaimUntil *time.Time
}

func (reservationRow) TableName() string { return "reservations" }

type idempotencyRow struct {
	UserID    string `gorm:"primaryKey"`
	IdemKey   string `gorm:"primaryKey"`
	ProductID int64
	Quantity  int
	OrderID   string
	Strategy  string
	CreatedAt time.Time
}

func (idempotencyRow) TableName() string { return "idempotency_keys" }

func (r idempotencyRow) receipt() sale.Receipt {
	return sale.Receipt{
		OrderID:   r.OrderID,
		Status:    sale.StatusQueued,
		ProductID: r.ProductID,
		UserID:    r.UserID,
		Quantity:  r.Quantity,
		Strategy:  sale.Strategy(r.Strategy),
	}
}

// ErrDuplicate means that a reservation of a batch collided with a committed one (the same user
// bought the product already, or used the same Idempotency-Key): the batch's INSERT failed as a
// whole. Conflicts says which reservations collide.
var ErrDuplicate = errors.New("store: a reservation of the batch is a duplicate")

// PurchaseTx is the transaction purchases run in: one, or a batch of one product's purchases. A
// stock strategy deducts through it and records the reservations with Reserve; everything
// commits together or not at all.
type PurchaseTx struct {
	tx *gorm.DB
}

// Purchase runs fn in a READ COMMITTED transaction, retried on deadlock. Errors come back as
// sale sentinels where they have a meaning for the buyer.
func (s *Store) Purchase(ctx context.Context, fn func(ctx context.Context, tx *PurchaseTx) error) error {
	return s.inTx(ctx, "purchase", func(tx *gorm.DB) error {
		return fn(ctx, &PurchaseTx{tx: tx})
	})
}

// ConnectionID returns the database connection the transaction runs on (for tests that kill it).
func (t *PurchaseTx) ConnectionID(ctx context.Context) (int64, error) {
	var id int64
	err := t.tx.WithContext(ctx).Raw("SELECT CONNECTION_ID()").Scan(&id).Error
	return id, err
}

// Reserve inserts the idempotency keys (of the reservations that have one) and the reservations,
// the outbox rows the relay publishes: two multi-row INSERTs, whatever the number. A collision
// with a committed row fails the statement: for a single reservation it is
// sale.ErrIdempotencyKeyInUse (the key was used) or sale.ErrAlreadyPurchased (the user holds a
// reservation of the product); for several, ErrDuplicate (see Conflicts).
func (t *PurchaseTx) Reserve(ctx context.Context, rs ...sale.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	db := t.tx.WithContext(ctx)
	var keyed []any
	for _, r := range rs {
		if r.IdempotencyKey != "" {
			keyed = append(keyed, r.UserID, r.IdempotencyKey, r.ProductID, r.Quantity, r.OrderID, string(r.Strategy), r.CreatedAt)
		}
	}
	if len(keyed) > 0 {
		err := db.Exec("INSERT INTO idempotency_keys (user_id, idem_key, product_id, quantity, order_id, strategy, created_at) VALUES "+
			placeholders(len(keyed)/7, 7), keyed...).Error
		if isDuplicate(err) {
			return duplicate(len(rs), sale.ErrIdempotencyKeyInUse)
		}
		if err != nil {
			return err
		}
	}
	rows := make([]any, 0, 6*len(rs))
	for _, r := range rs {
		rows = append(rows, r.OrderID, r.ProductID, r.UserID, r.Quantity, string(r.Strategy), r.CreatedAt)
	}
	err := db.Exec("INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at) VALUES "+
		placeholders(len(rs), 6), rows...).Error
	if isDuplicate(err) {
		return duplicate(len(rs), sale.ErrAlreadyPurchased)
	}
	return err
}

func duplicate(n int, single error) error {
	if n == 1 {
		return single
	}
	return ErrDuplicate
}

// placeholders returns "(?,…,?),(?,…,?)…": rows groups of cols.
func placeholders(rows, cols int) string {
	group := "(" + strings.Repeat("?,", cols-1) + "?)"
	var b strings.Builder
	b.Grow(rows * (len(group) + 1))
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(group)
	}
	return b.String()
}

// Conflicts returns, for each reservation of one product, why it cannot be inserted given the
// committed rows: sale.ErrIdempotencyKeyInUse, sale.ErrAlreadyPurchased, or nil.
func (t *PurchaseTx) Conflicts(ctx context.Context, productID int64, rs []sale.Reservation) ([]error, error) {
	db := t.tx.WithContext(ctx)
	out := make([]error, len(rs))
	var pairs, users []any
	for _, r := range rs {
		users = append(users, r.UserID)
		if r.IdempotencyKey != "" {
			pairs = append(pairs, r.UserID, r.IdempotencyKey)
		}
	}
	usedKey := map[[2]string]bool{}
	if len(pairs) > 0 {
		var keys []struct{ UserID, IdemKey string }
		err := db.Raw("SELECT user_id, idem_key FROM idempotency_keys WHERE (user_id, idem_key) IN ("+
			placeholders(len(pairs)/2, 2)+")", pairs...).Scan(&keys).Error
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			usedKey[[2]string{k.UserID, k.IdemKey}] = true
		}
	}
	var buyers []string
	err := db.Raw("SELECT user_id FROM reservations WHERE product_id = ? AND user_id IN ?", productID, users).Scan(&buyers).Error
	if err != nil {
		return nil, err
	}
	bought := map[string]bool{}
	for _, u := range buyers {
		bought[u] = true
	}
	for i, r := range rs {
		switch {
		case r.IdempotencyKey != "" && usedKey[[2]string{r.UserID, r.IdempotencyKey}]:
			out[i] = sale.ErrIdempotencyKeyInUse
		case bought[r.UserID]:
			out[i] = sale.ErrAlreadyPurchased
		}
	}
	return out, nil
}

// Unreserve deletes reservations inserted earlier in this transaction, with their idempotency
// keys: the batch's purchases that found no stock left.
func (t *PurchaseTx) Unreserve(ctx context.Context, rs []sale.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	db := t.tx.WithContext(ctx)
	var pairs []any
	orders := make([]string, len(rs))
	for i, r := range rs {
		orders[i] = r.OrderID
		if r.IdempotencyKey != "" {
			pairs = append(pairs, r.UserID, r.IdempotencyKey)
		}
	}
	if len(pairs) > 0 {
		err := db.Exec("DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN ("+placeholders(len(pairs)/2, 2)+")", pairs...).Error
		if err != nil {
			return err
		}
	}
	return db.Exec("DELETE FROM reservations WHERE order_id IN ?", orders).Error
}

// TakeIfAvailable is the mysql strategy's one statement: it takes qty units only if at least qty
// are left and the product is still in epoch with strategy st. The row lock it takes is held
// until commit, so concurrent deductions serialise here and no check can go stale. false means
// it took nothing; LockStock says why.
func (t *PurchaseTx) TakeIfAvailable(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, qty int) (bool, error) {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ? AND strategy = ? AND sale_epoch = ?",
		qty, productID, qty, string(st), epoch)
	return res.RowsAffected == 1, res.Error
}

// LockStock locks the product's row until commit and returns its stock, or sale.ErrNotFound,
// sale.ErrStrategyChanged or sale.ErrSaleChanged.
func (t *PurchaseTx) LockStock(ctx context.Context, productID int64, st sale.Strategy, epoch uint64) (int, error) {
	return t.stock(ctx, "SELECT stock, strategy, sale_epoch FROM products WHERE id = ? FOR UPDATE", productID, st, epoch)
}

// Stock reads the product's stock without locking, as the lock strategies do before they check
// and write. It returns sale.ErrNotFound, sale.ErrStrategyChanged or sale.ErrSaleChanged if the
// product is gone, no longer uses strategy st, or is no longer in epoch.
func (t *PurchaseTx) Stock(ctx context.Context, productID int64, st sale.Strategy, epoch uint64) (int, error) {
	return t.stock(ctx, "SELECT stock, strategy, sale_epoch FROM products WHERE id = ?", productID, st, epoch)
}

func (t *PurchaseTx) stock(ctx context.Context, query string, productID int64, st sale.Strategy, epoch uint64) (int, error) {
	var row struct {
		Stock     int
		Strategy  string
		SaleEpoch uint64
	}
	res := t.tx.WithContext(ctx).Raw(query, productID).Scan(&row)
	switch {
	case res.Error != nil:
		return 0, res.Error
	case res.RowsAffected == 0:
		return 0, sale.ErrNotFound
	case row.Strategy != string(st):
		return 0, sale.ErrStrategyChanged
	case row.SaleEpoch != epoch:
		return 0, sale.ErrSaleChanged
	}
	return row.Stock, nil
}

// Take subtracts qty from the stock of a row this transaction has locked (LockStock).
func (t *PurchaseTx) Take(ctx context.Context, productID int64, qty int) error {
	return t.tx.WithContext(ctx).Exec("UPDATE products SET stock = stock - ? WHERE id = ?", qty, productID).Error
}

// SetStock writes stock unconditionally: whatever makes the read-check-write safe (a lock, or
// nothing at all for the `none` strategy) is the caller's business.
func (t *PurchaseTx) SetStock(ctx context.Context, productID int64, st sale.Strategy, epoch uint64, stock int) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ? WHERE id = ? AND strategy = ? AND sale_epoch = ?", stock, productID, string(st), epoch)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return sale.ErrSaleChanged
	}
	return nil
}

// ClaimFence records token as the product's fence, in its own statement and before the purchase
// transaction, if it is larger than every token the product has accepted; otherwise it returns
// sale.ErrFenced and the caller must not touch the stock. Claiming before reading is what makes
// the fence sound for a read-check-write: a holder whose lease ran out between its claim and its
// write finds a newer token in place and its write (SetStockFenced) does nothing.
func (s *Store) ClaimFence(ctx context.Context, productID int64, st sale.Strategy, epoch, token uint64) error {
	res := s.db.WithContext(ctx).Exec(
		"UPDATE products SET fence_token = ? WHERE id = ? AND strategy = ? AND sale_epoch = ? AND fence_token < ?",
		token, productID, string(st), epoch, token)
	if res.Error != nil {
		return classify("claim fence", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var row struct {
		Strategy   string
		SaleEpoch  uint64
		FenceToken uint64
	}
	err := s.db.WithContext(ctx).Raw("SELECT strategy, sale_epoch, fence_token FROM products WHERE id = ?", productID).Scan(&row).Error
	switch {
	case err != nil:
		return classify("claim fence", err)
	case row.Strategy == "":
		return sale.ErrNotFound
	case row.Strategy != string(st):
		return sale.ErrStrategyChanged
	case row.SaleEpoch != epoch:
		return sale.ErrSaleChanged
	}
	return fmt.Errorf("%w: token %d, product already accepted %d", sale.ErrFenced, token, row.FenceToken)
}

// SetStockFenced writes stock only while the product's fence still holds token (see ClaimFence).
func (t *PurchaseTx) SetStockFenced(ctx context.Context, productID int64, st sale.Strategy, epoch, token uint64, stock int) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ? WHERE id = ? AND strategy = ? AND sale_epoch = ? AND fence_token = ?",
		stock, productID, string(st), epoch, token)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: token %d was superseded before the write", sale.ErrFenced, token)
	}
	return nil
}

// StoredReceipt returns the receipt committed with (userID, key), or sale.ErrNotFound.
func (s *Store) StoredReceipt(ctx context.Context, userID, key string) (sale.Receipt, error) {
	var row idempotencyRow
	err := s.db.WithContext(ctx).Where("user_id = ? AND idem_key = ?", userID, key).Take(&row).Error
	if err != nil {
		return sale.Receipt{}, classify("stored receipt", err)
	}
	return row.receipt(), nil
}
