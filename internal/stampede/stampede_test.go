package stampede

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/api/client"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   client.ErrorCode
		err    error
		want   outcome
		retry  bool
	}{
		{202, "", nil, outcomeAccepted, false},
		{409, "sold_out", nil, outcomeSoldOut, false},
		{409, "limit_reached", nil, outcomeLimitReached, false},
		{409, "something_new", nil, outcomeRejected, false},
		{403, "sale_not_started", nil, outcomeRejected, false},
		{429, "rate_limited", nil, outcomeRejected, true},
		{503, "unavailable", nil, outcomeRejected, true},
		{502, "", nil, outcomeRejected, true},
		{500, "internal", nil, outcomeRejected, false},
		{0, "", errors.New("connection refused"), outcomeError, true},
		{0, "", context.Canceled, outcomeError, false},
	} {
		if got := classify(tc.status, tc.code, tc.err); got != tc.want {
			t.Errorf("classify(%d, %q, %v) = %d, want %d", tc.status, tc.code, tc.err, got, tc.want)
		}
		if got := retryable(tc.status, tc.err); got != tc.retry {
			t.Errorf("retryable(%d, %v) = %v, want %v", tc.status, tc.err, got, tc.retry)
		}
	}
}

func TestProgressDone(t *testing.T) {
	p := Progress{Accepted: 1, SoldOut: 2, LimitReached: 3, RejectedOther: 4, Errors: 5}
	if p.Done() != 15 {
		t.Fatalf("Done() = %d, want 15", p.Done())
	}
}

// shop is a fake replica: it sells stock units, one per user, and can answer 503 to the first
// attempt of some buyers.
type shop struct {
	mu      sync.Mutex
	stock   int
	sold    map[string]bool
	keys    map[string]string // user -> Idempotency-Key
	hits    int
	flaky   map[string]bool // users whose first attempt gets a 503
	tried   map[string]bool
	release chan struct{} // when not nil, purchases wait for it
}

func newShop(stock int) *shop {
	return &shop{stock: stock, sold: map[string]bool{}, keys: map[string]string{}, flaky: map[string]bool{}, tried: map[string]bool{}}
}

