package sale_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// memStore is a Store in memory that counts the reads a purchase could make.
type memStore struct {
	sale.Store // methods the tests do not use panic

	mu       sync.Mutex
	products map[int64]sale.Product
	receipts map[[2]string]sale.Receipt // (user, key) → receipt

	productReads, receiptReads, snapshotReads atomic.Int32
}

func newMemStore(ps ...sale.Product) *memStore {
	s := &memStore{products: map[int64]sale.Product{}, receipts: map[[2]string]sale.Receipt{}}
	for _, p := range ps {
		s.products[p.ID] = p
	}
	return s
}

func (s *memStore) Product(_ context.Context, id int64) (sale.Product, error) {
	s.productReads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[id]
	if !ok {
		return sale.Product{}, sale.ErrNotFound
	}
	return p, nil
}

func (s *memStore) ProductsByID(_ context.Context, ids []int64) ([]sale.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sale.Product
	for _, id := range ids {
		if p, ok := s.products[id]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *memStore) StoredReceipt(_ context.Context, user, key string) (sale.Receipt, error) {
	s.receiptReads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.receipts[[2]string{user, key}]
	if !ok {
		return sale.Receipt{}, sale.ErrNotFound
	}
	return r, nil
}

func (s *memStore) KeyedReceipts(_ context.Context, id int64, limit int) (sale.ReceiptSnapshot, error) {
	s.snapshotReads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.products[id]
	snap := sale.ReceiptSnapshot{Epoch: p.Epoch, Stock: p.Stock}
	for k, r := range s.receipts {
		if r.ProductID == id {
			snap.Receipts = append(snap.Receipts, sale.KeyedReceipt{Key: k[1], Receipt: r})
		}
	}
	if len(snap.Receipts) > limit {
		snap.Receipts, snap.Truncated = snap.Receipts[:limit], true
	}
	return snap, nil
}

func (s *memStore) set(p sale.Product) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.products[p.ID] = p
}

// memDeductor deducts in memStore as a strategy would: the epoch, the key, then the stock.
// With seesKey, its refusals say what it saw of the key, as the store's strategies' do: the
// receipt that used it (sale.KeyInUse), or that it was unused (sale.KeyUnused).
type memDeductor struct {
	s       *memStore
	calls   atomic.Int32
	seesKey bool
}

func (d *memDeductor) Deduct(_ context.Context, r sale.Reservation) error {
	d.calls.Add(1)
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	p := d.s.products[r.ProductID]
	switch {
	case p.Epoch != r.Epoch:
		return sale.ErrSaleChanged
	case r.IdempotencyKey != "" && d.s.receipts[[2]string{r.UserID, r.IdempotencyKey}].OrderID != "":
		if d.seesKey {
			return sale.KeyInUse(d.s.receipts[[2]string{r.UserID, r.IdempotencyKey}])
		}
		return sale.ErrIdempotencyKeyInUse
	case p.Stock < r.Quantity:
		err := fmt.Errorf("%w: %d left", sale.ErrSoldOut, p.Stock)
		if d.seesKey {
			return sale.KeyUnused(err)
		}
		return err
	}
	p.Stock -= r.Quantity
	d.s.products[r.ProductID] = p
	if r.IdempotencyKey != "" {
		d.s.receipts[[2]string{r.UserID, r.IdempotencyKey}] = r.Receipt
	}
	return nil
}

// feedLog is a ChangeFeed that records what is published.
type feedLog struct {
	mu  sync.Mutex
	got []sale.Change
}

func (f *feedLog) Publish(_ context.Context, c sale.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, c)
}

func (f *feedLog) published() []sale.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sale.Change(nil), f.got...)
}

var saleNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func openSale(id int64, stock int) sale.Product {
	return sale.Product{ID: id, Name: "p", Stock: stock, InitialStock: stock, Strategy: sale.StrategyMySQL,
		SaleStartsAt: saleNow.Add(-time.Hour), SaleEndsAt: saleNow.Add(time.Hour), PerUserLimit: 1, Epoch: 1}
}

type fixture struct {
	store *memStore
	d     *memDeductor
	feed  *feedLog
	svc   *sale.Service
}

