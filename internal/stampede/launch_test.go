package stampede

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// fakeSales is one product, and the resets asked of it.
type fakeSales struct {
	mu     sync.Mutex
	p      sale.Product
	resets []sale.Reset
}

func (f *fakeSales) Product(_ context.Context, id int64) (sale.Product, error) {
	if id != f.p.ID {
		return sale.Product{}, sale.ErrNotFound
	}
	return f.p, nil
}

func (f *fakeSales) ResetProduct(_ context.Context, _ int64, r sale.Reset) (sale.Product, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resets = append(f.resets, r)
	return f.p, nil
}

func (f *fakeSales) asked() []sale.Reset {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sale.Reset(nil), f.resets...)
}

func TestLaunch(t *testing.T) {
	s := newShop(50)
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := startRunner(t, Options{Targets: []string{srv.URL}, MaxBuyers: 10})
	sales := &fakeSales{p: sale.Product{ID: 7, InitialStock: 20, Strategy: sale.StrategyMySQL}}
	l, err := NewLauncher(r, sales)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stock := 5
	for _, tc := range []struct {
		name      string
		req       Request
		wantErr   error
		wantReset []sale.Reset
	}{
		{"too few buyers", Request{ProductID: 7, Buyers: 0}, sale.ErrInvalid, nil},
		{"too many buyers", Request{ProductID: 7, Buyers: 11}, sale.ErrInvalid, nil},
		{"unknown strategy", Request{ProductID: 7, Buyers: 1, Strategy: "magic"}, sale.ErrInvalid, nil},
		{"unknown product", Request{ProductID: 8, Buyers: 1}, sale.ErrNotFound, nil},
		{"no reset", Request{ProductID: 7, Buyers: 2}, nil, nil},
		{"a stock resets, keeping the strategy", Request{ProductID: 7, Buyers: 2, Stock: &stock}, nil, []sale.Reset{{Stock: 5}}},
		{"a strategy resets to the initial stock", Request{ProductID: 7, Buyers: 2, Strategy: "zk"}, nil, []sale.Reset{{Stock: 20, Strategy: sale.StrategyZK}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(sales.asked())
			p, err := l.Launch(ctx, tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Launch = %v, want %v", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				waitDone(t, r, p.ID)
			}
			if diff := cmp.Diff(tc.wantReset, sales.asked()[before:], cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resets (-want +got):\n%s", diff)
			}
		})
	}
}
