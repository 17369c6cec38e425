package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/ratelimit"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// countingStore is a board.Store over products that a test changes, counting its reads.
type countingStore struct {
	mu    sync.Mutex
	ps    []sale.Product
	reads int
}

func (s *countingStore) Products(context.Context) ([]sale.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return append([]sale.Product(nil), s.ps...), nil
}

// ProductStocks counts as a read, as Products does.
func (s *countingStore) ProductStocks(ctx context.Context, ids []int64) (map[int64]sale.StockAt, error) {
	ps, err := s.Products(ctx)
	return stocksOf(ps, ids), err
}

// stocksOf is what a board.Store's ProductStocks answers for ids, of the products ps.
func stocksOf(ps []sale.Product, ids []int64) map[int64]sale.StockAt {
	out := map[int64]sale.StockAt{}
	for _, p := range ps {
		if slices.Contains(ids, p.ID) {
			out[p.ID] = sale.StockAt{Stock: p.Stock, Epoch: p.Epoch}
		}
	}
	return out
}

func (s *countingStore) set(ps ...sale.Product) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ps = ps
}

func (s *countingStore) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// readRouter is the real router over a board of store, with deps and cfg as given.
func readRouter(tb testing.TB, b Board, deps Deps, cfg Config) http.Handler {
	tb.Helper()
	m := metrics.New()
	cfg.AdminToken = "secret"
	cfg.Metrics = m.Handler()
	cfg.Web = fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}
	deps.Log = slog.New(slog.DiscardHandler)
	deps.Sales = fakeSales{purchase: failWith(sale.ErrSoldOut)}
	deps.Stampedes, deps.HTTPMetrics, deps.Board = noStampedes{}, m, b
	h, err := New(deps, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// TestPublicReadsFromMemory: the list, a product and its viewer figures are the board's, with an
// ETag that If-None-Match turns into a 304, under the public cache policy; reading them costs the
// store nothing. A product's admission shows what a buyer plans by, and no more: the mode, the
// queue's opening (the sale's start when not set) and the rate.
func TestPublicReadsFromMemory(t *testing.T) {
	unlisted := testProduct
	unlisted.ID, unlisted.Listed, unlisted.Name = 8, false, "Eight"
	unlisted.Admission = sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 2.5, MaxActive: 200,
		Session: 2 * time.Minute, Shuffle: true, AbandonAfter: 20 * time.Second}
	store := &countingStore{ps: []sale.Product{testProduct, unlisted}}
	b, err := board.New(board.Options{Store: store, Render: Renderer{}})
	if err != nil {
		t.Fatal(err)
	}
	b.Refresh(context.Background())
	h := readRouter(t, b, Deps{}, Config{})

	stats := `{"initial_stock":10,"stock":4,"sold_units":6,"requests_per_sec":0,"accepted_per_sec":0,` +
		`"rate_window_sec":5,"rates_available":false,"per_second":null}`
	want := map[string]string{
		"/api/v1/products": `{"products":[{"id":7,"name":"Seven","price_cents":700,"stock":4,"initial_stock":10,"strategy":"mysql",` +
			`"sale_starts_at":"2026-01-01T00:00:00Z","sale_ends_at":"2099-01-01T00:00:00Z","per_user_limit":1,"listed":true,"state":"on_sale",` +
			`"admission":{"mode":"open"},"stats":` + stats + `}]}`,
		"/api/v1/products/8": `{"id":8,"name":"Eight","price_cents":700,"stock":4,"initial_stock":10,"strategy":"mysql",` +
			`"sale_starts_at":"2026-01-01T00:00:00Z","sale_ends_at":"2099-01-01T00:00:00Z","per_user_limit":1,"listed":false,"state":"on_sale",` +
			`"admission":{"mode":"waiting_room","admit_rate":2.5,"queue_opens_at":"2026-01-01T00:00:00Z"},"stats":` + stats + `}`,
		"/api/v1/products/7/stats": stats,
	}
	for path, body := range want {
		t.Run(path, func(t *testing.T) {
			got := serve(h, "GET", path, "", nil, "Cache-Control", "Etag", "Content-Type")
			if got.Status != 200 || got.Body != body {
				t.Fatalf("GET %s = %d %s, want 200 %s", path, got.Status, got.Body, body)
			}
			tag := got.Headers["Etag"]
			if !strings.HasPrefix(tag, `"`) || got.Headers["Cache-Control"] != publicCache[0] || got.Headers["Content-Type"] != jsonContentType[0] {
				t.Errorf("headers: %v", got.Headers)
			}
			for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, "*"} {
				again := serve(h, "GET", path, "", map[string]string{"If-None-Match": inm}, "Etag", "Cache-Control")
				if again.Status != http.StatusNotModified || again.Body != "" || again.Headers["Etag"] != tag || again.Headers["Cache-Control"] != publicCache[0] {
					t.Errorf("If-None-Match %s: %d %q %v, want 304 with the tag and no body", inm, again.Status, again.Body, again.Headers)
				}
			}
			if other := serve(h, "GET", path, "", map[string]string{"If-None-Match": `"stale"`}); other.Status != 200 {
				t.Errorf("If-None-Match of another version: %d, want 200", other.Status)
			}
			if head := serve(h, "HEAD", path, "", nil, "Etag"); head.Status != 200 || head.Headers["Etag"] != tag {
				t.Errorf("HEAD: %d %v", head.Status, head.Headers)
			}
		})
	}

	before := store.readCount()
	for range 200 {
		serve(h, "GET", "/api/v1/products/7", "", nil)
		serve(h, "GET", "/api/v1/products", "", nil)
	}
	if n := store.readCount() - before; n != 0 {
		t.Errorf("400 public reads read the store %d times", n)
	}

	// A change makes a new version: the old tag no longer matches.
	old := serve(h, "GET", "/api/v1/products/7", "", nil, "Etag").Headers["Etag"]
	sold := testProduct
	sold.Stock = 0
	store.set(sold, unlisted)
	b.Refresh(context.Background())
	got := serve(h, "GET", "/api/v1/products/7", "", map[string]string{"If-None-Match": old}, "Etag")
	if got.Status != 200 || got.Headers["Etag"] == old || !strings.Contains(got.Body, `"state":"sold_out"`) {
		t.Errorf("after the sale sold out: %d %s %v", got.Status, got.Body, got.Headers)
	}
}

