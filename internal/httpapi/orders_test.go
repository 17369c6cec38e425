package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestOrdersPrivate (issue #29, finding 3): an order is its buyer's. Anyone else who reads, pays
// or cancels it by its id gets the very answer of an id that names no order (status, body and
// type), and the order is left as it was; its buyer reads, pays and cancels it. With buyer tokens
// the buyer is the token's subject, without them the user_id given (the query's, for a read).
func TestOrdersPrivate(t *testing.T) {
	verifier, err := buyer.NewVerifier(buyer.Config{HMACKey: fuzzBuyerKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		h      http.Handler
		tokens bool
	}{
		{"claimed user ids", memRouter(t), false},
		{"buyer tokens", memRouterBuyers(t, verifier), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// as sends a request as user: with tokens, the user's token and no user_id; without,
			// the user_id in the query (a read) or the body.
			as := func(user, method, path string, header map[string]string) response {
				t.Helper()
				h := map[string]string{"Idempotency-Key": "pay-1"}
				for k, v := range header {
					h[k] = v
				}
				body := ""
				switch {
				case tc.tokens:
					h["Authorization"] = "Bearer " + buyerToken(t, user, time.Hour)
					if method == http.MethodPost {
						body = `{}`
					}
				case method == http.MethodPost:
					body = `{"user_id":"` + user + `"}`
				default:
					path += "?user_id=" + user
				}
				return serve(tc.h, method, path, body, h, "Content-Type")
			}
			bought := as("alice", "POST", "/api/v1/products/1/purchase", nil)
			var receipt receiptJSON
			if err := json.Unmarshal([]byte(bought.Body), &receipt); bought.Status != 202 || err != nil {
				t.Fatalf("alice's purchase: %d %s", bought.Status, bought.Body)
			}
			mine, absent := "/api/v1/orders/"+receipt.OrderID, "/api/v1/orders/order-999999"

			for _, r := range []struct{ method, suffix string }{{"GET", ""}, {"HEAD", ""}, {"POST", "/pay"}, {"POST", "/cancel"}} {
				nobody := as("bob", r.method, absent+r.suffix, nil)
				if nobody.Status != 404 {
					t.Fatalf("%s %s as bob: %d %s, want 404", r.method, absent+r.suffix, nobody.Status, nobody.Body)
				}
				if got := as("bob", r.method, mine+r.suffix, nil); got.Status != nobody.Status || got.Body != nobody.Body ||
					got.Headers["Content-Type"] != nobody.Headers["Content-Type"] {
					t.Errorf("%s alice's order%s as bob: %+v; want the answer of an absent order, %+v", r.method, r.suffix, got, nobody)
				}
			}
			read := as("alice", "GET", mine, nil)
			var o orderJSON
			if err := json.Unmarshal([]byte(read.Body), &o); read.Status != 200 || err != nil || o.UserID != "alice" || o.Status != string(sale.StatusQueued) {
				t.Fatalf("alice reads her order after bob's tries: %d %s, want it queued as it was", read.Status, read.Body)
			}
			if got := as("alice", "POST", mine+"/cancel", nil); got.Status != 200 || !strings.Contains(got.Body, `"status":"cancelled"`) {
				t.Fatalf("alice cancels her order: %d %s", got.Status, got.Body)
			}
		})
	}
}

// TestOrderBuyerRequired: a read names its buyer. Without tokens the query's user_id is required
// and checked like any user id; with tokens a user_id other than the token's subject is refused
// as on a purchase, and no token is a 401, whether the order exists or not.
func TestOrderBuyerRequired(t *testing.T) {
	verifier, err := buyer.NewVerifier(buyer.Config{HMACKey: fuzzBuyerKey})
	if err != nil {
		t.Fatal(err)
	}
	claims, tokens := memRouter(t), memRouterBuyers(t, verifier)
	alice := "Bearer " + buyerToken(t, "alice", time.Hour)
	for _, tc := range []struct {
		name, target, auth string
		h                  http.Handler
		status             int
		code               string
	}{
		{"no user_id", "/api/v1/orders/order-1", "", claims, 400, string(sale.CodeInvalid)},
		{"empty user_id", "/api/v1/orders/order-1?user_id=", "", claims, 400, string(sale.CodeInvalid)},
		{"bad user_id", "/api/v1/orders/order-1?user_id=a%20b", "", claims, 400, string(sale.CodeInvalid)},
		{"user_id twice", "/api/v1/orders/order-1?user_id=alice&user_id=bob", "", claims, 400, string(sale.CodeInvalid)},
		{"malformed query", "/api/v1/orders/order-1?user_id=%zz", "", claims, 400, string(sale.CodeInvalid)},
		{"a token without tokens on is no identity", "/api/v1/orders/order-1", alice, claims, 400, string(sale.CodeInvalid)},
		{"claims: unknown order", "/api/v1/orders/order-1?user_id=alice", "", claims, 404, string(sale.CodeNotFound)},
		{"tokens: no token", "/api/v1/orders/order-1?user_id=alice", "", tokens, 401, codeUnauthorized},
		{"tokens: someone else's user_id", "/api/v1/orders/order-1?user_id=bob", alice, tokens, 403, codeUserMismatch},
		{"tokens: the subject's user_id", "/api/v1/orders/order-1?user_id=alice", alice, tokens, 404, string(sale.CodeNotFound)},
		{"tokens: the subject", "/api/v1/orders/order-1", alice, tokens, 404, string(sale.CodeNotFound)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.target, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); rec.Code != tc.status || err != nil || e.Error.Code != tc.code {
				t.Fatalf("GET %s: %d %s, want %d %s", tc.target, rec.Code, rec.Body, tc.status, tc.code)
			}
			CheckAnswer(t, http.MethodGet, tc.target, rec.Code, rec.Header(), rec.Body.Bytes())
		})
	}
}
