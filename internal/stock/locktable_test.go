package stock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// lockTable returns a lock-table client on db, its table made if missing. The naive one keeps
// its rows in a table of its own, as the app does.
func lockTable(tb testing.TB, db *sql.DB, opts mysqllock.Options) *mysqllock.Client {
	tb.Helper()
	if opts.Naive {
		opts.Table = "lock_table_naive"
	}
	opts.Logger = itest.Logger()
	c, err := mysqllock.New(db, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.EnsureTable(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return c
}

// newNaiveLockTable returns the mysql-lock-table-naive strategy on st, as the app builds it: the
// naive lock, no fence.
func newNaiveLockTable(tb testing.TB, st *store.Store, wait time.Duration) *stock.Locked {
	tb.Helper()
	c := lockTable(tb, st.DB(), mysqllock.Options{Naive: true})
	d, err := stock.NewLocked(stock.LockedOptions{Store: st, Strategy: sale.StrategyMySQLLockTableNaive, Locker: c.Locker(), Wait: wait, Observer: nopObserver{}, Unfenced: true})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// viaProxy opens a pool on the database of dsn through a proxy that the test can cut: a lock
// client's own connections, which fail while the purchase transactions, on the store's pool,
// still reach the database.
func viaProxy(tb testing.TB, dsn string) (*sql.DB, *itest.Proxy) {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	p := itest.NewProxy(tb, cfg.Addr)
	cfg.Addr = p.Addr()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, itest.Logger(), cfg.FormatDSN(), store.Options{MaxOpenConns: 4})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st.DB(), p
}

// TestLockTableFenceRefusesStaleHolder is TestFenceRefusesStaleHolder for mysql-lock-table: A is
// cut off from the lock table inside its critical section (its watchdog cannot renew), stays
// there past its TTL unaware, and B reaps A's row, takes the lock with a larger token and sells.
// A's write must then be refused by the fence; without the fence (the control) the unit is sold
// twice.
func TestLockTableFenceRefusesStaleHolder(t *testing.T) {
	itest.Integration(t)
	st, dsn := itest.Store(t)
	const ttl = 300 * time.Millisecond
	dial := func(t *testing.T, cut bool) (lock.Locker, *itest.Proxy) {
		if !cut {
			return lockTable(t, st.DB(), mysqllock.Options{TTL: ttl}).Locker(), nil
		}
		db, p := viaProxy(t, dsn)
		return lockTable(t, db, mysqllock.Options{TTL: ttl}).Locker(), p
	}
	for _, n := range []int{1, 3} {
		for _, fenced := range []bool{true, false} {
			name := fmt.Sprintf("batch of %d/fenced", n)
			if !fenced {
				name = fmt.Sprintf("batch of %d/control without fence", n)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testStaleHolder(t, st, sale.StrategyMySQLLockTable, dial, n, fenced)
			})
		}
	}
}

// TestLockTableNaivePausedHolder: the naive lock under a holder that pauses in its critical
// section (after it read the last unit, before it writes). Nothing expires, so every other buyer
// waits out its lock wait: the sale stalls. A person then deletes the row as the write-ups advise,
// the next buyer gets the lock and the unit, and the paused holder, resuming unaware and
// unfenced, sells the same unit again: one unit, two buyers.
func TestLockTableNaivePausedHolder(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	const wait = 300 * time.Millisecond
	p := newProduct(t, st, sale.StrategyMySQLLockTableNaive, 1)
	a := newNaiveLockTable(t, st, 30*time.Second)
	b := newNaiveLockTable(t, st, wait)
	human := lockTable(t, st.DB(), mysqllock.Options{Naive: true})
	var once sync.Once
	a.SetHold(func(ctx context.Context) {
		once.Do(func() {
			for i := range 3 {
				err := b.Deduct(ctx, reservation(p, fmt.Sprint("stalled-", i), 1, ""))
				if !errors.Is(err, sale.ErrLockTimeout) {
					t.Errorf("buyer %d while the holder is paused = %v, want ErrLockTimeout (the sale stalls)", i, err)
				}
			}
			if err := human.ForceRelease(ctx, stock.LockName(st.Name(), p.ID)); err != nil {
				t.Errorf("ForceRelease: %v", err)
			}
			if err := b.Deduct(ctx, reservation(p, "after-cleanup", 1, "")); err != nil {
				t.Errorf("the buyer after the cleanup = %v, want the unit", err)
			}
		})
	})
	mustDeduct(t, a, reservation(p, "paused", 1, ""))
	f := mustAudit(t, st, p.ID)
	if f.Oversold() == 0 || f.Reservations != 2 {
		t.Fatalf("audit %+v: want the unit sold twice (the paused holder's write after the cleanup)", f)
	}
	t.Logf("oversold: %q", f.Violations(false))
}
