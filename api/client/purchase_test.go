package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLeanPurchaseIsTheGenerated holds the load generators' purchase (PurchaseURL,
// NewLeanPurchase) to the one the generated Client sends from the contract: the same method,
// URL, headers and body. A change of the purchase's path or parameters in
// api/openapi.yaml fails here until purchase.go follows it.
func TestLeanPurchaseIsTheGenerated(t *testing.T) {
	key, pass, user, qty := "k-1", "pass-1", "alice", 2
	tests := []struct {
		name   string
		server string
		id     ProductID
		params PurchaseParams
		body   PurchaseRequest
	}{
		{"no parameters", "http://127.0.0.1:8080", 7, PurchaseParams{}, PurchaseRequest{}},
		{"key and body", "http://127.0.0.1:8080", 7, PurchaseParams{IdempotencyKey: &key}, PurchaseRequest{UserID: &user, Quantity: &qty}},
		{"key, pass, behind a path prefix", "http://lb.example/shop", 123456789012, PurchaseParams{IdempotencyKey: &key, AdmissionPass: &pass}, PurchaseRequest{UserID: &user}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want *http.Request
			c, err := NewClient(tt.server, WithHTTPClient(doerFunc(func(r *http.Request) (*http.Response, error) {
				want = r
				return nil, errors.New("not sent")
			})))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Purchase(context.Background(), tt.id, &tt.params, tt.body)
			if want == nil {
				t.Fatal("the generated client sent nothing")
			}
			url, err := PurchaseURL(tt.server, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewLeanPurchase(context.Background(), url, tt.params, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(summarize(t, want), summarize(t, got)); diff != "" {
				t.Errorf("the lean purchase differs from the generated one (-generated +lean):\n%s", diff)
			}
		})
	}
}

// doerFunc is a HttpRequestDoer that is a function.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

// request is what a server sees of a request.
type request struct {
	Method, URL string
	Header      http.Header
	Body        any
}

func summarize(t *testing.T, r *http.Request) request {
	t.Helper()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("body %q: %v", data, err)
	}
	return request{Method: r.Method, URL: r.URL.String(), Header: r.Header, Body: body}
}

// TestReadPurchaseAnswer: a receipt, an error and a body that is no JSON, each as the load
// generators read them.
func TestReadPurchaseAnswer(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    PurchaseAnswer
		wantErr bool
	}{
		{"receipt", `{"order_id":"o1","product_id":7,"quantity":1,"status":"pending","strategy":"redis-lua","user_id":"alice"}`,
			PurchaseAnswer{Receipt: Receipt{OrderID: "o1", ProductID: 7, Quantity: 1, Status: "pending", Strategy: "redis-lua", UserID: "alice"}}, false},
		{"error", `{"error":{"code":"sold_out","message":"sold out"}}`,
			PurchaseAnswer{Error: ErrorDetail{Code: "sold_out", Message: "sold out"}}, false},
		{"a proxy's page", `<html>502 Bad Gateway</html>`, PurchaseAnswer{}, true},
		{"empty", ``, PurchaseAnswer{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPurchaseAnswer(&http.Response{Body: io.NopCloser(strings.NewReader(tt.body))})
			if (err != nil) != tt.wantErr {
				t.Errorf("err %v, want an error: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
