package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// fakeSales answers purchases with purchase and stats with a fixed value; the other methods are
// not used by these tests.
type fakeSales struct {
	Sales
	purchase func(sale.PurchaseRequest) (sale.Receipt, error)
}

func (f fakeSales) Purchase(_ context.Context, req sale.PurchaseRequest) (sale.Receipt, error) {
	return f.purchase(req)
}

func (fakeSales) BuyerOrder(context.Context, string, string) (sale.Order, error) {
	return sale.Order{}, sale.ErrNotFound
}

func (fakeSales) AllProducts(context.Context) ([]sale.Product, error) {
	return []sale.Product{testProduct}, nil
}

func (fakeSales) Stats(context.Context, int64) (sale.Stats, error) {
	return sale.Stats{InitialStock: 10, Stock: 0}, nil
}

// testProduct is the product of testRouter's board: listed, on sale, 4 of 10 left.
var testProduct = sale.Product{
	ID: 7, Name: "Seven", PriceCents: 700, Stock: 4, InitialStock: 10, Strategy: sale.StrategyMySQL,
	SaleStartsAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), SaleEndsAt: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
	PerUserLimit: 1, Listed: true, Epoch: 1,
}

// boardOf returns a loaded board of ps, rendered as the API serves it.
func boardOf(ps ...sale.Product) *board.Board {
	b, err := board.New(board.Options{Store: &countingStore{ps: ps}, Render: Renderer{}})
	if err != nil {
		panic(err)
	}
	b.Refresh(context.Background())
	return b
}

type failingRates struct{}

func (failingRates) Rates(context.Context, int64) (livestats.Rates, error) {
	return livestats.Rates{}, errors.New("redis: connection refused")
}

// syncBuffer is a log destination for a router that may log from more than one goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines(tb testing.TB) []map[string]any {
	tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			tb.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// testRouter is the real router over purchase, logging JSON at debug level into logs.
