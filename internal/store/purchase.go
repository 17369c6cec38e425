package store

import (
	"context"
	"fmt"
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

// PurchaseTx is the transaction one purchase runs in. A stock strategy deducts through it and
// records the reservation with Reserve; everything commits together or not at all.
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

// Reserve inserts the idempotency key (when r has one) and the reservation, the outbox row the
// relay publishes. A user's second reservation of a product is sale.ErrAlreadyPurchased; a key
// already committed is sale.ErrIdempotencyKeyInUse.
func (t *PurchaseTx) Reserve(ctx context.Context, r sale.Reservation) error {
	db := t.tx.WithContext(ctx)
	if r.IdempotencyKey != "" {
		err := db.Create(&idempotencyRow{
			UserID:    r.UserID,
			IdemKey:   r.IdempotencyKey,
			ProductID: r.ProductID,
			Quantity:  r.Quantity,
			OrderID:   r.OrderID,
			Strategy:  string(r.Strategy),
			CreatedAt: r.CreatedAt,
		}).Error
		if isDuplicate(err) {
			return sale.ErrIdempotencyKeyInUse
		}
		if err != nil {
			return err
		}
	}
	err := db.Create(&reservationRow{
		OrderID:   r.OrderID,
		ProductID: r.ProductID,
		UserID:    r.UserID,
		Quantity:  r.Quantity,
		Strategy:  string(r.Strategy),
		CreatedAt: r.CreatedAt,
	}).Error
	if isDuplicate(err) {
		return sale.ErrAlreadyPurchased
	}
	return err
}

// DecrementIfAvailable is the whole mysql strategy in one statement: it takes qty units only if
// at least qty are left, and only while the product still uses strategy st. The row lock it takes
// is held until commit, so concurrent purchases serialise here and no check can go stale.
func (t *PurchaseTx) DecrementIfAvailable(ctx context.Context, productID int64, qty int, st sale.Strategy) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ? AND strategy = ?",
		qty, productID, qty, string(st))
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 1 {
		return nil
	}
	stock, err := t.Stock(ctx, productID, st)
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %d left", sale.ErrSoldOut, stock)
}

// Stock reads the product's stock without locking, as the lock strategies do before they check
// and write. It returns sale.ErrStrategyChanged if the product no longer uses strategy st.
func (t *PurchaseTx) Stock(ctx context.Context, productID int64, st sale.Strategy) (int, error) {
	var row struct {
		Stock    int
		Strategy string
	}
	res := t.tx.WithContext(ctx).Raw("SELECT stock, strategy FROM products WHERE id = ?", productID).Scan(&row)
	switch {
	case res.Error != nil:
		return 0, res.Error
	case res.RowsAffected == 0:
		return 0, sale.ErrNotFound
	case row.Strategy != string(st):
		return 0, sale.ErrStrategyChanged
	}
	return row.Stock, nil
}

// SetStock writes stock unconditionally: whatever makes the read-check-write safe (a lock, or
// nothing at all for the `none` strategy) is the caller's business.
func (t *PurchaseTx) SetStock(ctx context.Context, productID int64, st sale.Strategy, stock int) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ? WHERE id = ? AND strategy = ?", stock, productID, string(st))
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return sale.ErrStrategyChanged
	}
	return nil
}

// ClaimFence records token as the product's fence, in its own statement and before the purchase
// transaction, if it is larger than every token the product has accepted; otherwise it returns
// sale.ErrFenced and the caller must not touch the stock. Claiming before reading is what makes
// the fence sound for a read-check-write: a holder whose lease ran out between its claim and its
// write finds a newer token in place and its write (SetStockFenced) does nothing.
func (s *Store) ClaimFence(ctx context.Context, productID int64, st sale.Strategy, token uint64) error {
	res := s.db.WithContext(ctx).Exec(
		"UPDATE products SET fence_token = ? WHERE id = ? AND strategy = ? AND fence_token < ?",
		token, productID, string(st), token)
	if res.Error != nil {
		return classify("claim fence", res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	var row struct {
		Strategy   string
		FenceToken uint64
	}
	err := s.db.WithContext(ctx).Raw("SELECT strategy, fence_token FROM products WHERE id = ?", productID).Scan(&row).Error
	switch {
	case err != nil:
		return classify("claim fence", err)
	case row.Strategy == "":
		return sale.ErrNotFound
	case row.Strategy != string(st):
		return sale.ErrStrategyChanged
	}
	return fmt.Errorf("%w: token %d, product already accepted %d", sale.ErrFenced, token, row.FenceToken)
}

// SetStockFenced writes stock only while the product's fence still holds token (see ClaimFence).
func (t *PurchaseTx) SetStockFenced(ctx context.Context, productID int64, st sale.Strategy, token uint64, stock int) error {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ? WHERE id = ? AND strategy = ? AND fence_token = ?",
		stock, productID, string(st), token)
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
	return sale.Receipt{
		OrderID:   row.OrderID,
		Status:    sale.StatusQueued,
		ProductID: row.ProductID,
		UserID:    row.UserID,
		Quantity:  row.Quantity,
		Strategy:  sale.Strategy(row.Strategy),
	}, nil
}