// TestCachePolicy: only the public reads are cacheable by anyone; everything that depends on who
// asks, or is an error, is no-store.
func TestCachePolicy(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	admin := map[string]string{"Authorization": "Bearer secret"}
	for _, tc := range []struct {
		method, path string
		header       map[string]string
		wantStatus   int
		want         string
	}{
		{"GET", "/api/v1/products", nil, 200, publicCache[0]},
		{"GET", "/api/v1/products/7", nil, 200, publicCache[0]},
		{"GET", "/api/v1/products/7/stats", nil, 200, publicCache[0]},
		{"GET", "/api/v1/strategies", nil, 200, strategiesCacheControl[0]},
		{"GET", "/", nil, 200, "no-cache"},
		{"GET", "/api/v1/products/999", nil, 404, "no-store"},
		{"GET", "/api/v1/products/x", nil, 400, "no-store"},
		{"POST", purchasePath, nil, 409, "no-store"},
		{"GET", "/api/v1/orders/o-1?user_id=alice", nil, 404, "no-store"},
		{"GET", "/api/v1/orders/o-1", nil, 400, "no-store"},
		{"GET", "/api/v1/admin/products", admin, 200, "no-store"},
		{"GET", "/api/v1/admin/products/7/stats", admin, 200, "no-store"},
		{"GET", "/api/v1/admin/products", nil, 401, "no-store"},
		{"GET", "/healthz", nil, 200, "no-store"},
		{"GET", "/metrics", nil, 200, "no-store"},
		{"GET", "/api/v1/nope", nil, 404, "no-store"},
	} {
		got := serve(h, tc.method, tc.path, `{"user_id":"alice"}`, tc.header, "Cache-Control")
		if got.Status != tc.wantStatus || got.Headers["Cache-Control"] != tc.want {
			t.Errorf("%s %s = %d, Cache-Control %q; want %d, %q", tc.method, tc.path, got.Status, got.Headers["Cache-Control"], tc.wantStatus, tc.want)
		}
	}
}

