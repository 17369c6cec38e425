package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestMigrateConcurrently: replicas starting together all migrate; one applies, the others wait
// on the named lock and find nothing to do.
func TestMigrateConcurrently(t *testing.T) {
	dsn := itest.DatabaseDSN(t) // already migrated once
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			st, err := store.Open(context.Background(), itest.Logger(), dsn, store.Options{MaxOpenConns: 2})
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			if err := store.Migrate(context.Background(), itest.Logger(), st.DB()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestClaimOutboxDisjoint: relays claiming at once get disjoint batches that cover everything;
// an expired claim can be taken over.
func TestClaimOutboxDisjoint(t *testing.T) {
	st, _ := itest.Store(t)
	p := product(t, st, 300, sale.StrategyMySQL)
	purchase(t, st, p, 300)

	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for r := range 4 {
		owner := fmt.Sprintf("relay-%d", r)
		wg.Go(func() {
			for {
				batch, err := st.ClaimOutbox(context.Background(), owner, time.Minute, 25)
				if err != nil {
					t.Error(err)
					return
				}
				if len(batch) == 0 {
					return
				}
				mu.Lock()
				for _, e := range batch {
					if prev, dup := seen[e.ID]; dup {
						t.Errorf("entry %d claimed by %s and %s", e.ID, prev, owner)
					}
					seen[e.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 300 {
		t.Fatalf("claimed %d entries, want 300", len(seen))
	}

	// Claims of a dead relay expire; released claims come back at once.
	q := product(t, st, 10, sale.StrategyMySQL)
	purchase(t, st, q, 2)
	first, err := st.ClaimOutbox(context.Background(), "dead", time.Millisecond, 10)
	if err != nil || len(first) != 2 {
		t.Fatalf("claim = %d, %v", len(first), err)
	}
	time.Sleep(10 * time.Millisecond)
	again, err := st.ClaimOutbox(context.Background(), "alive", time.Minute, 10)
	if err != nil || len(again) != 2 {
		t.Fatalf("expired claims taken over: %d, %v; want 2", len(again), err)
	}
	if err := st.ReleaseClaims(context.Background(), "alive", []int64{again[0].ID}); err != nil {
		t.Fatal(err)
	}
	back, err := st.ClaimOutbox(context.Background(), "other", time.Minute, 10)
	if err != nil || len(back) != 1 || back[0].ID != again[0].ID {
		t.Fatalf("released claim = %+v, %v", back, err)
	}
}

// TestResetAndStats: stats count what happened; a reset clears it, restocks, switches the
// strategy and reopens an ended window.
func TestResetAndStats(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	now := time.Now().UTC()
	p, err := st.CreateProduct(ctx, sale.NewProduct{Name: "reset", PriceCents: 1, Stock: 10, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 3}, now)
	if err != nil {
		t.Fatal(err)
	}
	purchase(t, st, p, 4)
	entries, err := st.ClaimOutbox(ctx, "r", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConfirmOrders(ctx, []string{entries[0].OrderID, entries[1].OrderID}); err != nil {
		t.Fatal(err)
	}
	got, err := st.Stats(ctx, p.ID)
	want := sale.Stats{ProductID: p.ID, InitialStock: 10, Stock: 6, ReservedUnits: 4, Reservations: 4, OrdersConfirmed: 2, ConfirmedUnits: 2, AwaitingUnits: 2}
	if err != nil || got != want {
		t.Fatalf("stats = %+v, %v; want %+v", got, err, want)
	}
	o, err := st.Order(ctx, entries[0].OrderID)
	if err != nil || o.Status != sale.StatusConfirmed {
		t.Fatalf("order = %+v, %v; want confirmed", o, err)
	}
	if o, err := st.Order(ctx, entries[3].OrderID); err != nil || o.Status != sale.StatusQueued {
		t.Fatalf("order = %+v, %v; want queued", o, err)
	}

	later := now.Add(3 * time.Hour) // the sale has ended by then
	r, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 50, Strategy: sale.StrategyNone}, later)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stock != 50 || r.InitialStock != 50 || r.Strategy != sale.StrategyNone || r.CheckWindow(later) != nil {
		t.Fatalf("after reset: %+v", r)
	}
	got, err = st.Stats(ctx, p.ID)
	if err != nil || got != (sale.Stats{ProductID: p.ID, InitialStock: 50, Stock: 50}) {
		t.Fatalf("stats after reset = %+v, %v", got, err)
	}
	if _, err := st.Order(ctx, entries[0].OrderID); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("order after reset: %v, want not found", err)
	}
	if _, err := st.ResetProduct(ctx, 1<<40, sale.Reset{Stock: 1}, later); !errors.Is(err, sale.ErrNotFound) {
		t.Fatalf("reset of a missing product: %v, want not found", err)
	}
}

// TestRequeueUnconfirmed: published reservations without an order in the window are published
// again; confirmed ones and fresh ones are left alone. The look ends where the next one starts
// (what was looked at is not looked at again), except after a full batch.
func TestRequeueUnconfirmed(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	purchase(t, st, p, 3)
	entries, err := st.ClaimOutbox(ctx, "r", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	ids := []int64{entries[0].ID, entries[1].ID, entries[2].ID}
	if err := st.MarkPublished(ctx, ids); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ConfirmOrders(ctx, []string{entries[0].OrderID}); err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.RequeueUnconfirmed(ctx, time.Time{}, time.Hour, 24*time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("requeue of fresh entries = %d, %v; want 0", n, err)
	}
	time.Sleep(5 * time.Millisecond)
	n, upTo, err := st.RequeueUnconfirmed(ctx, time.Time{}, time.Millisecond, time.Hour, 1)
	if err != nil || n != 1 || !upTo.IsZero() {
		t.Fatalf("requeue, a batch of 1 = %d, %v, up to %v; want 1 of the 2 unconfirmed, and the same start for the next", n, err, upTo)
	}
	n, upTo, err = st.RequeueUnconfirmed(ctx, upTo, time.Millisecond, time.Hour, 100)
	if err != nil || n != 1 || upTo.IsZero() {
		t.Fatalf("requeue = %d, %v, up to %v; want the other unconfirmed one, and where the look ended", n, err, upTo)
	}
	if b, err := st.OutboxBacklog(ctx); err != nil || b != 2 {
		t.Fatalf("backlog = %d, %v; want 2", b, err)
	}
	// Published again, and still without an order: after the last look, so the next finds them.
	if err := st.MarkPublished(ctx, ids[1:]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	n, next, err := st.RequeueUnconfirmed(ctx, upTo, time.Millisecond, time.Hour, 100)
	if err != nil || n != 2 || !next.After(upTo) {
		t.Fatalf("requeue after publishing again = %d, %v, up to %v (last %v); want 2, and a later end", n, err, next, upTo)
	}
	// Published again, but looked at already: a look that starts after them does not see them.
	if err := st.MarkPublished(ctx, ids[1:]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	_, later, err := st.RequeueUnconfirmed(ctx, next, time.Millisecond, time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := st.RequeueUnconfirmed(ctx, later, time.Millisecond, time.Hour, 100); err != nil || n != 0 {
		t.Fatalf("a look after the last = %d, %v; want 0 (those were looked at)", n, err)
	}
}

func product(t *testing.T, st *store.Store, stockN int, strategy sale.Strategy) sale.Product {
	t.Helper()
	now := time.Now().UTC()
	p, err := st.CreateProduct(context.Background(), sale.NewProduct{Name: "store test", PriceCents: 1, Stock: stockN,
		Strategy: strategy, SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func purchase(t *testing.T, st *store.Store, p sale.Product, n int) {
	t.Helper()
	d, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		err := d.Deduct(context.Background(), sale.Reservation{
			Receipt: sale.Receipt{OrderID: fmt.Sprintf("o-%d-%d-%s", p.ID, i, itest.Suffix(4)), Status: sale.StatusQueued,
				ProductID: p.ID, UserID: fmt.Sprintf("u%d", i), Quantity: 1, Strategy: p.Strategy},
			Epoch:     p.Epoch,
			CreatedAt: time.Now().UTC(),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestTransactionsAreReadCommitted: a statement of a purchase transaction sees what another
// transaction committed after the purchase began (REPEATABLE READ, the server's default, would
// show the first read again). The pool sets READ COMMITTED per session, not per transaction.
func TestTransactionsAreReadCommitted(t *testing.T) {
	st, _ := itest.Store(t)
	p := product(t, st, 10, sale.StrategyMySQL)
	ctx := context.Background()
	err := st.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		before, err := tx.Stock(ctx, p.ID, p.Strategy, p.Epoch)
		if err != nil {
			return err
		}
		if _, err := st.DB().ExecContext(ctx, "UPDATE products SET stock = 7 WHERE id = ?", p.ID); err != nil {
			return err
		}
		after, err := tx.Stock(ctx, p.ID, p.Strategy, p.Epoch)
		if err != nil {
			return err
		}
		if before != 10 || after != 7 {
			t.Errorf("stock read %d then %d in one transaction; want 10 then 7 (READ COMMITTED)", before, after)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestOpenWaitsForMySQL: a replica started beside its database waits for it instead of failing
// (gorm asks the server its version when it opens: that must come after the wait).
func TestOpenWaitsForMySQL(t *testing.T) {
	dsn := itest.DatabaseDSN(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := itest.NewProxy(t, cfg.Addr)
	proxy.Cut() // MySQL "is still starting"
	cfg.Addr = proxy.Addr()
	go func() {
		time.Sleep(500 * time.Millisecond)
		proxy.Heal()
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, itest.Logger(), cfg.FormatDSN(), store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatalf("Open while MySQL comes up: %v", err)
	}
	defer st.Close()
	if _, err := st.Products(ctx); err != nil {
		t.Fatalf("the store opened but does not answer: %v", err)
	}
}

// TestMigrateRepairsAnEmptyVersionTable: goose's version table without its zero version (what a
// failed first start leaves: MySQL commits the CREATE TABLE of goose's create-and-insert on its
// own) no longer stops every later start with "missing zero version migration".
func TestMigrateRepairsAnEmptyVersionTable(t *testing.T) {
	itest.Integration(t)
	cfg, err := mysql.ParseDSN(itest.ServerDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "seckill_it_" + itest.Suffix(10)
	dsn := cfg.FormatDSN()
	if err := store.CreateDatabase(t.Context(), dsn); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), itest.Logger(), dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Cleanup(func() { _, _ = st.DB().Exec("DROP DATABASE `" + cfg.DBName + "`") })
	if _, err := st.DB().ExecContext(t.Context(), `CREATE TABLE goose_db_version (
		id bigint(20) unsigned NOT NULL AUTO_INCREMENT, version_id bigint NOT NULL, is_applied boolean NOT NULL,
		tstamp datetime NULL default CURRENT_TIMESTAMP, PRIMARY KEY(id))`); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(t.Context(), itest.Logger(), st.DB()); err != nil {
		t.Fatalf("Migrate over an empty version table: %v", err)
	}
	if err := store.Migrate(t.Context(), itest.Logger(), st.DB()); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	var zeros int
	if err := st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM goose_db_version WHERE version_id = 0").Scan(&zeros); err != nil || zeros != 1 {
		t.Fatalf("%d zero versions (%v), want 1", zeros, err)
	}
}
