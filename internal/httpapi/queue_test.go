package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// recordingQueue answers every visit with a waiting ticket and records who visited.
type recordingQueue struct {
	mu     sync.Mutex
	visits []string
}

func (q *recordingQueue) visit(kind string, p sale.Product, buyer string) (waitroom.Ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.visits = append(q.visits, fmt.Sprintf("%s %d %s", kind, p.ID, buyer))
	return waitroom.Ticket{SaleID: p.SaleID(), Status: waitroom.Status{State: waitroom.Waiting, Ticket: 3, Served: 1}}, nil
}

func (q *recordingQueue) Join(_ context.Context, p sale.Product, buyer string) (waitroom.Ticket, error) {
	return q.visit("join", p, buyer)
}

func (q *recordingQueue) Status(_ context.Context, p sale.Product, buyer string) (waitroom.Ticket, error) {
	return q.visit("status", p, buyer)
}

// TestQueueRoutes: the queue's routes take the product from the board and the buyer from the
// body or the query, answer no-store, and count against the per-client limit as purchases do;
// bad input is a 400 that never reaches the queue.
func TestQueueRoutes(t *testing.T) {
	q := &recordingQueue{}
	lim := &fixedLimit{refuse: map[string]bool{"203.0.113.7": true}, wait: time.Second}
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: noStampedes{}, Board: boardOf(testProduct), HTTPMetrics: m,
		ClientLimit: lim, Queue: q}, Config{AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{"index.html": {Data: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/v1/products/%d/queue", testProduct.ID)
	for _, tc := range []struct {
		name, method, target, body, remote string
		status                             int
		visit                              string // "" when the queue must not be asked
	}{
		{"join", "POST", path, `{"user_id":"alice"}`, "198.51.100.1:1", 200, fmt.Sprintf("join %d alice", testProduct.ID)},
		{"poll", "GET", path + "?user_id=alice", "", "198.51.100.1:1", 200, fmt.Sprintf("status %d alice", testProduct.ID)},
		{"join over the client limit", "POST", path, `{"user_id":"alice"}`, "203.0.113.7:1", 429, ""},
		{"poll over the client limit", "GET", path + "?user_id=alice", "", "203.0.113.7:1", 429, ""},
		{"an unknown product", "POST", "/api/v1/products/999/queue", `{"user_id":"alice"}`, "198.51.100.1:1", 404, ""},
		{"no user", "POST", path, `{}`, "198.51.100.1:1", 400, ""},
		{"a user twice in the query", "GET", path + "?user_id=a&user_id=b", "", "198.51.100.1:1", 400, ""},
		{"not JSON", "POST", path, `user_id=alice`, "198.51.100.1:1", 415, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q.visits = nil
			req := httptest.NewRequest(tc.method, tc.target, strings.NewReader(tc.body))
			if tc.body != "" && strings.HasPrefix(tc.body, "{") {
				req.Header.Set("Content-Type", "application/json")
			} else if tc.body != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req.RemoteAddr = tc.remote
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("%s %s: %d %q %s; want %d, no-store", tc.method, tc.target, rec.Code, rec.Header().Get("Cache-Control"), rec.Body, tc.status)
			}
			var want []string
			if tc.visit != "" {
				want = []string{tc.visit}
			}
			if fmt.Sprint(q.visits) != fmt.Sprint(want) {
				t.Errorf("the queue was asked %v, want %v", q.visits, want)
			}
			if tc.status == http.StatusOK && !strings.Contains(rec.Body.String(), `"state":"waiting","ticket":3,"ahead":1,"eta_seconds":null`) {
				t.Errorf("the ticket: %s", rec.Body)
			}
		})
	}
}
