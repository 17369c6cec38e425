package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestPersistReturns: returns made elsewhere (redis-lua's return script) are written once per
// order, only for orders that are closed, and give exactly their units back; a batch of another
// epoch or of a generation that is gone writes nothing.
func TestPersistReturns(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 5, sale.StrategyRedisLua)
	rs := []sale.Reservation{decided(p, "u1", ""), decided(p, "u2", ""), decided(p, "u3", "")}
	if _, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, rs); err != nil {
		t.Fatal(err)
	}
	ids := []string{rs[0].OrderID, rs[1].OrderID, rs[2].OrderID}
	if _, err := st.ConfirmOrders(ctx, ids); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs[:2] {
		if _, err := st.CancelOrder(ctx, r.OrderID, r.UserID); err != nil {
			t.Fatal(err)
		}
	}
	persist := func(epoch, gen uint64, ids ...string) (int, error) {
		t.Helper()
		return st.PersistReturns(ctx, p.ID, p.Strategy, epoch, gen, ids)
	}
	// The third order is still awaiting payment, and "o-none" is no order at all: nothing of theirs.
	if n, err := persist(p.Epoch, 0, ids[0], ids[2], "o-none"); err != nil || n != 1 {
		t.Fatalf("first write: %d units, %v; want 1", n, err)
	}
	if n, err := persist(p.Epoch, 0, ids[0], ids[2], "o-none"); err != nil || n != 0 {
		t.Fatalf("the same batch again (a persister that died before its ACK): %d units, %v; want 0", n, err)
	}
	for _, tc := range []struct {
		name       string
		epoch, gen uint64
	}{{"another epoch", p.Epoch + 1, 0}, {"a generation that is gone", p.Epoch, 7}} {
		if n, err := persist(tc.epoch, tc.gen, ids[1]); !errors.Is(err, sale.ErrSaleChanged) || n != 0 {
			t.Errorf("%s: %d units, %v; want sale changed", tc.name, n, err)
		}
	}
	if n, err := persist(p.Epoch, 0, ids[1]); err != nil || n != 1 {
		t.Fatalf("the second cancelled order: %d units, %v; want 1", n, err)
	}
	if s, r := stockOf(t, st, p.ID); s != 4 || r != 3 {
		t.Fatalf("stock %d, reserved %d; want 5 − 3 + 2 = 4, and 3", s, r)
	}
	got, err := st.ReturnedOrders(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ids[:2], got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("returned orders (-want +got):\n%s", diff)
	}
	due, err := st.Unreturned(ctx, 10, 1000, 0)
	if err != nil || len(due) != 0 {
		t.Fatalf("still due: %+v, %v; want none", due, err)
	}

	other := product(t, st, 5, sale.StrategyMySQL)
	if _, err := st.PersistReturns(ctx, other.ID, sale.StrategyRedisLua, other.Epoch, 0, ids); !errors.Is(err, sale.ErrStrategyChanged) {
		t.Fatalf("returns to a product sold otherwise: %v, want strategy changed", err)
	}
	if _, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 5}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ReturnedOrders(ctx, p.ID); err != nil || len(got) != 0 {
		t.Fatalf("returned orders after a reset: %v, %v; want none", got, err)
	}
}

// TestUnreturnedUnits: the units of closed orders not back in stock yet, per product: an order
// awaiting payment owes none, a returned one none any more; a product without any is absent.
func TestUnreturnedUnits(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 5, sale.StrategyRedisLua)
	quiet := product(t, st, 5, sale.StrategyRedisLua)
	rs := []sale.Reservation{decided(p, "u1", ""), decided(p, "u2", ""), decided(p, "u3", "")}
	if _, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, rs); err != nil {
		t.Fatal(err)
	}
	ids := []string{rs[0].OrderID, rs[1].OrderID, rs[2].OrderID}
	if _, err := st.ConfirmOrders(ctx, ids); err != nil {
		t.Fatal(err)
	}
	units := func() map[int64]int {
		t.Helper()
		got, err := st.UnreturnedUnits(ctx, []int64{p.ID, quiet.ID})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(map[int64]int{}, units()); diff != "" {
		t.Errorf("orders awaiting payment (-want +got):\n%s", diff)
	}
	for _, r := range rs[:2] {
		if _, err := st.CancelOrder(ctx, r.OrderID, r.UserID); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(map[int64]int{p.ID: 2}, units()); diff != "" {
		t.Errorf("two cancelled, not returned (-want +got):\n%s", diff)
	}
	if n, err := st.PersistReturns(ctx, p.ID, p.Strategy, p.Epoch, 0, ids[:1]); err != nil || n != 1 {
		t.Fatalf("return one: %d units, %v; want 1", n, err)
	}
	if diff := cmp.Diff(map[int64]int{p.ID: 1}, units()); diff != "" {
		t.Errorf("one of them returned (-want +got):\n%s", diff)
	}
	if got, err := st.UnreturnedUnits(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no products: %v, %v; want none", got, err)
	}
}
