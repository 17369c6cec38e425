package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
)

// TestBuyerOrder: a buyer reads its own order, queued and then confirmed; another buyer's read
// of it is not found, exactly as the read of an id no order has (issue #29: order ids travel in
// URLs and logs).
func TestBuyerOrder(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 5, sale.StrategyMySQL)
	d, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	id := "o-buyer-" + itest.Suffix(8)
	if err := d.Deduct(ctx, sale.Reservation{
		Receipt: sale.Receipt{OrderID: id, Status: sale.StatusQueued, ProductID: p.ID, UserID: "alice", Quantity: 1, Strategy: p.Strategy},
		Epoch:   p.Epoch, CreatedAt: time.Now().UTC(),
	}); err != nil {
		t.Fatal(err)
	}
	check := func(want sale.OrderStatus) {
		t.Helper()
		o, err := st.BuyerOrder(ctx, id, "alice")
		if err != nil || o.OrderID != id || o.UserID != "alice" || o.Status != want {
			t.Fatalf("alice's own order: %+v, %v; want it %s", o, err, want)
		}
		for _, read := range []struct{ order, user string }{{id, "bob"}, {id, "Alice"}, {"o-no-such-order", "alice"}} {
			if o, err := st.BuyerOrder(ctx, read.order, read.user); !errors.Is(err, sale.ErrNotFound) || o != (sale.Order{}) {
				t.Fatalf("BuyerOrder(%s, %s) = %+v, %v; want nothing, not found", read.order, read.user, o, err)
			}
		}
	}
	check(sale.StatusQueued)
	if _, err := st.ConfirmOrders(ctx, []string{id}); err != nil {
		t.Fatal(err)
	}
	check(sale.StatusConfirmed)
}
