package metrics

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// fakeProducts is a ProductLister of fixed products and units owed (or an error for them).
type fakeProducts struct {
	products []sale.Product
	owed     map[int64]int
	owedErr  error
}

func (f fakeProducts) Products(context.Context) ([]sale.Product, error) { return f.products, nil }

func (f fakeProducts) UnreturnedUnits(context.Context, []int64) (map[int64]int, error) {
	return f.owed, f.owedErr
}

// stockGauges gathers m's product gauges as "name{product_id,strategy}" → value.
func stockGauges(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "seckill_product_stock", "seckill_product_initial_stock", "seckill_product_unreturned_units", "seckill_product_stock_scrape_ok":
		default:
			continue
		}
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			out[key] = s.GetGauge().GetValue()
		}
	}
	return out
}

// TestCollectStock: every product's stock, initial stock and units owed (0 when none) at the
// scrape; when the units owed cannot be read, the stock is still reported, the units owed are
// absent (not a false 0) and the scrape says it failed.
func TestCollectStock(t *testing.T) {
	products := []sale.Product{
		{ID: 1, Strategy: sale.StrategyMySQL, Stock: 0, InitialStock: 10},
		{ID: 2, Strategy: sale.StrategyRedisLua, Stock: 4, InitialStock: 5},
	}
	for _, tc := range []struct {
		name string
		fake fakeProducts
		want map[string]float64
	}{
		{
			name: "read",
			fake: fakeProducts{products: products, owed: map[int64]int{1: 3}},
			want: map[string]float64{
				"seckill_product_stock product_id=1 strategy=mysql":                0,
				"seckill_product_stock product_id=2 strategy=redis-lua":            4,
				"seckill_product_initial_stock product_id=1 strategy=mysql":        10,
				"seckill_product_initial_stock product_id=2 strategy=redis-lua":    5,
				"seckill_product_unreturned_units product_id=1 strategy=mysql":     3,
				"seckill_product_unreturned_units product_id=2 strategy=redis-lua": 0,
				"seckill_product_stock_scrape_ok":                                  1,
			},
		},
		{
			name: "units owed unreadable",
			fake: fakeProducts{products: products, owedErr: errors.New("db down")},
			want: map[string]float64{
				"seckill_product_stock product_id=1 strategy=mysql":             0,
				"seckill_product_stock product_id=2 strategy=redis-lua":         4,
				"seckill_product_initial_stock product_id=1 strategy=mysql":     10,
				"seckill_product_initial_stock product_id=2 strategy=redis-lua": 5,
				"seckill_product_stock_scrape_ok":                               0,
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			m.CollectStock(tc.fake)
			if diff := cmp.Diff(tc.want, stockGauges(t, m)); diff != "" {
				t.Errorf("product gauges (-want +got):\n%s", diff)
			}
		})
	}
}
