package apitest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/seckill-go/seckill-go/api/apitest"
)

// TestCheck holds made-up answers to the real spec: the ones it describes pass, and each kind
// of planted difference — a route, a status, a field, an error code, a media type the spec does
// not have — fails, so that the end-to-end suites' checks (apptest.Client, httpapi.CheckAnswer)
// are shown able to fail.
func TestCheck(t *testing.T) {
	v, err := apitest.Default()
	if err != nil {
		t.Fatal(err)
	}
	jsonHeader := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	notFound := `{"error":{"code":"not_found","message":"no such product"}}`
	cases := []struct {
		name, method, target string
		status               int
		header               http.Header
		body                 string
		fails                string // "" passes; else a piece of the error
	}{
		{"healthz", "GET", "/healthz", 200, jsonHeader, `{"status":"ok"}`, ""},
		{"a product the API does not have", "GET", "/api/v1/products/99", 404, jsonHeader, notFound, ""},
		{"a path the spec does not have", "GET", "/api/v1/nowhere", 404, jsonHeader, notFound, ""},
		{"the storefront is outside the contract", "GET", "/static/app.js", 200, http.Header{"Content-Type": {"text/javascript"}}, "x", ""},
		{"the contract's page is outside the contract", "GET", "/api/docs", 200, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, "x", ""},
		{"a HEAD of a read", "HEAD", "/healthz", 200, jsonHeader, "", ""},
		{"planted: a HEAD's undocumented status", "HEAD", "/healthz", 418, jsonHeader, "", "not documented"},
		{"planted: an undocumented route answered", "GET", "/api/v1/nowhere", 200, jsonHeader, `{"status":"ok"}`, "no route of the spec"},
		{"planted: an undocumented method answered", "DELETE", "/healthz", 200, jsonHeader, `{"status":"ok"}`, "no route of the spec"},
		{"planted: an undocumented status", "GET", "/healthz", 418, jsonHeader, `{"status":"ok"}`, "not documented"},
		{"planted: an undocumented field", "GET", "/api/v1/products/99", 404, jsonHeader,
			`{"error":{"code":"not_found","message":"no such product","hint":"try 98"}}`, "hint"},
		{"planted: an undocumented error code", "GET", "/api/v1/products/99", 404, jsonHeader,
			`{"error":{"code":"gone_fishing","message":"no such product"}}`, "gone_fishing"},
		{"planted: a code of another status", "GET", "/api/v1/products/99", 404, jsonHeader,
			`{"error":{"code":"sold_out","message":"no such product"}}`, "sold_out"},
		{"planted: an undocumented media type", "GET", "/healthz", 200, http.Header{"Content-Type": {"text/plain"}}, "ok", "text/plain"},
		{"planted: an unknown path's error body", "GET", "/api/v1/nowhere", 404, jsonHeader, `{"error":"not found"}`, "error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Check(c.method, c.target, c.status, c.header, []byte(c.body))
			switch {
			case c.fails == "" && err != nil:
				t.Fatalf("an answer the spec describes failed: %v", err)
			case c.fails != "" && err == nil:
				t.Fatal("a planted difference passed")
			case c.fails != "" && !strings.Contains(err.Error(), c.fails):
				t.Fatalf("failed, but not on %q: %v", c.fails, err)
			}
		})
	}
}
