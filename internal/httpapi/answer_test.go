package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/api/apitest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// readmeErrors returns the error table of docs/api.md ("Every error is {"error":…}"): the codes
// documented for each status.
var readmeErrors = sync.OnceValues(func() (map[int][]string, error) {
	f, err := os.Open("../../docs/api.md")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	table := map[int][]string{}
	row := regexp.MustCompile(`^\| (\d{3}) \| ([^|]+) \|`)
	code := regexp.MustCompile("`([a-z_]+)`")
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "| status | code | when |":
			in = true
		case in && !strings.HasPrefix(line, "|"):
			return table, nil
		case in:
			if m := row.FindStringSubmatch(line); m != nil {
				status, _ := strconv.Atoi(m[1])
				for _, c := range code.FindAllStringSubmatch(m[2], -1) {
					table[status] = append(table[status], c[1])
				}
			}
		}
	}
	return table, sc.Err()
})

// ReadmeErrors is readmeErrors for the tests of other packages; it fails tb if docs/api.md cannot
// be read.
func ReadmeErrors(tb testing.TB) map[int][]string {
	tb.Helper()
	t, err := readmeErrors()
	if err != nil || len(t) == 0 {
		tb.Fatalf("docs/api.md's error table: %v (%d rows)", err, len(t))
	}
	return t
}

// apiCodes returns every status and code the API answers with: errorTable's, and those of the
// refusals the HTTP layer writes directly.
func apiCodes() map[int][]string {
	out := map[int][]string{}
	add := func(status int, code string) {
		if !slices.Contains(out[status], code) {
			out[status] = append(out[status], code)
		}
	}
	for _, e := range errorTable {
		add(e.status, e.code)
	}
	add(http.StatusUnauthorized, codeUnauthorized)
	add(http.StatusNotFound, codeNotFound)
	add(http.StatusMethodNotAllowed, codeMethodNotAllowed)
	add(http.StatusTooManyRequests, string(sale.CodeRateLimited)) // the admin throttle's
	for s := range out {
		slices.Sort(out[s])
	}
	return out
}

// TestAPIDocErrorTable: the error table of docs/api.md lists every 4xx and 5xx status and code the API
// answers with, and nothing else (500 internal aside: a bug is not documented as an answer).
func TestAPIDocErrorTable(t *testing.T) {
	got := ReadmeErrors(t)
	for s := range got {
		slices.Sort(got[s])
	}
	want := apiCodes()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("docs/api.md error table (-from the code +in docs/api.md):\n%s", diff)
	}
}

// CheckAnswer fails tb unless the answer to method target (the request's path, decoded) keeps the
// API's promises: never a 5xx; an answer api/openapi.yaml describes (apitest.Check); a refusal is a
// status and code of the error table in docs/api.md, with the API's JSON error body; every answer
// has the security headers and a request id; a redirect stays on this origin.
func CheckAnswer(tb testing.TB, method, target string, status int, header http.Header, body []byte) {
	tb.Helper()
	fail := func(format string, args ...any) {
		tb.Helper()
		tb.Fatalf("%s %q: %d %s %q: "+format, append([]any{method, target, status, header, body}, args...)...)
	}
	if status >= 500 {
		fail("a 5xx")
	}
	if v, err := apitest.Default(); err != nil {
		tb.Fatal(err)
	} else if err := v.Check(method, (&url.URL{Path: target}).RequestURI(), status, header, body); err != nil {
		fail("not as api/openapi.yaml says: %v", err)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"} {
		if header.Get(h) == "" {
			fail("no %s", h)
		}
	}
	if !strings.Contains(header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		fail("the policy lets the answer be framed")
	}
	if id := header.Get("X-Request-Id"); !saneRequestID(id) {
		fail("no sane X-Request-Id")
	}
	switch {
	case status >= 300 && status < 400:
		loc := header.Get("Location")
		if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			fail("a redirect off this origin")
		}
		return
	case status < 400:
		if strings.HasPrefix(header.Get("Content-Type"), "application/json") && method != http.MethodHead && !json.Valid(body) {
			fail("the answer is not JSON")
		}
		return
	}
	table := ReadmeErrors(tb)
	codes, ok := table[status]
	if !ok {
		fail("a status docs/api.md does not document")
	}
	if ct := header.Get("Content-Type"); ct != jsonContentType[0] {
		fail("Content-Type %q", ct)
	}
	if method == http.MethodHead && len(body) == 0 {
		return // a real server dropped the body
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || dec.More() {
		fail("not the API's error body: %v", err)
	}
	if !slices.Contains(codes, e.Error.Code) || e.Error.Message == "" {
		fail("code %q is not documented for %d (%s), or has no message", e.Error.Code, status, strings.Join(slices.Sorted(slices.Values(codes)), ", "))
	}
	switch status {
	case http.StatusMethodNotAllowed:
		if header.Get("Allow") == "" {
			fail("a 405 without Allow")
		}
	case http.StatusTooManyRequests:
		if n, err := strconv.Atoi(header.Get("Retry-After")); err != nil || n < 1 {
			fail("a 429 without Retry-After")
		}
	case http.StatusUnauthorized:
		if header.Get("WWW-Authenticate") == "" {
			fail("a 401 without WWW-Authenticate")
		}
	}
}

