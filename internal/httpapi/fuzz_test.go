package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-go/seckill-go/internal/buyer"
)

// The fuzz targets of the API's input surfaces: the path parameters, the headers the API reads,
// the JSON bodies of the public and admin APIs, and any method on any path. Each drives the real
// router over the domain in memory (memRouter) and holds every answer to CheckAnswer: never a
// 5xx, never a panic (the router would answer it 500), every refusal a documented 4xx with the
// API's JSON error body. app_fuzz_test.go runs the path parameters and the values that reach
// MySQL against the real app. `make fuzz` runs each for FUZZTIME; `make test`, a few seconds each.

// fuzzRequest is one request as net/http hands it to the router.
type fuzzRequest struct {
	method string
	path   string // decoded, as URL.Path
	query  string // URL.RawQuery
	body   []byte
	header http.Header
	remote string // RemoteAddr; 192.0.2.1:1234 if empty
	length int64  // declared Content-Length; len(body) if 0
}

func (r fuzzRequest) serve(tb testing.TB, h http.Handler) *httptest.ResponseRecorder {
	tb.Helper()
	u := &url.URL{Path: r.path, RawQuery: r.query}
	if r.header == nil {
		r.header = http.Header{}
	}
	if r.remote == "" {
		r.remote = "192.0.2.1:1234"
	}
	if r.length == 0 {
		r.length = int64(len(r.body))
	}
	req := &http.Request{
		Method: r.method, URL: u, RequestURI: u.RequestURI(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: r.header, Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: r.length,
		Host: "shop.test", RemoteAddr: r.remote,
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	CheckAnswer(tb, r.method, r.path, rec.Code, rec.Header(), rec.Body.Bytes())
	return rec
}

// jsonHeader is the header of a request with a JSON body, with the admin token if admin.
func jsonHeader(admin bool) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	if admin {
		h["Authorization"] = []string{"Bearer " + fuzzAdminToken}
	}
	return h
}

// FuzzPathParams: any bytes in any path parameter (product id, order id, stampede id, the
// storefront's file); a malformed id is a 400 (CheckParam).
func FuzzPathParams(f *testing.F) {
	for i := range ParamRoutes {
		for _, p := range ParamSeeds {
			f.Add(uint8(i), p)
		}
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, route uint8, param string) {
		r := ParamRoutes[int(route)%len(ParamRoutes)]
		req := fuzzRequest{method: r.Method, path: r.ParamPath(param), query: r.Query, header: jsonHeader(r.Admin)}
		if r.Body == "" {
			req.header = http.Header{"Authorization": req.header["Authorization"]}
		} else {
			req.body = []byte(r.Body)
		}
		for k, v := range r.Header {
			req.header.Set(k, v)
		}
		rec := req.serve(t, h)
		CheckParam(t, r, param, rec.Code)
	})
}

// headerRoutes are the routes FuzzHeaders sends its headers to, each with a body it accepts.
// auth says whose credentials the route needs: "admin", "buyer" or none.
var headerRoutes = []struct {
	method, path, query, body, auth string
}{
	{"POST", "/api/v1/products/1/purchase", "", `{"user_id":"header-fuzzer"}`, ""},
	{"POST", "/api/v1/admin/products", "", `{"name":"n","price_cents":1,"stock":1,"listed":false}`, "admin"},
	{"POST", "/api/v1/admin/products/2/reset", "", `{"stock":0}`, "admin"},
	{"POST", "/api/v1/admin/products/2/stampede", "", `{"buyers":1}`, "admin"},
	{"GET", "/api/v1/admin/products", "", "", "admin"},
	{"GET", "/api/v1/products", "", "", ""},
	{"GET", "/api/v1/orders/order-1", "user_id=header-fuzzer", "", ""},
	// Sent to a router whose purchases need buyer tokens (FuzzHeaders' last route).
	{"POST", "/api/v1/products/1/purchase", "", `{"user_id":"header-fuzzer"}`, "buyer"},
}

// bearerScheme reports whether auth starts with the Bearer scheme, in any case, and a space: what
// credentials must have to be looked at (issue #29: a bare token was taken as a buyer's).
func bearerScheme(auth string) bool {
	return len(auth) > len("bearer ") && strings.EqualFold(auth[:len("bearer ")], "bearer ")
}

// fuzzBuyerKey signs and verifies the buyer tokens of FuzzHeaders' router with buyer tokens.
var fuzzBuyerKey = []byte("fuzz-buyer-key-of-at-least-32-bytes!")

