package viewers

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sale is a fake read side of one product (id 7): its stock, which the test moves, served as
// the contract says — the product and its stats with an ETag, 304 to a matching If-None-Match,
// and the event stream, which a test can cut.
type sale struct {
	mu      sync.Mutex
	stock   int
	seq     int
	changed chan struct{} // closed and replaced at each change

	lastIDs   []string // Last-Event-ID of each stream request
	addrs     map[string]bool
	streams   atomic.Int64
	cut       chan struct{} // closed to end every open stream
	notModify atomic.Int64
}

func newSale(stock int) *sale {
	return &sale{stock: stock, changed: make(chan struct{}), cut: make(chan struct{}), addrs: map[string]bool{}}
}

func (s *sale) set(stock int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stock, s.seq = stock, s.seq+1
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *sale) state() (int, int, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stock, s.seq, s.changed
}

func (s *sale) productJSON(stock int) string {
	state := "on_sale"
	if stock == 0 {
		state = "sold_out"
	}
	return fmt.Sprintf(`{"id":7,"name":"t","stock":%d,"initial_stock":10,"state":%q}`, stock, state)
}

func (s *sale) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.addrs[host] = true
	s.mu.Unlock()
	stock, seq, changed := s.state()
	switch r.URL.Path {
	case "/api/v1/products/7", "/api/v1/products/7/stats", "/api/v1/products":
		etag := fmt.Sprintf(`"%s-%d"`, r.URL.Path, seq)
		if r.Header.Get("If-None-Match") == etag {
			s.notModify.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		switch r.URL.Path {
		case "/api/v1/products/7":
			fmt.Fprint(w, s.productJSON(stock))
		case "/api/v1/products/7/stats":
			fmt.Fprintf(w, `{"initial_stock":10,"stock":%d,"sold_units":%d}`, stock, 10-stock)
		default:
			fmt.Fprint(w, `{"products":[]}`) // the load test's product is unlisted
		}
	case "/api/v1/events":
		if r.URL.Query().Get("product_id") != "7" {
			http.Error(w, "want product_id=7", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.lastIDs = append(s.lastIDs, r.Header.Get("Last-Event-ID"))
		cut := s.cut
		s.mu.Unlock()
		s.streams.Add(1)
		defer s.streams.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		fmt.Fprintf(w, "retry: 50\n\nid: b.%d\nevent: snapshot\ndata: {\"items\":[{\"product\":%s}]}\n\n", seq, s.productJSON(stock))
		fl.Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case <-cut:
				return
			case <-changed:
			}
			stock, seq, changed = s.state()
			typ := "stock"
			if stock == 0 {
				typ = "sold_out"
			}
			fmt.Fprintf(w, ": ping\n\nid: b.%d\nevent: %s\ndata: {\"product\":%s,\n", seq, typ, s.productJSON(stock))
			fmt.Fprintf(w, "data: \"stats\":{\"stock\":%d}}\n\n", stock)
			fl.Flush()
		}
	default:
		http.NotFound(w, r)
	}
}

func (s *sale) cutStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.cut)
	s.cut = make(chan struct{})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPollingCrowd: polling viewers, each from its own address, read the product, its stats and
