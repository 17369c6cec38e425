package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestOutboxKeepsTheTraceParent: a reservation keeps its purchase's traceparent and the relay's
// claim reads it back, whether its batch was traced throughout, in part (an unsampled purchase
// in a traced batch keeps none) or not at all (the column left out: NULL, read as "").
func TestOutboxKeepsTheTraceParent(t *testing.T) {
	const (
		tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		tpB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	r := func(user, tp string) sale.Reservation {
		return sale.Reservation{Receipt: sale.Receipt{OrderID: "o-" + user + "-" + itest.Suffix(6), Status: sale.StatusQueued, ProductID: p.ID,
			UserID: user, Quantity: 1, Strategy: sale.StrategyMySQL}, Epoch: p.Epoch, CreatedAt: time.Now().UTC(), TraceParent: tp}
	}
	for _, batch := range [][]sale.Reservation{{r("a", tpA), r("b", "")}, {r("c", "")}, {r("d", tpB)}} {
		if err := st.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error { return tx.Reserve(ctx, batch...) }); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := st.ClaimOutbox(ctx, "relay", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.UserID] = e.TraceParent
	}
	if diff := cmp.Diff(map[string]string{"a": tpA, "b": "", "c": "", "d": tpB}, got); diff != "" {
		t.Errorf("traceparents claimed (-want +got):\n%s", diff)
	}
}