// buyerToken returns a token for user, valid for ttl (negative: expired).
func buyerToken(tb testing.TB, user string, ttl time.Duration) string {
	tb.Helper()
	s, err := buyer.NewSigner(buyer.Config{HMACKey: fuzzBuyerKey})
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := s.Token(user, ttl)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// signedClaims returns claims as a token signed with fuzzBuyerKey, whatever they hold.
func signedClaims(tb testing.TB, claims jwt.MapClaims) string {
	tb.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(fuzzBuyerKey)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// FuzzHeaders: every header the API reads (Idempotency-Key; Authorization: the admin token, and
// a buyer token on the last route, whose router verifies them; X-Request-ID, Content-Type,
// X-Forwarded-For from the trusted proxy), a declared Content-Length that may be wrong or
// unknown, and bodies on both sides of the 16 KiB limit. Credentials without the Bearer scheme
// never pass. client picks the caller's address among
// 256 (0: the trusted proxy, which names the client in X-Forwarded-For), so that the admin
// throttle and the per-client limit see clients old and new.
func FuzzHeaders(f *testing.F) {
	right := "Bearer " + fuzzAdminToken
	for i := range headerRoutes {
		f.Add(uint8(i), uint8(1), "k-1", right, "lb-1", "application/json", "", int64(0), uint16(0))
		f.Add(uint8(i), uint8(2), "", "", "", "", "", int64(0), uint16(0))
		f.Add(uint8(i), uint8(3), "a b", "Bearer wrong", "has space", "text/plain", "", int64(-1), uint16(20000))
		f.Add(uint8(i), uint8(0), "é", "bearer "+fuzzAdminToken, strings.Repeat("i", 65), "application/json; charset=utf-8", "203.0.113.9, 10.0.0.1", int64(1<<40), uint16(16000))
		f.Add(uint8(i), uint8(0), strings.Repeat("k", 129), right+" ", "\x00", "APPLICATION/JSON", "2001:db8::1", int64(5), uint16(16384))
		f.Add(uint8(i), uint8(4), "\xff", "Bearer", "\r\n", "application/x-www-form-urlencoded", "not an address", int64(3), uint16(17000))
	}
	last := uint8(len(headerRoutes) - 1)
	now := time.Now()
	for _, auth := range []string{
		"Bearer " + buyerToken(f, "header-fuzzer", time.Hour), "Bearer " + buyerToken(f, "someone-else", time.Hour),
		"Bearer " + buyerToken(f, "header-fuzzer", -time.Hour), "Bearer " + buyerToken(f, "header-fuzzer", time.Hour) + "x", "Bearer a.b.c",
		buyerToken(f, "header-fuzzer", time.Hour), "bearer " + buyerToken(f, "header-fuzzer", time.Hour),
		"Bearer " + signedClaims(f, jwt.MapClaims{"sub": "header-fuzzer", "iat": now.Unix(), "exp": strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}),
		"Bearer " + signedClaims(f, jwt.MapClaims{"sub": "header-fuzzer", "iat": now.Unix(), "exp": now.Add(25 * time.Hour).Unix()}),
	} {
		f.Add(last, uint8(1), "k-1", auth, "", "application/json", "", int64(0), uint16(0))
	}
	h := memRouter(f)
	verifier, err := buyer.NewVerifier(buyer.Config{HMACKey: fuzzBuyerKey})
	if err != nil {
		f.Fatal(err)
	}
	withBuyers := memRouterBuyers(f, verifier)
	f.Fuzz(func(t *testing.T, route, client uint8, idemKey, auth, reqID, contentType, xff string, declared int64, size uint16) {
		i := int(route) % len(headerRoutes)
		r := headerRoutes[i]
		h := h
		if i == len(headerRoutes)-1 {
			h = withBuyers
		}
		req := fuzzRequest{method: r.method, path: r.path, query: r.query, header: http.Header{}, remote: "192.0.2." + strconv.Itoa(int(client)) + ":4321"}
		if client == 0 {
			req.remote = "10.0.0.1:4321"
		}
		for k, v := range map[string]string{"Idempotency-Key": idemKey, "Authorization": auth, "X-Request-Id": reqID, "Content-Type": contentType, "X-Forwarded-For": xff} {
			if v != "" {
				req.header[k] = []string{v}
			}
		}
		if r.body != "" {
			body := []byte(r.body)
			if pad := int(size) - len(body); pad > 0 {
				body = append(body, bytes.Repeat([]byte(" "), pad)...) // trailing spaces: still one JSON object
			}
			req.body = body
			req.length = declared
			if declared < 0 {
				req.length = -1 // unknown: chunked
			}
		}
		rec := req.serve(t, h)
		if r.auth != "" && !bearerScheme(auth) && rec.Code < 400 {
			t.Fatalf("%s %s with Authorization %q: %d, want it refused", r.method, r.path, auth, rec.Code)
		}
	})
}

// The products the body targets aim at (memRouter's), and one that does not exist.
var bodyProducts = []int64{productOpen, productSoldOut, productNotStarted, productEnded, 999, 0}

// rawOr returns the JSON of v, or raw itself as the JSON text when asRaw is set: the first
// reaches every check behind the decoder, the second the decoder's own.
func rawOr(asRaw bool, raw string, v any) string {
	if asRaw {
		return raw
	}
	data, _ := json.Marshal(v)
	return string(data)
}

// FuzzPurchase: the purchase body's fields and the Idempotency-Key, on every kind of product.
// kind chooses how quantity is given: absent, an integer, a string, null, a fraction, an
// exponent; and whether user_id goes in raw (unescaped, maybe breaking the JSON).
func FuzzPurchase(f *testing.F) {
	for _, seed := range []struct {
		product uint8
		user    string
		kind    uint8
		qty     int64
		key     string
	}{
		{0, "alice", 1, 1, ""}, {0, "alice", 1, 1, "k1"}, {1, "bob", 0, 0, ""}, {2, "carol", 1, 2, "k2"},
		{3, "dave", 1, 1, ""}, {4, "erin", 1, 1, ""}, {5, "frank", 1, 1, ""}, {0, "gina", 1, 3, ""},
		{0, "", 1, 1, ""}, {0, "a b", 1, 1, ""}, {0, "é", 1, 1, ""}, {0, "\xff", 8, 1, ""},
		{0, strings.Repeat("u", 65), 1, 1, ""}, {0, "q", 1, 0, ""}, {0, "q", 1, -1, ""},
		{0, "q", 1, 1_000_000_001, ""}, {0, "q", 1, 1 << 62, ""}, {0, "q", 2, 1, ""}, {0, "q", 3, 0, ""},
		{0, "q", 4, 1, ""}, {0, "q", 5, 400, ""}, {0, "k", 1, 1, strings.Repeat("k", 129)},
		{0, "k", 1, 1, "é"}, {0, "k", 1, 1, "a b"}, {0, "\"}", 8, 1, ""},
	} {
		f.Add(seed.product, seed.user, seed.kind, seed.qty, seed.key)
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, product uint8, user string, kind uint8, qty int64, key string) {
		id := bodyProducts[int(product)%len(bodyProducts)]
		n := strconv.FormatInt(qty, 10)
		var quantity string
		switch kind % 6 {
		case 1:
			quantity = `,"quantity":` + n
		case 2:
			quantity = `,"quantity":"` + n + `"`
		case 3:
			quantity = `,"quantity":null`
		case 4:
			quantity = `,"quantity":` + n + `.5`
		case 5:
			quantity = `,"quantity":1e` + n
		}
		body := `{"user_id":` + rawOr(kind >= 8, `"`+user+`"`, user) + quantity + `}`
		header := jsonHeader(false)
		if key != "" {
			header["Idempotency-Key"] = []string{key}
		}
		path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
		fuzzRequest{method: "POST", path: path, body: []byte(body), header: header}.serve(t, h)
	})
}

// saleTimeSeeds are sale times at the edges of what the API accepts, and past them.
var saleTimeSeeds = []string{
	"2026-11-21T20:00:00Z", "1000-01-01T00:00:00Z", "0999-12-31T23:59:59Z", "1000-01-01T00:30:00+01:00",
	"9999-12-31T23:59:59Z", "9999-12-31T23:00:00-05:00", "9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00Z",
	"0001-01-01T00:00:00Z", "0000-01-01T00:00:00+01:00", "2026-02-30T00:00:00Z", "2026-11-21T20:00:00.999999999Z",
	"2026-11-21T20:00:00+23:59", "2026-11-21T20:00:00+24:00", "2026-11-21 20:00:00Z", "2026-11-21T20:00:00",
	"", "tomorrow", "1970-01-01T00:00:00Z", "2262-04-11T23:47:16Z", "1677-09-21T00:12:43Z",
}

// fieldsPresent is the object of the fields whose bit is set in present, in order.
func fieldsPresent(present uint16, fields ...[2]string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range fields {
		if present&(1<<i) == 0 {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + kv[0] + `":` + kv[1])
	}
	b.WriteByte('}')
	return b.String()
}

func jsonOf(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// FuzzAdminCreate: the admin create body, each field present or not (present's bits), with
// values of any size and times at the edges of their range.
func FuzzAdminCreate(f *testing.F) {
	const all = 0xff
	for i, start := range saleTimeSeeds {
		end := saleTimeSeeds[(i+1)%len(saleTimeSeeds)]
		f.Add(uint16(all), "sneaker", int64(12900), int64(5), "mysql", start, end, int64(1), false)
		f.Add(uint16(all&^(1<<5)), "sneaker", int64(1), int64(1), "", start, "", int64(1), false) // no end: start + 24 h
	}
	for _, s := range []struct {
		name         string
		price, stock int64
		strategy     string
		limit        int64
	}{
		{"", 1, 1, "mysql", 1}, {" ", 1, 1, "zk", 1}, {strings.Repeat("n", 201), 1, 1, "redis", 1},
		{strings.Repeat("é", 200), 1, 1, "redis", 1}, {strings.Repeat("é", 101), 1, 1, "", 1}, {"🙂\x00", 1, 1, "", 1},
		{"\xff", 1, 1, "", 1}, {"x", -1, 1, "", 1}, {"x", 100_000_000_001, 1, "", 1}, {"x", 1, -1, "", 1},
		{"x", 1, 1_000_000_001, "", 1}, {"x", 1, 1 << 40, "", 1}, {"x", 1, 1, "none", 1}, {"x", 1, 1, "MYSQL", 1},
		{"x", 1, 1, "magic", 1}, {"x", 1, 1, "", 0}, {"x", 1, 1, "", 1 << 33}, {"x", 1 << 62, 1 << 62, "", -1 << 62},
	} {
		f.Add(uint16(all&^(1<<4|1<<5)), s.name, s.price, s.stock, s.strategy, "", "", s.limit, false)
	}
	f.Add(uint16(0), "", int64(0), int64(0), "", "", "", int64(0), false)
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, present uint16, name string, price, stock int64, strategy, start, end string, limit int64, listed bool) {
		body := fieldsPresent(present,
			[2]string{"name", jsonOf(name)}, [2]string{"price_cents", jsonOf(price)}, [2]string{"stock", jsonOf(stock)},
			[2]string{"strategy", jsonOf(strategy)}, [2]string{"sale_starts_at", jsonOf(start)}, [2]string{"sale_ends_at", jsonOf(end)},
			[2]string{"per_user_limit", jsonOf(limit)}, [2]string{"listed", jsonOf(listed)})
		fuzzRequest{method: "POST", path: "/api/v1/admin/products", body: []byte(body), header: jsonHeader(true)}.serve(t, h)
	})
}

