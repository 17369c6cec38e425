package httpapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// TestSecurityHeaders: every answer (a page, a file, an API answer, a refusal, a path that names
// nothing) carries the security headers; the pages (the storefront's, the API's docs) under the
// page's policy, the API's answers under one that allows nothing.
func TestSecurityHeaders(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	for _, tc := range []struct {
		method, path string
		wantStatus   int
		wantCSP      []string
	}{
		{"GET", "/", 200, pageCSP},
		{"HEAD", "/", 200, pageCSP},
		{"GET", "/static/nope.js", 404, apiCSP},
		{"GET", "/api/v1/products/7/stats", 200, apiCSP},
		{"POST", purchasePath, 409, apiCSP},
		{"GET", "/api/v1/nope", 404, apiCSP},
		{"DELETE", "/api/v1/products/7", 405, apiCSP},
		{"GET", "/api/v1/admin/products", 401, apiCSP},
		{"GET", "/healthz", 200, apiCSP},
		{"GET", "/metrics", 200, apiCSP},
		{"GET", "/api/docs", 200, pageCSP},
		{"GET", "/api/openapi.yaml", 200, apiCSP},
	} {
		got := serve(h, tc.method, tc.path, `{"user_id":"alice"}`, nil,
			"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "X-Frame-Options")
		want := map[string]string{
			"Content-Security-Policy": tc.wantCSP[0],
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		}
		if tc.wantCSP[0] == pageCSP[0] { // a page: also for browsers without frame-ancestors
			want["X-Frame-Options"] = "DENY"
		}
		if got.Status != tc.wantStatus {
			t.Errorf("%s %s = %d, want %d", tc.method, tc.path, got.Status, tc.wantStatus)
		}
		if diff := cmp.Diff(want, got.Headers); diff != "" {
			t.Errorf("%s %s headers (-want +got):\n%s", tc.method, tc.path, diff)
		}
	}
}

// TestRequireJSON: a purchase or an admin write is refused with 415 unless its body is declared
// application/json; the admin token is checked first.
func TestRequireJSON(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	refused := errorJSON(codeUnsupportedMedia, errNotJSON.Error())
	admin := "Bearer secret"
	for _, tc := range []struct {
		path, contentType, auth string
		wantStatus              int
	}{
		{purchasePath, "application/json", "", 409},
		{purchasePath, "application/json; charset=utf-8", "", 409},
		{purchasePath, "Application/JSON ;charset=UTF-8", "", 409},
		{purchasePath, "", "", 415},
		{purchasePath, "text/plain", "", 415},
		{purchasePath, "text/plain; charset=application/json", "", 415},
		{purchasePath, "application/x-www-form-urlencoded", "", 415},
		{purchasePath, "multipart/form-data; boundary=x", "", 415},
		{purchasePath, "application/jsonp", "", 415},
		{purchasePath, "application/merge-patch+json", "", 415},
		{"/api/v1/admin/products", "text/plain", admin, 415},
		{"/api/v1/admin/products/7/reset", "text/plain", admin, 415},
		{"/api/v1/admin/products/7/stampede", "", admin, 415},
		{"/api/v1/admin/products", "text/plain", "", 401},
	} {
		got := serve(h, "POST", tc.path, `{"user_id":"alice"}`, map[string]string{"Content-Type": tc.contentType, "Authorization": tc.auth})
		if got.Status != tc.wantStatus || tc.wantStatus == 415 && got.Body != refused {
			t.Errorf("POST %s as %q = %d %s, want %d", tc.path, tc.contentType, got.Status, got.Body, tc.wantStatus)
		}
	}
	req := httptest.NewRequest("POST", purchasePath, strings.NewReader(`{"user_id":"alice"}`))
	req.Header["Content-Type"] = []string{"application/json", "text/plain"}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 415 {
		t.Errorf("two Content-Types = %d, want 415", rec.Code)
	}
}

// TestHeadWhereGet: every route that answers GET answers HEAD, with the same status (it was 405).
func TestHeadWhereGet(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	heads := map[string]bool{}
	var gets []string
	for _, r := range h.(*gin.Engine).Routes() {
		switch r.Method {
		case "GET":
			gets = append(gets, r.Path)
		case "HEAD":
			heads[r.Path] = true
		}
	}
	for _, p := range gets {
		if !heads[p] {
			t.Errorf("GET %s has no HEAD", p)
		}
	}
	for _, p := range []string{"/", "/healthz", "/readyz", "/metrics", "/api/v1/products/7/stats", "/api/v1/admin/products"} {
		get, head := serve(h, "GET", p, "", nil), serve(h, "HEAD", p, "", nil)
		if get.Status != head.Status {
			t.Errorf("%s: GET %d, HEAD %d", p, get.Status, head.Status)
		}
	}
}

// TestTrailingSlashNotRedirected: a path with a slash too many is the API's JSON 404 (gin's
// redirect answered in HTML, before the middleware: no request id, no security headers).
func TestTrailingSlashNotRedirected(t *testing.T) {
	h := testRouter(t, failWith(sale.ErrSoldOut), Config{}, io.Discard)
	for _, p := range []string{"/api/v1/products/7/stats/", "/static", "/healthz/"} {
		got := serve(h, "GET", p, "", nil, "Location", "X-Content-Type-Options")
		want := response{404, errorJSON(codeNotFound, "no such endpoint"), map[string]string{"X-Content-Type-Options": "nosniff"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", p, diff)
		}
	}
}

// TestWebFiles: the storefront's files with their types; anything else a JSON 404, never a
// listing, a redirect or http.FileServer's text answers.
func TestWebFiles(t *testing.T) {
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m}, Config{
		AdminToken: "secret", Metrics: m.Handler(),
		Web: fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}, "app.js": {Data: []byte("export {};")},
			"icons/x.svg": {Data: []byte("<svg/>")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path       string
		wantStatus int
		wantType   string
	}{
		{"/", 200, "text/html; charset=utf-8"},
		{"/static/app.js", 200, "text/javascript; charset=utf-8"},
		{"/static/icons/x.svg", 200, "image/svg+xml"},
		{"/static/index.html", 200, "text/html; charset=utf-8"},
		{"/static/", 404, jsonContentTypeV},
		{"/static/icons", 404, jsonContentTypeV},
		{"/static/icons/", 404, jsonContentTypeV},
		{"/static/../index.html", 404, jsonContentTypeV},
		{"/static/./app.js", 404, jsonContentTypeV},
		{"/static//app.js", 404, jsonContentTypeV},
		{"/static/nope.js", 404, jsonContentTypeV},
	} {
		got := serve(h, "GET", tc.path, "", map[string]string{"Range": "bytes=5-1", "If-Match": `"x"`}, "Content-Type")
		if got.Status != tc.wantStatus || got.Headers["Content-Type"] != tc.wantType {
			t.Errorf("GET %s = %d %s %q, want %d %s", tc.path, got.Status, got.Headers["Content-Type"], got.Body, tc.wantStatus, tc.wantType)
		}
	}
}

// TestMethodLabelBounded: a method HTTP does not define is counted as "other": a client cannot
// add series to the metrics, nor make them panic with bytes that are not UTF-8.
func TestMethodLabelBounded(t *testing.T) {
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m}, Config{
		AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{"FOO", "BAR1", "\x80", "get"} {
		if got := (fuzzRequest{method: method, path: "/api/v1/products"}).serve(t, h).Code; got != 405 {
			t.Errorf("%q = %d, want 405", method, got)
		}
	}
	body := serve(h, "GET", "/metrics", "", nil).Body
	if strings.Contains(body, "FOO") || strings.Contains(body, `method="get"`) || !strings.Contains(body, `method="other"`) {
		t.Errorf("the metrics count unknown methods by name:\n%s", body)
	}
}

// TestReadyzHidesErrors: /readyz names the dependencies that failed, and logs, without showing
// them, their errors.
func TestReadyzHidesErrors(t *testing.T) {
	var logs syncBuffer
	m := metrics.New()
	secret := errors.New("dial tcp 10.1.2.3:3306: access denied for user 'seckill'@'10.0.0.7'")
	h, err := New(Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil)), HTTPMetrics: m}, Config{
		Metrics: m.Handler(), OpsOnly: true,
		Ready: map[string]Check{
			"mysql":     func(context.Context) error { return secret },
			"redis":     func(context.Context) error { return nil },
			"zookeeper": func(context.Context) error { return context.DeadlineExceeded },
		},
		Topology: map[string]string{"redis": "cluster (seeds 127.0.0.1:7001)"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := serve(h, "GET", "/readyz", "", nil)
	want := `{"checks":{"mysql":"unavailable","redis":"ok","zookeeper":"unavailable"},` +
		`"error":{"code":"unavailable","message":"not ready: mysql, zookeeper unavailable"},` +
		`"topology":{"redis":"cluster (seeds 127.0.0.1:7001)"}}`
	if got.Status != 503 || got.Body != want {
		t.Errorf("readyz = %d %s, want 503 %s", got.Status, got.Body, want)
	}
	var logged []string
	for _, l := range logs.lines(t) {
		if l["msg"] == "not ready" {
			logged = append(logged, l["check"].(string)+": "+l["err"].(string))
		}
	}
	if diff := cmp.Diff([]string{"mysql: " + secret.Error(), "zookeeper: " + context.DeadlineExceeded.Error()}, logged); diff != "" {
		t.Errorf("logged errors (-want +got):\n%s", diff)
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// unknownStampedes knows no stampede.
type unknownStampedes struct{ Stampedes }

func (unknownStampedes) Progress(context.Context, string) (stampede.Progress, error) {
	return stampede.Progress{}, stampede.ErrUnknown
}

// TestAdminThrottle: a client's wrong admin tokens are free up to five, then it waits 1 s, 2 s,
// 4 s…, during which even the right token is answered 429 with the wait; a right token after
// the wait resets the count; another client is not affected; X-Forwarded-For names the client
// only when a trusted proxy sends it.
func TestAdminThrottle(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: unknownStampedes{}, Board: boardOf(), HTTPMetrics: m, Now: clock.Now}, Config{
		AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{}, TrustedProxies: []string{"10.0.0.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	call := func(from, xff, token string) string {
		req := httptest.NewRequest("GET", "/api/v1/admin/stampedes/0123456789ab", nil)
		req.RemoteAddr = from + ":5555"
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			return rec.Result().Status[:3] + " after " + ra
		}
		return rec.Result().Status[:3]
	}
	const attacker, admin = "192.0.2.66", "192.0.2.7"
	var got []string
	for range 5 {
		got = append(got, call(attacker, "", "guess"))
	}
	got = append(got,
		call(attacker, "", "secret"), // the 5th failure imposed 1 s
		call(admin, "", "secret"),    // another client: not affected (404: no such stampede)
		call(attacker, "", "guess"))  // still waiting
	clock.Add(time.Second)
	got = append(got, call(attacker, "", "guess")) // the 6th failure: 2 s
	clock.Add(1500 * time.Millisecond)
	got = append(got, call(attacker, "", "secret")) // 0.5 s left: rounded up
	clock.Add(500 * time.Millisecond)
	got = append(got, call(attacker, "", "secret"), call(attacker, "", "guess")) // reset: one failure
	want := []string{"401", "401", "401", "401", "401", "429 after 1", "404", "429 after 1", "401", "429 after 1", "404", "401"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}

	// Behind the trusted proxy, each client in X-Forwarded-For is counted apart; from anyone
	// else the header is ignored (else it would be a way out of the wait).
	for i := range 5 {
		call("10.0.0.1", "203.0.113.5", "guess")
		call("192.0.2.99", "203.0.113."+strconv.Itoa(10+i), "guess")
	}
	if got := call("10.0.0.1", "203.0.113.6", "secret"); got != "404" {
		t.Errorf("another client behind the proxy = %s, want 404", got)
	}
	if got := call("10.0.0.1", "203.0.113.5", "secret"); got != "429 after 1" {
		t.Errorf("the guessing client behind the proxy = %s, want 429 after 1", got)
	}
	if got := call("192.0.2.99", "198.51.100.1", "secret"); got != "429 after 1" {
		t.Errorf("a client naming another in X-Forwarded-For = %s, want 429 after 1", got)
	}
}

// TestMemThrottle: the waits double up to the cap; a client is forgotten after its quiet time;
// the memory stays bounded; an IPv6 client is its /64.
func TestMemThrottle(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	th := NewMemoryThrottle(ThrottleConfig{Free: 2, FirstWait: time.Second, MaxWait: 10 * time.Second, Forget: time.Minute, MaxClients: 3}, clock.Now).(*memThrottle)
	var waits []time.Duration
	for range 7 {
		w, _ := th.Failed(ctx, "a")
		waits = append(waits, w)
	}
	if diff := cmp.Diff([]time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if w, _ := th.Wait(ctx, "a"); w != 10*time.Second {
		t.Errorf("Wait = %v, want 10s", w)
	}
	clock.Add(10*time.Second + time.Minute) // the wait's end plus exactly the quiet time: remembered
	if w, _ := th.Failed(ctx, "a"); w != 10*time.Second {
		t.Errorf("after the wait and a minute, a failure waits %v, want 10s (still counted)", w)
	}
	clock.Add(10*time.Second + time.Minute + time.Nanosecond)
	if w, _ := th.Failed(ctx, "a"); w != 0 {
		t.Errorf("after the quiet time, a failure waits %v, want 0 (forgotten)", w)
	}
	for _, c := range []string{"b", "c", "d", "e"} {
		_, _ = th.Failed(ctx, c)
	}
	if n := len(th.clients); n > 3 {
		t.Errorf("%d clients remembered, want at most 3", n)
	}
	for in, want := range map[string]string{
		"192.0.2.1":                "192.0.2.1",
		"::ffff:192.0.2.1":         "192.0.2.1",
		"2001:db8:1:2:3:4:5:6":     "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1%eth": "2001:db8:1:2::/64",
		"":                         "",
	} {
		if got := throttleKey(in); got != want {
			t.Errorf("throttleKey(%q) = %q, want %q", in, got, want)
		}
	}
}
