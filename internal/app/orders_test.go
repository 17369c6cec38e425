package app_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestOrdersPrivateEndToEnd (issue #29, finding 3), through the real app, store and checkout: a
// buyer's order, once confirmed, is read, paid and cancelled by nobody else. Another buyer gets
// the answer of an order id that exists nowhere, byte for byte, and the order is left awaiting
// payment; then its buyer pays it. Once with user ids claimed (the query's or the body's), once
// on a replica that verifies buyer tokens (their subjects), both over one database.
func TestOrdersPrivateEndToEnd(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	claims := stack.Start(t, map[string]string{"SECKILL_PAYMENT_FAILURE_RATE": "0"})
	tokens := stack.Start(t, map[string]string{"SECKILL_PAYMENT_FAILURE_RATE": "0", "SECKILL_BUYER_JWT_HMAC_KEY": buyerKey})
	admin := apptest.Client{URL: claims.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "private orders", "price_cents": 250, "stock": 10, "per_user_limit": 1, "listed": false})

	for _, tc := range []struct {
		name   string
		url    string
		tokens bool
	}{
		{"claimed user ids", claims.URL, false},
		{"buyer tokens", tokens.URL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner, other := tc.name[:1]+"-owner", tc.name[:1]+"-other"
			// as is user's client: its token, or its user_id in the query of a read and the body
			// of a write.
			as := func(user string) (apptest.Client, func(string) string, map[string]any) {
				c := apptest.Client{URL: tc.url}
				if tc.tokens {
					c.Token = mint(t, user)
					return c, func(p string) string { return p }, map[string]any{}
				}
				return c, func(p string) string { return p + "?user_id=" + url.QueryEscape(user) }, map[string]any{"user_id": user}
			}
			buyer, read, body := as(owner)
			r := buyer.MustDo(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(product, 10)+"/purchase", body, nil)
			if r.Status != http.StatusAccepted {
				t.Fatalf("the owner's purchase: %d %s", r.Status, r.Raw)
			}
			mine := "/api/v1/orders/" + r.Str("order_id")
			itest.Eventually(t, 30*time.Second, func() (bool, string) {
				r = buyer.MustDo(t, http.MethodGet, read(mine), nil, nil)
				return r.Status == http.StatusOK && r.Str("status") == "confirmed", r.Raw
			})

			stranger, strangerRead, strangerBody := as(other)
			absent := "/api/v1/orders/01a20076-796b-7172-9393-d0e8391928db"
			key := map[string]string{"Idempotency-Key": "stranger-pays"}
			for _, req := range []struct {
				method, suffix string
				body           any
				header         map[string]string
			}{
				{http.MethodGet, "", nil, nil},
				{http.MethodPost, "/pay", strangerBody, key},
				{http.MethodPost, "/cancel", strangerBody, nil},
			} {
				path := func(p string) string {
					if req.method == http.MethodGet {
						return strangerRead(p)
					}
					return p + req.suffix
				}
				want := stranger.MustDo(t, req.method, path(absent), req.body, req.header)
				got := stranger.MustDo(t, req.method, path(mine), req.body, req.header)
				if want.Status != http.StatusNotFound || got.Status != want.Status || got.Raw != want.Raw {
					t.Errorf("%s the owner's order%s as another buyer: %d %s; want the answer of an absent order, %d %s",
						req.method, req.suffix, got.Status, got.Raw, want.Status, want.Raw)
				}
			}
			if r := buyer.MustDo(t, http.MethodGet, read(mine), nil, nil); r.Status != http.StatusOK || r.Str("status") != "confirmed" || r.Str("user_id") != owner {
				t.Fatalf("the owner's order after the other buyer's tries: %d %s, want it still confirmed", r.Status, r.Raw)
			}
			r = buyer.MustDo(t, http.MethodPost, mine+"/pay", body, map[string]string{"Idempotency-Key": "owner-pays"})
			if r.Status != http.StatusOK || r.Str("status") != "paid" {
				t.Fatalf("the owner pays: %d %s", r.Status, r.Raw)
			}
		})
	}
}

// TestOversizedHeaderEndToEnd (issue #29, finding 5): a replica's own server hands a request
// head over the API's limit (httpapi.MaxHeaderBytes) to the API, which answers the JSON 431 with
// the security headers, not net/http's plain text.
func TestOversizedHeaderEndToEnd(t *testing.T) {
	itest.Integration(t)
	a := apptest.NewStack(t).Start(t, nil)
	req, err := http.NewRequest(http.MethodGet, a.URL+"/api/v1/products", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("p", 100<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !bytes.Contains(body, []byte(`"code":"header_too_large"`)) ||
		res.Header.Get("Content-Security-Policy") == "" || res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("X-Request-Id") == "" {
		t.Fatalf("a 100 KiB header: %d %v %s, want the API's JSON 431 with its headers", res.StatusCode, res.Header, body)
	}
}

// TestTokenLifetime: `seckill token` mints tokens the replicas accept (the default -ttl, and up to
// SECKILL_BUYER_JWT_MAX_TTL), and refuses a -ttl over that maximum instead of minting a token
// that every replica would refuse.
func TestTokenLifetime(t *testing.T) {
	run := func(maxTTL string, args ...string) error {
		getenv := func(k string) string {
			switch k {
			case "SECKILL_BUYER_JWT_HMAC_KEY":
				return buyerKey
			case "SECKILL_BUYER_JWT_MAX_TTL":
				return maxTTL
			}
			return ""
		}
		var out, errOut bytes.Buffer
		return app.Run(context.Background(), append([]string{"token"}, args...), getenv, &out, &errOut, app.Options{})
	}
	for _, tc := range []struct {
		maxTTL string
		args   []string
		ok     bool
	}{
		{"", []string{"alice"}, true},
		{"", []string{"-ttl", "24h", "alice"}, true},
		{"", []string{"-ttl", "25h", "alice"}, false},
		{"2h", []string{"-ttl", "2h", "alice"}, true},
		{"2h", []string{"-ttl", "3h", "alice"}, false},
	} {
		if err := run(tc.maxTTL, tc.args...); (err == nil) != tc.ok {
			t.Errorf("SECKILL_BUYER_JWT_MAX_TTL=%q seckill token %v: %v, want ok %v", tc.maxTTL, tc.args, err, tc.ok)
		}
	}
}
