package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// appReplica is the app's own router in front of nothing: httpapi.New with OpsOnly, which has
// the middleware of every replica (request id, security headers, body limit) and the same answer
// to a path it does not know, without a database behind it. It records the paths it is asked.
type appReplica struct {
	url string

	mu   sync.Mutex
	seen []string
}

type nopHTTPMetrics struct{}

func (nopHTTPMetrics) ObserveHTTP(string, string, int, time.Duration) {}

func startAppReplica(tb testing.TB) *appReplica {
	tb.Helper()
	h, err := httpapi.New(httpapi.Deps{Log: slog.New(slog.DiscardHandler), HTTPMetrics: nopHTTPMetrics{}},
		httpapi.Config{OpsOnly: true, Metrics: http.NotFoundHandler()})
	if err != nil {
		tb.Fatal(err)
	}
	a := &appReplica{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.seen = append(a.seen, r.Method+" "+r.URL.Path)
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	a.url = srv.URL
	return a
}

// asked returns the requests the app got since the last call.
func (a *appReplica) asked() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.seen
	a.seen = nil
	return out
}

// everyAnswerHeader returns the headers the app puts on every answer, its 404 to an unknown
// path asked directly: all but those whose value changes from answer to answer (Date, the
// length, the request id). nginx's own answers must carry each, with the same values.
func (a *appReplica) everyAnswerHeader(tb testing.TB) http.Header {
	tb.Helper()
	res, err := http.Get(a.url + "/no-such-path")
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode != http.StatusNotFound {
		tb.Fatalf("the app answered an unknown path %d", res.StatusCode)
	}
	h := res.Header.Clone()
	for _, k := range []string{"Date", "Content-Length", "X-Request-Id"} {
		h.Del(k)
	}
	for _, k := range []string{"Content-Type", "Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control"} {
		if h.Get(k) == "" {
			tb.Fatalf("the app's 404 has no %s: %v", k, res.Header)
		}
	}
	a.asked()
	return h
}

// wireAnswer is an answer as it came over the connection: the header lines in nginx's order
// and spelling, besides the parsed header.
type wireAnswer struct {
	status int
	lines  []string // "Name: value", as sent
	header http.Header
	body   string
}

// exchange writes req, raw bytes, to addr on a new connection and reads one answer; the body
// is not read after a HEAD. Raw, because a Go client would not send the malformed requests.
func exchange(tb testing.TB, addr, req string) wireAnswer {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	// A refused request may be answered before all of it is written: the answer is what counts.
	_, werr := io.WriteString(c, req)
	r := bufio.NewReader(c)
	status, err := r.ReadString('\n')
	if err != nil {
		tb.Fatalf("%.60q: no answer (write: %v): %v", req, werr, err)
	}
	f := strings.Fields(status)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/1.") {
		tb.Fatalf("%.60q: status line %q", req, status)
	}
	a := wireAnswer{header: http.Header{}}
	a.status, _ = strconv.Atoi(f[1])
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			tb.Fatalf("%.60q: header: %v", req, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		a.lines = append(a.lines, line)
		k, v, _ := strings.Cut(line, ":")
		a.header.Add(k, strings.TrimSpace(v))
	}
	if strings.HasPrefix(req, "HEAD ") {
		return a
	}
	var body io.Reader = r
	switch {
	case a.header.Get("Transfer-Encoding") == "chunked":
		body = httputil.NewChunkedReader(r)
	case a.header.Get("Content-Length") != "":
		n, _ := strconv.Atoi(a.header.Get("Content-Length"))
		body = io.LimitReader(r, int64(n))
	}
	b, err := io.ReadAll(body)
	if err != nil {
		tb.Fatalf("%.60q: body: %v", req, err)
	}
	a.body = string(b)
	return a
}

// saneID is the app's rule for a request id it keeps (saneRequestID).
var saneID = regexp.MustCompile(`^[!-~]{1,64}$`)

// checkAPIError checks that a is the API's JSON error with status and code, and the headers
// of every answer of the app (want) besides a request id.
func checkAPIError(t *testing.T, what string, a wireAnswer, status int, code string, want http.Header) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: status %d, want %d\n%s", what, a.status, status, a.body)
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	dec := json.NewDecoder(strings.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() {
		t.Errorf("%s: body %q is not the API's JSON error: %v", what, a.body, err)
	} else if e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: error %+v, want code %q and a message", what, e.Error, code)
	}
	for k, v := range want {
		if got := a.header.Values(k); !slices.Equal(got, v) {
			t.Errorf("%s: %s %q, want the app's %q", what, k, got, v)
		}
	}
	if id := a.header.Values("X-Request-Id"); len(id) != 1 || !saneID.MatchString(id[0]) {
		t.Errorf("%s: X-Request-Id %q, want one the app would keep", what, id)
	}
}

