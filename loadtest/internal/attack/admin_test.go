package attack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSaleProduct: a name not on the admin's list is created, unlisted, one per buyer, its sale
// open now for an hour in whole seconds; a listed name is reset by its id.
func TestSaleProduct(t *testing.T) {
	var got []string // each request: method, path and body
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		for _, k := range []string{"sale_starts_at", "sale_ends_at"} {
			if s, _ := body[k].(string); s != "" {
				if at, err := time.Parse(time.RFC3339, s); err != nil || at.Nanosecond() != 0 || at.Location() != time.UTC {
					t.Errorf("%s %q: want RFC 3339, UTC, whole seconds", k, s)
				}
				body[k] = "T"
			}
		}
		b, _ := json.Marshal(body)
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/admin/products":
			_, _ = io.WriteString(w, `{"products":[{"id":3,"name":"known"}]}`)
		case "POST /api/v1/admin/products":
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":9,"name":"new"}`)
		case "POST /api/v1/admin/products/3/reset":
			_, _ = io.WriteString(w, `{"id":3,"name":"known"}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	admin := (&Options{AdminURL: srv.URL, AdminToken: "tok"}).Admin()

	for _, tt := range []struct {
		name   string
		wantID int64
		want   []string
	}{
		{"new", 9, []string{
			"GET /api/v1/admin/products null",
			`POST /api/v1/admin/products {"listed":false,"name":"new","per_user_limit":1,"price_cents":100,"sale_ends_at":"T","sale_starts_at":"T","stock":5,"strategy":"redis-lua"}`,
		}},
		{"known", 3, []string{
			"GET /api/v1/admin/products null",
			`POST /api/v1/admin/products/3/reset {"sale_ends_at":"T","sale_starts_at":"T","stock":5,"strategy":"redis-lua"}`,
		}},
	} {
		got = nil
		id, err := admin.SaleProduct(context.Background(), tt.name, "redis-lua", 5)
		if err != nil || id != tt.wantID {
			t.Errorf("%s: id %d, %v; want %d", tt.name, id, err, tt.wantID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: requests (-want +got):\n%s", tt.name, diff)
		}
	}
}
