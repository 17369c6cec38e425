package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"
	"unicode/utf8"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/ratelimit"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// The fuzz targets drive the real router over the real domain (sale.Service, stampede.Launcher)
// with a store, a deductor and the stampede's buyers in memory. memStore refuses what MySQL or
// its driver would refuse (non-ASCII bytes for an ASCII column, a string too long for its column,
// a year the driver cannot encode) with an error that no table maps: a 500. So input that would
// reach the database unchecked fails these targets without the services; the app targets
// (app_fuzz_test.go) hold the model to MySQL itself.

// errColumn is what memStore answers in MySQL's place.
var errColumn = errors.New("memstore: MySQL would refuse this value")

// asciiColumn checks s for a VARCHAR(n) CHARACTER SET ascii column. lookup: s is only compared
// (too long a value matches nothing), not stored.
func asciiColumn(s string, n int, lookup bool) error {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return fmt.Errorf("%w: %q is not ASCII (illegal mix of collations)", errColumn, s)
		}
	}
	if !lookup && len(s) > n {
		return fmt.Errorf("%w: %q is longer than %d", errColumn, s, n)
	}
	return nil
}

// timeColumn checks t for DATETIME(6) through go-sql-driver/mysql, which encodes years 0–9999.
func timeColumn(t time.Time) error {
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%w: year %d", errColumn, y)
	}
	return nil
}

// int32Column checks n for an INT column.
func int32Column(n int) error {
	if n < -1<<31 || n > 1<<31-1 {
		return fmt.Errorf("%w: %d overflows INT", errColumn, n)
	}
	return nil
}

type memReservation struct {
	sale.Receipt
	key   string
	epoch uint64
	// status is where the order is: queued until paid or cancelled (memStore has no consumer).
	status sale.OrderStatus
}

// memStore is sale.Store in memory.
type memStore struct {
	mu       sync.Mutex
	nextID   int64
	products map[int64]sale.Product
	resv     []memReservation
}

var _ sale.Store = (*memStore)(nil)

func (s *memStore) Product(_ context.Context, id int64) (sale.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[id]
	if !ok {
		return sale.Product{}, sale.ErrNotFound
	}
	return p, nil
}

