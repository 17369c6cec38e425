package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

func decided(p sale.Product, user, key string) sale.Reservation {
	return sale.Reservation{
		Receipt: sale.Receipt{OrderID: "o-" + user + "-" + itest.Suffix(6), Status: sale.StatusQueued, ProductID: p.ID,
			UserID: user, Quantity: 1, Strategy: p.Strategy},
		IdempotencyKey: key, Epoch: p.Epoch, CreatedAt: time.Now().UTC(),
	}
}

func stockOf(t *testing.T, st *store.Store, id int64) (stock, reserved int) {
	t.Helper()
	s, err := st.Stats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Stock, s.ReservedUnits
}

// TestPersistReservations: reservations decided elsewhere are written once, whatever number of
// times a batch comes, and MySQL's stock goes down by exactly the units written.
func TestPersistReservations(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	batch := []sale.Reservation{decided(p, "u1", "k1"), decided(p, "u2", ""), decided(p, "u3", "k3")}
	persist := func(rs []sale.Reservation) int {
		t.Helper()
		n, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, rs)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := persist(batch); n != 3 {
		t.Fatalf("first write: %d inserted, want 3", n)
	}
	if n := persist(batch); n != 0 {
		t.Fatalf("the same batch again: %d inserted, want 0", n)
	}
	if n := persist([]sale.Reservation{batch[1], decided(p, "u4", "k4")}); n != 1 {
		t.Fatalf("half old, half new: %d inserted, want 1", n)
	}
	if s, r := stockOf(t, st, p.ID); s != 6 || r != 4 {
		t.Fatalf("stock %d, reserved %d; want 6 and 4", s, r)
	}

	// u5's key is already u5's on another product: the unit is kept, the key is not stored.
	q := product(t, st, 5, sale.StrategyMySQL)
	if _, _, err := st.PersistReservations(ctx, q.ID, q.Strategy, q.Epoch, 0, []sale.Reservation{decided(q, "u5", "shared")}); err != nil {
		t.Fatal(err)
	}
	if n := persist([]sale.Reservation{decided(p, "u5", "shared"), decided(p, "u6", "k6")}); n != 2 {
		t.Fatalf("with a key held elsewhere: %d inserted, want 2", n)
	}
	if s, r := stockOf(t, st, p.ID); s != 4 || r != 6 {
		t.Fatalf("stock %d, reserved %d; want 4 and 6", s, r)
	}
	if rc, err := st.StoredReceipt(ctx, "u6", "k6"); err != nil || rc.ProductID != p.ID {
		t.Fatalf("u6's key: %+v, %v; want its receipt", rc, err)
	}

	// Another epoch (a reset in between): nothing written.
	_, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch+1, 0, []sale.Reservation{decided(p, "u7", "")})
	if !errors.Is(err, sale.ErrSaleChanged) {
		t.Fatalf("another epoch: %v, want ErrSaleChanged", err)
	}
	// Another generation of the Redis state (it was lost and rebuilt since): nothing written.
	if _, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 1, []sale.Reservation{decided(p, "u8", "")}); !errors.Is(err, sale.ErrSaleChanged) {
		t.Fatalf("another generation: %v, want ErrSaleChanged", err)
	}
	// A reload writes the surviving entries of the current generation and starts the next one.
	_, rs, gen, err := st.ReloadSale(ctx, p.ID, p.Strategy, func(epoch, gen uint64) []sale.Reservation {
		if epoch != p.Epoch || gen != 0 {
			t.Errorf("surviving asked for epoch %d gen %d, want %d and 0", epoch, gen, p.Epoch)
		}
		return []sale.Reservation{decided(p, "u9", "")}
	})
	if err != nil || gen != 1 || len(rs) != 7 {
		t.Fatalf("reload: gen %d, %d reservations, %v; want 1, 7", gen, len(rs), err)
	}
	if _, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, []sale.Reservation{decided(p, "u10", "")}); !errors.Is(err, sale.ErrSaleChanged) {
		t.Fatalf("the old generation after a reload: %v, want ErrSaleChanged", err)
	}
	if s, r := stockOf(t, st, p.ID); s != 3 || r != 7 {
		t.Fatalf("after the reload: stock %d, reserved %d; want 3 and 7", s, r)
	}
}

