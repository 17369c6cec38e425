package board

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// memStore is a Store over products kept in memory, counting its reads; err fails them.
type memStore struct {
	mu    sync.Mutex
	ps    map[int64]sale.Product
	reads int
	err   error
}

func newStore(ps ...sale.Product) *memStore {
	s := &memStore{ps: map[int64]sale.Product{}}
	for _, p := range ps {
		s.ps[p.ID] = p
	}
	return s
}

func (s *memStore) Products(context.Context) ([]sale.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	var out []sale.Product
	for _, p := range s.ps {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b sale.Product) int { return int(a.ID - b.ID) })
	return out, nil
}

func (s *memStore) update(id int64, f func(*sale.Product)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.ps[id]
	f(&p)
	s.ps[id] = p
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func product(id int64, stock int) sale.Product {
	return sale.Product{
		ID: id, Name: "p", Stock: stock, InitialStock: 10, Strategy: sale.StrategyMySQL,
		SaleStartsAt: t0, SaleEndsAt: t0.Add(time.Hour), PerUserLimit: 1, Listed: true, Epoch: 1,
	}
}

func newBoard(t *testing.T, o Options) (*Board, *clock) {
	t.Helper()
	clk := &clock{t: t0.Add(time.Minute)}
	o.Now = clk.now
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return b, clk
}

// events lists the (product, event) of each item that changed after seq.
func events(s *Snapshot, seq uint64) [][2]any {
	var out [][2]any
	for _, it := range s.Since(seq) {
		out = append(out, [2]any{it.Product.ID, it.Event})
	}
	return out
}

// TestRefreshEvents: each refresh publishes a snapshot only when a viewer would see a difference,
// and names why each product changed; a stream resuming at any earlier sequence gets exactly the
// products that changed since.
func TestRefreshEvents(t *testing.T) {
	ctx := context.Background()
	upcoming := product(3, 10)
	upcoming.SaleStartsAt, upcoming.SaleEndsAt = t0.Add(2*time.Minute), t0.Add(3*time.Minute)
	store := newStore(product(1, 10), product(2, 1), upcoming)
	b, clk := newBoard(t, Options{Store: store})

	if s := b.Snapshot(); s.Loaded() || len(s.Listed()) != 0 {
		t.Fatalf("before the first refresh: loaded %v, %d items", s.Loaded(), len(s.Listed()))
	}
	b.Refresh(ctx)
	first := b.Snapshot()
	if diff := cmp.Diff([][2]any{{int64(1), EventReset}, {int64(2), EventReset}, {int64(3), EventReset}}, events(first, 0)); diff != "" {
		t.Errorf("first refresh (-want +got):\n%s", diff)
	}

	b.Refresh(ctx)
	if b.Snapshot() != first {
		t.Fatal("a refresh that found nothing new published a snapshot")
	}
	select {
	case <-first.Changed():
		t.Fatal("Changed closed without a change")
	default:
	}

	store.update(1, func(p *sale.Product) { p.Stock = 7 })
	store.update(2, func(p *sale.Product) { p.Stock = 0 })
	b.Refresh(ctx)
	second := b.Snapshot()
	select {
	case <-first.Changed():
	default:
		t.Fatal("Changed of the replaced snapshot is still open")
	}
	if diff := cmp.Diff([][2]any{{int64(1), EventStock}, {int64(2), EventSoldOut}}, events(second, first.Seq)); diff != "" {
		t.Errorf("stock moved (-want +got):\n%s", diff)
	}

	store.update(2, func(p *sale.Product) { p.Stock = 1 }) // an expired order's unit came back
	clk.add(90 * time.Second)                              // product 3's sale opens
	b.Refresh(ctx)
	third := b.Snapshot()
	if diff := cmp.Diff([][2]any{{int64(2), EventOnSale}, {int64(3), EventOpen}}, events(third, second.Seq)); diff != "" {
		t.Errorf("back on sale, opened (-want +got):\n%s", diff)
	}
	// Resuming from the first snapshot: every product changed since, each once, as its latest.
	if diff := cmp.Diff([][2]any{{int64(1), EventStock}, {int64(2), EventOnSale}, {int64(3), EventOpen}}, events(third, first.Seq)); diff != "" {
		t.Errorf("changes since the first snapshot (-want +got):\n%s", diff)
	}

	store.update(1, func(p *sale.Product) { p.Epoch, p.Stock = 2, 10 }) // an admin reset
	clk.add(time.Minute)                                                // product 3's sale ends
	b.Refresh(ctx)
	if diff := cmp.Diff([][2]any{{int64(1), EventReset}, {int64(3), EventEnded}}, events(b.Snapshot(), third.Seq)); diff != "" {
		t.Errorf("reset, ended (-want +got):\n%s", diff)
	}
	if it, _ := b.Snapshot().Item(3); it.State != Ended {
		t.Errorf("product 3: %s, want ended", it.State)
	}
}

// TestAdmissionChangeIsSeen: a product whose admission rule changed is a change a viewer sees
// (its JSON shows the rule), even in the same sale epoch, and a refresh that finds the same rule
// is not.
func TestAdmissionChangeIsSeen(t *testing.T) {
	ctx := context.Background()
	store := newStore(product(1, 10))
	b, _ := newBoard(t, Options{Store: store})
	b.Refresh(ctx)
	first := b.Snapshot()
	store.update(1, func(p *sale.Product) {
		p.Admission = sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 5, MaxActive: 10, Session: time.Minute,
			AbandonAfter: time.Minute}
	})
	b.Refresh(ctx)
	second := b.Snapshot()
	if diff := cmp.Diff([][2]any{{int64(1), EventReset}}, events(second, first.Seq)); diff != "" {
		t.Errorf("admission changed (-want +got):\n%s", diff)
	}
	if it, _ := second.Item(1); !it.Product.Admission.WaitingRoom() {
		t.Errorf("the board's product: %+v, want its waiting room", it.Product.Admission)
	}
	b.Refresh(ctx)
	if b.Snapshot() != second {
		t.Error("a refresh that found the same admission published a snapshot")
	}
}