// ParamRoute is a route with a path parameter, and a request to it that is right but for the
// parameter.
type ParamRoute struct {
	Method, Prefix, Suffix string
	Query                  string            // the raw query, if any
	Body                   string            // sent as application/json when not empty
	Header                 map[string]string // sent as they are
	Admin                  bool              // sent with the admin token
	// ID says what the parameter is: "product" (a product id) or "order" (an order id), whose
	// malformed values CheckParam holds to a 400; "" for any other.
	ID string
}

// ParamRoutes are the routes of every path parameter: product id, order id, stampede id, and the
// storefront's file. New routes go at the end: the corpora name routes by index.
var ParamRoutes = []ParamRoute{
	{Method: "GET", Prefix: "/api/v1/products/", ID: "product"},
	{Method: "HEAD", Prefix: "/api/v1/products/", ID: "product"},
	{Method: "GET", Prefix: "/api/v1/products/", Suffix: "/stats", ID: "product"},
	{Method: "POST", Prefix: "/api/v1/products/", Suffix: "/purchase", Body: `{"user_id":"param-fuzzer","quantity":1}`, ID: "product"},
	{Method: "GET", Prefix: "/api/v1/orders/", Query: "user_id=param-fuzzer", ID: "order"},
	{Method: "HEAD", Prefix: "/api/v1/orders/", Query: "user_id=param-fuzzer", ID: "order"},
	{Method: "POST", Prefix: "/api/v1/admin/products/", Suffix: "/reset", Body: `{"stock":5}`, Admin: true, ID: "product"},
	{Method: "POST", Prefix: "/api/v1/admin/products/", Suffix: "/stampede", Body: `{"buyers":1}`, Admin: true, ID: "product"},
	{Method: "GET", Prefix: "/api/v1/admin/stampedes/", Admin: true},
	{Method: "GET", Prefix: "/static/"},
	{Method: "POST", Prefix: "/api/v1/orders/", Suffix: "/pay", Body: `{"user_id":"param-fuzzer"}`, Header: map[string]string{"Idempotency-Key": "param-fuzzer"}, ID: "order"},
	{Method: "POST", Prefix: "/api/v1/orders/", Suffix: "/cancel", Body: `{"user_id":"param-fuzzer"}`, ID: "order"},
	{Method: "GET", Prefix: "/api/v1/admin/products/", Suffix: "/stats", Admin: true, ID: "product"},
}

// CheckParam fails tb unless a malformed id in route's path was refused as such (issue #29): a
// product id not in its one spelling (decimal digits, no sign, no leading zero) or an order id
// that cannot be one is a 400 (or the 429 of a limit asked first), never read as another id
// (01 as 1) or as a well-formed one that was not found. A param with a "/" names another route.
func CheckParam(tb testing.TB, route ParamRoute, param string, status int) {
	tb.Helper()
	if param == "" || strings.Contains(param, "/") || status == http.StatusBadRequest || status == http.StatusTooManyRequests {
		return
	}
	switch {
	case route.ID == "product" && !canonicalProductID(param):
		tb.Fatalf("%s %q: %d, want 400: %q is no product id in its one spelling", route.Method, route.ParamPath(param), status, param)
	case route.ID == "order" && sale.ValidateOrderID(param) != nil:
		tb.Fatalf("%s %q: %d, want 400: %q cannot be an order id", route.Method, route.ParamPath(param), status, param)
	}
}

// canonicalProductID is the spec of a product id's spelling, written apart from parseID.
func canonicalProductID(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == s
}

// ParamSeeds are values of a path parameter worth trying on every route.
var ParamSeeds = []string{
	"1", "2", "0", "-1", "+1", "01", " 1", "1 ", "1e3", "0x10", "9223372036854775807", "9223372036854775808",
	"é", "\xff", "\xc3", "o-\x80", "%", "%25", "a/b", "", ".", "..", "../index.html", "\x00", "\t",
	"order-1", "01a20076-796b-7172-9393-d0e8391928db", "0123456789ab", "0123456789AB", "app.js", "index.html",
	strings.Repeat("9", 100), strings.Repeat("é", 40), "🙂", "00", "+01", "1\n", "١", strings.Repeat("o", 40), strings.Repeat("o", 41),
}

// ParamPath is route's path with param, as net/http hands it over: decoded.
func (r ParamRoute) ParamPath(param string) string { return r.Prefix + param + r.Suffix }
