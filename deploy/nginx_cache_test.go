package deploy

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The Cache-Control values of the app (docs/read-path.md, "Routes and headers").
const (
	publicReadPolicy = "public, max-age=1, s-maxage=1, stale-while-revalidate=1"
	strategiesPolicy = "public, max-age=60"
	privatePolicy    = "no-store"
	// carelessPolicy is what an app that forgot no-store on a private route might send.
	carelessPolicy = "public, max-age=60"
)

// publicRead matches the paths of the app's public reads, from the contract's table.
var publicRead = regexp.MustCompile(`^/api/v1/(products|products/\d+|products/\d+/stats|strategies)$`)

// replicaStandIn answers as a replica of the read side does, with the headers the app sends:
// GET and HEAD of a public read cacheable (for a second, the strategies for a minute) with a
// strong ETag and a 304 on a matching If-None-Match; everything else no-store, or, when careless,
// a public policy, as an app that forgot no-store would. It counts what it is asked.
type replicaStandIn struct {
	delay    time.Duration // before answering a public read: lets concurrent misses overlap
	careless bool

	mu          sync.Mutex
	asked       map[string]int  // "METHOD /path?query" -> requests
	ifNoneMatch map[string]bool // every If-None-Match it was sent
	notModified int             // public reads it answered 304
}

func newReplicaStandIn(tb testing.TB, delay time.Duration, careless bool) (*replicaStandIn, string) {
	tb.Helper()
	s := &replicaStandIn{delay: delay, careless: careless, asked: map[string]int{}, ifNoneMatch: map[string]bool{}}
	srv := httptest.NewServer(s)
	tb.Cleanup(srv.Close)
	return s, srv.URL
}

// publicBody is the stand-in's answer to a public read: the same for everyone.
func publicBody(uri string) string { return fmt.Sprintf(`{"read":%q}`, uri) }

// etagOf is the stand-in's ETag of a body.
func etagOf(body string) string {
	h := fnv.New64a()
	h.Write([]byte(body))
	return fmt.Sprintf(`"%x"`, h.Sum64())
}

// privateBody is the stand-in's answer to anything else: it names the request, its number and
// who asked, so that an answer given to someone else shows.
func privateBody(method, uri string, n int, auth string) string {
	return fmt.Sprintf("%s %s #%d for %q", method, uri, n, auth)
}

func (s *replicaStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.RequestURI()
	inm := r.Header.Get("If-None-Match")
	s.mu.Lock()
	s.asked[key]++
	n := s.asked[key]
	if inm != "" {
		s.ifNoneMatch[inm] = true
	}
	s.mu.Unlock()

	h := w.Header()
	if publicRead.MatchString(r.URL.Path) && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		time.Sleep(s.delay)
		body := publicBody(r.URL.RequestURI())
		h.Set("Cache-Control", publicReadPolicy)
		if r.URL.Path == "/api/v1/strategies" {
			h.Set("Cache-Control", strategiesPolicy)
		}
		h.Set("ETag", etagOf(body))
		h.Set("Content-Type", "application/json")
		if inm == etagOf(body) {
			s.mu.Lock()
			s.notModified++
			s.mu.Unlock()
			w.WriteHeader(http.StatusNotModified)
			return
		}
		io.WriteString(w, body)
		return
	}
	h.Set("Cache-Control", privatePolicy)
	if s.careless {
		h.Set("Cache-Control", carelessPolicy)
		h.Set("ETag", fmt.Sprintf(`"%d"`, n))
	}
	io.WriteString(w, privateBody(r.Method, r.URL.RequestURI(), n, r.Header.Get("Authorization")))
}

// total returns how many requests reached the stand-in.
func (s *replicaStandIn) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.asked {
		n += v
	}
	return n
}

func (s *replicaStandIn) askedFor(method, uri string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked[method+" "+uri]
}

func (s *replicaStandIn) sawIfNoneMatch(v string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ifNoneMatch[v]
}

func (s *replicaStandIn) notModifiedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notModified
}

func (s *replicaStandIn) snapshot() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.asked)
}

