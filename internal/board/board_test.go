package board

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
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
	// stockReads are the ids of each ProductStocks call.
	stockReads [][]int64
	err        error
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

func (s *memStore) ProductStocks(_ context.Context, ids []int64) (map[int64]sale.StockAt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stockReads = append(s.stockReads, slices.Clone(ids))
	if s.err != nil {
		return nil, s.err
	}
	out := map[int64]sale.StockAt{}
	for _, id := range ids {
		if p, ok := s.ps[id]; ok {
			out[id] = sale.StockAt{Stock: p.Stock, Epoch: p.Epoch}
		}
	}
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

// TestRefreshReadsTheSalesOnNow: between the reads of every product (once per FullEvery, or on a
// change), a refresh reads the stock of the sales on now only (open, or opening within a
// refresh): an ended or upcoming sale costs no read, its stock is seen at the next full read; a
// sale reset behind the board's back is read whole at the next refresh.
func TestRefreshReadsTheSalesOnNow(t *testing.T) {
	onSale, ended, upcoming, opening := product(1, 10), product(2, 10), product(3, 10), product(4, 10)
	ended.SaleStartsAt, ended.SaleEndsAt = t0.Add(-time.Hour), t0
	upcoming.SaleStartsAt, upcoming.SaleEndsAt = t0.Add(time.Hour), t0.Add(2*time.Hour)
	store := newStore(onSale, ended, upcoming, opening)
	b, clk := newBoard(t, Options{Store: store, Refresh: 100 * time.Millisecond, FullEvery: time.Second})
	ctx := context.Background()
	opening.SaleStartsAt = clk.now().Add(50 * time.Millisecond)
	store.update(4, func(p *sale.Product) { p.SaleStartsAt = opening.SaleStartsAt })
	b.Refresh(ctx)
	stock := func(id int64) int { it, _ := b.Snapshot().Item(id); return it.Product.Stock }

	store.update(1, func(p *sale.Product) { p.Stock = 7 })
	store.update(2, func(p *sale.Product) { p.Stock = 3 })
	clk.add(100 * time.Millisecond)
	b.refresh(ctx, false)
	if store.reads != 1 || !cmp.Equal(store.stockReads, [][]int64{{1, 4}}) {
		t.Fatalf("a refresh within FullEvery: %d full reads (want 1, the first), stock reads %v (want [[1 4]])", store.reads, store.stockReads)
	}
	if stock(1) != 7 || stock(2) != 10 {
		t.Errorf("after a stock read: on sale %d (want 7), ended %d (want 10: not read)", stock(1), stock(2))
	}

	clk.add(time.Second)
	b.refresh(ctx, false)
	if store.reads != 2 || stock(2) != 3 {
		t.Errorf("after FullEvery: %d full reads (want 2), ended sale's stock %d (want 3)", store.reads, stock(2))
	}

	store.update(3, func(p *sale.Product) {
		p.SaleStartsAt, p.SaleEndsAt = clk.now().Add(-time.Hour), clk.now().Add(50*time.Millisecond)
	})
	b.Refresh(ctx) // sale 3 now ends within the next refresh
	clk.add(100 * time.Millisecond)
	b.refresh(ctx, false)
	if it, _ := b.Snapshot().Item(3); it.State != Ended || it.Event != EventEnded {
		t.Errorf("a sale that ended since the last refresh: %s (%s), want ended by a stock read", it.State, it.Event)
	}
	fullReads := store.reads

	store.update(1, func(p *sale.Product) { p.Epoch, p.Stock = 2, 10 })
	clk.add(100 * time.Millisecond)
	b.refresh(ctx, false)
	if it, _ := b.Snapshot().Item(1); it.Product.Epoch != 1 || store.reads != fullReads {
		t.Fatalf("a stock read that finds a new epoch: epoch %d, %d full reads; want the old epoch kept, no full read yet", it.Product.Epoch, store.reads)
	}
	clk.add(100 * time.Millisecond)
	b.refresh(ctx, false)
	if it, _ := b.Snapshot().Item(1); it.Product.Epoch != 2 || it.Product.Stock != 10 || store.reads != fullReads+1 {
		t.Errorf("the refresh after: epoch %d stock %d, %d full reads; want epoch 2, stock 10, one more full read", it.Product.Epoch, it.Product.Stock, store.reads-fullReads)
	}
}

// TestApplyReadsWhatTheChangeMoved: a sold-out or restocked broadcast has the stock of its
// product read at the next refresh (an ended sale's too, which a stock read leaves alone
// otherwise), not every product; a reset or a resync has every product read; a change of a
// product the board does not hold (its creation's broadcast missed) has every product read at
// the refresh after.
func TestApplyReadsWhatTheChangeMoved(t *testing.T) {
	onSale, ended := product(1, 10), product(2, 10)
	ended.SaleStartsAt, ended.SaleEndsAt = t0.Add(-3*time.Hour), t0.Add(-2*time.Hour)
	store := newStore(onSale, ended)
	b, clk := newBoard(t, Options{Store: store, Refresh: 100 * time.Millisecond, FullEvery: time.Hour})
	ctx := context.Background()
	b.Refresh(ctx)
	stock := func(id int64) int { it, _ := b.Snapshot().Item(id); return it.Product.Stock }

	store.update(2, func(p *sale.Product) { p.Stock = 4 })
	for _, kind := range []sale.ChangeKind{sale.ChangeRestocked, sale.ChangeSoldOut} {
		b.Apply(sale.Change{Kind: kind, ProductID: 2, Epoch: 1})
		clk.add(100 * time.Millisecond)
		b.refresh(ctx, false)
	}
	if store.reads != 1 || stock(2) != 4 || !cmp.Equal(store.stockReads, [][]int64{{1, 2}, {1, 2}}) {
		t.Fatalf("after a restocked and a sold-out broadcast of the ended sale: %d full reads (want 1, the first), its stock %d (want 4), stock reads %v (want [[1 2] [1 2]])",
			store.reads, stock(2), store.stockReads)
	}
	clk.add(100 * time.Millisecond)
	b.refresh(ctx, false)
	if last := store.stockReads[len(store.stockReads)-1]; !cmp.Equal(last, []int64{1}) {
		t.Errorf("the refresh after: stock read %v, want [1] (the change was taken in once)", last)
	}

	for _, kind := range []sale.ChangeKind{sale.ChangeReset, sale.ChangeResync} {
		reads := store.reads
		b.Apply(sale.Change{Kind: kind, ProductID: 1, Epoch: 1})
		b.refresh(ctx, false)
		if store.reads != reads+1 {
			t.Errorf("after change kind %d: %d full reads, want one more", kind, store.reads-reads)
		}
	}

	reads := store.reads
	b.Apply(sale.Change{Kind: sale.ChangeRestocked, ProductID: 99, Epoch: 1})
	b.refresh(ctx, false)
	b.refresh(ctx, false)
	if store.reads != reads+1 {
		t.Errorf("a restock of a product the board does not hold: %d full reads after two refreshes, want 1", store.reads-reads)
	}
}

// TestApplyBesideRun: changes applied while the board refreshes (the change feed's goroutine and
// the refresher's), under the race detector.
func TestApplyBesideRun(t *testing.T) {
	store := newStore(product(1, 10), product(2, 10))
	b, _ := newBoard(t, Options{Store: store, Refresh: time.Millisecond, FullEvery: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	kinds := []sale.ChangeKind{sale.ChangeRestocked, sale.ChangeSoldOut, sale.ChangeReset}
	for i := range 3000 {
		b.Apply(sale.Change{Kind: kinds[i%len(kinds)], ProductID: int64(1 + i%2), Epoch: 1})
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	cancel()
	<-done
}

// digestStore is a memStore that is a Digester: its digest counts the products and XORs a hash of
// each one's id, epoch, admission and stock (the stock of skipStock's left out).
type digestStore struct {
	*memStore
	digests int
}

func (s *digestStore) CatalogDigest(_ context.Context, skipStock []int64) (sale.CatalogDigest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.digests++
	if s.err != nil {
		return sale.CatalogDigest{}, s.err
	}
	d := sale.CatalogDigest{Products: int64(len(s.ps))}
	for id, p := range s.ps {
		stock := p.Stock
		if slices.Contains(skipStock, id) {
			stock = -1
		}
		h := fnv.New32a()
		fmt.Fprint(h, id, p.Epoch, p.Admission, stock)
		d.Checksum ^= h.Sum32()
	}
	return d, nil
}

// idleRates answers idle rates for every product asked about, but for those of busy.
type idleRates struct {
	mu   sync.Mutex
	busy map[int64]Rates
}

func (r *idleRates) RatesOf(_ context.Context, ids []int64) (map[int64]Rates, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[int64]Rates, len(ids))
	for _, id := range ids {
		out[id] = Rates{Start: t0, Requests: make([]int64, 30), Accepted: make([]int64, 30)}
		if rs, ok := r.busy[id]; ok {
			out[id] = rs
		}
	}
	return out, nil
}

// TestIdleSalesCostNoRead: with a Digester store, a thousand open sales nobody buys cost one
// digest per FullEvery and no read of a product or a stock; the first purchase in one is seen at
// the next digest, and its stock is then read every refresh while it is busy, then no more; a
// sale whose rates show attempts is read every refresh; a reset behind the board's back moves the
// digest and has every product read.
func TestIdleSalesCostNoRead(t *testing.T) {
	const n = 1000
	mem := newStore()
	for id := int64(1); id <= n; id++ {
		p := product(id, 10)
		p.SaleStartsAt = t0.Add(-time.Hour) // open for an hour already: not just opened
		mem.ps[id] = p
	}
	store := &digestStore{memStore: mem}
	src := &idleRates{}
	b, clk := newBoard(t, Options{Store: store, Rates: src, Refresh: 100 * time.Millisecond, FullEvery: time.Second, Busy: 5 * time.Second})
	ctx := context.Background()
	b.Refresh(ctx)
	stock := func(id int64) int { it, _ := b.Snapshot().Item(id); return it.Product.Stock }
	tick := func(times int) {
		for range times {
			clk.add(100 * time.Millisecond)
			b.refresh(ctx, false)
		}
	}
	tick(30) // the first refresh's rates: every sale was busy until they came (no rates: cannot tell)
	reads, stockReads, digests, seq := store.reads, len(store.stockReads), store.digests, b.Snapshot().Seq
	tick(50)
	if store.reads != reads || len(store.stockReads) != stockReads || store.digests != digests+5 || b.Snapshot().Seq != seq {
		t.Fatalf("5 s of %d idle sales: %d full reads, %d stock reads, %d digests, %d snapshots; want 0, 0, 5, 0",
			n, store.reads-reads, len(store.stockReads)-stockReads, store.digests-digests, b.Snapshot().Seq-seq)
	}

	store.update(7, func(p *sale.Product) { p.Stock = 9 }) // a purchase in an idle sale
	tick(10)
	if stock(7) != 9 || store.reads != reads+1 {
		t.Fatalf("a second after a purchase in an idle sale: its stock %d (want 9), %d full reads (want 1)", stock(7), store.reads-reads)
	}
	stockReads = len(store.stockReads)
	store.update(7, func(p *sale.Product) { p.Stock = 8 })
	tick(1)
	if stock(7) != 8 || len(store.stockReads) != stockReads+1 || !cmp.Equal(store.stockReads[stockReads], []int64{7}) {
		t.Fatalf("the refresh after: stock %d (want 8), stock reads %v (want [[7]])", stock(7), store.stockReads[stockReads:])
	}
	tick(60) // Busy passes with no move: idle again
	reads, stockReads = store.reads, len(store.stockReads)
	tick(20)
	if store.reads != reads || len(store.stockReads) != stockReads {
		t.Errorf("sale 7 idle again: %d full reads, stock reads %v; want none", store.reads-reads, store.stockReads[stockReads:])
	}

	src.mu.Lock()
	src.busy = map[int64]Rates{9: {Start: t0, Requests: append(make([]int64, 29), 40), Accepted: make([]int64, 30)}}
	src.mu.Unlock()
	tick(20)
	stockReads = len(store.stockReads)
	tick(5)
	if got := store.stockReads[stockReads:]; len(got) != 5 || !cmp.Equal(got[4], []int64{9}) {
		t.Errorf("a sale whose rates show attempts: stock reads %v, want [9] at every refresh", got)
	}

	reads = store.reads
	store.update(3, func(p *sale.Product) { p.Epoch, p.Stock = 2, 10 }) // reset on another replica, its broadcast missed
	tick(10)
	if it, _ := b.Snapshot().Item(3); it.Product.Epoch != 2 || store.reads <= reads {
		t.Errorf("a reset behind the board's back: epoch %d after a second, %d full reads; want 2, one", it.Product.Epoch, store.reads-reads)
	}
}

// TestIdleSalesOpenAndEndOnTime: an idle sale that nobody reads still opens and ends on time.
func TestIdleSalesOpenAndEndOnTime(t *testing.T) {
	opening, ending := product(1, 10), product(2, 10)
	store := &digestStore{memStore: newStore(opening, ending)}
	b, clk := newBoard(t, Options{Store: store, Rates: &idleRates{}, Refresh: 100 * time.Millisecond, FullEvery: time.Hour})
	ctx := context.Background()
	store.update(1, func(p *sale.Product) {
		p.SaleStartsAt, p.SaleEndsAt = clk.now().Add(10*time.Second), clk.now().Add(time.Hour)
	})
	store.update(2, func(p *sale.Product) {
		p.SaleStartsAt, p.SaleEndsAt = clk.now().Add(-time.Hour), clk.now().Add(20*time.Second)
	})
	b.Refresh(ctx)
	reads := store.reads
	state := func(id int64) State { it, _ := b.Snapshot().Item(id); return it.State }
	for range 250 {
		clk.add(100 * time.Millisecond)
		b.refresh(ctx, false)
	}
	if state(1) != OnSale || state(2) != Ended || store.reads != reads {
		t.Errorf("25 s later: %s and %s with %d full reads; want on_sale, ended, none", state(1), state(2), store.reads-reads)
	}
}

// BenchmarkIdleRefresh is one refresh of a board over 1,000 open sales nobody buys, between two
// digests (the common case: ten a second).
func BenchmarkIdleRefresh(b *testing.B) {
	mem := newStore()
	for id := int64(1); id <= 1000; id++ {
		p := product(id, 10)
		p.SaleStartsAt = t0.Add(-time.Hour)
		mem.ps[id] = p
	}
	clk := &clock{t: t0.Add(time.Minute)}
	bd, err := New(Options{Store: &digestStore{memStore: mem}, Rates: &idleRates{}, Refresh: 100 * time.Millisecond,
		FullEvery: time.Hour, RatesEvery: time.Hour, Now: clk.now})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	bd.Refresh(ctx)
	clk.add(10 * time.Second) // past Busy: every sale idle
	bd.refresh(ctx, false)
	b.ReportAllocs()
	for b.Loop() {
		bd.refresh(ctx, false)
	}
	if n := len(mem.stockReads); n != 0 {
		b.Fatalf("%d stock reads of idle sales", n)
	}
}
