package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestPurchaseLockWait: a row lock held elsewhere makes the transaction wait the lock wait (1.2 s
// → 2 s, whole seconds rounded up) once, not once per retry, and answer sale.ErrLockTimeout with
// its writes rolled back; the connection goes back to the pool with the server's default
// timeout, after a success, a timeout and a ctx that ended in the middle alike. The pool has one
// connection, so that every statement after the transaction runs on the connection it used.
func TestPurchaseLockWait(t *testing.T) {
	dsn := itest.DatabaseDSN(t)
	st, err := store.Open(t.Context(), itest.Logger(), dsn, store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := store.Open(t.Context(), itest.Logger(), dsn, store.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	p := product(t, st, 10, sale.StrategyMySQLForUpdate)
	var global int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT @@GLOBAL.innodb_lock_wait_timeout").Scan(&global); err != nil {
		t.Fatal(err)
	}
	assertSessionTimeout := func(t *testing.T, want int) {
		t.Helper()
		var got int
		if err := st.DB().QueryRowContext(t.Context(), "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("the pooled connection's innodb_lock_wait_timeout = %d, want %d", got, want)
		}
	}

	t.Run("granted", func(t *testing.T) {
		err := st.PurchaseLockWait(t.Context(), 1200*time.Millisecond, func(ctx context.Context, tx *store.PurchaseTx) error {
			stock, err := tx.LockStock(ctx, p.ID, p.Strategy, p.Epoch)
			if err != nil {
				return err
			}
			return tx.SetStock(ctx, p.ID, p.Strategy, p.Epoch, stock-1)
		})
		if err != nil {
			t.Fatal(err)
		}
		assertSessionTimeout(t, global)
	})

	t.Run("times out once", func(t *testing.T) {
		held := lockRow(t, other, p.ID)
		defer held.Rollback()
		calls := 0
		start := time.Now()
		err := st.PurchaseLockWait(t.Context(), 1200*time.Millisecond, func(ctx context.Context, tx *store.PurchaseTx) error {
			calls++
			return tx.SetStock(ctx, p.ID, p.Strategy, p.Epoch, 0) // waits for the lock
		})
		took := time.Since(start)
		if !errors.Is(err, sale.ErrLockTimeout) || !errors.Is(err, sale.ErrRateLimited) {
			t.Fatalf("err = %v, want sale.ErrLockTimeout (429)", err)
		}
		if calls != 1 || took < 2*time.Second || took > 3500*time.Millisecond {
			t.Errorf("ran %d times in %s; want once, in about 2 s (1.2 s rounded up, never retried)", calls, took)
		}
		held.Rollback()
		assertSessionTimeout(t, global)
		if got, _ := st.Product(t.Context(), p.ID); got.Stock != 9 {
			t.Errorf("stock = %d, want 9: the timed-out write must be rolled back", got.Stock)
		}
	})

	t.Run("ctx ends while it waits", func(t *testing.T) {
		held := lockRow(t, other, p.ID)
		defer held.Rollback()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		err := st.PurchaseLockWait(ctx, 5*time.Second, func(ctx context.Context, tx *store.PurchaseTx) error {
			_, err := tx.LockStock(ctx, p.ID, p.Strategy, p.Epoch)
			return err
		})
		if err == nil {
			t.Fatal("the purchase went through a held lock")
		}
		held.Rollback()
		// The connection was either restored or closed: the pool's next one has the default.
		assertSessionTimeout(t, global)
	})
}

// lockRow locks the product's row in a transaction of st's, until the caller ends it.
func lockRow(t *testing.T, st *store.Store, productID int64) *sql.Tx {
	t.Helper()
	tx, err := st.DB().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(t.Context(), "SELECT stock FROM products WHERE id = ? FOR UPDATE", productID); err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	return tx
}
