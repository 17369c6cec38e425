package app_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestRefusedOrderEndToEnd, through the real app: a purchase the persister's write refuses (here
// written as a lagging redis-lua state would hand it over: a unit MySQL no longer has) is an
// order its buyer reads as refused, with why and that nothing will be charged; paying or
// cancelling it is 409 order_refused, anyone else reads the 404 of an absent order, and the audit
// counts it apart from the orders.
func TestRefusedOrderEndToEnd(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	srv := stack.Start(t, map[string]string{"SECKILL_PAYMENT_FAILURE_RATE": "0"})
	admin := apptest.Client{URL: srv.URL, Token: apptest.AdminToken}
	id := admin.CreateProduct(t, map[string]any{"name": "refused orders", "price_cents": 250, "stock": 1, "strategy": "mysql", "per_user_limit": 1, "listed": false})
	buyer := apptest.Client{URL: srv.URL}
	if r := buyer.MustDo(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(id, 10)+"/purchase", map[string]any{"user_id": "first"}, nil); r.Status != http.StatusAccepted {
		t.Fatalf("the first purchase: %d %s", r.Status, r.Raw)
	}

	ctx := context.Background()
	st, err := store.Open(ctx, itest.Logger(), stack.DSN, store.Options{MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := st.Product(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	late := sale.Reservation{Receipt: sale.Receipt{OrderID: "refused-" + itest.Suffix(8), Status: sale.StatusQueued, ProductID: id,
		UserID: "late", Quantity: 1, Strategy: p.Strategy}, Epoch: p.Epoch, CreatedAt: time.Now().UTC()}
	if n, refused, err := st.PersistReservations(ctx, id, p.Strategy, p.Epoch, 0, []sale.Reservation{late}); err != nil || n != 0 || len(refused) != 1 {
		t.Fatalf("the late purchase's write: %d inserted, %d refused, %v; want it refused", n, len(refused), err)
	}

	order := "/api/v1/orders/" + late.OrderID
	r := buyer.MustDo(t, http.MethodGet, order+"?user_id=late", nil, nil)
	if r.Status != http.StatusOK || r.Str("status") != "refused" || r.Str("refusal") != "sold_out" ||
		!strings.Contains(r.Str("message"), "nothing will be charged") || r.Body["expires_at"] != nil {
		t.Fatalf("the late buyer's order: %d %s; want refused, sold_out, nothing charged, no payment window", r.Status, r.Raw)
	}
	for _, suffix := range []string{"/pay", "/cancel"} {
		r := buyer.MustDo(t, http.MethodPost, order+suffix, map[string]any{"user_id": "late"}, map[string]string{"Idempotency-Key": "late-pays"})
		if r.Status != http.StatusConflict || r.ErrorCode() != string(sale.CodeOrderRefused) {
			t.Errorf("POST %s of a refused order: %d %s; want 409 order_refused", suffix, r.Status, r.Raw)
		}
	}
	if r := buyer.MustDo(t, http.MethodGet, order+"?user_id=first", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("another buyer reads the refused order: %d %s; want 404", r.Status, r.Raw)
	}
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		r := admin.MustDo(t, http.MethodGet, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/stats", nil, nil)
		return r.Num("refused_orders") == 1 && r.Num("orders_confirmed") == 1 && r.Num("reserved") == 1 && r.Num("oversold") == 0, r.Raw
	})
}