// FuzzAdminReset: the reset body on every kind of product.
func FuzzAdminReset(f *testing.F) {
	for i, start := range saleTimeSeeds {
		f.Add(uint8(i), uint16(0xf), int64(5), "", start, saleTimeSeeds[(i+3)%len(saleTimeSeeds)])
	}
	for _, s := range []struct {
		present  uint16
		stock    int64
		strategy string
	}{
		{1, 0, ""}, {1, -1, ""}, {1, 1_000_000_001, ""}, {1, 1 << 40, ""}, {3, 1, "zk"}, {3, 1, "none"},
		{3, 1, "\xff"}, {2, 0, "redis"}, {0, 0, ""}, {5, 1, ""}, {9, 1, ""},
	} {
		f.Add(uint8(1), s.present, s.stock, s.strategy, "2030-01-01T00:00:00Z", "2030-01-02T00:00:00Z")
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, product uint8, present uint16, stock int64, strategy, start, end string) {
		id := bodyProducts[int(product)%len(bodyProducts)]
		body := fieldsPresent(present, [2]string{"stock", jsonOf(stock)}, [2]string{"strategy", jsonOf(strategy)},
			[2]string{"sale_starts_at", jsonOf(start)}, [2]string{"sale_ends_at", jsonOf(end)})
		path := "/api/v1/admin/products/" + strconv.FormatInt(id, 10) + "/reset"
		fuzzRequest{method: "POST", path: path, body: []byte(body), header: jsonHeader(true)}.serve(t, h)
	})
}