// TestNginxOwnErrors: what nginx refuses itself, before any replica sees it (a request it cannot
// read, a head or URI over its buffers, a body over the API's limit, a method or encoding it does
// not take), is answered as the API answers a refusal: its JSON error with a code of the error
// table, and the headers the app sets on every answer; on both servers.
func TestNginxOwnErrors(t *testing.T) {
	app := startAppReplica(t)
	want := app.everyAnswerHeader(t)
	ng := startNginx(t, "", app.url)

	const purchase = "POST /api/v1/products/1/purchase HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\n"
	long := strings.Repeat("a", 9000) // over one of nginx's large header buffers (8k)
	var sevenK strings.Builder        // lines that fit a buffer each, more of them than buffers (4)
	for i := range 6 {
		fmt.Fprintf(&sevenK, "X-Filler-%d: %s\r\n", i, strings.Repeat("b", 7000))
	}
	big := purchase + "Content-Length: 16385\r\n\r\n" + strings.Repeat("x", 16385)
	cases := []struct {
		name, req string
		status    int
		code      string
		// sameAs, when set, is a request the app refuses itself with the same status: nginx's
		// answer must be the app's, word for word.
		sameAs string
	}{
		{"a request line that is not HTTP", "BAD\x01LINE\r\n\r\n", 400, "invalid_request", ""},
		{"HTTP/1.1 without Host", "GET /api/v1/products HTTP/1.1\r\n\r\n", 400, "invalid_request", ""},
		{"a header over 8k", "GET /api/v1/products HTTP/1.1\r\nHost: shop\r\nX-Big: " + long + "\r\n\r\n", 431, "header_too_large", ""},
		{"a cookie over 8k", "GET /api/v1/orders/x HTTP/1.1\r\nHost: shop\r\nCookie: c=" + long + "\r\n\r\n", 431, "header_too_large", ""},
		{"headers over 32k together", "GET /api/v1/orders/x HTTP/1.1\r\nHost: shop\r\n" + sevenK.String() + "\r\n", 431, "header_too_large", ""},
		{"a URI over 8k", "GET /api/v1/products?q=" + long + " HTTP/1.1\r\nHost: shop\r\n\r\n", 414, "invalid_request", ""},
		{"a body over 16 KiB, announced", big, 413, "payload_too_large", big},
		{"a body over 16 KiB, chunked", purchase + "Transfer-Encoding: chunked\r\n\r\n" + chunk(strings.Repeat("x", 17000)) + "0\r\n\r\n", 413, "payload_too_large", big},
		{"TRACE", "TRACE /api/v1/products HTTP/1.1\r\nHost: shop\r\n\r\n", 405, "method_not_allowed", "POST /healthz HTTP/1.1\r\nHost: shop\r\nContent-Length: 0\r\n\r\n"},
		{"an unknown Transfer-Encoding", purchase + "Transfer-Encoding: gzip\r\n\r\n", 501, "invalid_request", ""},
		{"HTTP/2.0 in the request line", "GET /api/v1/products HTTP/2.0\r\nHost: shop\r\n\r\n", 505, "invalid_request", ""},
	}
	for _, server := range []struct{ name, addr string }{{"public", ng.public}, {"operations", ng.ops}} {
		for _, tc := range cases {
			a := exchange(t, server.addr, tc.req)
			checkAPIError(t, server.name+" server, "+tc.name, a, tc.status, tc.code, want)
			if saw := app.asked(); len(saw) > 0 {
				t.Errorf("%s server, %s: the replica was asked %q; nginx should refuse it itself", server.name, tc.name, saw)
			}
			if tc.sameAs == "" {
				continue
			}
			own := exchange(t, strings.TrimPrefix(app.url, "http://"), tc.sameAs)
			app.asked()
			if own.status != a.status || own.body != a.body {
				t.Errorf("%s server, %s: %d %q; the app answers %d %q", server.name, tc.name, a.status, a.body, own.status, own.body)
			}
		}
	}

	// The error location, asked for by a client, is a path that does not exist.
	a := exchange(t, ng.public, "GET /.seckill-error HTTP/1.1\r\nHost: shop\r\n\r\n")
	checkAPIError(t, "GET /.seckill-error", a, 404, "not_found", want)
}

