package fairness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPurchaseSends: a visitor's purchase carries its key and, when it has one, its pass, and
// reads the order or the refusal's code.
func TestPurchaseSends(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/products/7/purchase" || string(body) != `{"quantity":1,"user_id":"v1"}` ||
			r.Header.Get("Idempotency-Key") != "v1-k1" {
			t.Errorf("%s %s %v %s: not v1's purchase of product 7", r.Method, r.URL, r.Header, body)
		}
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Admission-Pass") == "" {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error":{"code":"admission_required","message":"join the queue"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"order_id":"o1","product_id":7,"quantity":1,"status":"pending","strategy":"s","user_id":"v1"}`)
	}))
	defer srv.Close()
	cr := &crowd{s: sale{productID: 7, targets: []string{srv.URL}}}
	ignoreAt := cmp.Comparer(func(a, b time.Time) bool { return true })
	for _, tt := range []struct {
		pass string
		want Purchase
	}{
		{"", Purchase{Key: "v1-k1", Status: http.StatusForbidden, Code: "admission_required"}},
		{"p1", Purchase{Key: "v1-k1", Status: http.StatusAccepted, OrderID: "o1"}},
	} {
		got := cr.purchase(context.Background(), srv.Client(), srv.URL, "v1", "v1-k1", tt.pass, "")
		if diff := cmp.Diff(tt.want, got, ignoreAt); diff != "" {
			t.Errorf("pass %q (-want +got):\n%s", tt.pass, diff)
		}
	}
}