// FuzzAdminAdmission: the admission object of a create (route even) or a reset (odd), each field
// present or not (present's bits), with values of any size and times at the edges of their range.
func FuzzAdminAdmission(f *testing.F) {
	const all = 0x7f
	for i, opens := range saleTimeSeeds {
		f.Add(uint8(i), uint16(all), "waiting_room", 50.0, int64(200), int64(120), opens, true, int64(20))
	}
	for _, s := range []struct {
		present           uint16
		mode              string
		rate              float64
		active, sess, abd int64
	}{
		{all, "open", -1, -1, -1, -1}, {1, "open", 0, 0, 0, 0}, {1, "waiting_room", 0, 0, 0, 0}, {0, "", 0, 0, 0, 0},
		{all &^ 1, "", 1, 1, 1, 1}, {all, "WAITING_ROOM", 1, 1, 1, 1}, {all, "lottery", 1, 1, 1, 1}, {all, "\xff", 1, 1, 1, 1},
		{all, "waiting_room", 100_000, 1_000_000_000, 3600, 3600}, {all, "waiting_room", 100_000.5, 1_000_000_001, 3601, 3601},
		{all, "waiting_room", 1e-300, 1 << 40, 1 << 62, -1 << 62}, {all, "waiting_room", 0, -1, 0, 0},
		{all &^ (1 << 4), "waiting_room", 1, 1, 1, 1},
	} {
		f.Add(uint8(0), s.present, s.mode, s.rate, s.active, s.sess, "2030-01-01T00:00:00Z", false, s.abd)
		f.Add(uint8(1), s.present, s.mode, s.rate, s.active, s.sess, "", false, s.abd)
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, route uint8, present uint16, mode string, rate float64, active, session int64, opens string, shuffle bool, abandon int64) {
		admission := fieldsPresent(present,
			[2]string{"mode", jsonOf(mode)}, [2]string{"admit_rate", jsonOf(rate)}, [2]string{"max_active", jsonOf(active)},
			[2]string{"session_seconds", jsonOf(session)}, [2]string{"queue_opens_at", jsonOf(opens)},
			[2]string{"shuffle", jsonOf(shuffle)}, [2]string{"abandon_seconds", jsonOf(abandon)})
		if admission == "{}" && present&(1<<7) != 0 {
			admission = "null"
		}
		window := `"sale_starts_at":"2030-01-01T00:00:00Z","sale_ends_at":"2030-01-02T00:00:00Z"`
		req := fuzzRequest{method: "POST", path: "/api/v1/admin/products", header: jsonHeader(true),
			body: []byte(`{"name":"n","price_cents":1,"stock":1,` + window + `,"admission":` + admission + `}`)}
		if route%2 == 1 {
			id := bodyProducts[int(route/2)%len(bodyProducts)]
			req.path = "/api/v1/admin/products/" + strconv.FormatInt(id, 10) + "/reset"
			req.body = []byte(`{"stock":1,"admission":` + admission + `}`)
		}
		req.serve(t, h)
	})
}

