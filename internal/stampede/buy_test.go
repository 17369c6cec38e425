package stampede

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestBuyerBackoff: a buyer waits 100 ms, then 200 ms, and so on, tries-1 times in all.
func TestBuyerBackoff(t *testing.T) {
	for _, tries := range []int{1, 3, 5} {
		b := buyerBackoff(tries)
		for i := 1; i < tries; i++ {
			if d, stop := b.Next(); stop || d != time.Duration(i)*100*time.Millisecond {
				t.Fatalf("tries %d, wait %d: %v (stop %v), want %v", tries, i, d, stop, time.Duration(i)*100*time.Millisecond)
			}
		}
		if d, stop := b.Next(); !stop {
			t.Fatalf("tries %d: a wait %d (%v), want none", tries, tries, d)
		}
	}
}

// TestBuyRetries pins what a buyer sends again and where: an ambiguous answer goes to the next
// target with the same key, up to three attempts; the last answer is the outcome.
func TestBuyRetries(t *testing.T) {
	soldOut := func(w http.ResponseWriter) {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"` + string(sale.CodeSoldOut) + `"}}`))
	}
	tests := []struct {
		name        string
		answers     []int // statuses in turn (0: a sold-out 409); 503 after the list
		wantHits    []string
		wantRetries int64
		want        outcome
	}{
		{"accepted at once", []int{202}, []string{"a"}, 0, outcomeAccepted},
		{"sold out at once", []int{0}, []string{"a"}, 0, outcomeSoldOut},
		{"429, then accepted", []int{429, 202}, []string{"a", "b"}, 1, outcomeAccepted},
		{"502, 504, then sold out", []int{502, 504, 0}, []string{"a", "b", "a"}, 2, outcomeSoldOut},
		{"503 three times: gives up", nil, []string{"a", "b", "a"}, 2, outcomeRejected},
		{"403: not sent again", []int{403}, []string{"a"}, 0, outcomeRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var hits []string
			target := func(name string) *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					hits = append(hits, name)
					n := len(hits)
					mu.Unlock()
					if r.Header.Get("Idempotency-Key") != "stampede-s1-0" {
						t.Errorf("Idempotency-Key %q, want the buyer's", r.Header.Get("Idempotency-Key"))
					}
					status := http.StatusServiceUnavailable
					if n <= len(tt.answers) {
						status = tt.answers[n-1]
					}
					if status == 0 {
						soldOut(w)
						return
					}
					w.WriteHeader(status)
				}))
			}
			a, b := target("a"), target("b")
			defer a.Close()
			defer b.Close()
			r := &Runner{client: http.DefaultClient, tries: 3}
			st := testRun(t, a.URL, b.URL)

			if got := r.buy(context.Background(), st, 0); got != tt.want {
				t.Errorf("outcome %d, want %d", got, tt.want)
			}
			if got := st.retries.Load(); got != tt.wantRetries {
				t.Errorf("%d retries counted, want %d", got, tt.wantRetries)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(hits) != len(tt.wantHits) {
				t.Fatalf("hits %v, want %v", hits, tt.wantHits)
			}
			for i := range hits {
				if hits[i] != tt.wantHits[i] {
					t.Fatalf("hits %v, want %v", hits, tt.wantHits)
				}
			}
		})
	}
}

// TestBuyStopsWithCtx: a buyer whose ctx ends while it waits to send again keeps the answer it
// has and counts no retry; one whose ctx ended before it began sends nothing and counts an error.
func TestBuyStopsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	// The ctx ends as the first answer arrives, before the wait.
	r := &Runner{client: &http.Client{Transport: cancelOnAnswer{http.DefaultTransport, cancel}}, tries: 3}
	st := testRun(t, srv.URL)
	if got := r.buy(ctx, st, 0); got != outcomeRejected || hits.Load() != 1 || st.retries.Load() != 0 {
		t.Errorf("outcome %d after %d hits and %d retries, want %d (the 429) after 1 and 0", got, hits.Load(), st.retries.Load(), outcomeRejected)
	}

	if got := r.buy(ctx, st, 1); got != outcomeError || hits.Load() != 1 {
		t.Errorf("on an ended ctx: outcome %d after %d more hits, want %d after none", got, hits.Load()-1, outcomeError)
	}
}

// cancelOnAnswer calls cancel once an answer has arrived.
type cancelOnAnswer struct {
	http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelOnAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.RoundTripper.RoundTrip(r)
	c.cancel()
	return res, err
}

// TestBuyCarriesToken: with Options.Token, each purchase carries its buyer's bearer token; without
// it, none.
func TestBuyCarriesToken(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	st := testRun(t, srv.URL)

	r := &Runner{client: http.DefaultClient, tries: 1, token: func(u string) (string, error) { return "tok-" + u, nil }}
	if o := r.buy(context.Background(), st, 3); o != outcomeAccepted || got.Load() != "Bearer tok-stampede-s1-3" {
		t.Errorf("outcome %d, Authorization %q; want accepted with Bearer tok-stampede-s1-3", o, got.Load())
	}
	r.token = nil
	if o := r.buy(context.Background(), st, 4); o != outcomeAccepted || got.Load() != "" {
		t.Errorf("outcome %d, Authorization %q; want accepted with none", o, got.Load())
	}
}

// testRun is stampede s1 of product 7 over targets, its clock at the zero time.
func testRun(tb testing.TB, targets ...string) *run {
	tb.Helper()
	urls, err := purchaseURLs(targets, 7)
	if err != nil {
		tb.Fatal(err)
	}
	return newRun("s1", Plan{ProductID: 7, Buyers: 1}, targets, urls, time.Time{})
}