func (s *shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.release != nil {
		<-s.release
	}
	var body struct {
		UserID   string `json:"user_id"`
		Quantity int    `json:"quantity"`
	}
	data, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(data, &body); err != nil || r.URL.Path != "/api/v1/products/7/purchase" || r.Method != http.MethodPost {
		http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits++
	w.Header().Set("Content-Type", "application/json")
	if s.flaky[body.UserID] && !s.tried[body.UserID] {
		s.tried[body.UserID] = true
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"x"}}`)
		return
	}
	if key := r.Header.Get("Idempotency-Key"); key == "" || (s.keys[body.UserID] != "" && s.keys[body.UserID] != key) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"code":"invalid_request","message":"key"}}`)
		return
	} else {
		s.keys[body.UserID] = key
	}
	switch {
	case s.sold[body.UserID]:
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"code":"limit_reached","message":"x"}}`)
	case s.stock == 0:
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"code":"sold_out","message":"x"}}`)
	default:
		s.stock--
		s.sold[body.UserID] = true
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"order_id":"o","status":"queued"}`)
	}
}

type memBoard struct {
	mu   sync.Mutex
	puts int
	last map[string]Progress
}

func (b *memBoard) Put(_ context.Context, p Progress) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.puts++
	if b.last == nil {
		b.last = map[string]Progress{}
	}
	b.last[p.ID] = p
	return nil
}

func (b *memBoard) Get(_ context.Context, id string) (Progress, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p, ok := b.last[id]
	if !ok {
		return Progress{}, ErrUnknown
	}
	return p, nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startRunner returns a runner whose Run goroutine the test's cleanup stops and waits for.
func startRunner(t *testing.T, o Options) *Runner {
	t.Helper()
	r, err := New(quietLog(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func waitDone(t *testing.T, r *Runner, id string) Progress {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := r.Progress(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !p.Running {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("stampede still running: %+v", p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunCountsEveryBuyerAcrossTargets(t *testing.T) {
	a, b := newShop(10), newShop(10)
	srvA, srvB := httptest.NewServer(a), httptest.NewServer(b)
	defer srvA.Close()
	defer srvB.Close()
	board := &memBoard{}
	r := startRunner(t, Options{Targets: []string{srvA.URL + "/", srvB.URL}, Concurrency: 8, Board: board, PublishEvery: time.Millisecond})

	prepared := false
	p, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 50, Prepare: func(context.Context) error { prepared = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !prepared || !p.Running || p.Buyers != 50 || len(p.ID) != idLen {
		t.Fatalf("Start() = %+v (prepared %v)", p, prepared)
	}
	got := waitDone(t, r, p.ID)
	want := Progress{ID: p.ID, ProductID: 7, Buyers: 50, Targets: []string{srvA.URL, srvB.URL}, Sent: 50, Accepted: 20, SoldOut: 30}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Progress{}, "StartedAt", "FinishedAt")); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if got.FinishedAt.Before(got.StartedAt) || got.FinishedAt.IsZero() {
		t.Errorf("started %s, finished %s", got.StartedAt, got.FinishedAt)
	}
	if a.hits != 25 || b.hits != 25 {
		t.Errorf("hits %d and %d, want 25 each (round robin)", a.hits, b.hits)
	}
	if fromBoard, _ := board.Get(context.Background(), p.ID); fromBoard.Running || fromBoard.Accepted != 20 {
		t.Errorf("board holds %+v, want the final progress", fromBoard)
	}
}

func TestRunRetriesAmbiguousAnswersWithTheSameKey(t *testing.T) {
	s := newShop(100)
	srv := httptest.NewServer(s)
	defer srv.Close()
	r := startRunner(t, Options{Targets: []string{srv.URL}, Concurrency: 1})
	// Every buyer's first attempt is refused with 503: users are stampede-<id>-<i>, so mark them
	// once the id is known, before any buyer runs (the shop blocks until released).
	s.release = make(chan struct{})
	p, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 3})
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	for i := range 3 {
		s.flaky["stampede-"+p.ID+"-"+strconv.Itoa(i)] = true
	}
	s.mu.Unlock()
	close(s.release)
	got := waitDone(t, r, p.ID)
	if got.Accepted != 3 || got.RejectedOther != 0 || got.Retries != 3 || s.hits != 6 {
		t.Fatalf("progress %+v after %d hits: want 3 accepted in 6 attempts, 3 of them retries", got, s.hits)
	}
}

func TestStartRefusals(t *testing.T) {
	s := newShop(5)
	s.release = make(chan struct{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer close(s.release)
	r := startRunner(t, Options{Targets: []string{srv.URL}, MaxBuyers: 10})

	for _, p := range []Plan{{ProductID: 7, Buyers: 0}, {ProductID: 7, Buyers: 11}, {ProductID: 0, Buyers: 1}} {
		if _, err := r.Start(context.Background(), p); !errors.Is(err, ErrInvalidPlan) {
			t.Errorf("Start(%+v) = %v, want ErrInvalidPlan", p, err)
		}
	}
	prepErr := errors.New("reset failed")
	if _, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 1, Prepare: func(context.Context) error { return prepErr }}); !errors.Is(err, prepErr) {
		t.Errorf("Start with a failing Prepare = %v, want its error", err)
	}
	first, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 3})
	if err != nil {
		t.Fatalf("Start after a failed Prepare: %v (the reservation must be released)", err)
	}
	ran := false
	if _, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 3, Prepare: func(context.Context) error { ran = true; return nil }}); !errors.Is(err, ErrBusy) || ran {
		t.Errorf("second Start while one runs = %v (prepare ran: %v), want ErrBusy without preparing", err, ran)
	}
	if _, err := r.Progress(context.Background(), "nope"); !errors.Is(err, ErrUnknown) {
		t.Errorf("Progress(malformed id) = %v, want ErrUnknown", err)
	}
	if _, err := r.Progress(context.Background(), strings.Repeat("a", idLen)); !errors.Is(err, ErrUnknown) {
		t.Errorf("Progress(unknown id) = %v, want ErrUnknown", err)
	}
	if p, err := r.Progress(context.Background(), first.ID); err != nil || !p.Running {
		t.Errorf("Progress(running) = %+v, %v", p, err)
	}
}

func TestRunStopsTheStampede(t *testing.T) {
	s := newShop(5)
	s.release = make(chan struct{}) // buyers hang until the server closes
	srv := httptest.NewServer(s)
	r, err := New(quietLog(), Options{Targets: []string{srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	p, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	close(s.release)
	srv.Close()
	got, _ := r.Progress(context.Background(), p.ID)
	if got.Running || got.Sent >= 1000 {
		t.Errorf("after Run returned: %+v, want a finished, interrupted stampede", got)
	}
	if _, err := r.Start(context.Background(), Plan{ProductID: 7, Buyers: 1}); !errors.Is(err, ErrStopped) {
		t.Errorf("Start after Run returned = %v, want ErrStopped", err)
	}
}

func TestNewNeedsTargets(t *testing.T) {
	if _, err := New(quietLog(), Options{}); err == nil {
		t.Fatal("New without targets succeeded")
	}
	if _, err := New(quietLog(), Options{Targets: []string{"http://127.0.0.1:8081", "http://[::1"}}); err == nil {
		t.Fatal("New with a target that is no URL succeeded")
	}
}