// TestNginxNoReplicaAnswers: when no replica answers (none listens, one drops the connection,
// one is too slow), nginx's 502 or 504 is the API's JSON error "unavailable" with the app's
// headers; a replica's own error passes as the replica sent it.
func TestNginxNoReplicaAnswers(t *testing.T) {
	want := startAppReplica(t).everyAnswerHeader(t)
	reqs := []string{
		"GET /api/v1/orders/x HTTP/1.1\r\nHost: shop\r\n\r\n",
		"GET /api/v1/products HTTP/1.1\r\nHost: shop\r\n\r\n", // the micro-cache's, empty
		"GET /api/v1/events HTTP/1.1\r\nHost: shop\r\n\r\n",   // the stream's
		"POST /api/v1/products/1/purchase HTTP/1.1\r\nHost: shop\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
	}
	askAll := func(t *testing.T, ng *nginxServer, status int) {
		t.Helper()
		for _, addr := range []string{ng.public, ng.ops} {
			for _, req := range reqs {
				what := addr + " " + req[:strings.Index(req, " HTTP/")]
				checkAPIError(t, what, exchange(t, addr, req), status, "unavailable", want)
			}
		}
	}

	t.Run("down", func(t *testing.T) {
		// Nothing listens on a port just freed.
		ng := startNginx(t, "", "127.0.0.1:"+strconv.Itoa(itest.FreePort(t)))
		askAll(t, ng, http.StatusBadGateway)
	})

	t.Run("drops the connection", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				// Reads the request, as a replica that dies while it works on it.
				_, _ = bufio.NewReader(c).ReadString('\n')
				c.Close()
			}
		}()
		ng := startNginx(t, "", ln.Addr().String())
		askAll(t, ng, http.StatusBadGateway)
	})

	t.Run("too slow", func(t *testing.T) {
		stall := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-stall:
			}
		}))
		t.Cleanup(slow.Close)
		t.Cleanup(func() { close(stall) })
		// The template's read timeout is nginx's default minute: a second here.
		tmpl := editedTemplate(t, "    proxy_connect_timeout 2s;\n", "    proxy_connect_timeout 2s;\n    proxy_read_timeout 1s;\n")
		ng := startNginx(t, tmpl, slow.URL)
		for _, addr := range []string{ng.public, ng.ops} {
			a := exchange(t, addr, "GET /api/v1/orders/x HTTP/1.1\r\nHost: shop\r\n\r\n")
			checkAPIError(t, addr+" GET /api/v1/orders/x", a, http.StatusGatewayTimeout, "unavailable", want)
		}
	})

	t.Run("a replica's own error", func(t *testing.T) {
		const body = `{"error":{"code":"unavailable","message":"the replica's own words"}}`
		own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Replica", "yes")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, body)
		}))
		t.Cleanup(own.Close)
		ng := startNginx(t, "", own.URL)
		for _, addr := range []string{ng.public, ng.ops} {
			a := exchange(t, addr, "GET /api/v1/orders/x HTTP/1.1\r\nHost: shop\r\n\r\n")
			if a.status != http.StatusServiceUnavailable || a.body != body || a.header.Get("X-Replica") != "yes" {
				t.Errorf("%s: %d %q %v; want the replica's 503 as it sent it", addr, a.status, a.body, a.header)
			}
		}
	})
}

