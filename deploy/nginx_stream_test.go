package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sseEvent is one Server-Sent Event as a client reads it: its fields in order, comments left out.
type sseEvent []string

// readEvents reads the events of an event stream from r into the returned channel, closed with
// the stream.
func readEvents(r io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 16)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		var ev sseEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
				// A block without data (the stream's first, "retry:") dispatches no event.
				if slices.ContainsFunc(ev, func(f string) bool { return strings.HasPrefix(f, "data:") }) {
					out <- ev
				}
				ev = nil
			case strings.HasPrefix(line, ":"):
			default:
				ev = append(ev, line)
			}
		}
	}()
	return out
}

// nextEvent waits for the next event of events, failing the test after timeout or at the end.
func nextEvent(tb testing.TB, events <-chan sseEvent, timeout time.Duration) sseEvent {
	tb.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			tb.Fatal("the stream ended")
		}
		return ev
	case <-time.After(timeout):
		tb.Fatalf("no event in %v: held back by nginx?", timeout)
	}
	return nil
}

// streamStandIn is a replica's event stream for one viewer: it writes and flushes an event,
// waits for next, writes another, and keeps the response open until release (or the viewer
// leaves).
type streamStandIn struct {
	next, release, done chan struct{}

	mu          sync.Mutex
	query       string
	lastEventID string
	streams     int
}

func (s *streamStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/events" {
		w.Header().Set("Cache-Control", privatePolicy)
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.query, s.lastEventID = r.URL.RawQuery, r.Header.Get("Last-Event-ID")
	s.streams++
	s.mu.Unlock()
	defer close(s.done)

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", privatePolicy)
	fmt.Fprintf(w, "retry: 2000\n\nid: b.1\nevent: snapshot\ndata: {\"query\":%q}\n\n", r.URL.RawQuery)
	if err := rc.Flush(); err != nil {
		return
	}
	select {
	case <-s.next:
	case <-r.Context().Done():
		return
	}
	io.WriteString(w, ": ping\n\nid: b.2\nevent: stock\ndata: {\"stock\":9}\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	select {
	case <-s.release:
	case <-r.Context().Done():
	}
}