// answer is what a client got through nginx.
type answer struct {
	status      int
	cacheStatus string // X-Cache-Status, "" when absent
	etag        string
	body        string
}

// send makes one request to nginx at addr with header, and fails the test if it gets no answer.
func send(tb testing.TB, c *http.Client, method, addr, uri string, header map[string]string, body string) answer {
	tb.Helper()
	a, err := trySend(c, method, addr, uri, header, body)
	if err != nil {
		tb.Fatalf("%s %s%s: %v", method, addr, uri, err)
	}
	return a
}

// trySend makes one request to nginx at addr; safe from any goroutine.
func trySend(c *http.Client, method, addr, uri string, header map[string]string, body string) (answer, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+addr+uri, rd)
	if err != nil {
		return answer{}, err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return answer{
		status:      res.StatusCode,
		cacheStatus: res.Header.Get("X-Cache-Status"),
		etag:        res.Header.Get("ETag"),
		body:        string(b),
	}, err
}

// newClient returns a client that keeps up to conns connections to nginx open.
func newClient(tb testing.TB, conns int) *http.Client {
	tb.Helper()
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, DisableCompression: true}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// crowd has viewers GET uri through nginx at addr all at once, then again every gap, rounds
// times in all, and returns every answer and how long it took.
func crowd(tb testing.TB, addr, uri string, viewers, rounds int, gap time.Duration) ([]answer, time.Duration) {
	tb.Helper()
	c := newClient(tb, viewers)
	var (
		mu      sync.Mutex
		answers []answer
		errs    []error
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for range viewers {
		wg.Go(func() {
			<-start
			for i := range rounds {
				if i > 0 {
					time.Sleep(gap)
				}
				a, err := trySend(c, http.MethodGet, addr, uri, nil, "")
				mu.Lock()
				answers = append(answers, a)
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	if len(errs) > 0 {
		tb.Fatalf("%d of %d requests failed, the first: %v", len(errs), viewers*rounds, errs[0])
	}
	return answers, elapsed
}

// cacheStatuses are the values of $upstream_cache_status a cached location may answer with.
var cacheStatuses = []string{"MISS", "HIT", "EXPIRED", "STALE", "UPDATING", "REVALIDATED"}

// TestNginxMicroCacheCrowd: 200 GETs of one product over about a second, 50 viewers at once
// each round, cost the replica a request or two a second, and everyone gets the replica's
// answer. The replica takes 200 ms to answer, so without proxy_cache_lock the first round's
// misses all reach it: the second case shows that the crowd does overlap, so that the first
// case's bound means something.
func TestNginxMicroCacheCrowd(t *testing.T) {
	const (
		uri     = "/api/v1/products/1"
		viewers = 50
		rounds  = 4
		gap     = 250 * time.Millisecond
	)
	for _, tc := range []struct {
		name     string
		old, new string // an edit of the template, none if old is ""
		check    func(t *testing.T, asked int, elapsed time.Duration)
	}{
		{
			name: "as shipped",
			check: func(t *testing.T, asked int, elapsed time.Duration) {
				// One fill, then at most one refresh per second of freshness (an entry is
				// fresh for 1 to 2 s: nginx counts whole seconds).
				if limit := 2 + int(elapsed/time.Second); asked > limit {
					t.Errorf("the replica was asked %d times in %v, want at most %d", asked, elapsed, limit)
				}
			},
		},
		{
			name: "without proxy_cache_lock",
			old:  "proxy_cache_lock on;", new: "proxy_cache_lock off;",
			check: func(t *testing.T, asked int, elapsed time.Duration) {
				if asked < viewers/2 {
					t.Errorf("without the lock the replica was asked only %d times in %v: the crowd's misses do not overlap, so the shipped case proves nothing", asked, elapsed)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica, url := newReplicaStandIn(t, 200*time.Millisecond, false)
			tmpl := ""
			if tc.old != "" {
				tmpl = editedTemplate(t, tc.old, tc.new)
			}
			ng := startNginx(t, tmpl, url)

			answers, elapsed := crowd(t, ng.public, uri, viewers, rounds, gap)
			asked := replica.askedFor(http.MethodGet, uri)
			statuses := map[string]int{}
			for _, a := range answers {
				statuses[a.cacheStatus]++
				if a.status != http.StatusOK || a.body != publicBody(uri) || !slices.Contains(cacheStatuses, a.cacheStatus) {
					t.Errorf("an answer %d %q (X-Cache-Status %q), want 200 %q", a.status, a.body, a.cacheStatus, publicBody(uri))
					break
				}
			}
			t.Logf("%d answers in %v, the replica asked %d times; X-Cache-Status %v", len(answers), elapsed, asked, statuses)
			tc.check(t, asked, elapsed)
		})
	}
}

// TestNginxConditionalGet: a viewer that has the current ETag gets a 304 from nginx's cache
// (the replica never sees the viewer's If-None-Match), and an expired entry is refreshed by
// asking the replica with If-None-Match on the stored ETag, which it answers 304.
func TestNginxConditionalGet(t *testing.T) {
	const uri = "/api/v1/products/7"
	replica, url := newReplicaStandIn(t, 0, false)
	ng := startNginx(t, "", url)
	c := newClient(t, 1)

	first := send(t, c, http.MethodGet, ng.public, uri, nil, "")
	etag := etagOf(publicBody(uri))
	if diff := cmp.Diff(answer{status: 200, cacheStatus: "MISS", etag: etag, body: publicBody(uri)}, first, cmp.AllowUnexported(answer{})); diff != "" {
		t.Fatalf("the first GET (-want +got):\n%s", diff)
	}

	const other = `"not-the-current-one"`
	for _, tc := range []struct {
		name, ifNoneMatch string
		want              int
	}{
		{"the current ETag", etag, http.StatusNotModified},
		{"among others", other + ", " + etag, http.StatusNotModified},
		{"its weak form", "W/" + etag, http.StatusNotModified},
		{"another ETag", other, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, c, http.MethodGet, ng.public, uri, map[string]string{"If-None-Match": tc.ifNoneMatch}, "")
			want := answer{status: tc.want, cacheStatus: a.cacheStatus, etag: etag}
			if tc.want == http.StatusOK {
				want.body = publicBody(uri)
			}
			if diff := cmp.Diff(want, a, cmp.AllowUnexported(answer{})); diff != "" {
				t.Errorf("If-None-Match: %s (-want +got):\n%s", tc.ifNoneMatch, diff)
			}
			if a.cacheStatus == "MISS" || !slices.Contains(cacheStatuses, a.cacheStatus) {
				t.Errorf("X-Cache-Status %q: want it answered from the cache", a.cacheStatus)
			}
		})
	}
	if replica.sawIfNoneMatch(other) || replica.sawIfNoneMatch("W/"+etag) {
		t.Error("a viewer's If-None-Match reached the replica: nginx should answer it from its cache")
	}

	t.Run("an expired entry is revalidated", func(t *testing.T) {
		// Fresh for 1 to 2 s; then the next GET is answered from the stale entry while nginx
		// asks the replica with the stored ETag in the background.
		deadline := time.Now().Add(6 * time.Second)
		for replica.notModifiedCount() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the replica never saw If-None-Match %s in 6 s (asked %d times)", etag, replica.askedFor(http.MethodGet, uri))
			}
			a := send(t, c, http.MethodGet, ng.public, uri, nil, "")
			if a.status != http.StatusOK || a.body != publicBody(uri) {
				t.Fatalf("GET: %d %q (X-Cache-Status %s), want 200 %q", a.status, a.body, a.cacheStatus, publicBody(uri))
			}
			time.Sleep(100 * time.Millisecond)
		}
		a := send(t, c, http.MethodGet, ng.public, uri, nil, "")
		if a.status != http.StatusOK || a.body != publicBody(uri) || (a.cacheStatus != "HIT" && a.cacheStatus != "REVALIDATED") {
			t.Errorf("after the revalidation: %d %q (X-Cache-Status %s), want 200 from the refreshed entry", a.status, a.body, a.cacheStatus)
		}
	})
}

// TestNginxCachesOnlyPublicReads sends each request twice, as buyer A and then as buyer B, to
// each server, in front of a replica that sends the app's headers and in front of one that
// forgot no-store everywhere: the public reads are answered once by the replica and then from
// the cache (each method and query its own entry); everything else reaches the replica both
// times, and B gets B's answer. The location decides, not the replica's headers.
func TestNginxCachesOnlyPublicReads(t *testing.T) {
	type request struct {
		method, uri string
		cached      bool
		opsOnly     bool // the public server refuses it (TestNginxComposeRuns)
	}
	requests := []request{
		{http.MethodGet, "/api/v1/products", true, false},
		{http.MethodGet, "/api/v1/products?page=2", true, false},
		{http.MethodGet, "/api/v1/products/1", true, false},
		{http.MethodHead, "/api/v1/products/1", true, false},
		{http.MethodGet, "/api/v1/products/1/stats", true, false},
		{http.MethodGet, "/api/v1/strategies", true, false},
		{http.MethodPost, "/api/v1/products/1/purchase", false, false},
		{http.MethodGet, "/api/v1/products/1/purchase", false, false},
		{http.MethodPost, "/api/v1/products", false, false},
		{http.MethodGet, "/api/v1/products/", false, false},
		{http.MethodGet, "/api/v1/orders/5", false, false},
		{http.MethodGet, "/api/v1/orders/5?user_id=alice", false, false},
		{http.MethodGet, "/api/v1/orders?product_id=1", false, false},
		{http.MethodPost, "/api/v1/orders/5/pay", false, false},
		{http.MethodPost, "/api/v1/orders/5/cancel", false, false},
		{http.MethodGet, "/", false, false},
		{http.MethodGet, "/static/app.js", false, false},
		{http.MethodGet, "/api/openapi.yaml", false, false},
		{http.MethodGet, "/api/docs", false, false},
		{http.MethodGet, "/healthz", false, false},
		{http.MethodGet, "/api/v1/admin/products", false, true},
		{http.MethodGet, "/api/v1/admin/products/1/stats", false, true},
	}
	buyers := []string{"Bearer A", "Bearer B"}

	for _, careless := range []bool{false, true} {
		for _, server := range []string{"public", "ops"} {
			name := "app headers/" + server
			if careless {
				name = "no-store forgotten/" + server
			}
			t.Run(name, func(t *testing.T) {
				replica, url := newReplicaStandIn(t, 0, careless)
				ng := startNginx(t, "", url)
				addr := ng.public
				if server == "ops" {
					addr = ng.ops
				}
				c := newClient(t, 1)
				for _, rq := range requests {
					if rq.opsOnly && server == "public" {
						continue
					}
					before := replica.total()
					var got []answer
					for _, auth := range buyers {
						body := ""
						if rq.method == http.MethodPost {
							body = `{"user_id":"` + auth + `"}`
						}
						got = append(got, send(t, c, rq.method, addr, rq.uri, map[string]string{"Authorization": auth}, body))
					}
					asked := replica.total() - before

					var want []answer
					wantAsked := len(buyers)
					if rq.cached {
						wantAsked = 1
						body := publicBody(rq.uri)
						if rq.method == http.MethodHead {
							body = ""
						}
						etag := etagOf(publicBody(rq.uri))
						want = []answer{
							{status: 200, cacheStatus: "MISS", etag: etag, body: body},
							{status: 200, cacheStatus: "HIT", etag: etag, body: body},
						}
					} else {
						for i, auth := range buyers {
							a := answer{status: 200, body: privateBody(rq.method, rq.uri, i+1, auth)}
							if careless {
								a.etag = fmt.Sprintf(`"%d"`, i+1)
							}
							want = append(want, a)
						}
					}
					if diff := cmp.Diff(want, got, cmp.AllowUnexported(answer{})); diff != "" {
						t.Errorf("%s %s as %v (-want +got):\n%s", rq.method, rq.uri, buyers, diff)
					}
					if asked != wantAsked {
						t.Errorf("%s %s as %v: the replica was asked %d times, want %d", rq.method, rq.uri, buyers, asked, wantAsked)
					}
				}
				if t.Failed() {
					t.Logf("the replica was asked: %v", replica.snapshot())
				}
			})
		}
	}
}
