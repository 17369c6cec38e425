package sale_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// fakeStore holds one product and remembers receipts by Idempotency-Key.
type fakeStore struct {
	sale.Store // the methods a purchase does not call panic if called
	product    sale.Product
	receipts   map[string]sale.Receipt
}

func (s *fakeStore) Product(_ context.Context, id int64) (sale.Product, error) {
	if id != s.product.ID {
		return sale.Product{}, sale.ErrNotFound
	}
	return s.product, nil
}

func (s *fakeStore) ProductsByID(ctx context.Context, ids []int64) ([]sale.Product, error) {
	p, err := s.Product(ctx, s.product.ID)
	return []sale.Product{p}, err
}

func (s *fakeStore) KeyedReceipts(context.Context, int64, int) (sale.ReceiptSnapshot, error) {
	snap := sale.ReceiptSnapshot{Epoch: s.product.Epoch, Stock: s.product.Stock}
	for k, r := range s.receipts {
		_, key, _ := strings.Cut(k, "/")
		snap.Receipts = append(snap.Receipts, sale.KeyedReceipt{Key: key, Receipt: r})
	}
	return snap, nil
}

func (s *fakeStore) StoredReceipt(_ context.Context, user, key string) (sale.Receipt, error) {
	r, ok := s.receipts[user+"/"+key]
	if !ok {
		return sale.Receipt{}, sale.ErrNotFound
	}
	return r, nil
}

type fakeDeductor struct{ s *fakeStore }

func (d fakeDeductor) Deduct(_ context.Context, r sale.Reservation) error {
	if _, used := d.s.receipts[r.UserID+"/"+r.IdempotencyKey]; used && r.IdempotencyKey != "" {
		return sale.ErrIdempotencyKeyInUse
	}
	if d.s.product.Stock < r.Quantity {
		return sale.ErrSoldOut
	}
	d.s.product.Stock -= r.Quantity
	if r.IdempotencyKey != "" {
		d.s.receipts[r.UserID+"/"+r.IdempotencyKey] = r.Receipt
	}
	return nil
}

type seen struct {
	mu  sync.Mutex
	got []string
}

func (s *seen) ObservePurchase(o sale.Observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line := strconv.FormatInt(o.ProductID, 10) + " " + string(o.Strategy) + " " + string(o.Code)
	if o.Replayed {
		line += " replayed"
	}
	s.got = append(s.got, line)
}

// TestObserverSeesEveryAttempt: the observer learns the product, its strategy (none when no
// product was found), the code the buyer got, and whether an accepted answer was a replay.
func TestObserverSeesEveryAttempt(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	st := &fakeStore{
		product: sale.Product{ID: 7, Stock: 1, InitialStock: 1, Strategy: sale.StrategyMySQL, PerUserLimit: 1,
			SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour)},
		receipts: map[string]sale.Receipt{},
	}
	obs := &seen{}
	svc, err := sale.NewService(sale.Options{
		Store:           st,
		Deductors:       map[sale.Strategy]sale.Deductor{sale.StrategyMySQL: fakeDeductor{st}},
		DefaultStrategy: sale.StrategyMySQL,
		NewOrderID:      func() string { return "order-1" },
		Observer:        obs,
		Now:             func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, req := range []sale.PurchaseRequest{
		{ProductID: 7, UserID: "a", Quantity: 1, IdempotencyKey: "k"}, // accepted
		{ProductID: 7, UserID: "a", Quantity: 1, IdempotencyKey: "k"}, // replayed
		{ProductID: 7, UserID: "b", Quantity: 1},                      // sold out
		{ProductID: 7, UserID: "c", Quantity: 2},                      // over the limit
		{ProductID: 9, UserID: "d", Quantity: 1},                      // unknown product: no strategy
		{ProductID: 7, UserID: "bad id", Quantity: 1},                 // invalid: no strategy
	} {
		_, _ = svc.Purchase(ctx, req)
	}
	want := []string{"7 mysql accepted", "7 mysql accepted replayed", "7 mysql sold_out", "7 mysql limit_reached",
		"9  not_found", "7  invalid_request"}
	if diff := cmp.Diff(want, obs.got); diff != "" {
		t.Fatalf("observed (-want +got):\n%s", diff)
	}
}
