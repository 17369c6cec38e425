package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// sseFrame is one Server-Sent Events frame: its fields, or a comment.
type sseFrame struct {
	ID, Event, Data, Retry, Comment string
}

// sseReader reads frames off a stream.
type sseReader struct {
	t    testing.TB
	sc   *bufio.Scanner
	body interface{ Close() error }
}

func openStream(t testing.TB, url string, header map[string]string) (*sseReader, *http.Response) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return &sseReader{t: t, sc: bufio.NewScanner(res.Body), body: res.Body}, res
}

// next returns the next frame, failing the test after timeout.
func (r *sseReader) next(timeout time.Duration) sseFrame {
	r.t.Helper()
	got := make(chan sseFrame, 1)
	go func() {
		var f sseFrame
		seen := false
		for r.sc.Scan() {
			line := r.sc.Text()
			if line == "" {
				if seen {
					got <- f
					return
				}
				continue
			}
			seen = true
			name, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch name {
			case "":
				f.Comment = value
			case "id":
				f.ID = value
			case "event":
				f.Event = value
			case "data":
				f.Data += value
			case "retry":
				f.Retry = value
			}
		}
		close(got)
	}()
	select {
	case f, ok := <-got:
		if !ok {
			r.t.Fatal("the stream ended")
		}
		return f
	case <-time.After(timeout):
		r.body.Close()
		r.t.Fatalf("no frame within %s", timeout)
	}
	return sseFrame{}
}

// itemOf decodes a per-product event's data.
func itemOf(t testing.TB, f sseFrame) eventItemJSON {
	t.Helper()
	var it eventItemJSON
	if err := json.Unmarshal([]byte(f.Data), &it); err != nil {
		t.Fatalf("event %s data %q: %v", f.Event, f.Data, err)
	}
	return it
}

// streamServer serves the real router over a board of store on a real listener whose server has
// short read and write timeouts (a stream must outlive them).
func streamServer(t *testing.T, store *countingStore, cfg Config, closing chan struct{}) (*httptest.Server, *board.Board) {
	t.Helper()
	b, err := board.New(board.Options{Store: store, Render: Renderer{}})
	if err != nil {
		t.Fatal(err)
	}
	b.Refresh(context.Background())
	h := readRouter(t, b, Deps{Closing: closing}, cfg)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, b
}

// TestEventStream: a stream opens with its retry and a snapshot, then carries each change once,
// coalesced, named for what happened; it outlives the server's timeouts; a client that comes
// back with its Last-Event-ID gets only what changed since, one of another board a snapshot.
func TestEventStream(t *testing.T) {
	store := &countingStore{ps: []sale.Product{testProduct}}
	srv, b := streamServer(t, store, Config{Streams: StreamConfig{MinGap: 300 * time.Millisecond}}, nil)

	s, res := openStream(t, srv.URL+"/api/v1/events", nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != eventStreamType[0] ||
		res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("stream answered %d %v", res.StatusCode, res.Header)
	}
	if f := s.next(2 * time.Second); f.Retry == "" {
		t.Fatalf("first frame %+v, want retry", f)
	}
	snap := s.next(2 * time.Second)
	var items struct{ Items []eventItemJSON }
	if err := json.Unmarshal([]byte(snap.Data), &items); err != nil || snap.Event != "snapshot" || len(items.Items) != 1 ||
		items.Items[0].Product.Stock != 4 || items.Items[0].Stats.SoldUnits != 6 || snap.ID != b.Snapshot().Board+".1" {
		t.Fatalf("snapshot %+v (%v)", snap, err)
	}

	time.Sleep(500 * time.Millisecond) // past the server's timeouts
	setStock := func(stock int) {
		p := testProduct
		p.Stock = stock
		store.set(p)
		b.Refresh(context.Background())
	}
	setStock(3)
	if f := s.next(2 * time.Second); f.Event != "stock" || itemOf(t, f).Product.Stock != 3 {
		t.Fatalf("after a stock move: %+v", f)
	}
	// Two more within the stream's MinGap of that write: one write carries the latest state.
	setStock(2)
	setStock(1)
	f := s.next(2 * time.Second)
	if it := itemOf(t, f); f.Event != "stock" || it.Product.Stock != 1 || it.Product.State != "on_sale" {
		t.Fatalf("after two quick stock moves: %+v", f)
	}
	lastID := f.ID
	sold := testProduct
	sold.Stock = 0
	store.set(sold)
	b.Refresh(context.Background())
	f = s.next(2 * time.Second)
	if it := itemOf(t, f); f.Event != "sold_out" || it.Product.State != "sold_out" || it.Stats.Stock != 0 {
		t.Fatalf("sold out: %+v", f)
	}

	resumed, _ := openStream(t, srv.URL+"/api/v1/events", map[string]string{"Last-Event-ID": lastID})
	resumed.next(2 * time.Second) // retry
	if f := resumed.next(2 * time.Second); f.Event != "sold_out" {
		t.Errorf("resumed after %s: %+v, want the sold_out missed", lastID, f)
	}
	foreign, _ := openStream(t, srv.URL+"/api/v1/events", map[string]string{"Last-Event-ID": "elsewhere.3"})
	foreign.next(2 * time.Second)
	if f := foreign.next(2 * time.Second); f.Event != "snapshot" {
		t.Errorf("resumed from another board: %+v, want a snapshot", f)
	}
}

