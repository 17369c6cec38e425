package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/httpapi"
)

// The fuzz targets of the values that reach MySQL, against the real app over the real services
// (apptest): the path parameters, and the strings and times of the purchase, create and reset
// bodies. The in-memory targets (fuzz_test.go) model what MySQL refuses; these hold the model to
// MySQL itself. Each fuzzing process starts one app on a database of its own.

var appClient = &http.Client{Timeout: 20 * time.Second}

// fuzzApp is one app under fuzzing, with a product on sale (a billion units, two per user) and
// one that the reset target resets.
type fuzzApp struct {
	url             string
	onSale, toReset int64
}

func startFuzzApp(f *testing.F) fuzzApp {
	f.Helper()
	a := apptest.NewStack(f).Start(f, nil)
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := map[string]any{"name": "fuzzed", "price_cents": 100, "stock": 1_000_000_000, "per_user_limit": 2, "listed": false}
	return fuzzApp{url: a.URL, onSale: admin.CreateProduct(f, product), toReset: admin.CreateProduct(f, product)}
}

// do sends method path (decoded; the client escapes it) and query with body as JSON if not empty,
// holds the answer to httpapi.CheckAnswer and returns its status. A header value the client refuses to send (no server
// ever sees it) skips the input.
//
// A 503 is the input's fault only while every dependency is up: the chaos run stops them under
// the tests' feet. So a 503 waits for /readyz to answer 200 (30 s at most) and the request is sent
// again; the second answer is the one held to the contract.
func (a fuzzApp) do(t *testing.T, method, path, query string, body []byte, header map[string]string) int {
	t.Helper()
	status, h, data := a.send(t, method, path, query, body, header)
	if status == http.StatusServiceUnavailable && a.waitReady() {
		status, h, data = a.send(t, method, path, query, body, header)
	}
	httpapi.CheckAnswer(t, method, path, status, h, data)
	return status
}

// waitReady waits for the app's /readyz to answer 200, 30 s at most, and reports whether it did.
func (a fuzzApp) waitReady() bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		res, err := appClient.Get(a.url + "/readyz")
		if err != nil {
			continue
		}
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}

func (a fuzzApp) send(t *testing.T, method, path, query string, body []byte, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	u := a.url + (&url.URL{Path: path, RawQuery: query}).RequestURI()
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := appClient.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "invalid header field") {
			t.Skip("a header value no client sends")
		}
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, data
}

var adminHeader = map[string]string{"Authorization": "Bearer " + apptest.AdminToken}

// FuzzAppPathParams: any bytes in any path parameter, through the real app to MySQL (this is how
// non-ASCII bytes in an order id were found: a collation error, a 500); a malformed id is a 400
// (httpapi.CheckParam).
func FuzzAppPathParams(f *testing.F) {
	for i := range httpapi.ParamRoutes {
		for _, p := range httpapi.ParamSeeds {
			f.Add(uint8(i), p)
		}
	}
	a := startFuzzApp(f)
	f.Fuzz(func(t *testing.T, route uint8, param string) {
		r := httpapi.ParamRoutes[int(route)%len(httpapi.ParamRoutes)]
		header := map[string]string{}
		for k, v := range r.Header {
			header[k] = v
		}
		if r.Admin {
			header["Authorization"] = adminHeader["Authorization"]
		}
		httpapi.CheckParam(t, r, param, a.do(t, r.Method, r.ParamPath(param), r.Query, []byte(r.Body), header))
	})
}

// FuzzAppWrites: the strings and times of the bodies that are stored, through the real app to
// MySQL. kind 0: a purchase (user_id s1, Idempotency-Key s2, quantity n); 1: an admin create
// (name s1, sale_starts_at s2, sale_ends_at s3, stock n); 2: an admin reset (sale_starts_at s2,
// sale_ends_at s3, stock n); 3: an admin create with a waiting room (name s1, sale_starts_at s2,
// the queue's opening s3, every number of the admission n). An empty time is left out.
func FuzzAppWrites(f *testing.F) {
	times := []string{"", "2026-11-21T20:00:00Z", "1000-01-01T00:00:00Z", "0999-12-31T23:59:59Z",
		"9999-12-31T23:59:59Z", "9999-12-31T23:00:00-05:00", "0000-01-01T00:00:00+01:00", "1000-01-01T00:30:00+01:00",
		"2026-11-21T20:00:00.999999999Z", "2030-01-01T00:00:00Z"}
	for i, s := range times {
		f.Add(uint8(1), "edge "+strconv.Itoa(i), s, times[(i+4)%len(times)], int64(1))
		f.Add(uint8(2), "", s, times[(i+4)%len(times)], int64(3))
		f.Add(uint8(3), "room "+strconv.Itoa(i), s, times[(i+9)%len(times)], int64(60))
	}
	for _, n := range []int64{0, 1, 3600, 3601, 100_000, 1_000_000_000, 1 << 40, -1} {
		f.Add(uint8(3), "room", "2030-01-01T00:00:00Z", "2029-12-31T23:00:00Z", n)
	}
	for _, s := range []string{"alice", "é", "\xff", "a b", strings.Repeat("u", 64), strings.Repeat("u", 65), "🙂", "\x00", "x'; --"} {
		f.Add(uint8(0), s, "", "", int64(1))
		f.Add(uint8(0), "keyed", s, "", int64(1))
		f.Add(uint8(1), s, "", "", int64(1))
	}
	f.Add(uint8(1), strings.Repeat("é", 200), "", "", int64(1))
	f.Add(uint8(1), strings.Repeat("🙂", 200), "", "", int64(1))
	f.Add(uint8(1), strings.Repeat("n", 201), "", "", int64(1))
	f.Add(uint8(1), "big", "", "", int64(1_000_000_000))
	f.Add(uint8(1), "bigger", "", "", int64(1<<40))
	f.Add(uint8(0), "many", "", "", int64(3))
	a := startFuzzApp(f)
	f.Fuzz(func(t *testing.T, kind uint8, s1, s2, s3 string, n int64) {
		body := map[string]any{}
		if s2 != "" {
			body["sale_starts_at"] = s2
		}
		if s3 != "" {
			body["sale_ends_at"] = s3
		}
		switch kind % 4 {
		case 0:
			var header map[string]string
			if s2 != "" {
				header = map[string]string{"Idempotency-Key": s2}
			}
			data, _ := json.Marshal(map[string]any{"user_id": s1, "quantity": n})
			a.do(t, "POST", "/api/v1/products/"+strconv.FormatInt(a.onSale, 10)+"/purchase", "", data, header)
		case 1:
			body["name"], body["price_cents"], body["stock"], body["listed"] = s1, 1, n, false
			data, _ := json.Marshal(body)
			a.do(t, "POST", "/api/v1/admin/products", "", data, adminHeader)
		case 2:
			body["stock"] = n
			data, _ := json.Marshal(body)
			a.do(t, "POST", "/api/v1/admin/products/"+strconv.FormatInt(a.toReset, 10)+"/reset", "", data, adminHeader)
		case 3:
			admission := map[string]any{"mode": "waiting_room", "admit_rate": n, "max_active": n, "session_seconds": n, "abandon_seconds": n}
			if s3 != "" {
				admission["queue_opens_at"] = s3
			}
			delete(body, "sale_ends_at")
			body["name"], body["price_cents"], body["stock"], body["listed"], body["admission"] = s1, 1, 1, false, admission
			data, _ := json.Marshal(body)
			a.do(t, "POST", "/api/v1/admin/products", "", data, adminHeader)
		}
	})
}
