package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"testing/fstest"
	"time"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestBuyerTokens: with buyer tokens on, a purchase's user id is the verified token's subject;
// no token, a bad one, or a body user_id naming someone else is refused before the domain is
// asked. Without them (the control), the body's user_id is taken as it is.
func TestBuyerTokens(t *testing.T) {
	key := []byte("an HMAC key of at least 32 bytes, for tests only")
	cfg := buyer.Config{HMACKey: key, Audience: "seckill"}
	v, err := buyer.NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := buyer.NewSigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	token := func(user string) string {
		tok, err := signer.Token(user, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	other, _ := buyer.NewSigner(buyer.Config{HMACKey: []byte("another key of at least 32 bytes, not the shop's"), Audience: "seckill"})
	forged, _ := other.Token("alice", time.Minute)

	var asked []string // the user ids the domain was asked to sell to
	purchase := func(req sale.PurchaseRequest) (sale.Receipt, error) {
		asked = append(asked, req.UserID)
		return sale.Receipt{OrderID: "o1", Status: sale.StatusQueued, ProductID: req.ProductID, UserID: req.UserID, Quantity: req.Quantity}, nil
	}
	router := func(buyers *buyer.Verifier) http.Handler {
		m := metrics.New()
		h, err := New(Deps{Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Sales: fakeSales{purchase: purchase}, Stampedes: noStampedes{}, Board: boardOf(),
			HTTPMetrics: m, Buyers: buyers},
			Config{AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	withTokens, without := router(v), router(nil)

	tests := []struct {
		name       string
		h          http.Handler
		body, auth string
		status     int
		code, user string // the error code, or the user the domain was asked for
	}{
		{"token, no user_id: the subject", withTokens, `{"quantity":1}`, token("alice"), 202, "", "alice"},
		{"token and the same user_id", withTokens, `{"user_id":"alice"}`, token("alice"), 202, "", "alice"},
		{"token for someone else", withTokens, `{"user_id":"bob"}`, token("alice"), 403, codeUserMismatch, ""},
		{"no token", withTokens, `{"user_id":"alice"}`, "", 401, codeUnauthorized, ""},
		{"not a bearer token", withTokens, `{"user_id":"alice"}`, "Basic YWxpY2U6eA==", 401, codeUnauthorized, ""},
		{"signed with another key", withTokens, `{"user_id":"alice"}`, "Bearer " + forged, 401, codeUnauthorized, ""},
		{"control: no tokens, the claim is taken", without, `{"user_id":"bob"}`, token("alice"), 202, "", "bob"},
		{"control: no tokens, no user_id", without, `{"quantity":1}`, "", 400, string(sale.CodeInvalid), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			res := serve(tc.h, http.MethodPost, purchasePath, tc.body, map[string]string{"Authorization": tc.auth}, "WWW-Authenticate")
			if res.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.Status, tc.status, res.Body)
			}
			if tc.code != "" {
				var e errorBody
				if err := json.Unmarshal([]byte(res.Body), &e); err != nil || e.Error.Code != tc.code {
					t.Fatalf("body %s, want code %s", res.Body, tc.code)
				}
				if len(asked) != 0 {
					t.Fatalf("the domain was asked for %v after a refusal", asked)
				}
				if tc.status == 401 && res.Headers["WWW-Authenticate"] == "" {
					t.Error("a 401 without WWW-Authenticate")
				}
				return
			}
			if tc.user != "" && (len(asked) != 1 || asked[0] != tc.user) {
				t.Fatalf("the domain was asked for %v, want [%s]", asked, tc.user)
			}
		})
	}
}