// FuzzAdminStampede: the stampede body on every kind of product (memRouter's buyers answer in
// memory; at most 20 of them).
func FuzzAdminStampede(f *testing.F) {
	for _, s := range []struct {
		product  uint8
		present  uint16
		buyers   int64
		strategy string
		stock    int64
	}{
		{1, 1, 3, "", 0}, {0, 7, 2, "redis", 5}, {2, 1, 1, "", 0}, {4, 1, 1, "", 0}, {5, 1, 1, "", 0},
		{1, 1, 0, "", 0}, {1, 1, -1, "", 0}, {1, 1, 21, "", 0}, {1, 1, 1 << 40, "", 0}, {1, 0, 0, "", 0},
		{1, 3, 1, "none", 0}, {1, 3, 1, "magic", 0}, {1, 5, 1, "", -1}, {1, 5, 1, "", 1 << 40}, {1, 6, 0, "zk", 1},
	} {
		f.Add(s.product, s.present, s.buyers, s.strategy, s.stock)
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, product uint8, present uint16, buyers int64, strategy string, stock int64) {
		id := bodyProducts[int(product)%len(bodyProducts)]
		body := fieldsPresent(present, [2]string{"buyers", jsonOf(buyers)}, [2]string{"strategy", jsonOf(strategy)}, [2]string{"stock", jsonOf(stock)})
		path := "/api/v1/admin/products/" + strconv.FormatInt(id, 10) + "/stampede"
		fuzzRequest{method: "POST", path: path, body: []byte(body), header: jsonHeader(true)}.serve(t, h)
	})
}