// TestNginxEventStream: through either server, an event the replica flushes reaches the viewer
// while the replica keeps the response open (nginx buffers nothing, and does not compress), the
// query string and Last-Event-ID reach the replica, and the stream ends when the replica ends it.
func TestNginxEventStream(t *testing.T) {
	for _, server := range []string{"public", "ops"} {
		t.Run(server, func(t *testing.T) {
			replica := &streamStandIn{next: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
			srv := httptest.NewServer(replica)
			t.Cleanup(srv.Close)
			ng := startNginx(t, "", srv.URL)
			addr := ng.public
			if server == "ops" {
				addr = ng.ops
			}

			req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/events?product_id=7", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Accept-Encoding", "gzip") // set by hand: Go then leaves the body as sent
			req.Header.Set("Last-Event-ID", "b.0")
			res, err := (&http.Client{}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			header := map[string]string{}
			for _, h := range []string{"Content-Type", "Cache-Control", "Content-Encoding", "X-Cache-Status"} {
				header[h] = res.Header.Get(h)
			}
			wantHeader := map[string]string{"Content-Type": "text/event-stream", "Cache-Control": privatePolicy, "Content-Encoding": "", "X-Cache-Status": ""}
			if res.StatusCode != http.StatusOK || !cmp.Equal(wantHeader, header) {
				t.Fatalf("status %d, headers (-want +got):\n%s", res.StatusCode, cmp.Diff(wantHeader, header))
			}
			events := readEvents(res.Body)

			got := nextEvent(t, events, 5*time.Second)
			if diff := cmp.Diff(sseEvent{"id: b.1", "event: snapshot", `data: {"query":"product_id=7"}`}, got); diff != "" {
				t.Errorf("the first event (-want +got):\n%s", diff)
			}
			close(replica.next)
			got = nextEvent(t, events, 5*time.Second)
			if diff := cmp.Diff(sseEvent{"id: b.2", "event: stock", `data: {"stock":9}`}, got); diff != "" {
				t.Errorf("the second event (-want +got):\n%s", diff)
			}
			select {
			case <-replica.done:
				t.Fatal("the replica's response ended before the viewer read its events: nothing proves streaming")
			default:
			}

			close(replica.release)
			select {
			case ev, ok := <-events:
				if ok {
					t.Errorf("after the replica ended the stream: %q", ev)
				}
			case <-time.After(5 * time.Second):
				t.Error("the replica ended the stream, the viewer's stayed open")
			}
			replica.mu.Lock()
			defer replica.mu.Unlock()
			if replica.query != "product_id=7" || replica.lastEventID != "b.0" || replica.streams != 1 {
				t.Errorf("the replica saw %d stream(s), query %q, Last-Event-ID %q; want 1, product_id=7, b.0", replica.streams, replica.query, replica.lastEventID)
			}
		})
	}
}

// TestNginxEventStreamBackPressure: nginx reads no stream ahead for a viewer that does not read.
// The replica's writes stall once the sockets' buffers are full, so that the replica sees its
// slow viewer; with proxy_buffering on, nginx would take the stream into its buffers and then a
// temp file (up to proxy_max_temp_file_size, 1 GB, per stream) while the replica writes on.
func TestNginxEventStreamBackPressure(t *testing.T) {
	const (
		want  = 64 << 20 // what the replica tries to write: far beyond the sockets' buffers
		piece = 64 << 10
	)
	wrote := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", privatePolicy)
		data := "data: " + strings.Repeat("x", piece-len("data: \n\n")) + "\n\n"
		n := 0
		for n < want {
			// A write that waits a second is a write the viewer holds back.
			if err := rc.SetWriteDeadline(time.Now().Add(time.Second)); err != nil {
				break
			}
			m, err := io.WriteString(w, data)
			n += m
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				break
			}
		}
		wrote <- n
	}))
	t.Cleanup(srv.Close)
	ng := startNginx(t, "", srv.URL)

	res, err := http.Get("http://" + ng.public + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close() // never read
	select {
	case n := <-wrote:
		t.Logf("the replica wrote %d MB of %d MB to a viewer that does not read", n>>20, want>>20)
		if n >= want {
			t.Errorf("the replica wrote all %d MB to a viewer that reads nothing: nginx buffered the stream", want>>20)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the replica neither finished nor stalled in 30 s")
	}
}

// TestNginxHoldsManyStreams: nginx holds viewerStreams event streams at once, each a viewer's
// connection and one to the replica, and all of them still carry events. The replica and the
// viewers are plain sockets served from one goroutine each (net/http would need two goroutines
// per connection, beyond what the race detector allows).
func TestNginxHoldsManyStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 10,000 sockets in this process (-short)")
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur < 2*viewerStreams+512 {
		t.Skipf("open-file limit %d: the test holds %d sockets", rl.Cur, 2*viewerStreams)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The replica: for each connection nginx opens, read the request, answer with a chunked
	// event stream and its first event, keep the connection.
	upstreams := make(chan net.Conn, viewerStreams)
	replicaErr := make(chan error, 1)
	go func() {
		defer close(upstreams)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					replicaErr <- fmt.Errorf("read a request: %w", err)
					c.Close()
					return
				}
				if line == "\r\n" {
					break
				}
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nTransfer-Encoding: chunked\r\n\r\n%s", chunk("data: first\n\n"))
			select {
			case upstreams <- c:
			default:
				replicaErr <- errors.New("more streams than viewers")
				c.Close()
				return
			}
		}
	}()
	ng := startNginx(t, "", ln.Addr().String())
	t.Cleanup(func() { ln.Close() })

	viewers := make([]net.Conn, 0, viewerStreams)
	t.Cleanup(func() {
		for _, c := range viewers {
			c.Close()
		}
	})
	began := time.Now()
	for i := range viewerStreams {
		c, err := net.Dial("tcp", ng.public)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		viewers = append(viewers, c)
		fmt.Fprintf(c, "GET /api/v1/events?product_id=%d HTTP/1.1\r\nHost: seckill\r\nAccept: text/event-stream\r\n\r\n", i)
		if err := readUntil(c, "data: first\n"); err != nil {
			select {
			case rerr := <-replicaErr:
				err = fmt.Errorf("%w (the replica: %v)", err, rerr)
			default:
			}
			t.Fatalf("stream %d of %d: %v\n%s", i+1, viewerStreams, err, tail(ng.logs.String(), 2000))
		}
	}
	opened := time.Since(began)

	// Every stream is still open at both ends: a second event on each reaches its viewer.
	var replicaSide []net.Conn
	for range viewerStreams {
		c, ok := <-upstreams
		if !ok {
			t.Fatalf("the replica stopped after %d streams: %v", len(replicaSide), <-replicaErr)
		}
		replicaSide = append(replicaSide, c)
	}
	t.Cleanup(func() {
		for _, c := range replicaSide {
			c.Close()
		}
	})
	for _, c := range replicaSide {
		if _, err := io.WriteString(c, chunk("data: again\n\n")); err != nil {
			t.Fatalf("the replica's side of a stream: %v", err)
		}
	}
	for i, c := range viewers {
		if err := readUntil(c, "data: again\n"); err != nil {
			t.Fatalf("stream %d: the second event: %v", i, err)
		}
	}
	t.Logf("%d streams opened in %v, all carried a second event after %v", viewerStreams, opened, time.Since(began))
}

// chunk is s as one chunk of a chunked HTTP body.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// readUntil reads from c until it has seen want, for up to 10 s.
func readUntil(c net.Conn, want string) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var seen []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(seen, []byte(want)) {
		n, err := c.Read(buf)
		seen = append(seen, buf[:n]...)
		if err != nil {
			return fmt.Errorf("%w after %q", err, seen)
		}
	}
	return nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
