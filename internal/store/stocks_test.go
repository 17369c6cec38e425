package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestProductStocks: the board's stock read gives the stock and epoch of the products asked for
// that exist, a reset's new epoch and stock included, and nothing for an id that is none.
func TestProductStocks(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var ids []int64
	for _, stock := range []int{3, 8} {
		p, err := st.CreateProduct(ctx, sale.NewProduct{Name: "stocks", PriceCents: 1, Stock: stock, Strategy: sale.StrategyMySQL,
			SaleStartsAt: now, SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1}, now)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	if _, err := st.ResetProduct(ctx, ids[1], sale.Reset{Stock: 5}, now); err != nil {
		t.Fatal(err)
	}
	got, err := st.ProductStocks(ctx, append(ids, ids[1]+1000))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]sale.StockAt{ids[0]: {Stock: 3, Epoch: 1}, ids[1]: {Stock: 5, Epoch: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stocks (-want +got):\n%s", diff)
	}
	if got, err := st.ProductStocks(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v, %v", got, err)
	}
}

// TestCatalogDigest: the digest moves when a product is created or reset and when the stock of
// one not left out moves, and stays when only the stock of one left out moves.
func TestCatalogDigest(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	digest := func(skip ...int64) sale.CatalogDigest {
		t.Helper()
		d, err := st.CatalogDigest(ctx, skip)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	empty := digest()
	if empty != (sale.CatalogDigest{}) {
		t.Errorf("no product: %+v, want the zero digest", empty)
	}
	var ids []int64
	for range 2 {
		p, err := st.CreateProduct(ctx, sale.NewProduct{Name: "digest", PriceCents: 1, Stock: 10, Strategy: sale.StrategyMySQL,
			SaleStartsAt: now, SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1}, now)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	two := digest()
	if two.Products != 2 || two == empty {
		t.Fatalf("two products: %+v", two)
	}
	db := st.DB()
	setStock := func(id int64, stock int) {
		t.Helper()
		if _, err := db.ExecContext(ctx, "UPDATE products SET stock = ? WHERE id = ?", stock, id); err != nil {
			t.Fatal(err)
		}
	}
	skipped := digest(ids[1])
	setStock(ids[1], 7)
	if got := digest(ids[1]); got != skipped {
		t.Errorf("the stock of a product left out moved: %+v, want %+v", got, skipped)
	}
	if got := digest(); got == two {
		t.Error("the stock of a product moved: the digest did not")
	}
	before := digest(ids[1])
	setStock(ids[0], 9)
	if got := digest(ids[1]); got == before {
		t.Error("the stock of a product not left out moved: the digest did not")
	}
	before = digest(ids[1])
	if _, err := st.ResetProduct(ctx, ids[1], sale.Reset{Stock: 7}, now); err != nil { // same stock, a new epoch
		t.Fatal(err)
	}
	if got := digest(ids[1]); got == before {
		t.Error("a product left out was reset: the digest did not move")
	}
}