// TestReadsCostNothing: reading the board does not read the store; only refreshes do.
func TestReadsCostNothing(t *testing.T) {
	store := newStore(product(1, 10))
	b, _ := newBoard(t, Options{Store: store})
	b.Refresh(context.Background())
	for range 1000 {
		if _, ok := b.Snapshot().Item(1); !ok {
			t.Fatal("product 1 not on the board")
		}
	}
	if store.reads != 1 {
		t.Errorf("store read %d times for one refresh and 1,000 reads", store.reads)
	}
}

// TestLearnBeatsAnOlderRead: a product this replica reset is on the board at once, and a refresh
// whose read began before the reset does not bring the old epoch back.
func TestLearnBeatsAnOlderRead(t *testing.T) {
	store := newStore(product(1, 3))
	b, _ := newBoard(t, Options{Store: store})
	b.Refresh(context.Background())

	reset := product(1, 10)
	reset.Epoch = 2
	b.Learn(reset)
	it, _ := b.Snapshot().Item(1)
	if it.Product.Epoch != 2 || it.Product.Stock != 10 || it.Event != EventReset {
		t.Fatalf("after Learn: %+v", it)
	}
	b.Refresh(context.Background()) // the store still holds epoch 1: a read from before the reset
	if it, _ := b.Snapshot().Item(1); it.Product.Epoch != 2 {
		t.Errorf("a stale read took the board back to epoch %d", it.Product.Epoch)
	}
	b.Learn(product(1, 3)) // a Learn of an older epoch changes nothing either
	if it, _ := b.Snapshot().Item(1); it.Product.Epoch != 2 {
		t.Errorf("an older Learn took the board back to epoch %d", it.Product.Epoch)
	}
}

// TestStoreDown: while the store fails, the board keeps what it read and sales still open and end
// on time.
func TestStoreDown(t *testing.T) {
	p := product(1, 5)
	p.SaleStartsAt = t0.Add(2 * time.Minute)
	store := newStore(p)
	b, clk := newBoard(t, Options{Store: store})
	b.Refresh(context.Background())
	store.mu.Lock()
	store.err = errors.New("mysql: connection refused")
	store.mu.Unlock()
	clk.add(2 * time.Minute)
	b.Refresh(context.Background())
	it, ok := b.Snapshot().Item(1)
	if !ok || it.State != OnSale || it.Event != EventOpen || it.Product.Stock != 5 {
		t.Errorf("with the store down, after the opening time: %+v", it)
	}
}

type liveStocks map[int64]int

func (l liveStocks) Stocks(_ context.Context, ps []sale.Product) (map[int64]int, error) {
	out := map[int64]int{}
	for _, p := range ps {
		if n, ok := l[p.ID]; ok {
			out[p.ID] = n
		}
	}
	return out, nil
}