// bodyRoutes are the routes that read a JSON body.
var bodyRoutes = []struct {
	path  string
	admin bool
}{
	{"/api/v1/products/1/purchase", false},
	{"/api/v1/admin/products", true},
	{"/api/v1/admin/products/2/reset", true},
	{"/api/v1/admin/products/2/stampede", true},
}

// FuzzRawBodies: any bytes as the body of every route that reads one: field types, encodings,
// nesting, duplicate keys, trailing data.
func FuzzRawBodies(f *testing.F) {
	for i := range bodyRoutes {
		for _, b := range []string{
			`{"user_id":"raw","quantity":1}`, `{"name":"n","price_cents":1,"stock":1,"listed":false}`, `{"stock":1}`, `{"buyers":1}`,
			``, ` `, `null`, `[]`, `{}`, `"x"`, `{"a":1} {}`, `{"user_id":"a","user_id":7}`, `{"USER_ID":"a"}`,
			`{"user\u005fid":"a"}`, "\xef\xbb\xbf{\"stock\":1}", `{"stock":1.0}`, `{"stock":1e2}`, `{"stock":-0}`,
			`{"stock":"1"}`, `{"stock":true}`, `{"stock":null}`, `{"stock":[1]}`, `{"stock":{"a":1}}`, `{"stock":1e400}`,
			`{"stock":99999999999999999999}`, `{"buyers":1,"buyers":2}`, `{"name":"\ud800"}`, `{"name":"\u0000"}`,
			`{"sale_starts_at":9999}`, `{"listed":"true"}`, `{"price_cents":9223372036854775808}`,
			strings.Repeat("[", 10000), `{"a":` + strings.Repeat(`{"a":`, 5000) + `1` + strings.Repeat("}", 5001),
			"{\"user_id\":\"\xff\"}", `{"user_id":"a"`, `{"user_id":"a",}`, `{'user_id':'a'}`,
			`{"stock":1,"admission":{"mode":"waiting_room","admit_rate":1,"max_active":1,"session_seconds":1,"abandon_seconds":1}}`,
			`{"stock":1,"admission":null}`, `{"stock":1,"admission":{}}`, `{"stock":1,"admission":[]}`, `{"stock":1,"admission":"open"}`,
			`{"stock":1,"admission":{"mode":"open","mode":"lottery"}}`, `{"stock":1,"admission":{"Mode":"open"}}`,
			`{"stock":1,"admission":{"mode":"waiting_room","admit_rate":1e400}}`, `{"stock":1,"admission":{"mode":"open","x":{"y":[1]}}}`,
		} {
			f.Add(uint8(i), []byte(b))
		}
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		fuzzRequest{method: "POST", path: r.path, body: body, header: jsonHeader(r.admin)}.serve(t, h)
	})
}

// FuzzMethodPath: any method on any path (with the admin token or not). A GET is sent again as
// HEAD, which must answer with the same status.
func FuzzMethodPath(f *testing.F) {
	for _, p := range []string{
		"/", "/healthz", "/readyz", "/metrics", "/api/v1/products", "/api/v1/products/", "/api/v1/products/1",
		"/api/v1/products/1/stats", "/api/v1/strategies", "/api/v1/products/1/purchase", "/api/v1/orders/x", "/api/v1/admin/products",
		"/api/v1/admin/stampedes/0123456789ab", "/static/app.js", "/static/", "/static", "/static/../index.html",
		"//api/v1/products", "/api/v1//products", "/API/V1/PRODUCTS", "/api/v2/everything", "", "*", "/\x00", "/é",
	} {
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE", "get", ""} {
			f.Add(m, p, false)
		}
		f.Add("GET", p, true)
	}
	h := memRouter(f)
	f.Fuzz(func(t *testing.T, method, path string, admin bool) {
		header := http.Header{}
		if admin {
			header["Authorization"] = []string{"Bearer " + fuzzAdminToken}
		}
		got := fuzzRequest{method: method, path: path, header: header}.serve(t, h)
		if method == http.MethodGet {
			head := fuzzRequest{method: http.MethodHead, path: path, header: header}.serve(t, h)
			if head.Code != got.Code {
				t.Fatalf("GET %q = %d, HEAD = %d", path, got.Code, head.Code)
			}
		}
	})
}