func testRouter(tb testing.TB, purchase func(sale.PurchaseRequest) (sale.Receipt, error), cfg Config, logs io.Writer) http.Handler {
	tb.Helper()
	m := metrics.New()
	cfg.AdminToken = "secret"
	cfg.Metrics = m.Handler()
	cfg.Web = fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := New(Deps{Log: log, Sales: fakeSales{purchase: purchase}, Stampedes: noStampedes{}, Board: boardOf(testProduct), HTTPMetrics: m, Live: failingRates{}}, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func failWith(err error) func(sale.PurchaseRequest) (sale.Receipt, error) {
	return func(sale.PurchaseRequest) (sale.Receipt, error) { return sale.Receipt{}, err }
}

type response struct {
	Status  int
	Body    string
	Headers map[string]string
}

// serve sends one request and returns the status, the body and the headers named in keep. A POST
// is sent as Content-Type: application/json unless header says otherwise; a header given as ""
// is not sent.
func serve(h http.Handler, method, path, body string, header map[string]string, keep ...string) response {
	return serveWith(h, method, path, body, header, nil, keep...)
}

// serveWith is serve with the request changed by edit (if not nil) before it is sent.
func serveWith(h http.Handler, method, path, body string, header map[string]string, edit func(*http.Request), keep ...string) response {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if edit != nil {
		edit(req)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	out := response{Status: rec.Code, Body: rec.Body.String(), Headers: map[string]string{}}
	for _, k := range keep {
		if v := rec.Header().Get(k); v != "" {
			out.Headers[k] = v
		}
	}
	return out
}

func errorJSON(code, msg string) string {
	data, _ := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
	return string(data)
}

const (
	generic5xx       = "a dependency is unavailable or too slow; nothing was changed, retry shortly"
	genericInternal  = "internal error; it has been logged with the request id"
	purchasePath     = "/api/v1/products/7/purchase"
	jsonContentTypeV = "application/json; charset=utf-8"
)

// TestErrorContract: every refusal leaves with its status, the {"error":{"code","message"}} body
// and its headers, whether the body was pre-encoded or not.
func TestErrorContract(t *testing.T) {
	receipt := sale.Receipt{OrderID: "o-1", Status: sale.StatusQueued, ProductID: 7, UserID: "alice", Quantity: 1, Strategy: sale.StrategyMySQL}
	for _, tc := range []struct {
		name     string
		purchase func(sale.PurchaseRequest) (sale.Receipt, error)
		method   string
		path     string
		body     string
		header   map[string]string
		want     response
	}{
		{name: "sold out", purchase: failWith(sale.ErrSoldOut),
			want: response{409, errorJSON(string(sale.CodeSoldOut), "sold out"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "sold out, wrapped", purchase: failWith(fmt.Errorf("product 7: %w", sale.ErrSoldOut)),
			want: response{409, errorJSON(string(sale.CodeSoldOut), "product 7: sold out"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "limit reached", purchase: failWith(fmt.Errorf("%w: at most %d per user", sale.ErrLimitReached, 1)),
			want: response{409, errorJSON(string(sale.CodeLimitReached), "per-user limit reached: at most 1 per user"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "already purchased", purchase: failWith(sale.ErrAlreadyPurchased),
			want: response{409, errorJSON(string(sale.CodeLimitReached), "per-user limit reached: this user already bought this product"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "not started", purchase: failWith(sale.ErrSaleNotStarted),
			want: response{403, errorJSON(string(sale.CodeSaleNotStarted), "sale not started"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "ended", purchase: failWith(sale.ErrSaleEnded),
			want: response{403, errorJSON(string(sale.CodeSaleEnded), "sale ended"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "not found", purchase: failWith(sale.ErrNotFound),
			want: response{404, errorJSON(codeNotFound, "not found"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "rate limited by the domain", purchase: failWith(sale.ErrRateLimited),
			want: response{429, errorJSON(string(sale.CodeRateLimited), "rate limited"), map[string]string{"Content-Type": jsonContentTypeV, "Retry-After": "1"}}},
		{name: "busy", purchase: failWith(fmt.Errorf("product 7: %w", sale.ErrRateLimited)),
			want: response{429, errorJSON(string(sale.CodeRateLimited), "product 7: rate limited"), map[string]string{"Content-Type": jsonContentTypeV, "Retry-After": "1"}}},
		{name: "unavailable", purchase: failWith(fmt.Errorf("redis: %w", sale.ErrUnavailable)),
			want: response{503, errorJSON(string(sale.CodeUnavailable), generic5xx), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "unconfirmed", purchase: failWith(fmt.Errorf("product 7: %w", sale.ErrUnconfirmed)),
			want: response{503, errorJSON(string(sale.CodeUnconfirmed), msgUnconfirmed), map[string]string{"Content-Type": jsonContentTypeV, "Retry-After": "1"}}},
		{name: "canceled", purchase: failWith(context.Canceled),
			want: response{503, errorJSON(string(sale.CodeUnavailable), generic5xx), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "unexpected", purchase: failWith(errors.New("boom: secret dsn user:pw@db")),
			want: response{500, errorJSON(string(sale.CodeInternal), genericInternal), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "panic", purchase: func(sale.PurchaseRequest) (sale.Receipt, error) { panic("boom") },
			want: response{500, errorJSON(string(sale.CodeInternal), genericInternal), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "invalid id", path: "/api/v1/products/x/purchase",
			want: response{400, errorJSON(string(sale.CodeInvalid), "id: must be a positive integer in decimal digits, without sign or leading zeros"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "unknown field", body: `{"user_id":"alice","USER_ID":"b"}`,
			want: response{400, errorJSON(string(sale.CodeInvalid), "USER_ID: unknown field"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "malformed", body: `{"user_id":`,
			want: response{400, errorJSON(string(sale.CodeInvalid), "malformed JSON at byte 11"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "bad user", body: `{"user_id":"a b"}`,
			want: response{400, errorJSON(string(sale.CodeInvalid), "user_id: may contain only letters, digits, '_' and '-'"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "too large", body: `{"user_id":"` + strings.Repeat("a", 20<<10) + `"}`,
			want: response{413, errorJSON(codePayloadTooLarge, "request body too large: the limit is 16384 bytes"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "accepted", purchase: func(sale.PurchaseRequest) (sale.Receipt, error) { return receipt, nil },
			want: response{202, `{"order_id":"o-1","status":"queued","product_id":7,"user_id":"alice","quantity":1,"strategy":"mysql"}`,
				map[string]string{"Content-Type": jsonContentTypeV, "Location": "/api/v1/orders/o-1"}}},
		{name: "replayed", header: map[string]string{"Idempotency-Key": "k1"},
			purchase: func(req sale.PurchaseRequest) (sale.Receipt, error) {
				r := receipt
				r.Replayed = req.IdempotencyKey == "k1"
				return r, nil
			},
			want: response{202, `{"order_id":"o-1","status":"queued","product_id":7,"user_id":"alice","quantity":1,"strategy":"mysql"}`,
				map[string]string{"Content-Type": jsonContentTypeV, "Location": "/api/v1/orders/o-1", "Idempotent-Replayed": "true"}}},
		{name: "no route", method: "GET", path: "/api/v1/nope",
			want: response{404, errorJSON(codeNotFound, "no such endpoint"), map[string]string{"Content-Type": jsonContentTypeV}}},
		{name: "wrong method", method: "GET", path: purchasePath,
			want: response{405, errorJSON(codeMethodNotAllowed, "method not allowed on this endpoint"), map[string]string{"Content-Type": jsonContentTypeV}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.method == "" {
				tc.method = "POST"
			}
			if tc.path == "" {
				tc.path = purchasePath
			}
			if tc.body == "" {
				tc.body = `{"user_id":"alice"}`
			}
			if tc.purchase == nil {
				tc.purchase = failWith(errors.New("not reached"))
			}
			h := testRouter(t, tc.purchase, Config{}, io.Discard)
			got := serve(h, tc.method, tc.path, tc.body, tc.header, "Content-Type", "Retry-After", "Location", "Idempotent-Replayed", "X-Request-ID")
			if id := got.Headers["X-Request-ID"]; len(id) != 16 {
				t.Errorf("X-Request-ID = %q, want the 16 hex digits of a new id", id)
			}
			delete(got.Headers, "X-Request-ID")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// fixedLimit refuses the keys in refuse with wait, and records every key it is asked about.
type fixedLimit struct {
	mu     sync.Mutex
	refuse map[string]bool
	wait   time.Duration
	asked  []string
}

func (l *fixedLimit) Allow(_ context.Context, key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, key)
	if l.refuse[key] {
		return false, l.wait
	}
	return true, 0
}

// TestClientLimit: the per-client limit is asked with the client's address (X-Forwarded-For only
// from a trusted proxy, an IPv6 client by its /64), never for an exempt client, and its refusal is
// 429 with the wait in Retry-After, rounded up to whole seconds.
func TestClientLimit(t *testing.T) {
	lim := &fixedLimit{refuse: map[string]bool{"203.0.113.7": true}, wait: 2100 * time.Millisecond}
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{purchase: failWith(sale.ErrSoldOut)}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: metrics.New(), ClientLimit: lim}, Config{
		AdminToken: "test-token", Metrics: http.NotFoundHandler(), Web: fstest.MapFS{"index.html": {Data: []byte("x")}},
		TrustedProxies: []string{"10.0.0.1"}, RateExempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	if err != nil {
		t.Fatal(err)
	}
	send := func(remote, xff string) response {
		req := httptest.NewRequest("POST", purchasePath, strings.NewReader(`{"user_id":"u"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = remote
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return response{Status: rec.Code, Body: rec.Body.String(), Headers: map[string]string{"Retry-After": rec.Header().Get("Retry-After")}}
	}
	for _, tc := range []struct {
		name, remote, xff string
		status            int
		asked             string // "" when the limit must not be asked
	}{
		{"a client", "198.51.100.1:1", "", 409, "198.51.100.1"},
		{"XFF from an untrusted peer is ignored", "198.51.100.1:1", "203.0.113.7", 409, "198.51.100.1"},
		{"XFF from the trusted proxy names the client", "10.0.0.1:1", "203.0.113.7", 429, "203.0.113.7"},
		{"the rightmost untrusted address counts", "10.0.0.1:1", "203.0.113.7, 198.51.100.9", 409, "198.51.100.9"},
		{"an IPv6 client by its /64", "[2001:db8:1:2:3:4:5:6]:1", "", 409, "2001:db8:1:2::/64"},
		{"an exempt peer", "127.0.0.1:1", "", 409, ""},
		{"an exempt client named by the proxy", "10.0.0.1:1", "127.0.0.1", 409, ""},
		{"the proxy itself, not exempt", "10.0.0.1:1", "", 409, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim.asked = nil
			res := send(tc.remote, tc.xff)
			if res.Status != tc.status {
				t.Fatalf("status %d %s, want %d", res.Status, res.Body, tc.status)
			}
			var want []string
			if tc.asked != "" {
				want = []string{tc.asked}
			}
			if diff := cmp.Diff(want, lim.asked); diff != "" {
				t.Errorf("keys asked (-want +got):\n%s", diff)
			}
			if tc.status == 429 && (res.Headers["Retry-After"] != "3" || !strings.Contains(res.Body, `"rate_limited"`)) {
				t.Errorf("refusal %v, want rate_limited with Retry-After: 3 (2.1 s rounded up)", res)
			}
		})
	}
}

// TestInflightLimit: beyond MaxInflightPurchases at once, purchases are shed with 429, and a slot
// is free again once a purchase returns.
func TestInflightLimit(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := testRouter(t, func(req sale.PurchaseRequest) (sale.Receipt, error) {
		if req.UserID == "slow" {
			entered <- struct{}{}
			<-release
		}
		return sale.Receipt{}, sale.ErrSoldOut
	}, Config{MaxInflightPurchases: 1}, io.Discard)
	done := make(chan int)
	go func() { done <- serve(h, "POST", purchasePath, `{"user_id":"slow"}`, nil).Status }()
	<-entered
	shed := serve(h, "POST", purchasePath, `{"user_id":"fast"}`, nil, "Retry-After")
	close(release)
	if got := <-done; got != 409 {
		t.Errorf("the slow purchase = %d, want 409", got)
	}
	want := response{429, errorJSON(string(sale.CodeRateLimited), "rate limited"), map[string]string{"Retry-After": "1"}}
	if diff := cmp.Diff(want, shed); diff != "" {
		t.Errorf("shed purchase (-want +got):\n%s", diff)
	}
	if got := serve(h, "POST", purchasePath, `{"user_id":"fast"}`, nil).Status; got != 409 {
		t.Errorf("after the slot was freed = %d, want 409", got)
	}
}

// TestRequestIDInEveryLogLine: whatever a request logs (its debug request line, a 5xx logged
// once, a recovered panic, a degraded dependency) carries the id the response echoes, whether the
// caller sent one or the server made it; and a 5xx error is logged exactly once.
func TestRequestIDInEveryLogLine(t *testing.T) {
	for _, tc := range []struct {
		name     string
		purchase func(sale.PurchaseRequest) (sale.Receipt, error)
		method   string
		path     string
		id       string // sent as X-Request-ID; "" sends none
		auth     string // sent as Authorization
		wantMsgs []string
	}{
		{name: "sold out, caller's id", purchase: failWith(sale.ErrSoldOut), id: "lb-1234",
			wantMsgs: []string{"http request"}},
		{name: "sold out, made id", purchase: failWith(sale.ErrSoldOut),
			wantMsgs: []string{"http request"}},
		{name: "insane id replaced", purchase: failWith(sale.ErrSoldOut), id: "has space",
			wantMsgs: []string{"http request"}},
		{name: "unavailable", purchase: failWith(fmt.Errorf("redis: %w", sale.ErrUnavailable)), id: "lb-5",
			wantMsgs: []string{"request failed", "http request"}},
		{name: "unexpected", purchase: failWith(errors.New("boom")),
			wantMsgs: []string{"request failed unexpectedly", "http request"}},
		{name: "panic", purchase: func(sale.PurchaseRequest) (sale.Receipt, error) { panic("boom") },
			wantMsgs: []string{"panic in handler", "http request"}},
		{name: "audit without live rates", method: "GET", path: "/api/v1/admin/products/7/stats", auth: "Bearer secret",
			wantMsgs: []string{"live rates unavailable", "http request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			h := testRouter(t, tc.purchase, Config{}, &logs)
			if tc.method == "" {
				tc.method, tc.path = "POST", purchasePath
			}
			hdr := map[string]string{}
			if tc.id != "" {
				hdr["X-Request-ID"] = tc.id
			}
			if tc.auth != "" {
				hdr["Authorization"] = tc.auth
			}
			res := serve(h, tc.method, tc.path, `{"user_id":"alice"}`, hdr, "X-Request-ID")
			id := res.Headers["X-Request-ID"]
			switch {
			case tc.id != "" && saneRequestID(tc.id):
				if id != tc.id {
					t.Fatalf("X-Request-ID = %q, want the caller's %q", id, tc.id)
				}
			case len(id) != 16:
				t.Fatalf("X-Request-ID = %q, want 16 hex digits made by the server", id)
			}
			var msgs []string
			for _, line := range logs.lines(t) {
				msgs = append(msgs, fmt.Sprint(line["msg"]))
				if line["request_id"] != id {
					t.Errorf("log line without the request id %q: %v", id, line)
				}
			}
			if diff := cmp.Diff(tc.wantMsgs, msgs); diff != "" {
				t.Errorf("log messages (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRequestIDsDiffer: ids made by the server differ from request to request.
func TestRequestIDsDiffer(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	seen := map[string]bool{}
	for range 100 {
		id := serve(h, "POST", purchasePath, `{"user_id":"alice"}`, nil, "X-Request-ID").Headers["X-Request-ID"]
		if seen[id] {
			t.Fatalf("request id %q made twice", id)
		}
		seen[id] = true
	}
}

// TestDebugLogOff: at info level the request line is not written (and not built).
func TestDebugLogOff(t *testing.T) {
	var logs syncBuffer
	m := metrics.New()
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	h, err := New(Deps{Log: log, Sales: fakeSales{purchase: failWith(sale.ErrSoldOut)}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m, Now: time.Now},
		Config{AdminToken: "x", Metrics: m.Handler(), Web: fstest.MapFS{}})
	if err != nil {
		t.Fatal(err)
	}
	serve(h, "POST", purchasePath, `{"user_id":"alice"}`, nil)
	if lines := logs.lines(t); len(lines) != 0 {
		t.Errorf("at info level a 409 logged %v", lines)
	}
}

// TestMapErrorFastPath: finding a bare sentinel by comparison gives the entry errors.Is would
// have, first match first, for every sentinel of the table.
func TestMapErrorFastPath(t *testing.T) {
	for _, e := range errorTable {
		var want *errorMapping
		for i := range errorTable {
			if errors.Is(e.err, errorTable[i].err) {
				want = &errorTable[i]
				break
			}
		}
		if got := mapError(e.err); got != want {
			t.Errorf("mapError(%v) = %s, errors.Is finds %s first", e.err, got.code, want.code)
		}
	}
}