// TestLiveStock: a strategy's live stock replaces its products' MySQL stock; others keep theirs.
func TestLiveStock(t *testing.T) {
	lua := product(2, 10)
	lua.Strategy = sale.StrategyRedisLua
	b, _ := newBoard(t, Options{
		Store: newStore(product(1, 10), lua, product(3, 10)),
		Live:  map[sale.Strategy]LiveStock{sale.StrategyRedisLua: liveStocks{1: 0, 2: 4}},
	})
	b.Refresh(context.Background())
	got := map[int64]int{}
	for _, it := range b.Snapshot().Listed() {
		got[it.Product.ID] = it.Product.Stock
	}
	if diff := cmp.Diff(map[int64]int{1: 10, 2: 4, 3: 10}, got); diff != "" {
		t.Errorf("stocks (-want +got):\n%s", diff)
	}
}

type rateSource struct {
	mu    sync.Mutex
	asked [][]int64
	rates map[int64]Rates
}

func (r *rateSource) RatesOf(_ context.Context, ids []int64) (map[int64]Rates, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, ids)
	return r.rates, nil
}

// TestRates: rates are read once per RatesEvery, only for the listed products and the sales near
// their window; a window that slides over nothing is no change, new counts are.
func TestRates(t *testing.T) {
	old := product(2, 10)
	old.Listed, old.SaleEndsAt = false, t0.Add(-time.Hour) // a load test's sale, long over
	near := product(3, 10)
	near.Listed = false
	src := &rateSource{rates: map[int64]Rates{1: {Start: t0, Requests: []int64{0, 0}, Accepted: []int64{0, 0}}}}
	b, clk := newBoard(t, Options{Store: newStore(product(1, 10), old, near), Rates: src})
	b.Refresh(context.Background())
	b.Refresh(context.Background()) // within RatesEvery: not read again
	if diff := cmp.Diff([][]int64{{1, 3}}, src.asked); diff != "" {
		t.Errorf("rates asked for (-want +got):\n%s", diff)
	}
	first := b.Snapshot()
	if it, _ := first.Item(1); it.Rates == nil {
		t.Error("product 1 has no rates")
	}
	if it, _ := first.Item(2); it.Rates != nil {
		t.Error("a sale long over has rates")
	}

	src.rates = map[int64]Rates{1: {Start: t0.Add(time.Second), Requests: []int64{0, 0}, Accepted: []int64{0, 0}}}
	clk.add(time.Second)
	b.Refresh(context.Background())
	if b.Snapshot() != first {
		t.Error("an idle window that slid was published as a change")
	}
	src.rates = map[int64]Rates{1: {Start: t0.Add(2 * time.Second), Requests: []int64{0, 9}, Accepted: []int64{0, 3}}}
	clk.add(time.Second)
	b.Refresh(context.Background())
	if diff := cmp.Diff([][2]any{{int64(1), EventStats}}, events(b.Snapshot(), first.Seq)); diff != "" {
		t.Errorf("new counts (-want +got):\n%s", diff)
	}
}

func TestRatesPerSecond(t *testing.T) {
	r := Rates{Requests: []int64{100, 0, 5, 5, 10, 10, 20}, Accepted: []int64{1, 1, 1, 1, 1, 1, 1}}
	for _, tc := range []struct {
		window   int
		req, acc float64
	}{
		{5, 10, 1},
		{1, 20, 1},
		{100, 150.0 / 7, 1},
		{0, 0, 0},
	} {
		req, acc := r.PerSecond(tc.window)
		if req != tc.req || acc != tc.acc {
			t.Errorf("PerSecond(%d) = %v, %v, want %v, %v", tc.window, req, acc, tc.req, tc.acc)
		}
	}
	if req, acc := (Rates{}).PerSecond(5); req != 0 || acc != 0 {
		t.Errorf("empty rates: %v %v", req, acc)
	}
}

// TestRunFollowsChanges: Run refreshes on its own, at once when a change is applied, and a reader
// waiting on Changed is woken by the refresh that saw the change.
func TestRunFollowsChanges(t *testing.T) {
	p := product(1, 10)
	p.SaleStartsAt, p.SaleEndsAt = time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	store := newStore(p)
	b, err := New(Options{Store: store, Refresh: time.Hour}) // only Apply can wake it
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- b.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor := func(what string, ok func(*Snapshot) bool) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for s := b.Snapshot(); !ok(s); s = b.Snapshot() {
			select {
			case <-s.Changed():
			case <-deadline:
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	waitFor("the first refresh", (*Snapshot).Loaded)
	store.update(1, func(p *sale.Product) { p.Stock = 0 })
	b.Apply(sale.Change{Kind: sale.ChangeSoldOut, ProductID: 1, Epoch: 1})
	waitFor("sold out", func(s *Snapshot) bool { it, _ := s.Item(1); return it.State == SoldOut })
}
