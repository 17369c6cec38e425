package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile/turnstiletest"
)

// contractChallenge makes the router serve the challenge's route and check on the join; it is
// never asked.
type contractChallenge struct {
	ChallengeVerifier
	ChallengeIssuer
}

var challengeKey = []byte("httpapi-test-altcha-key-0123456789")

// testClock is a settable clock.
type testClock struct{ at atomic.Int64 }

func (c *testClock) now() time.Time  { return time.Unix(0, c.at.Load()) }
func (c *testClock) set(t time.Time) { c.at.Store(t.UnixNano()) }

// testAltcha is an Altcha of challengeKey, easy to solve, on clk, spending in memory.
func testAltcha(tb testing.TB, clk *testClock) *challenge.Altcha {
	tb.Helper()
	a, err := challenge.NewAltcha(challengeKey, challenge.NewMemorySpent(clk.now), challenge.AltchaOptions{MaxNumber: 2000, Expires: time.Minute, Now: clk.now})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func solved(tb testing.TB, a *challenge.Altcha) string {
	tb.Helper()
	c, err := a.Issue(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	s, err := challenge.Solve(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// challengeRouter is the real router with the waiting rooms served by q and the challenge given.
func challengeRouter(tb testing.TB, q Queue, v ChallengeVerifier, issuer ChallengeIssuer) http.Handler {
	tb.Helper()
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: noStampedes{}, Board: boardOf(testProduct), HTTPMetrics: m,
		Queue: q, JoinChallenge: v, Challenges: issuer}, Config{AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{"index.html": {Data: []byte("x")}}})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// TestChallengeRoute: GET /api/v1/waitroom/challenge answers a new challenge, no-store, in the
// shape of the spec's Challenge (and of the ALTCHA widget: maxnumber), each one different.
func TestChallengeRoute(t *testing.T) {
	clk := &testClock{}
	clk.set(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	a := testAltcha(t, clk)
	h := challengeRouter(t, &recordingQueue{}, a, a)
	first := serve(h, http.MethodGet, "/api/v1/waitroom/challenge", "", nil, "Cache-Control")
	second := serve(h, http.MethodGet, "/api/v1/waitroom/challenge", "", nil)
	if first.Status != http.StatusOK || first.Headers["Cache-Control"] != "no-store" || first.Body == second.Body {
		t.Fatalf("GET challenge: %d %v %s (then %s); want 200, no-store, a new one each time", first.Status, first.Headers, first.Body, second.Body)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(first.Body), &v); err != nil {
		t.Fatal(err)
	}
	if v["maxnumber"] != 2000.0 || v["algorithm"] != "SHA-256" || v["expires_at"] != "2026-11-29T08:01:00Z" {
		t.Errorf("the challenge: %s", first.Body)
	}
	schema := loadSpec(t).Components.Schemas["Challenge"].Value
	if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s does not fit the spec's Challenge: %v", first.Body, err)
	}
	v["planted_field"] = 1
	if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
		t.Error("the spec's Challenge lets a planted field through")
	}
}

// TestJoinChallenge: with the challenge on, a join passes only with a genuine, unexpired, unused
// solution; every refusal is a 403 of its code (400 for the header sent twice) and never reaches
// the queue; the poll needs none. Off (the default), a join needs none and the challenge route is
// not served.
func TestJoinChallenge(t *testing.T) {
	clk := &testClock{}
	clk.set(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	a := testAltcha(t, clk)
	past := &testClock{}
	past.set(clk.now().Add(-2 * time.Minute))
	expired := solved(t, testAltcha(t, past)) // genuine, of this key, issued two minutes ago
	other, err := challenge.NewAltcha([]byte(strings.Repeat("o", 32)), challenge.NewMemorySpent(clk.now), challenge.AltchaOptions{MaxNumber: 2000, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	q := &recordingQueue{}
	h := challengeRouter(t, q, a, a)
	path := fmt.Sprintf("/api/v1/products/%d/queue", testProduct.ID)
	join := fmt.Sprintf("join %d alice", testProduct.ID)
	good := solved(t, a)
	c, err := a.Issue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wrongNumber := challenge.Solution(c, c.MaxNumber+1)
	c.Signature = strings.Repeat("0", 64)
	tampered, err := challenge.Solve(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		header   map[string]string
		edit     func(*http.Request)
		status   int
		code     string
		visited  bool
		contains string
	}{
		{name: "no solution", status: 403, code: codeChallengeRequired},
		{name: "sent twice", edit: func(r *http.Request) { r.Header.Add(solutionHeader, good); r.Header.Add(solutionHeader, good) }, status: 400, code: "invalid_request"},
		{name: "not a solution", header: map[string]string{solutionHeader: "hello"}, status: 403, code: codeChallengeInvalid},
		{name: "the wrong number", header: map[string]string{solutionHeader: wrongNumber}, status: 403, code: codeChallengeInvalid},
		{name: "a tampered signature", header: map[string]string{solutionHeader: tampered}, status: 403, code: codeChallengeInvalid},
		{name: "another server's", header: map[string]string{solutionHeader: solved(t, other)}, status: 403, code: codeChallengeInvalid},
		{name: "expired", header: map[string]string{solutionHeader: expired}, status: 403, code: codeChallengeExpired},
		{name: "solved", header: map[string]string{solutionHeader: good}, status: 200, visited: true},
		{name: "replayed", header: map[string]string{solutionHeader: good}, status: 403, code: codeChallengeInvalid, contains: "used already"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.visits = nil
			res := serveWith(h, http.MethodPost, path, `{"user_id":"alice"}`, tc.header, tc.edit)
			var e errorBody
			_ = json.Unmarshal([]byte(res.Body), &e)
			if res.Status != tc.status || e.Error.Code != tc.code || !strings.Contains(res.Body, tc.contains) {
				t.Errorf("join: %d %s; want %d %q", res.Status, res.Body, tc.status, tc.code)
			}
			if got := len(q.visits) > 0; got != tc.visited || (got && q.visits[0] != join) {
				t.Errorf("the queue was asked %v; want a join: %v", q.visits, tc.visited)
			}
		})
	}
	q.visits = nil
	if res := serve(h, http.MethodGet, path+"?user_id=alice", "", nil); res.Status != 200 || len(q.visits) != 1 {
		t.Errorf("a poll without a solution: %d %s, %v; want 200 (the poll needs none)", res.Status, res.Body, q.visits)
	}

	off := challengeRouter(t, q, nil, nil)
	q.visits = nil
	if res := serve(off, http.MethodPost, path, `{"user_id":"alice"}`, nil); res.Status != 200 || len(q.visits) != 1 {
		t.Errorf("off, a join without a solution: %d %s; want 200", res.Status, res.Body)
	}
	if res := serve(off, http.MethodGet, "/api/v1/waitroom/challenge", "", nil); res.Status != 404 {
		t.Errorf("off, GET challenge: %d; want 404", res.Status)
	}
}

// TestJoinTurnstile: the hosted captcha through the join, against a stand-in for siteverify that
// answers as Cloudflare documents its test secret keys: the passing key joins, with the client's
// address sent along; the failing one is a 403; siteverify away is a 503, never a join.
func TestJoinTurnstile(t *testing.T) {
	cf := turnstiletest.New()
	defer cf.Close()
	path := fmt.Sprintf("/api/v1/products/%d/queue", testProduct.ID)
	verifier := func(secret, url string) ChallengeVerifier {
		v, err := turnstile.New(secret, turnstile.Options{URL: url, Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	for _, tc := range []struct {
		name, secret, url string
		status            int
		code              string
	}{
		{"the passing test key", turnstiletest.SecretPass, cf.URL, 200, ""},
		{"the failing test key", turnstiletest.SecretFail, cf.URL, 403, codeChallengeInvalid},
		{"siteverify away", turnstiletest.SecretPass, dead.URL, 503, string(sale.CodeUnavailable)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{}
			h := challengeRouter(t, q, verifier(tc.secret, tc.url), nil)
			res := serveWith(h, http.MethodPost, path, `{"user_id":"alice"}`, map[string]string{solutionHeader: turnstiletest.DummyToken},
				func(r *http.Request) { r.RemoteAddr = "198.51.100.9:1234" })
			var e errorBody
			_ = json.Unmarshal([]byte(res.Body), &e)
			if res.Status != tc.status || e.Error.Code != tc.code || (len(q.visits) == 1) != (tc.status == 200) {
				t.Errorf("join: %d %s, queue asked %v; want %d %q", res.Status, res.Body, q.visits, tc.status, tc.code)
			}
		})
	}
	reqs := cf.Requests()
	if len(reqs) != 2 || reqs[0].RemoteIP != "198.51.100.9" || reqs[0].Response != turnstiletest.DummyToken {
		t.Errorf("siteverify got %+v; want two calls with the token and the client's address", reqs)
	}
}

// fixedQueue answers every join at once, from memory: the join's own cost, without Redis.
type fixedQueue struct{}

func (fixedQueue) Join(_ context.Context, p sale.Product, _ string) (waitroom.Ticket, error) {
	return waitroom.Ticket{SaleID: p.SaleID(), Status: waitroom.Status{State: waitroom.Waiting, Ticket: 3, Served: 1}}, nil
}

func (q fixedQueue) Status(ctx context.Context, p sale.Product, b string) (waitroom.Ticket, error) {
	return q.Join(ctx, p, b)
}

// BenchmarkJoinChallenge: the join route through the real router (recorder driver, a queue that
// answers from memory), without the challenge and with ALTCHA verified and spent in memory: what
// the check adds to the HTTP layer's CPU. The solutions are made off the clock. The replay
// cache's Redis round trip is redisspent's BenchmarkSpend; the join's own Redis script is not
// here either (docs/api.md puts the three together).
func BenchmarkJoinChallenge(b *testing.B) {
	path := fmt.Sprintf("/api/v1/products/%d/queue", testProduct.ID)
	run := func(b *testing.B, h http.Handler, solutions func(n int) []string) {
		const pool = 2048
		var sols []string
		i := pool
		var stopped time.Duration // the CPU time spent solving, off the clock
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			if i == pool && solutions != nil {
				b.StopTimer()
				from := cpuTime(b)
				sols, i = solutions(pool), 0
				stopped += cpuTime(b) - from
				b.StartTimer()
			}
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"user_id":"alice"}`))
			req.Header.Set("Content-Type", "application/json")
			if solutions != nil {
				req.Header.Set(solutionHeader, sols[i])
				i++
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("join: %d %s", rec.Code, rec.Body)
			}
		}
		b.ReportMetric(float64(cpuTime(b)-cpu-stopped)/float64(b.N), "cpu-ns/op")
	}
	b.Run("off", func(b *testing.B) { run(b, challengeRouter(b, fixedQueue{}, nil, nil), nil) })
	b.Run("altcha", func(b *testing.B) {
		clk := &testClock{}
		clk.set(time.Now())
		a := testAltcha(b, clk)
		run(b, challengeRouter(b, fixedQueue{}, a, a), func(n int) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = solved(b, a)
			}
			return out
		})
	})
}
