package appapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45000: "-45,000"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":{"code":"sold_out"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":7}`))
	}))
	defer srv.Close()
	c := New(srv.URL, "tok")
	var out struct{ ID int64 }
	if err := c.Call(context.Background(), http.MethodPost, "/ok", map[string]any{"a": 1}, http.StatusOK, &out); err != nil || out.ID != 7 {
		t.Fatalf("Call = %v, id %d", err, out.ID)
	}
	err := c.Call(context.Background(), http.MethodGet, "/bad", nil, http.StatusOK, &out)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "sold_out") {
		t.Fatalf("Call of a 409 = %v, want an error naming the status and the answer", err)
	}
}

// TestAPI: the generated client carries the admin token, and Want turns an answer of another
// status into a *StatusError with the answer.
func TestAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"no"}}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"products":[{"id":7,"name":"p"}]}`))
	}))
	defer srv.Close()
	for _, tt := range []struct {
		token   string
		wantErr string
	}{{"tok", ""}, {"other", `GET /api/v1/admin/products: 401 Unauthorized {"error":{"code":"unauthorized","message":"no"}}`}} {
		rsp, err := New(srv.URL, tt.token).API().AdminListProductsWithResponse(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = Want(rsp.HTTPResponse, rsp.Body, http.StatusOK)
		var se *StatusError
		switch {
		case tt.wantErr == "" && (err != nil || len(rsp.JSON200.Products) != 1 || rsp.JSON200.Products[0].ID != 7):
			t.Errorf("token %s: %v, %s", tt.token, err, rsp.Body)
		case tt.wantErr != "" && (!errors.As(err, &se) || err.Error() != tt.wantErr):
			t.Errorf("token %s: error %v, want %s", tt.token, err, tt.wantErr)
		}
	}
}
