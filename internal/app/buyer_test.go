package app_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
)

const buyerKey = "the dev stack's buyer key, 32 bytes or more"

// mint runs `seckill token` for user and returns the token it prints.
func mint(t *testing.T, user string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "SECKILL_BUYER_JWT_HMAC_KEY" {
			return buyerKey
		}
		return ""
	}
	if err := app.Run(context.Background(), []string{"token", "-ttl", "5m", user}, getenv, &out, &errOut, app.Options{}); err != nil {
		t.Fatalf("seckill token: %v: %s", err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// TestBuyerTokensEndToEnd: a replica started with SECKILL_BUYER_JWT_HMAC_KEY sells to the
// subject of a token minted by `seckill token`, refuses a purchase without one, and its
// storefront stampede signs its own buyers' tokens (they buy; without tokens they would all be
// refused 401).
func TestBuyerTokensEndToEnd(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	a := stack.Start(t, map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": buyerKey})
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "tokens", "price_cents": 100, "stock": 5, "per_user_limit": 1, "listed": false})
	path := "/api/v1/products/" + strconv.FormatInt(product, 10) + "/purchase"

	buyer := apptest.Client{URL: a.URL, Token: mint(t, "alice")}
	r := buyer.MustDo(t, http.MethodPost, path, map[string]any{"quantity": 1}, nil)
	if r.Status != http.StatusAccepted || r.Str("user_id") != "alice" {
		t.Fatalf("with alice's token: %d %s, want 202 for alice", r.Status, r.Raw)
	}
	if r := buyer.MustDo(t, http.MethodPost, path, map[string]any{"user_id": "mallory"}, nil); r.Status != http.StatusForbidden || r.ErrorCode() != "user_mismatch" {
		t.Fatalf("alice's token for mallory: %d %s, want 403 user_mismatch", r.Status, r.Raw)
	}
	anon := apptest.Client{URL: a.URL}
	if r := anon.MustDo(t, http.MethodPost, path, map[string]any{"user_id": "bob"}, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d %s, want 401", r.Status, r.Raw)
	}

	st := admin.MustDo(t, http.MethodPost, "/api/v1/admin/products/"+strconv.FormatInt(product, 10)+"/stampede", map[string]any{"buyers": 12}, nil)
	if st.Status != http.StatusAccepted {
		t.Fatalf("stampede: %d %s", st.Status, st.Raw)
	}
	var p apptest.Response
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		p = admin.MustDo(t, http.MethodGet, "/api/v1/admin/stampedes/"+st.Str("stampede_id"), nil, nil)
		return p.Status == http.StatusOK && p.Body["running"] == false, p.Raw
	})
	if p.Num("accepted") != 4 || p.Num("sold_out") != 8 || p.Num("rejected_other") != 0 {
		t.Fatalf("stampede of 12 buyers for the 4 units left: %s, want 4 accepted, 8 sold out, none rejected", p.Raw)
	}
}
