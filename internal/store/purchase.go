package store

import (
	"context"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// keyedRow is a reservation as a receipt: what a retry with its Idempotency-Key gets back.
type keyedRow struct {
	OrderID   string
	ProductID int64
	UserID    string
	IdemKey   string
	Quantity  int
	Strategy  string
}

func (r keyedRow) receipt() sale.Receipt {
	return sale.Receipt{
		OrderID:   r.OrderID,
		Status:    sale.StatusQueued,
		ProductID: r.ProductID,
		UserID:    r.UserID,
		Quantity:  r.Quantity,
		Strategy:  sale.Strategy(r.Strategy),
	}
}

// ErrDuplicate means that a reservation collided with a committed one (the same user bought the
// product already, or used the same Idempotency-Key): the INSERT failed as a whole, and only it —
// the transaction goes on. Conflicts says which reservations collide.
var ErrDuplicate = errors.New("store: a reservation is a duplicate")

// PurchaseTx is the transaction purchases run in: one, or a batch of one product's purchases. A
// stock strategy deducts through it and records the reservations with Reserve; everything
// commits together or not at all.
type PurchaseTx struct {
	tx *gorm.DB
	s  *Store
}

// Purchase runs fn in a READ COMMITTED transaction, retried on deadlock. Errors come back as
// sale sentinels where they have a meaning for the buyer.
func (s *Store) Purchase(ctx context.Context, fn func(ctx context.Context, tx *PurchaseTx) error) error {
	return s.inTx(ctx, "purchase", func(tx *gorm.DB) error {
		return fn(ctx, &PurchaseTx{tx: tx, s: s})
	})
}

// ConnectionID returns the database connection the transaction runs on (for tests that kill it).
func (t *PurchaseTx) ConnectionID(ctx context.Context) (int64, error) {
	var id int64
	err := t.tx.WithContext(ctx).Raw("SELECT CONNECTION_ID()").Scan(&id).Error
	return id, err
}

// Reserve inserts the reservations, the outbox rows the relay publishes, each with its
// Idempotency-Key (if any) and its traceparent (if any): one multi-row INSERT, whatever the
// number. A collision with a committed row (the user's reservation of the product, or the user's
// key) fails the statement alone with ErrDuplicate; Conflicts then says which reservations
// collide, in the same transaction. A batch of which no reservation carries a traceparent (every
// batch while tracing is off) leaves the column out of the statement: it stays NULL.
func (t *PurchaseTx) Reserve(ctx context.Context, rs ...sale.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	traced := false
	for i := range rs {
		if rs[i].TraceParent != "" {
			traced = true
			break
		}
	}
	cols, insert := 7, insertReservations
	if traced {
		cols, insert = 8, insertTracedReservations
	}
	rows := make([]any, 0, cols*len(rs))
	for _, r := range rs {
		var key *string
		if r.IdempotencyKey != "" {
			key = &r.IdempotencyKey
		}
		rows = append(rows, r.OrderID, r.ProductID, r.UserID, key, r.Quantity, string(r.Strategy), r.CreatedAt)
		if traced {
			var tp *string
			if r.TraceParent != "" {
				tp = &r.TraceParent
			}
			rows = append(rows, tp)
		}
	}
	err := t.tx.WithContext(ctx).Exec(insert+placeholders(len(rs), cols), rows...).Error
	if isDuplicate(err) {
		return ErrDuplicate
	}
	return err
}

// The INSERTs of Reserve: without the traceparent column, and with it.
const (
	insertReservations       = "INSERT INTO reservations (order_id, product_id, user_id, idem_key, quantity, strategy, created_at) VALUES "
	insertTracedReservations = "INSERT INTO reservations (order_id, product_id, user_id, idem_key, quantity, strategy, created_at, trace_parent) VALUES "
)

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
// committed rows: sale.ErrIdempotencyKeyInUse with the receipt of the purchase that used the key
// (sale.KeyInUse; for this product or another), sale.ErrAlreadyPurchased (the user holds a
// reservation of the product; marked sale.KeyUnused, since the key was read too), or nil.
func (t *PurchaseTx) Conflicts(ctx context.Context, productID int64, rs []sale.Reservation) ([]error, error) {
	var pairs, users []any
	for _, r := range rs {
		users = append(users, r.UserID)
		if r.IdempotencyKey != "" {
			pairs = append(pairs, r.UserID, r.IdempotencyKey)
		}
	}
	// The first rows say who bought the product (no key); the others are the keyed receipts.
	query := "SELECT '' AS order_id, product_id, user_id, '' AS idem_key, 0 AS quantity, '' AS strategy FROM reservations WHERE product_id = ? AND user_id IN " + placeholders(1, len(users))
	args := append([]any{productID}, users...)
	if len(pairs) > 0 {
		query += " UNION ALL SELECT order_id, product_id, user_id, idem_key, quantity, strategy FROM reservations WHERE (user_id, idem_key) IN (" + placeholders(len(pairs)/2, 2) + ")"
		args = append(args, pairs...)
	}
	var found []keyedRow
	if err := t.tx.WithContext(ctx).Raw(query, args...).Scan(&found).Error; err != nil {
		return nil, err
	}
	bought, usedKey := map[string]bool{}, map[[2]string]sale.Receipt{}
	for _, f := range found {
		if f.IdemKey == "" {
			bought[f.UserID] = true
		} else {
			usedKey[[2]string{f.UserID, f.IdemKey}] = f.receipt()
		}
	}
	out := make([]error, len(rs))
	for i, r := range rs {
		used, ok := usedKey[[2]string{r.UserID, r.IdempotencyKey}]
		switch {
		case r.IdempotencyKey != "" && ok:
			out[i] = sale.KeyInUse(used)
		case bought[r.UserID]:
			out[i] = sale.KeyUnused(sale.ErrAlreadyPurchased) // the key was looked up just now
		}
	}
	return out, nil
}

// Unreserve deletes reservations inserted earlier in this transaction: the batch's purchases
// that found no stock left.
func (t *PurchaseTx) Unreserve(ctx context.Context, rs []sale.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	orders := make([]string, len(rs))
	for i, r := range rs {
		orders[i] = r.OrderID
	}
	return t.tx.WithContext(ctx).Exec("DELETE FROM reservations WHERE order_id IN ?", orders).Error
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

// StoredReceipt returns the receipt committed with (userID, key), or sale.ErrNotFound.
func (s *Store) StoredReceipt(ctx context.Context, userID, key string) (sale.Receipt, error) {
	var row keyedRow
	err := s.db.WithContext(ctx).Raw(`SELECT order_id, product_id, user_id, idem_key, quantity, strategy
		FROM reservations WHERE user_id = ? AND idem_key = ?`, userID, key).Take(&row).Error
	if err != nil {
		return sale.Receipt{}, classify("stored receipt", err)
	}
	return row.receipt(), nil
}