// TestStaticRevalidates: the storefront's files carry an ETag and answer 304 on it.
func TestStaticRevalidates(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	first := serve(h, "GET", "/", "", nil, "Etag")
	second := serve(h, "GET", "/", "", map[string]string{"If-None-Match": first.Headers["Etag"]}, "Etag")
	if first.Status != 200 || first.Headers["Etag"] == "" || second.Status != 304 || second.Body != "" {
		t.Errorf("GET / then with its ETag: %d %v, %d %q", first.Status, first.Headers, second.Status, second.Body)
	}
	strategies := serve(h, "GET", "/api/v1/strategies", "", nil, "Etag")
	if again := serve(h, "GET", "/api/v1/strategies", "", map[string]string{"If-None-Match": strategies.Headers["Etag"]}); again.Status != 304 {
		t.Errorf("strategies with their ETag: %d", again.Status)
	}
}

// TestBoardNotLoaded: before the board's first read, public reads answer 503 with Retry-After.
func TestBoardNotLoaded(t *testing.T) {
	b, err := board.New(board.Options{Store: &countingStore{}, Render: Renderer{}})
	if err != nil {
		t.Fatal(err)
	}
	h := readRouter(t, b, Deps{}, Config{})
	for _, path := range []string{"/api/v1/products", "/api/v1/products/7", "/api/v1/products/7/stats", "/api/v1/events"} {
		got := serve(h, "GET", path, "", nil, "Retry-After", "Cache-Control")
		if got.Status != 503 || got.Headers["Retry-After"] != "1" || got.Headers["Cache-Control"] != "no-store" ||
			got.Body != errorJSON(string(sale.CodeUnavailable), msgUnavailable) {
			t.Errorf("GET %s before the board loaded: %d %s %v", path, got.Status, got.Body, got.Headers)
		}
	}
}

// TestReadLimit: a client over the read rate is refused with 429 and Retry-After, from memory;
// an exempt client and other clients are not.
func TestReadLimit(t *testing.T) {
	exempt := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	h := readRouter(t, boardOf(testProduct), Deps{ReadLimit: ratelimit.NewLocal(ratelimit.Limit{PerSecond: 1, Burst: 3})},
		Config{RateExempt: exempt})
	get := func(addr string) response {
		return serveFrom(h, addr, "GET", "/api/v1/products/7", nil, "Retry-After")
	}
	for i := range 3 {
		if got := get("198.51.100.7:1000"); got.Status != 200 {
			t.Fatalf("read %d within the burst: %d", i, got.Status)
		}
	}
	got := get("198.51.100.7:1001")
	if got.Status != 429 || got.Headers["Retry-After"] == "" {
		t.Errorf("read over the burst: %d %v, want 429 with Retry-After", got.Status, got.Headers)
	}
	if other := get("198.51.100.8:1000"); other.Status != 200 {
		t.Errorf("another client: %d", other.Status)
	}
	for i := range 10 {
		if ex := get("192.0.2.9:1000"); ex.Status != 200 {
			t.Fatalf("exempt client, read %d: %d", i, ex.Status)
		}
	}
}

// serveFrom is serve from the client address remote.
func serveFrom(h http.Handler, remote, method, path string, header map[string]string, keep ...string) response {
	return serveWith(h, method, path, "", header, func(r *http.Request) { r.RemoteAddr = remote }, keep...)
}

// TestETagMatches is If-None-Match's weak comparison.
func TestETagMatches(t *testing.T) {
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{[]string{`"a"`}, true},
		{[]string{`W/"a"`}, true},
		{[]string{`"b", "a"`}, true},
		{[]string{`"b"`, `"a"`}, true},
		{[]string{`*`}, true},
		{[]string{`"b"`}, false},
		{[]string{`a`}, false},
		{[]string{``}, false},
		{[]string{`"a`}, false},
	} {
		if got := etagMatches(tc.values, `"a"`); got != tc.want {
			t.Errorf("etagMatches(%q, \"a\") = %v, want %v", tc.values, got, tc.want)
		}
	}
}
