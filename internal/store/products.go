package store

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/seckill-go/seckill-go/internal/sale"
)

type productRow struct {
	ID           int64 `gorm:"primaryKey"`
	Name         string
	PriceCents   int64
	Stock        int
	InitialStock int
	Strategy     string
	SaleStartsAt time.Time
	SaleEndsAt   time.Time
	PerUserLimit int
	Listed       bool
	Admission    admissionColumns `gorm:"embedded"`
	FenceToken   uint64
	FenceIssuer  uint64
	SaleEpoch    uint64
	LuaGen       uint64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func (productRow) TableName() string { return "products" }

func (r productRow) domain() sale.Product {
	return sale.Product{
		ID:           r.ID,
		Name:         r.Name,
		PriceCents:   r.PriceCents,
		Stock:        r.Stock,
		InitialStock: r.InitialStock,
		Strategy:     sale.Strategy(r.Strategy),
		SaleStartsAt: r.SaleStartsAt.UTC(),
		SaleEndsAt:   r.SaleEndsAt.UTC(),
		PerUserLimit: r.PerUserLimit,
		Listed:       r.Listed,
		Epoch:        r.SaleEpoch,
		Admission:    r.Admission.domain(),
	}
}

// admissionColumns are a product's admission rule (sale.AdmissionRule), embedded in productRow:
// the columns keep their admission_ prefix.
type admissionColumns struct {
	AdmissionMode           string
	AdmissionAdmitRate      float64
	AdmissionMaxActive      int
	AdmissionSessionSeconds int
	AdmissionQueueOpensAt   sql.NullTime
	AdmissionShuffle        bool
	AdmissionAbandonSeconds int
}

func toAdmissionColumns(a sale.AdmissionRule) admissionColumns {
	a = a.Normalized()
	return admissionColumns{
		AdmissionMode:           string(a.Mode),
		AdmissionAdmitRate:      a.AdmitRate,
		AdmissionMaxActive:      a.MaxActive,
		AdmissionSessionSeconds: int(a.Session / time.Second),
		AdmissionQueueOpensAt:   sql.NullTime{Time: a.QueueOpensAt.UTC(), Valid: !a.QueueOpensAt.IsZero()},
		AdmissionShuffle:        a.Shuffle,
		AdmissionAbandonSeconds: int(a.AbandonAfter / time.Second),
	}
}

func (c admissionColumns) domain() sale.AdmissionRule {
	a := sale.AdmissionRule{
		Mode:         sale.AdmissionMode(c.AdmissionMode),
		AdmitRate:    c.AdmissionAdmitRate,
		MaxActive:    c.AdmissionMaxActive,
		Session:      time.Duration(c.AdmissionSessionSeconds) * time.Second,
		Shuffle:      c.AdmissionShuffle,
		AbandonAfter: time.Duration(c.AdmissionAbandonSeconds) * time.Second,
	}
	if c.AdmissionQueueOpensAt.Valid {
		a.QueueOpensAt = c.AdmissionQueueOpensAt.Time.UTC()
	}
	return a.Normalized()
}

// Product returns one product or sale.ErrNotFound.
func (s *Store) Product(ctx context.Context, id int64) (sale.Product, error) {
	var row productRow
	if err := s.db.WithContext(ctx).Take(&row, id).Error; err != nil {
		return sale.Product{}, classify("product", err)
	}
	return row.domain(), nil
}

// Products returns every product by id.
func (s *Store) Products(ctx context.Context) ([]sale.Product, error) {
	return s.products(ctx, s.db.WithContext(ctx))
}

// ProductIDsWithStrategy returns the ids of the products sold with strategy st, in order.
func (s *Store) ProductIDsWithStrategy(ctx context.Context, st sale.Strategy) ([]int64, error) {
	var ids []int64
	if err := s.db.WithContext(ctx).Model(&productRow{}).Where("strategy = ?", string(st)).Order("id").Pluck("id", &ids).Error; err != nil {
		return nil, classify("products by strategy", err)
	}
	return ids, nil
}

func (s *Store) products(_ context.Context, q *gorm.DB) ([]sale.Product, error) {
	var rows []productRow
	if err := q.Order("id").Find(&rows).Error; err != nil {
		return nil, classify("products", err)
	}
	out := make([]sale.Product, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// CatalogDigest returns the digest of every product (sale.CatalogDigest): how many there are,
// and the XOR of a CRC-32 per row of its id, sale epoch, last update (every create and reset
// sets it) and stock, the stock left out for the products of skipStock (the sales the board
// reads on their own every refresh, whose stock moves all the time). One row, computed by
// MariaDB over the products table: microseconds per product in the database and nothing per
// product here, where reading every product costs an ORM row each.
func (s *Store) CatalogDigest(ctx context.Context, skipStock []int64) (sale.CatalogDigest, error) {
	stock := "stock"
	args := make([]any, len(skipStock))
	if len(skipStock) > 0 {
		stock = "CASE WHEN id IN (?" + strings.Repeat(",?", len(skipStock)-1) + ") THEN '' ELSE stock END"
		for i, id := range skipStock {
			args[i] = id
		}
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return sale.CatalogDigest{}, classify("catalog digest", err)
	}
	var d sale.CatalogDigest
	var sum int64
	err = sqlDB.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS(',', id, sale_epoch,
		DATE_FORMAT(updated_at, '%Y%m%d%H%i%s%f'), `+stock+`))), 0) FROM products`, args...).Scan(&d.Products, &sum)
	if err != nil {
		return sale.CatalogDigest{}, classify("catalog digest", err)
	}
	d.Checksum = uint32(sum)
	return d, nil
}

// ProductStocks returns the stock and sale epoch of those of the products ids that exist: the
// board's read of the sales on now, a few times a second, which wants nothing else of them. One
// primary-key lookup per id, no ORM on the way: an idle open sale should cost nearly nothing.
func (s *Store) ProductStocks(ctx context.Context, ids []int64) (map[int64]sale.StockAt, error) {
	out := make(map[int64]sale.StockAt, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return nil, classify("product stocks", err)
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := sqlDB.QueryContext(ctx, "SELECT id, stock, sale_epoch FROM products WHERE id IN (?"+strings.Repeat(",?", len(ids)-1)+")", args...)
	if err != nil {
		return nil, classify("product stocks", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st sale.StockAt
		if err := rows.Scan(&id, &st.Stock, &st.Epoch); err != nil {
			return nil, classify("product stocks", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, classify("product stocks", err)
	}
	return out, nil
}

// ProductsByID returns those of the products ids that exist, by id.
func (s *Store) ProductsByID(ctx context.Context, ids []int64) ([]sale.Product, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []productRow
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Order("id").Find(&rows).Error; err != nil {
		return nil, classify("products by id", err)
	}
	out := make([]sale.Product, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// KeyedReceipts reads, in one consistent snapshot, the product's stock and sale epoch and up to
// limit receipts of its purchases that carried an Idempotency-Key. A replica keeps them in memory
// once the product sold out, to answer retries without asking the database.
func (s *Store) KeyedReceipts(ctx context.Context, productID int64, limit int) (sale.ReceiptSnapshot, error) {
	var snap sale.ReceiptSnapshot
	// REPEATABLE READ: the second statement sees exactly what the first one saw.
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row productRow
		if err := tx.Select("stock", "sale_epoch").Take(&row, productID).Error; err != nil {
			return err
		}
		snap = sale.ReceiptSnapshot{Epoch: row.SaleEpoch, Stock: row.Stock}
		var keys []keyedRow
		err := tx.Raw(`SELECT order_id, product_id, user_id, idem_key, quantity, strategy FROM reservations
			WHERE product_id = ? AND idem_key IS NOT NULL LIMIT ?`, productID, limit+1).Scan(&keys).Error
		if err != nil {
			return err
		}
		if len(keys) > limit {
			snap.Truncated, keys = true, keys[:limit]
		}
		snap.Receipts = make([]sale.KeyedReceipt, len(keys))
		for i, k := range keys {
			snap.Receipts[i] = sale.KeyedReceipt{Key: k.IdemKey, Receipt: k.receipt()}
		}
		return nil
	}, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	return snap, classify("keyed receipts", err)
}

// ProductByName returns the product with the given name with the lowest id, or sale.ErrNotFound.
func (s *Store) ProductByName(ctx context.Context, name string) (sale.Product, error) {
	var row productRow
	if err := s.db.WithContext(ctx).Where("name = ?", name).Order("id").Take(&row).Error; err != nil {
		return sale.Product{}, classify("product by name", err)
	}
	return row.domain(), nil
}

// CreateProduct inserts a product whose stock and initial stock are np.Stock.
func (s *Store) CreateProduct(ctx context.Context, np sale.NewProduct, now time.Time) (sale.Product, error) {
	row := productRow{
		Name:         np.Name,
		PriceCents:   np.PriceCents,
		Stock:        np.Stock,
		InitialStock: np.Stock,
		Strategy:     string(np.Strategy),
		SaleStartsAt: np.SaleStartsAt.UTC(),
		SaleEndsAt:   np.SaleEndsAt.UTC(),
		PerUserLimit: np.PerUserLimit,
		Listed:       np.Listed,
		SaleEpoch:    1,
		Admission:    toAdmissionColumns(np.Admission),
		CreatedAt:    now,
		UpdatedAt:    now,
	}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return sale.Product{}, classify("create product", err)
	}
	return row.domain(), nil
}

// ResetProduct restocks the product, starts its fence afresh and a new sale epoch, and deletes
// its reservations (with their idempotency keys) and orders in one transaction. The product row
// is locked first, so purchases in flight either finish before the reset (and are cleared) or run
// after it (against the new stock). The admission rule is the reset's when it gives one, else
// the product's (sale.Reset.AdmissionFor, which may refuse it against the new window).
func (s *Store) ResetProduct(ctx context.Context, id int64, r sale.Reset, now time.Time) (sale.Product, error) {
	var out sale.Product
	err := s.inTx(ctx, "reset product", func(tx *gorm.DB) error {
		var row productRow
		if err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate}).Take(&row, id).Error; err != nil {
			return err
		}
		start, end := r.Window(row.domain(), now)
		admission, err := r.AdmissionFor(row.domain(), start)
		if err != nil {
			return err
		}
		row.Admission = toAdmissionColumns(admission)
		row.Stock, row.InitialStock = r.Stock, r.Stock
		if r.Strategy != "" {
			row.Strategy = string(r.Strategy)
		}
		row.SaleStartsAt, row.SaleEndsAt, row.UpdatedAt = start.UTC(), end.UTC(), now
		// A new sale, a new fence: tokens of another lock service start anywhere.
		row.FenceIssuer, row.FenceToken = 0, 0
		row.SaleEpoch++
		for _, table := range []string{"order_events", "order_events_consumed", "order_event_tallies", "payment_charges", "orders", "reservations"} {
			if err := tx.Exec("DELETE FROM "+table+" WHERE product_id = ?", id).Error; err != nil {
				return err
			}
		}
		if err := tx.Save(&row).Error; err != nil {
			return err
		}
		out = row.domain()
		return nil
	})
	return out, err
}

// Stats counts a product's stock, reservations, orders and where its orders are in their
// lifecycle, in one statement. Refused orders are counted apart: they hold no unit.
func (s *Store) Stats(ctx context.Context, id int64) (sale.Stats, error) {
	st := sale.Stats{ProductID: id}
	row := s.db.WithContext(ctx).Raw(`
		SELECT p.initial_stock, p.stock,
		       (SELECT COALESCE(SUM(quantity), 0) FROM reservations WHERE product_id = p.id),
		       (SELECT COUNT(*) FROM reservations WHERE product_id = p.id),
		       o.n, o.units, o.awaiting, o.paid, o.expired, o.cancelled, o.returned, o.refused
		FROM products p, (
		    SELECT COUNT(CASE WHEN status <> 'refused' THEN 1 END) AS n,
		           COALESCE(SUM(CASE WHEN status <> 'refused' THEN quantity END), 0) AS units,
		           COUNT(CASE WHEN status = 'refused' THEN 1 END) AS refused,
		           COALESCE(SUM(CASE WHEN status IN ('confirmed', 'paying') THEN quantity END), 0) AS awaiting,
		           COALESCE(SUM(CASE WHEN status = 'paid' THEN quantity END), 0) AS paid,
		           COALESCE(SUM(CASE WHEN status = 'expired' THEN quantity END), 0) AS expired,
		           COALESCE(SUM(CASE WHEN status = 'cancelled' THEN quantity END), 0) AS cancelled,
		           COALESCE(SUM(CASE WHEN returned_at IS NOT NULL THEN quantity END), 0) AS returned
		    FROM orders WHERE product_id = ?) o
		WHERE p.id = ?`, id, id).Row()
	err := row.Scan(&st.InitialStock, &st.Stock, &st.ReservedUnits, &st.Reservations, &st.OrdersConfirmed, &st.ConfirmedUnits,
		&st.AwaitingUnits, &st.PaidUnits, &st.ExpiredUnits, &st.CancelledUnits, &st.ReturnedUnits, &st.RefusedOrders)
	if err != nil {
		return sale.Stats{}, classify("stats", err)
	}
	return st, nil
}