// TestNginxBlockedPathLooksAbsent: on the public server, a path of the operations surface is
// answered exactly as the app answers a path it does not know: the same status, the same body,
// the same header lines in the same order and spelling (the date and a fresh request id aside),
// whatever the method, the request id sent or the body; so that a prober cannot tell that
// /metrics, /readyz or the admin API exist behind it.
func TestNginxBlockedPathLooksAbsent(t *testing.T) {
	app := startAppReplica(t)
	ng := startNginx(t, "", app.url)

	blocked := []string{"/metrics", "/readyz", "/api/v1/admin", "/api/v1/admin/products", "/api/v1/%61dmin/products/1/stampede"}
	absent := []string{"/metricz", "/readyz0", "/api/v1/adminx", "/api/v1/nope", "/nope"}
	ids := []struct{ name, header string }{
		{"no request id", ""},
		{"a request id the app keeps", "X-Request-ID: probe-1\r\n"},
		{"a request id too long", "X-Request-ID: " + strings.Repeat("r", 65) + "\r\n"},
		{"a request id with a space", "X-Request-ID: has space\r\n"},
		{"two request ids", "X-Request-ID: one\r\nX-Request-ID: two\r\n"},
	}
	requests := []struct{ name, method, rest string }{
		{"GET", "GET", "\r\n"},
		{"HEAD", "HEAD", "\r\n"},
		{"DELETE", "DELETE", "\r\n"},
		{"OPTIONS", "OPTIONS", "\r\n"},
		{"POST JSON", "POST", "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"},
		{"POST 16,000 bytes", "POST", "Content-Type: application/json\r\nContent-Length: 16000\r\n\r\n" + strings.Repeat("x", 16000)},
		{"POST over 16 KiB", "POST", "Content-Type: application/json\r\nContent-Length: 16385\r\n\r\n" + strings.Repeat("x", 16385)},
		{"PUT chunked", "PUT", "Transfer-Encoding: chunked\r\n\r\n" + chunk("{}") + "0\r\n\r\n"},
	}
	fresh := regexp.MustCompile(`^[0-9a-f]{32}$`) // nginx's $request_id, which the app keeps
	for _, id := range ids {
		for _, rq := range requests {
			ask := func(path string) wireAnswer {
				return exchange(t, ng.public, rq.method+" "+path+" HTTP/1.1\r\nHost: shop\r\n"+id.header+rq.rest)
			}
			// What varies from answer to answer is masked: the date, and the request id when
			// nginx made one.
			mask := func(a wireAnswer) []string {
				var out []string
				for _, l := range a.lines {
					k, v, _ := strings.Cut(l, ": ")
					switch {
					case k == "Date":
						v = "…"
					case strings.EqualFold(k, "X-Request-Id") && fresh.MatchString(v):
						v = "(fresh)"
					}
					out = append(out, k+": "+v)
				}
				return out
			}
			ref := ask(absent[0])
			for _, path := range append(absent[1:], blocked...) {
				what := fmt.Sprintf("%s %s, %s", rq.name, path, id.name)
				got := ask(path)
				if got.status != ref.status || got.body != ref.body {
					t.Errorf("%s: %d %q; %s answers %d %q", what, got.status, got.body, absent[0], ref.status, ref.body)
				}
				if diff := cmp.Diff(mask(ref), mask(got)); diff != "" {
					t.Errorf("%s: header lines differ from %s's (-absent +got):\n%s", what, absent[0], diff)
				}
			}
			if id.header == "X-Request-ID: probe-1\r\n" && ref.header.Get("X-Request-Id") != "probe-1" {
				t.Errorf("%s %s: X-Request-Id %q, want the one sent", rq.name, id.name, ref.header.Get("X-Request-Id"))
			}
		}
	}

	// The comparison is worth something only if the absent paths reached the app and the
	// blocked ones did not, and if what came back is the app's 404.
	saw := app.asked()
	for _, p := range blocked {
		path := strings.ReplaceAll(p, "%61", "a")
		if slices.ContainsFunc(saw, func(s string) bool { return strings.HasSuffix(s, " "+path) }) {
			t.Errorf("the blocked %s reached the app", p)
		}
	}
	if !slices.Contains(saw, "GET /nope") {
		t.Errorf("the app was not asked for GET /nope: %q", saw)
	}
	a := exchange(t, ng.public, "GET /metrics HTTP/1.1\r\nHost: shop\r\n\r\n")
	if !bytes.Equal([]byte(a.body), []byte(`{"error":{"code":"not_found","message":"no such endpoint"}}`)) || a.status != 404 {
		t.Errorf("GET /metrics: %d %q, want the app's 404", a.status, a.body)
	}
}

// checkNginxErrorPages checks a rendered configuration's own error answers: every status that
// error_page sends on has a body in the $status map, the API's JSON error, and every server has
// the location error_page names, internal, the same in each (a server without it would answer
// those errors with nginx's HTML 500).
func checkNginxErrorPages(t *testing.T, conf string) {
	t.Helper()
	root, err := parseNginxConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	httpBlock := root.one("http")
	bodies := map[string]string{}
	for _, m := range httpBlock.all("map") {
		if slices.Equal(m.args, []string{"$status", "$seckill_error_body"}) {
			for _, e := range m.children {
				bodies[e.name] = strings.Join(e.args, " ")
			}
		}
	}
	var uris []string
	for _, ep := range httpBlock.all("error_page") {
		if len(ep.args) < 2 {
			t.Errorf("error_page %q", ep.args)
			continue
		}
		uri, codes := ep.args[len(ep.args)-1], ep.args[:len(ep.args)-1]
		if !slices.Contains(uris, uri) {
			uris = append(uris, uri)
		}
		if sent, ok := strings.CutPrefix(codes[len(codes)-1], "="); ok {
			codes = []string{sent}
		}
		for _, code := range codes {
			var e struct {
				Error struct{ Code, Message string }
			}
			body, ok := bodies[code]
			if err := json.Unmarshal([]byte(body), &e); !ok || err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Errorf("error_page %s: the status map's body %q (%v) is not the API's JSON error", code, body, err)
			}
		}
	}
	if len(uris) != 1 {
		t.Errorf("error_page goes to %q, want one location", uris)
	}
	var first *ngxDirective
	for i, s := range httpBlock.all("server") {
		for _, uri := range uris {
			loc := nginxLocation(t, s, uri)
			if loc == nil || !slices.Equal(loc.args, []string{"=", uri}) || loc.one("internal") == nil {
				t.Errorf("server %d: no internal location = %s for error_page", i, uri)
				continue
			}
			if first == nil {
				first = loc
			} else if diff := cmp.Diff(first, loc, cmp.AllowUnexported(ngxDirective{})); diff != "" {
				t.Errorf("server %d: location = %s differs from the first server's (-first +this):\n%s", i, uri, diff)
			}
		}
	}
}