// TestPersistRefusesWhatMySQLCannotHold: a decider whose state went backwards (a Redis failed
// over to a replica that missed the latest purchases) decides purchases MySQL cannot hold: more
// units than MySQL has left, or a second purchase of a buyer it forgot. They are refused, in
// order, never reserved (each becomes a refused order: TestRefusedOrder); the rest of the batch
// is written. The control shows what the check stands between: the same batch taken
// unconditionally oversells.
func TestPersistRefusesWhatMySQLCannotHold(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 3, sale.StrategyMySQL)
	if _, refused, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, []sale.Reservation{decided(p, "a", ""), decided(p, "b", "")}); err != nil || len(refused) != 0 {
		t.Fatalf("first batch: refused %v, %v", refused, err)
	}
	// The lagging state forgot a and b: it sells again to a (a second purchase of a buyer), to c
	// (the one unit MySQL has left), and to d (a unit MySQL gave to b).
	batch := []sale.Reservation{decided(p, "a", ""), decided(p, "c", ""), decided(p, "d", "")}
	n, refused, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, batch)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range refused {
		got = append(got, r.UserID)
	}
	if n != 1 || strings.Join(got, ",") != "a,d" {
		t.Fatalf("inserted %d, refused %v; want c inserted, a and d refused", n, got)
	}
	if s, r := stockOf(t, st, p.ID); s != 0 || r != 3 {
		t.Fatalf("stock %d, reserved %d; want 0 and 3", s, r)
	}
	// The same batch again: c is written already, a and d refused already; nothing changes.
	if n, refused, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, batch); err != nil || n != 0 || len(refused) != 0 {
		t.Fatalf("again: inserted %d, refused %d, %v; want 0, 0 (refused once)", n, len(refused), err)
	}
	if s, r := stockOf(t, st, p.ID); s != 0 || r != 3 {
		t.Fatalf("again: stock %d, reserved %d; want 0 and 3", s, r)
	}

	// Control: what the unconditional write did before the check, on a twin product.
	q := product(t, st, 1, sale.StrategyMySQL)
	err = st.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		if err := tx.Reserve(ctx, decided(q, "x", ""), decided(q, "y", "")); err != nil {
			return err
		}
		return tx.Take(ctx, q.ID, 2)
	})
	if s, _ := stockOf(t, st, q.ID); err != nil || s != -1 {
		t.Fatalf("control: stock %d, %v; want -1 (an oversell the check prevents)", s, err)
	}
}

// TestPersistConcurrently: persisters racing with overlapping batches (one claimed the entries of
// another that it thought dead) write every reservation once.
func TestPersistConcurrently(t *testing.T) {
	st, _ := itest.Store(t)
	p := product(t, st, 100, sale.StrategyMySQL)
	var all []sale.Reservation
	for i := range 60 {
		all = append(all, decided(p, fmt.Sprintf("c%d", i), fmt.Sprintf("key%d", i)))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := 0
	for w := range 4 {
		wg.Go(func() {
			for i := w * 10; i+20 <= len(all); i += 20 { // windows of 20 that overlap between workers
				n, _, err := st.PersistReservations(context.Background(), p.ID, p.Strategy, p.Epoch, 0, all[i:i+20])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				inserted += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if _, _, err := st.PersistReservations(context.Background(), p.ID, p.Strategy, p.Epoch, 0, all); err != nil {
		t.Fatal(err)
	}
	if s, r := stockOf(t, st, p.ID); s != 40 || r != 60 {
		t.Fatalf("stock %d, reserved %d; want 40 and 60 (inserted by the racers: %d)", s, r, inserted)
	}
}
