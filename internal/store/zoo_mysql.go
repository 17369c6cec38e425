package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"time"

	"github.com/sethvargo/go-retry"
	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// What the lock zoo's MySQL strategies need beyond the purchase transaction: a transaction whose
// row-lock waits are bounded by the app's lock wait (mysql-for-update), and the versioned read
// and write of the optimistic lock (mysql-version).

// PurchaseLockWait runs fn like Purchase, in a READ COMMITTED transaction, but no statement of
// it waits longer than wait (rounded up to whole seconds, at least 1) for a row lock, and a wait
// that runs out is not retried: it returns sale.ErrLockTimeout, with the transaction rolled back.
// Deadlocks are still retried as Purchase retries them: they end at once, so a retry adds no
// wait.
//
// Why not Purchase: it retries a lock-wait timeout (1205) three times, which would turn a lock
// wait of 3 s into 12, and waits up to the server's innodb_lock_wait_timeout (50 s by default).
func (s *Store) PurchaseLockWait(ctx context.Context, wait time.Duration, fn func(ctx context.Context, tx *PurchaseTx) error) error {
	secs := lockWaitSeconds(wait)
	err := retry.Do(ctx, conflictBackoff(), func(ctx context.Context) error {
		err := s.lockWaitTx(ctx, secs, fn)
		if mysqlErrno(err) == errDeadlock {
			return retry.RetryableError(err)
		}
		return err
	})
	if mysqlErrno(err) == errLockWaitTimeout {
		return fmt.Errorf("%w: a row lock was not granted within %d s", sale.ErrLockTimeout, secs)
	}
	return classify("purchase", err)
}

// lockWaitSeconds is wait as innodb_lock_wait_timeout takes it: whole seconds, rounded up, at
// least 1 (MySQL's smallest).
func lockWaitSeconds(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// lockWaitTx runs one transaction on a connection of its own whose innodb_lock_wait_timeout is
// secs, and sets it back to the server's default before the connection returns to the pool.
//
// The bound is the session variable because it is the one way both servers share: MariaDB also
// has `SELECT … FOR UPDATE WAIT n` and `SET STATEMENT … FOR`, MySQL 8 neither (only NOWAIT). A
// session variable outlives the transaction, so it is set on a connection taken from the pool
// for this transaction alone and restored after it; a connection whose restore fails is closed,
// never handed to another transaction with this strategy's timeout.
func (s *Store) lockWaitTx(ctx context.Context, secs int, fn func(ctx context.Context, tx *PurchaseTx) error) error {
	return s.db.WithContext(ctx).Connection(func(c *gorm.DB) error {
		conn := c.Session(&gorm.Session{}) // each statement on a fresh copy, the connection kept
		if err := conn.Exec("SET SESSION innodb_lock_wait_timeout = ?", secs).Error; err != nil {
			return err
		}
		defer restoreLockWait(ctx, conn)
		return conn.Transaction(func(tx *gorm.DB) error {
			return fn(ctx, &PurchaseTx{tx: tx, s: s})
		})
	})
}

// restoreLockWait sets the connection's innodb_lock_wait_timeout back to the server's default,
// even when the purchase's ctx has ended, or closes the connection when it cannot.
func restoreLockWait(ctx context.Context, conn *gorm.DB) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if conn.WithContext(rctx).Exec("SET SESSION innodb_lock_wait_timeout = DEFAULT").Error == nil {
		return
	}
	if c, ok := conn.Statement.ConnPool.(*sql.Conn); ok {
		_ = c.Raw(func(any) error { return driver.ErrBadConn }) // closes it instead of pooling it
	}
}

// VersionedStock reads the product's stock and version without locking (the optimistic lock's
// read). It returns sale.ErrNotFound, sale.ErrStrategyChanged or sale.ErrSaleChanged as Stock
// does.
func (t *PurchaseTx) VersionedStock(ctx context.Context, productID int64, st sale.Strategy, epoch uint64) (stock int, version uint64, err error) {
	var row struct {
		Stock     int
		Version   uint64
		Strategy  string
		SaleEpoch uint64
	}
	res := t.tx.WithContext(ctx).Raw("SELECT stock, version, strategy, sale_epoch FROM products WHERE id = ?", productID).Scan(&row)
	switch {
	case res.Error != nil:
		return 0, 0, res.Error
	case res.RowsAffected == 0:
		return 0, 0, sale.ErrNotFound
	case row.Strategy != string(st):
		return 0, 0, sale.ErrStrategyChanged
	case row.SaleEpoch != epoch:
		return 0, 0, sale.ErrSaleChanged
	}
	return row.Stock, row.Version, nil
}

// SetStockIfVersion writes stock and advances the version, only while the product still has
// version (and is in epoch with strategy st): the optimistic lock's write. false means that
// another write came first, or the sale changed; the caller rolls back and reads again, and the
// read says which.
func (t *PurchaseTx) SetStockIfVersion(ctx context.Context, productID int64, st sale.Strategy, epoch, version uint64, stock int) (bool, error) {
	res := t.tx.WithContext(ctx).Exec(
		"UPDATE products SET stock = ?, version = version + 1 WHERE id = ? AND strategy = ? AND sale_epoch = ? AND version = ?",
		stock, productID, string(st), epoch, version)
	return res.RowsAffected == 1, res.Error
}
