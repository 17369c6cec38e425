package attack

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestAttackAndSettle runs a small plan, one request at a time, against two replicas that check each purchase for the
// contract's path, method and headers and answer it as a sale would: the first key of a buyer
// buys, its second is limit_reached, and the first try on replica b finds it unavailable. Every
// answer comes back to its attempt with the order or the code; Settle sends the unavailable ones
// again.
func TestAttackAndSettle(t *testing.T) {
	var mu sync.Mutex
	bought := map[string]bool{}    // keys that bought
	firstSeen := map[string]bool{} // replica b's first sight of a key
	replica := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				UserID   string `json:"user_id"`
				Quantity int    `json:"quantity"`
			}
			data, _ := io.ReadAll(r.Body)
			key := r.Header.Get("Idempotency-Key")
			if r.Method != http.MethodPost || r.URL.Path != "/api/v1/products/7/purchase" || r.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(data, &body) != nil || body.Quantity != 1 || !strings.HasPrefix(key, body.UserID+"-k") {
				t.Errorf("%s %s %v %s: not the contract's purchase of product 7", r.Method, r.URL, r.Header, data)
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case name == "b" && !firstSeen[key]:
				firstSeen[key] = true
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"try again"}}`)
			case strings.HasSuffix(key, "-k2"):
				w.WriteHeader(http.StatusConflict)
				_, _ = io.WriteString(w, `{"error":{"code":"limit_reached","message":"one each"}}`)
			default:
				if bought[key] {
					w.Header().Set("Idempotent-Replayed", "true")
				}
				bought[key] = true
				w.WriteHeader(http.StatusAccepted)
				_, _ = io.WriteString(w, `{"order_id":"o-`+key+`","product_id":7,"quantity":1,"status":"pending","strategy":"s","user_id":"`+body.UserID+`"}`)
			}
		}))
	}
	a, b := replica("a"), replica("b")
	defer a.Close()
	defer b.Close()
	o := &Options{Targets: []string{a.URL, b.URL}, Buyers: 2, Attempts: 3, Rate: 1000, Workers: 1, MaxDuration: 10 * time.Second}
	plan := PlanAttempts(o, "r1", "t")
	answers, _, err := Attack(context.Background(), o, 7, plan, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}

	// row is one try's answer.
	type row struct {
		Buyer, Try int
		Status     int
		Outcome    string
	}
	rows := func(as []Answer) []row {
		var r []row
		for _, a := range as {
			if a.Status == http.StatusAccepted && a.OrderID != "o-"+a.key {
				t.Errorf("%+v: the order of another key", a)
			}
			r = append(r, row{a.Buyer, a.n, a.Status, a.Outcome()})
		}
		slices.SortFunc(r, func(x, y row) int { return (x.Buyer*10 + x.Try) - (y.Buyer*10 + y.Try) })
		return r
	}
	// Buyer 0 on a buys, is answered its first answer again, is refused its second key; buyer 1
	// on b finds b unavailable for each key's first try and buys with its retry.
	want := []row{
		{0, 1, 202, "accepted"}, {0, 2, 202, "replayed"}, {0, 3, 409, "limit_reached"},
		{1, 1, 503, "unavailable"}, {1, 2, 202, "accepted"}, {1, 3, 503, "unavailable"},
	}
	if diff := cmp.Diff(want, rows(answers)); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}

	settled, stuck := Settle(context.Background(), o, 7, answers)
	if len(stuck) != 0 {
		t.Errorf("stuck: %+v", stuck)
	}
	// Only buyer 1's second key was left unknown: settled, on a, as limit_reached.
	if diff := cmp.Diff([]row{{1, 3, 409, "limit_reached"}}, rows(settled)); diff != "" {
		t.Errorf("settled (-want +got):\n%s", diff)
	}
}