func newFixture(t *testing.T, refresh time.Duration, ps ...sale.Product) *fixture {
	t.Helper()
	f := &fixture{store: newMemStore(ps...), feed: &feedLog{}}
	f.d = &memDeductor{s: f.store}
	var n atomic.Int64
	svc, err := sale.NewService(sale.Options{
		Store:           f.store,
		Deductors:       map[sale.Strategy]sale.Deductor{sale.StrategyMySQL: f.d},
		DefaultStrategy: sale.StrategyMySQL,
		NewOrderID:      func() string { return fmt.Sprintf("order-%d", n.Add(1)) },
		Feed:            f.feed,
		Refresh:         refresh,
		Now:             func() time.Time { return saleNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.svc = svc
	return f
}

func (f *fixture) buy(user, key string) (sale.Receipt, error) {
	return f.svc.Purchase(context.Background(), sale.PurchaseRequest{ProductID: 1, UserID: user, Quantity: 1, IdempotencyKey: key})
}

func TestSoldOutIsAnsweredFromMemory(t *testing.T) {
	f := newFixture(t, time.Hour, openSale(1, 2))
	for i := range 2 {
		if _, err := f.buy(fmt.Sprint("winner-", i), fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.buy("first-loser", ""); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("third buyer: %v, want sold out", err)
	}
	deductions := f.d.calls.Load()
	// The first refusal came from the deduction; it was broadcast, and the receipts of the
	// keyed purchases are loaded for replays.
	if got := f.feed.published(); len(got) != 1 || got[0] != (sale.Change{Kind: sale.ChangeSoldOut, ProductID: 1, Epoch: 1}) {
		t.Fatalf("published %+v, want one sold-out change of epoch 1", got)
	}
	waitFor(t, func() bool { return f.store.snapshotReads.Load() == 1 })
	waitFor(t, func() bool {
		f.store.receiptReads.Store(0)
		r, err := f.buy("winner-0", "k0")
		return err == nil && r.Replayed && f.store.receiptReads.Load() == 0
	})

	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			key := ""
			if i%2 == 0 {
				key = fmt.Sprint("late-key-", i)
			}
			if _, err := f.buy(fmt.Sprint("late-", i), key); !errors.Is(err, sale.ErrSoldOut) {
				t.Errorf("late buyer %d: %v, want sold out", i, err)
			}
		})
	}
	wg.Wait()
	r, err := f.buy("winner-1", "k1")
	if err != nil || !r.Replayed || r.OrderID != "order-2" {
		t.Fatalf("retry of an accepted purchase after the sell-out: %+v %v, want the replay of order-2", r, err)
	}
	if err := func() error { _, err := f.buy("winner-1", "k-other"); return err }(); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a new key of a winner: %v, want sold out", err)
	}
	if n := f.d.calls.Load() - deductions; n != 0 {
		t.Errorf("%d deductions after the sell-out, want 0", n)
	}
	if n := f.store.productReads.Load(); n != 1 {
		t.Errorf("%d product reads, want 1", n)
	}
	if n := f.store.receiptReads.Load(); n != 0 {
		t.Errorf("%d receipt reads after the receipts were loaded, want 0", n)
	}
}

func TestOneReadForABurstOnAnUncachedProduct(t *testing.T) {
	f := newFixture(t, time.Hour, openSale(1, 0))
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { _, _ = f.buy(fmt.Sprint("u", i), "") })
	}
	wg.Wait()
	if n := f.store.productReads.Load(); n != 1 {
		t.Fatalf("%d product reads for 100 simultaneous buyers, want 1", n)
	}
	for range 3 {
		_, _ = f.svc.Purchase(context.Background(), sale.PurchaseRequest{ProductID: 42, UserID: "u", Quantity: 1})
	}
	if n := f.store.productReads.Load(); n != 2 {
		t.Fatalf("%d product reads after 3 purchases of an unknown product, want 2 (it is remembered as missing)", n)
	}
}

func TestResetReopensTheSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		tell func(f *fixture)
	}{
		{"broadcast", func(f *fixture) { f.svc.ApplyChange(sale.Change{Kind: sale.ChangeReset, ProductID: 1, Epoch: 2}) }},
		{"broadcast missed: the refresh finds it", func(*fixture) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 20*time.Millisecond, openSale(1, 0))
			if _, err := f.buy("a", ""); !errors.Is(err, sale.ErrSoldOut) {
				t.Fatalf("before the reset: %v, want sold out", err)
			}
			p := openSale(1, 5)
			p.Epoch = 2
			f.store.set(p) // another replica reset the product
			tc.tell(f)
			waitFor(t, func() bool { _, err := f.buy("a", ""); return err == nil })
		})
	}
}

func TestStaleRulesNeverAdmitAPurchaseIntoANewSale(t *testing.T) {
	f := newFixture(t, time.Hour, openSale(1, 5))
	if _, err := f.buy("a", ""); err != nil {
		t.Fatal(err)
	}
	// Reset elsewhere, into a sale that has not started yet; this replica was not told.
	p := openSale(1, 5)
	p.Epoch, p.SaleStartsAt = 2, saleNow.Add(time.Minute)
	f.store.set(p)
	if _, err := f.buy("b", ""); !errors.Is(err, sale.ErrSaleNotStarted) {
		t.Fatalf("purchase admitted under the old sale's rules: %v, want the deduction's epoch check to send it back to the new rules (sale not started)", err)
	}
	if got, _ := f.store.Product(context.Background(), 1); got.Stock != 5 {
		t.Fatalf("stock %d, want 5: nothing may be deducted", got.Stock)
	}
}

// TestDeductionsThatSawTheKeySpareTheRead: a refusal from a deduction that read the key — it
// carries the receipt of the purchase that used it, or says it found it unused — is answered
// without reading the key again; a plain refusal is looked up (the control).
func TestDeductionsThatSawTheKeySpareTheRead(t *testing.T) {
	for _, seesKey := range []bool{true, false} {
		t.Run(fmt.Sprint("seesKey=", seesKey), func(t *testing.T) {
			f := newFixture(t, time.Hour, openSale(1, 2))
			f.d.seesKey = seesKey
			first, err := f.buy("a", "k")
			if err != nil {
				t.Fatal(err)
			}
			wantReads := int32(0)
			if !seesKey {
				wantReads = 1
			}
			f.store.receiptReads.Store(0)
			r, err := f.buy("a", "k")
			if err != nil || !r.Replayed || r.OrderID != first.OrderID || r.Status != sale.StatusQueued {
				t.Fatalf("retry: %+v %v, want the replay of %s", r, err, first.OrderID)
			}
			if n := f.store.receiptReads.Load(); n != wantReads {
				t.Errorf("retry: %d receipt reads, want %d", n, wantReads)
			}
			if _, err := f.buy("b", "kb"); err != nil {
				t.Fatal(err)
			}
			f.store.receiptReads.Store(0)
			if _, err := f.buy("c", "kc"); !errors.Is(err, sale.ErrSoldOut) {
				t.Fatalf("after the last unit: %v, want sold out", err)
			}
			if n := f.store.receiptReads.Load(); n != wantReads {
				t.Errorf("sold out: %d receipt reads, want %d", n, wantReads)
			}
		})
	}
}

func TestKeyedRefusalsStillReplay(t *testing.T) {
	f := newFixture(t, time.Hour, openSale(1, 5))
	first, err := f.buy("a", "k")
	if err != nil {
		t.Fatal(err)
	}
	p := openSale(1, 4)
	p.SaleEndsAt = saleNow // the sale ended
	f.store.set(p)
	f.svc.ApplyChange(sale.Change{Kind: sale.ChangeReset, ProductID: 1, Epoch: 1}) // same epoch: kept
	f.svc.ApplyChange(sale.Change{Kind: sale.ChangeResync})
	waitFor(t, func() bool { _, err := f.buy("z", ""); return errors.Is(err, sale.ErrSaleEnded) })
	r, err := f.buy("a", "k")
	if err != nil || !r.Replayed || r.OrderID != first.OrderID {
		t.Fatalf("retry after the end: %+v %v, want the first answer", r, err)
	}
	_, err = f.svc.Purchase(context.Background(), sale.PurchaseRequest{ProductID: 1, UserID: "a", Quantity: 1, IdempotencyKey: "k2"})
	if !errors.Is(err, sale.ErrSaleEnded) {
		t.Fatalf("new purchase after the end: %v, want sale ended", err)
	}
}

