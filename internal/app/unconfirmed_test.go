package app_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestUnconfirmedEndToEnd: SECKILL_REDISLUA_MIN_REPLICAS reaches the redis-lua deductor. On a
// Redis of the test's own without a replica, a purchase and its retry with the same key are
// answered 503 unconfirmed with Retry-After and the message that tells the buyer to retry with
// the key, never 202, and the metrics count them; the same replica with the setting at 0 (the
// control) answers the retry 202 with the order the unconfirmed purchase made.
func TestUnconfirmedEndToEnd(t *testing.T) {
	itest.Integration(t)
	srv := itest.RedisServer(t)
	stack := apptest.NewStack(t)
	env := map[string]string{"SECKILL_REDIS_MODE": "single", "SECKILL_REDIS_ADDR": srv.Addr(), "SECKILL_REDIS_ADDRS": "",
		"SECKILL_REDISLUA_MIN_REPLICAS": "1", "SECKILL_REDISLUA_WAIT_TIMEOUT": "50ms"}
	a := stack.Start(t, env)
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "unconfirmed", "price_cents": 1, "stock": 5, "per_user_limit": 1, "strategy": "redis-lua"})
	path := "/api/v1/products/" + strconv.FormatInt(product, 10) + "/purchase"
	buyer := apptest.Client{URL: a.URL}
	key := map[string]string{"Idempotency-Key": "k-alice"}
	for try := range 2 {
		r := buyer.MustDo(t, http.MethodPost, path, map[string]any{"user_id": "alice"}, key)
		if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unconfirmed" || r.Header.Get("Retry-After") != "1" ||
			!strings.Contains(r.Raw, "same Idempotency-Key") {
			t.Fatalf("try %d without a replica: %d %v %s, want 503 unconfirmed with Retry-After", try, r.Status, r.Header, r.Raw)
		}
	}
	res, err := http.Get(a.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if want := `seckill_purchases_total{outcome="unconfirmed",strategy="redis-lua"} 2`; !strings.Contains(string(metrics), want) {
		t.Fatalf("/metrics does not count the unconfirmed answers: no %q", want)
	}

	a.Stop()
	env["SECKILL_REDISLUA_MIN_REPLICAS"] = "0"
	b := stack.Start(t, env)
	r := apptest.Client{URL: b.URL}.MustDo(t, http.MethodPost, path, map[string]any{"user_id": "alice"}, key)
	if r.Status != http.StatusAccepted || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry without the wait: %d %v %s, want the unconfirmed purchase's 202 replayed", r.Status, r.Header, r.Raw)
	}
	order := apptest.Client{URL: b.URL}
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		o := order.MustDo(t, http.MethodGet, "/api/v1/orders/"+r.Str("order_id")+"?user_id=alice", nil, nil)
		return o.Status == http.StatusOK, o.Raw
	})
}