// the list, revalidate with the ETags (304s), and all read the sale sold out.
func TestPollingCrowd(t *testing.T) {
	s := newSale(10)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := Start(t.Context(), Config{Mode: Poll, Count: 20, Targets: []string{srv.URL}, ProductID: 7,
		PollEvery: 40 * time.Millisecond, ListEvery: 100 * time.Millisecond, OwnAddresses: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	waitFor(t, "every viewer answered", func() bool { return c.Connected() == 20 })
	time.Sleep(100 * time.Millisecond) // a few 304s
	from := time.Now()
	var sold []time.Time
	for stock := 9; stock >= 0; stock-- {
		s.set(stock)
		sold = append(sold, time.Now())
		time.Sleep(15 * time.Millisecond)
	}
	if !c.WaitSoldOut(t.Context(), 5*time.Second) {
		t.Fatalf("%d of 20 viewers read the sold out", c.SoldOutSeen())
	}
	to := time.Now()
	r := c.Stop()
	sum := Summarize(r, from, to, 20, 10, sold, sold)
	if sum.Status[200] == 0 || sum.Status[304] == 0 || sum.NotModifiedShare == 0 || sum.FiveXX() != 0 || sum.NoAnswer() != 0 {
		t.Errorf("status %v, 304 share %.2f: want 200s and 304s, no 5xx, none unanswered", sum.Status, sum.NotModifiedShare)
	}
	for _, k := range []string{KindProduct, KindList} {
		if sum.ByKind[k] == 0 {
			t.Errorf("no %s read: %v", k, sum.ByKind)
		}
	}
	if sum.SoldOutSeen != 20 || sum.Lag.Missed != 0 || sum.Lag.Samples != 200 || sum.ReadsPerSec <= 0 {
		t.Errorf("sold out seen %d, lag %+v, reads/s %.0f: want 20, 200 samples none missed, some reads", sum.SoldOutSeen, sum.Lag, sum.ReadsPerSec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.addrs) != 20 {
		t.Errorf("the server saw %d client addresses, want 20 (one per viewer)", len(s.addrs))
	}
}

// TestStreamingCrowd: stream viewers hold the stream, read multi-line events, come back with
// Last-Event-ID after the server cuts them, and all read the sold out.
func TestStreamingCrowd(t *testing.T) {
	forEachReader(t, testStreamingCrowd)
}

// forEachReader runs a stream test with the reactors and with a goroutine per stream.
func forEachReader(t *testing.T, test func(t *testing.T, goroutines bool)) {
	for _, goroutines := range []bool{false, true} {
		t.Run(map[bool]string{false: "reactors", true: "goroutines"}[goroutines], func(t *testing.T) { test(t, goroutines) })
	}
}

func testStreamingCrowd(t *testing.T, goroutines bool) {
	s := newSale(10)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := Start(t.Context(), Config{Mode: Stream, Count: 30, Targets: []string{srv.URL}, ProductID: 7, Goroutines: goroutines})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	if n := c.WaitConnected(t.Context(), 5*time.Second); n != 30 {
		t.Fatalf("%d of 30 streams connected", n)
	}
	from := time.Now()
	var sold []time.Time
	for stock := 9; stock >= 5; stock-- {
		s.set(stock)
		sold = append(sold, time.Now())
	}
	waitFor(t, "every viewer read stock 5", func() bool { return c.EveryoneReadAtMost(5) })
	s.cutStreams()
	waitFor(t, "30 streams back", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.lastIDs) == 60 && s.streams.Load() == 30 && c.Connected() == 30
	})
	for stock := 4; stock >= 0; stock-- {
		s.set(stock)
		sold = append(sold, time.Now())
	}
	if !c.WaitSoldOut(t.Context(), 5*time.Second) {
		t.Fatalf("%d of 30 viewers read the sold out", c.SoldOutSeen())
	}
	to := time.Now()
	r := c.Stop()
	sum := Summarize(r, from, to, 30, 10, sold, sold)
	if sum.Drops != 30 || sum.Status[200] != 60 || sum.ByKind[KindStream] != 60 {
		t.Errorf("drops %d, status %v, by kind %v: want 30 drops and 60 connections answered 200", sum.Drops, sum.Status, sum.ByKind)
	}
	if sum.Events["snapshot"] != 60 || sum.Events["sold_out"] != 30 || sum.Comments == 0 {
		t.Errorf("events %v, comments %d: want 60 snapshots, 30 sold_out, the pings counted", sum.Events, sum.Comments)
	}
	if sum.SoldOutSeen != 30 || sum.Lag.Missed != 0 || sum.Lag.Samples != 300 || sum.EventsPerSec <= 0 {
		t.Errorf("sold out seen %d, lag %+v, events/s %.0f", sum.SoldOutSeen, sum.Lag, sum.EventsPerSec)
	}
	resumed := 0
	for _, id := range s.lastIDs {
		if id == "b.5" {
			resumed++
		} else if id != "" {
			t.Errorf("a reconnection sent Last-Event-ID %q, want b.5", id)
		}
	}
	if resumed != 30 {
		t.Errorf("%d reconnections sent Last-Event-ID b.5, want 30 (%q)", resumed, s.lastIDs)
	}
}

// TestStreamFailsOver: a viewer whose replica cannot be reached tries the next target; one
// answered 503 with Retry-After waits it out.
func TestStreamFailsOver(t *testing.T) {
	forEachReader(t, testStreamFailsOver)
}

func testStreamFailsOver(t *testing.T, goroutines bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var busy atomic.Int64
	full := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busy.Add(1)
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"unavailable","message":"too many streams"}}`)
	}))
	defer full.Close()
	s := newSale(3)
	srv := httptest.NewServer(s)
	defer srv.Close()
	c, err := Start(t.Context(), Config{Mode: Stream, Count: 3, Targets: []string{dead, full.URL, srv.URL}, ProductID: 7, Goroutines: goroutines})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	// Viewer 0 starts on the dead target, 1 on the full one, 2 on the live one.
	if n := c.WaitConnected(t.Context(), 10*time.Second); n != 3 {
		t.Fatalf("%d of 3 connected", n)
	}
	s.set(0)
	if !c.WaitSoldOut(t.Context(), 5*time.Second) {
		t.Fatal("not every viewer read the sold out")
	}
	sum := Summarize(c.Stop(), time.Now(), time.Now(), 3, 3, nil, nil)
	if sum.NoAnswer() == 0 || sum.Status[503] == 0 || busy.Load() == 0 {
		t.Errorf("status %v: want the dead target unanswered and the full one's 503", sum.Status)
	}
	if sum.FiveXX() != sum.Status[503] {
		t.Errorf("status %v", sum.Status)
	}
}

func TestConfigRefusals(t *testing.T) {
	for _, cfg := range []Config{
		{Mode: "watch", Count: 1, Targets: []string{"http://127.0.0.1:1"}, ProductID: 1},
		{Mode: Poll, Count: 1, ProductID: 1},
		{Mode: Poll, Count: 1, Targets: []string{"http://127.0.0.1:1"}},
		{Mode: Poll, Count: 1, Targets: []string{"https://127.0.0.1:1/x"}, ProductID: 1},
		{Mode: Poll, Count: -1, Targets: []string{"http://127.0.0.1:1"}, ProductID: 1},
	} {
		if c, err := Start(context.Background(), cfg); err == nil {
			c.Stop()
			t.Errorf("%+v: started", cfg)
		}
	}
	if _, err := ParseMode("poll"); err != nil {
		t.Error(err)
	}
	if _, err := ParseMode(strings.ToUpper("stream")); err == nil {
		t.Error("STREAM: parsed")
	}
}

// TestStreamInPieces: an answer that arrives a few bytes at a time — its head, the chunk sizes,
// the CRLFs, the events all cut — is read as if it had come whole.
func TestStreamInPieces(t *testing.T) {
	forEachReader(t, func(t *testing.T, goroutines bool) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		body := "retry: 60000\n\nid: b.1\nevent: snapshot\ndata: {\"items\":[{\"product\":{\"id\":7,\"stock\":2,\"state\":\"on_sale\"}}]}\n\n" +
			"id: b.2\nevent: sold_out\ndata: {\"product\":{\"id\":7,\"admission\":{\"mode\":\"open\"},\"stock\":0,\"state\":\"sold_out\"}}\n\n"
		var chunked strings.Builder
		for rest := body; rest != ""; {
			n := min(len(rest), 37)
			fmt.Fprintf(&chunked, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		answer := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked.String()
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			buf := make([]byte, 4096)
			if _, err := conn.Read(buf); err != nil {
				return
			}
			for i := 0; i < len(answer); i += 3 {
				if _, err := conn.Write([]byte(answer[i:min(i+3, len(answer))])); err != nil {
					return
				}
				time.Sleep(200 * time.Microsecond)
			}
			time.Sleep(time.Minute) // the stream stays open
		}()
		c, err := Start(t.Context(), Config{Mode: Stream, Count: 1, Targets: []string{"http://" + ln.Addr().String()}, ProductID: 7, Goroutines: goroutines})
		if err != nil {
			t.Fatal(err)
		}
		if !c.WaitSoldOut(t.Context(), 10*time.Second) {
			t.Fatalf("the viewer never read the sold out: %+v", c.Stop())
		}
		r := c.Stop()
		if r.Events["snapshot"] != 1 || r.Events["sold_out"] != 1 || len(r.Failures) > 0 {
			t.Errorf("events %v, failures %q: want one snapshot and one sold_out", r.Events, r.Failures)
		}
	})
}

func TestOnGrid(t *testing.T) {
	base := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ now, d, want time.Duration }{
		{0, time.Second, time.Second},                                      // already on the grid
		{time.Millisecond, time.Second, time.Second + 4*time.Millisecond},  // to the next 5 ms
		{4 * time.Millisecond, 0, time.Millisecond},                        // now itself lengthened
		{2 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}, // lands on 5 ms
	} {
		if got := onGrid(base.Add(tc.now), tc.d); got != tc.want {
			t.Errorf("onGrid(+%s, %s) = %s, want %s", tc.now, tc.d, got, tc.want)
		}
		if end := base.Add(tc.now + onGrid(base.Add(tc.now), tc.d)); end.UnixNano()%int64(pollGrid) != 0 {
			t.Errorf("onGrid(+%s, %s) ends at %s, off the grid", tc.now, tc.d, end)
		}
	}
}