func (s *memStore) Products(context.Context) ([]sale.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sale.Product
	for id := int64(1); id <= s.nextID; id++ {
		if p, ok := s.products[id]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *memStore) ProductStocks(ctx context.Context, ids []int64) (map[int64]sale.StockAt, error) {
	ps, err := s.Products(ctx)
	return stocksOf(ps, ids), err
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

func (s *memStore) CreateProduct(_ context.Context, np sale.NewProduct, _ time.Time) (sale.Product, error) {
	switch {
	case !utf8.ValidString(np.Name) || utf8.RuneCountInString(np.Name) > 200:
		return sale.Product{}, fmt.Errorf("%w: name %q", errColumn, np.Name)
	case asciiColumn(string(np.Strategy), 16, false) != nil:
		return sale.Product{}, asciiColumn(string(np.Strategy), 16, false)
	}
	for _, err := range []error{timeColumn(np.SaleStartsAt), timeColumn(np.SaleEndsAt), int32Column(np.Stock), int32Column(np.PerUserLimit)} {
		if err != nil {
			return sale.Product{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	p := sale.Product{ID: s.nextID, Name: np.Name, PriceCents: np.PriceCents, Stock: np.Stock, InitialStock: np.Stock,
		Strategy: np.Strategy, SaleStartsAt: np.SaleStartsAt, SaleEndsAt: np.SaleEndsAt, PerUserLimit: np.PerUserLimit,
		Listed: np.Listed, Epoch: 1, Admission: np.Admission.Normalized()}
	s.products[p.ID] = p
	return p, nil
}

func (s *memStore) ResetProduct(_ context.Context, id int64, r sale.Reset, now time.Time) (sale.Product, error) {
	if err := int32Column(r.Stock); err != nil {
		return sale.Product{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[id]
	if !ok {
		return sale.Product{}, sale.ErrNotFound
	}
	start, end := r.Window(p, now)
	if err := errors.Join(timeColumn(start), timeColumn(end)); err != nil {
		return sale.Product{}, err
	}
	admission, err := r.AdmissionFor(p, start)
	if err != nil {
		return sale.Product{}, err
	}
	p.Admission = admission
	p.Stock, p.InitialStock, p.SaleStartsAt, p.SaleEndsAt = r.Stock, r.Stock, start, end
	if r.Strategy != "" {
		p.Strategy = r.Strategy
	}
	p.Epoch++
	s.products[id] = p
	kept := s.resv[:0]
	for _, rv := range s.resv {
		if rv.ProductID != id {
			kept = append(kept, rv)
		}
	}
	s.resv = kept
	return p, nil
}

func (s *memStore) Stats(_ context.Context, id int64) (sale.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[id]
	if !ok {
		return sale.Stats{}, sale.ErrNotFound
	}
	st := sale.Stats{ProductID: id, InitialStock: p.InitialStock, Stock: p.Stock}
	for _, rv := range s.resv {
		if rv.ProductID == id {
			st.Reservations++
			st.ReservedUnits += rv.Quantity
		}
	}
	return st, nil
}

func (s *memStore) BuyerOrder(_ context.Context, orderID, userID string) (sale.Order, error) {
	if err := errors.Join(asciiColumn(orderID, 40, true), asciiColumn(userID, 64, true)); err != nil {
		return sale.Order{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range s.resv {
		if rv.OrderID == orderID && rv.UserID == userID {
			return rv.order(), nil
		}
	}
	return sale.Order{}, sale.ErrNotFound
}

func (rv *memReservation) order() sale.Order {
	return sale.Order{OrderID: rv.OrderID, Status: rv.status, ProductID: rv.ProductID, UserID: rv.UserID, Quantity: rv.Quantity}
}

// memOrders is Orders in memory, with the store's rule: userID's order, or not found.
type memOrders struct{ s *memStore }

var _ Orders = memOrders{}

func (o memOrders) Pay(_ context.Context, orderID, userID, _ string) (sale.Order, error) {
	return o.s.change(orderID, userID, sale.StatusPaid)
}

func (o memOrders) Cancel(_ context.Context, orderID, userID string) (sale.Order, error) {
	return o.s.change(orderID, userID, sale.StatusCancelled)
}

// change moves userID's order orderID from queued to status; a repeat answers the same.
func (s *memStore) change(orderID, userID string, status sale.OrderStatus) (sale.Order, error) {
	if err := errors.Join(asciiColumn(orderID, 40, true), asciiColumn(userID, 64, true)); err != nil {
		return sale.Order{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.resv {
		rv := &s.resv[i]
		if rv.OrderID != orderID || rv.UserID != userID {
			continue
		}
		switch rv.status {
		case sale.StatusQueued:
			rv.status = status
		case status:
		case sale.StatusPaid:
			return sale.Order{}, sale.ErrOrderPaid
		default:
			return sale.Order{}, sale.ErrOrderCancelled
		}
		return rv.order(), nil
	}
	return sale.Order{}, sale.ErrNotFound
}

func (s *memStore) StoredReceipt(_ context.Context, userID, key string) (sale.Receipt, error) {
	if err := errors.Join(asciiColumn(userID, 64, true), asciiColumn(key, 128, true)); err != nil {
		return sale.Receipt{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rv := range s.resv {
		if rv.UserID == userID && rv.key == key && key != "" {
			return rv.Receipt, nil
		}
	}
	return sale.Receipt{}, sale.ErrNotFound
}

func (s *memStore) KeyedReceipts(_ context.Context, id int64, limit int) (sale.ReceiptSnapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.products[id]
	snap := sale.ReceiptSnapshot{Epoch: p.Epoch, Stock: p.Stock}
	for _, rv := range s.resv {
		if rv.ProductID == id && rv.key != "" {
			if len(snap.Receipts) == limit {
				snap.Truncated = true
				break
			}
			snap.Receipts = append(snap.Receipts, sale.KeyedReceipt{Key: rv.key, Receipt: rv.Receipt})
		}
	}
	return snap, nil
}

// Deduct is every strategy's deduction, in memory: one lock, the checks a strategy makes.
func (s *memStore) Deduct(_ context.Context, r sale.Reservation) error {
	if err := errors.Join(asciiColumn(r.UserID, 64, false), asciiColumn(r.IdempotencyKey, 128, false), asciiColumn(r.OrderID, 40, false)); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.products[r.ProductID]
	switch {
	case !ok:
		return sale.ErrNotFound
	case p.Epoch != r.Epoch:
		return sale.ErrSaleChanged
	case p.Strategy != r.Strategy:
		return sale.ErrStrategyChanged
	}
	for _, rv := range s.resv {
		switch {
		case rv.ProductID == r.ProductID && rv.UserID == r.UserID:
			return sale.ErrAlreadyPurchased
		case r.IdempotencyKey != "" && rv.UserID == r.UserID && rv.key == r.IdempotencyKey:
			return sale.ErrIdempotencyKeyInUse
		}
	}
	if p.Stock < r.Quantity {
		return sale.ErrSoldOut
	}
	p.Stock -= r.Quantity
	s.products[r.ProductID] = p
	s.resv = append(s.resv, memReservation{Receipt: r.Receipt, key: r.IdempotencyKey, epoch: r.Epoch, status: sale.StatusQueued})
	return nil
}

// soldOutBuyers answers every purchase a stampede's buyer sends with 409 sold_out, in memory.
type soldOutBuyers struct{}

func (soldOutBuyers) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusConflict, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":"sold_out","message":"sold out"}}`)), Request: req,
	}, nil
}

// The products every memory domain starts with.
const (
	productOpen       = 1 // on sale, a billion units, two per user
	productSoldOut    = 2
	productNotStarted = 3
	productEnded      = 4
	memProducts       = 4
)

// fuzzAdminToken is the admin token of memRouter.
const fuzzAdminToken = "fuzz-admin-token"

// memRouter is the real router over the memory domain (orders paid and cancelled in memory too),
// with the production limits (per-user
// rate 5/s, burst 10; 2,000 purchases in flight), an admin throttle in memory, and 10.0.0.1
// as the one trusted proxy. Its background work stops with the test.
func memRouter(tb testing.TB) http.Handler { return memRouterBuyers(tb, nil) }

// memRouterBuyers is memRouter whose purchases need buyer tokens verified by buyers (nil: none).
func memRouterBuyers(tb testing.TB, buyers *buyer.Verifier) http.Handler {
	tb.Helper()
	now := time.Now()
	st := &memStore{products: map[int64]sale.Product{}}
	for id, p := range map[int64]sale.Product{
		productOpen:       {Stock: 1_000_000_000, SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(1000 * time.Hour), PerUserLimit: 2},
		productSoldOut:    {Stock: 0, SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(1000 * time.Hour), PerUserLimit: 1},
		productNotStarted: {Stock: 10, SaleStartsAt: now.Add(1000 * time.Hour), SaleEndsAt: now.Add(2000 * time.Hour), PerUserLimit: 1},
		productEnded:      {Stock: 10, SaleStartsAt: now.Add(-2 * time.Hour), SaleEndsAt: now.Add(-time.Hour), PerUserLimit: 1},
	} {
		p.ID, p.Name, p.PriceCents, p.InitialStock, p.Strategy, p.Listed, p.Epoch = id, fmt.Sprint("product ", id), 100, p.Stock, sale.StrategyMySQL, true, 1
		st.products[id] = p
	}
	st.nextID = memProducts
	log := slog.New(slog.DiscardHandler)
	var orders sync.Mutex
	n := 0
	reads, err := board.New(board.Options{Store: st, Render: Renderer{}})
	if err != nil {
		tb.Fatal(err)
	}
	reads.Refresh(context.Background())
	svc, err := sale.NewService(sale.Options{
		Store:           st,
		Deductors:       map[sale.Strategy]sale.Deductor{sale.StrategyMySQL: st, sale.StrategyRedis: st, sale.StrategyZK: st},
		DefaultStrategy: sale.StrategyMySQL,
		NewOrderID: func() string {
			orders.Lock()
			defer orders.Unlock()
			n++
			return fmt.Sprintf("order-%d", n)
		},
		Log:       log,
		Admission: localAdmission{ratelimit.NewLocal(ratelimit.Limit{PerSecond: 5, Burst: 10})},
		OnChanged: reads.Learn,
	})
	if err != nil {
		tb.Fatal(err)
	}
	runner, err := stampede.New(log, stampede.Options{
		Targets: []string{"http://buyers.invalid"}, MaxBuyers: 20, Concurrency: 2,
		Client: &http.Client{Transport: soldOutBuyers{}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	launcher, err := stampede.NewLauncher(runner, svc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Run(ctx) })
	wg.Go(func() { _ = runner.Run(ctx) })
	wg.Go(func() { _ = reads.Run(ctx) })
	tb.Cleanup(func() { cancel(); wg.Wait() })

	m := metrics.New()
	// The limits at their defaults, each replica's own (the fuzzers send from a few addresses and
	// users: the 429s and their Retry-After are fuzzed too).
	clients := localLimit{ratelimit.NewLocal(ratelimit.Limit{PerSecond: 20, Burst: 40})}
	h, err := New(Deps{Log: log, Sales: svc, Orders: memOrders{st}, Stampedes: launcher, Board: reads, HTTPMetrics: m, ClientLimit: clients, Buyers: buyers}, Config{
		AdminToken:           fuzzAdminToken,
		MaxInflightPurchases: 2000,
		Metrics:              m.Handler(),
		Web:                  fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}, "app.js": {Data: []byte("export {};")}},
		TrustedProxies:       []string{"10.0.0.1"},
		RateExempt:           []netip.Prefix{netip.MustParsePrefix("192.0.2.128/25")},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// localLimit is Limiter over this process's own limiter.
type localLimit struct{ l *ratelimit.Local }

func (l localLimit) Allow(_ context.Context, key string) (bool, time.Duration) {
	return l.l.Allow(key, time.Now())
}

// localAdmission is sale.Admission over this process's own limiter.
type localAdmission struct{ l *ratelimit.Local }

func (a localAdmission) Admit(_ context.Context, user string) error {
	if ok, wait := a.l.Allow(user, time.Now()); !ok {
		return &sale.RateLimitedError{Wait: wait}
	}
	return nil
}