// TestImpossibleOrderIDNotFound: an order id no order can have is not found without a store
// read (memStore has no BuyerOrder: a call would panic), and ValidateOrderID, which the HTTP
// layer asks first, refuses it. Non-ASCII bytes reached MySQL, whose ASCII column refused to
// compare them: a 500.
func TestImpossibleOrderIDNotFound(t *testing.T) {
	f := newFixture(t, time.Hour)
	for _, id := range []string{"", "é", "o-\xff", "a b", "tab\t", "nul\x00", strings.Repeat("o", sale.MaxOrderIDLen+1)} {
		if _, err := f.svc.BuyerOrder(context.Background(), id, "alice"); !errors.Is(err, sale.ErrNotFound) {
			t.Errorf("BuyerOrder(%q) = %v, want ErrNotFound", id, err)
		}
		if err := sale.ValidateOrderID(id); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("ValidateOrderID(%q) = %v, want a validation error", id, err)
		}
	}
	for _, id := range []string{"order-1", "01a20076-796b-7172-9393-d0e8391928db", strings.Repeat("o", sale.MaxOrderIDLen)} {
		if err := sale.ValidateOrderID(id); err != nil {
			t.Errorf("ValidateOrderID(%q) = %v, want nil", id, err)
		}
	}
}

// admitter is an Admission that lets n buyers through, then refuses, and counts the questions.
type admitter struct {
	left  atomic.Int32
	asked atomic.Int32
}

func (a *admitter) Admit(context.Context, string) error {
	a.asked.Add(1)
	if a.left.Add(-1) < 0 {
		return &sale.RateLimitedError{Wait: 2 * time.Second}
	}
	return nil
}

// TestAdmissionGuardsTheDeduction: the buyer's limit is asked only for purchases that would go
// to the deduction; the refusals that cost nothing come first.
func TestAdmissionGuardsTheDeduction(t *testing.T) {
	st := newMemStore(openSale(1, 1), openSale(2, 5))
	d := &memDeductor{s: st}
	adm := &admitter{}
	adm.left.Store(2) // a, then b (who finds the product sold out: the cache learns it from that deduction)
	var n atomic.Int64
	svc, err := sale.NewService(sale.Options{
		Store:           st,
		Deductors:       map[sale.Strategy]sale.Deductor{sale.StrategyMySQL: d},
		DefaultStrategy: sale.StrategyMySQL,
		NewOrderID:      func() string { return fmt.Sprintf("order-%d", n.Add(1)) },
		Admission:       adm,
		Now:             func() time.Time { return saleNow },
	})
	if err != nil {
		t.Fatal(err)
	}
	buy := func(product int64, user string, qty int) error {
		_, err := svc.Purchase(t.Context(), sale.PurchaseRequest{ProductID: product, UserID: user, Quantity: qty})
		return err
	}
	if err := buy(1, "a", 1); err != nil {
		t.Fatalf("first purchase: %v", err)
	}
	if err := buy(1, "b", 1); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("second buyer: %v", err)
	}
	asked := adm.asked.Load()
	for _, tc := range []struct {
		product int64
		qty     int
		want    error
	}{{1, 1, sale.ErrSoldOut}, {2, 2, sale.ErrLimitReached}, {9, 1, sale.ErrNotFound}} {
		if err := buy(tc.product, "c", tc.qty); !errors.Is(err, tc.want) {
			t.Fatalf("product %d qty %d: %v, want %v", tc.product, tc.qty, err, tc.want)
		}
	}
	if got := adm.asked.Load(); got != asked {
		t.Errorf("admission asked %d more times for purchases refused from memory, want 0", got-asked)
	}
	err = buy(2, "d", 1)
	var rl *sale.RateLimitedError
	if !errors.As(err, &rl) || !errors.Is(err, sale.ErrRateLimited) || sale.CodeOf(err) != sale.CodeRateLimited {
		t.Fatalf("purchase past the admission's limit: %v, want a RateLimitedError (rate_limited)", err)
	}
	if p, _ := st.Product(t.Context(), 2); p.Stock != 5 {
		t.Errorf("stock %d, want 5: a refused admission deducts nothing", p.Stock)
	}
}