// TestEventStreamOfOneProduct: ?product_id follows one product, listed or not; a bad or unknown
// id is refused before any stream opens.
func TestEventStreamOfOneProduct(t *testing.T) {
	unlisted := testProduct
	unlisted.ID, unlisted.Listed = 8, false
	store := &countingStore{ps: []sale.Product{testProduct, unlisted}}
	srv, b := streamServer(t, store, Config{}, nil)
	s, _ := openStream(t, srv.URL+"/api/v1/events?product_id=8", nil)
	s.next(2 * time.Second)
	snap := s.next(2 * time.Second)
	var items struct{ Items []eventItemJSON }
	_ = json.Unmarshal([]byte(snap.Data), &items)
	if len(items.Items) != 1 || items.Items[0].Product.ID != 8 {
		t.Fatalf("snapshot of product 8: %+v", snap)
	}
	listed, _ := openStream(t, srv.URL+"/api/v1/events", nil)
	listed.next(2 * time.Second)
	listed.next(2 * time.Second)

	p7, p8 := testProduct, unlisted
	p7.Stock, p8.Stock = 1, 2
	store.set(p7, p8)
	b.Refresh(context.Background())
	if f := s.next(2 * time.Second); itemOf(t, f).Product.ID != 8 {
		t.Errorf("product 8's stream carried %+v", f)
	}
	if f := listed.next(2 * time.Second); itemOf(t, f).Product.ID != 7 {
		t.Errorf("the listed products' stream carried %+v", f)
	}

	for _, tc := range []struct {
		query  string
		status int
	}{{"product_id=x", 400}, {"product_id=0", 400}, {"product_id=999", 404}} {
		res, err := http.Get(srv.URL + "/api/v1/events?" + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status || res.Header.Get("Content-Type") != jsonContentType[0] {
			t.Errorf("?%s: %d %s, want %d JSON", tc.query, res.StatusCode, res.Header.Get("Content-Type"), tc.status)
		}
	}
}

// TestStreamLimits: beyond its streams per client a client gets 429, beyond the replica's
// streams anyone gets 503, both with Retry-After; exempt clients are not counted per client; a
// closed stream frees its place.
func TestStreamLimits(t *testing.T) {
	s := &streams{cfg: StreamConfig{Max: 3, PerClient: 2}, exempt: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		metrics: nopStreamMetrics{}, byClient: map[string]int{}}
	var got []string
	try := func(client string) {
		err := s.acquire(client)
		got = append(got, client+": "+map[error]string{nil: "ok", errStreamsFull: "replica full", errClientStreams: "client full"}[err])
	}
	try("198.51.100.1")
	try("198.51.100.1")
	try("198.51.100.1")
	try("127.0.0.1")
	try("198.51.100.2")
	s.release("198.51.100.1")
	try("198.51.100.2")
	want := []string{"198.51.100.1: ok", "198.51.100.1: ok", "198.51.100.1: client full", "127.0.0.1: ok", "198.51.100.2: replica full", "198.51.100.2: ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// Through the router: the answers of a refusal.
	store := &countingStore{ps: []sale.Product{testProduct}}
	srv, _ := streamServer(t, store, Config{Streams: StreamConfig{Max: 1}}, nil)
	first, _ := openStream(t, srv.URL+"/api/v1/events", nil)
	first.next(2 * time.Second)
	res, err := http.Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 || res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != jsonContentType[0] {
		t.Errorf("a second stream on a replica of one: %d %v", res.StatusCode, res.Header)
	}
}

// TestStreamHeartbeatAndClosing: a silent stream gets a comment each heartbeat; when the process
// begins to shut down, every stream ends.
func TestStreamHeartbeatAndClosing(t *testing.T) {
	closing := make(chan struct{})
	store := &countingStore{ps: []sale.Product{testProduct}}
	srv, _ := streamServer(t, store, Config{Streams: StreamConfig{Heartbeat: 200 * time.Millisecond}}, closing)
	s, _ := openStream(t, srv.URL+"/api/v1/events", nil)
	s.next(2 * time.Second)
	s.next(2 * time.Second)
	if f := s.next(2 * time.Second); f.Comment != "ping" {
		t.Errorf("a silent stream: %+v, want a ping", f)
	}
	close(closing)
	ended := make(chan bool)
	go func() {
		for s.sc.Scan() {
		}
		ended <- true
	}()
	select {
	case <-ended:
	case <-time.After(3 * time.Second):
		t.Error("the stream did not end when shutdown began")
	}
}

// TestUntilSlot: a stream's slots fall every period from its first one, before it as after.
func TestUntilSlot(t *testing.T) {
	slot0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	const period = 800 * time.Millisecond
	for _, tc := range []struct {
		after time.Duration // now − slot0
		want  time.Duration
	}{
		{0, 0},
		{time.Millisecond, period - time.Millisecond},
		{period - time.Millisecond, time.Millisecond},
		{period, 0},
		{5*period + 300*time.Millisecond, 500 * time.Millisecond},
		{-300 * time.Millisecond, 300 * time.Millisecond},
		{-period, 0},
		{-2*period - time.Millisecond, time.Millisecond},
	} {
		if got := untilSlot(slot0, slot0.Add(tc.after), period); got != tc.want {
			t.Errorf("%v after the first slot: %v to the next, want %v", tc.after, got, tc.want)
		}
	}
}
