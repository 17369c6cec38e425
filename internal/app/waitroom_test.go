package app_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// waitroomKey returns a fresh Ed25519 key and its seed as SECKILL_WAITROOM_KEY spells it.
func waitroomKey(tb testing.TB) (ed25519.PrivateKey, string) {
	tb.Helper()
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		tb.Fatal(err)
	}
	return ed25519.NewKeyFromSeed(seed), base64.StdEncoding.EncodeToString(seed)
}

// forge signs claims under header with method and key, as an attacker's library would.
func forge(tb testing.TB, method jwt.SigningMethod, claims jwt.MapClaims, header map[string]any, key any) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		t.Header[k] = v
	}
	s, err := t.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestWaitingRoomPurchasePass, through the real app: a purchase of a waiting-room sale without a
// valid admission pass is refused 403 with the code of its kind, whatever the forgery, and
// deducts nothing: the stock unchanged, nothing reserved, its Idempotency-Key left unused; the
// genuine pass buys; a reset makes the passes of the sale before it worthless; an open sale
// ignores the header.
func TestWaitingRoomPurchasePass(t *testing.T) {
	itest.Integration(t)
	key, seed := waitroomKey(t)
	stack := apptest.NewStack(t)
	srv := stack.Start(t, map[string]string{"SECKILL_WAITROOM_KEY": seed})
	admin := apptest.Client{URL: srv.URL, Token: apptest.AdminToken}
	id := admin.CreateProduct(t, map[string]any{"name": "queued", "price_cents": 100, "stock": 5, "strategy": "mysql", "per_user_limit": 1, "listed": false,
		"admission": map[string]any{"mode": "waiting_room", "admit_rate": 10, "max_active": 10, "session_seconds": 60, "abandon_seconds": 10}})
	open := admin.CreateProduct(t, map[string]any{"name": "open", "price_cents": 100, "stock": 5, "strategy": "mysql", "per_user_limit": 1, "listed": false})
	path := func(id int64) string { return "/api/v1/products/" + strconv.FormatInt(id, 10) }
	saleID := strconv.FormatInt(id, 10) + ".1" // a new product's first sale: sale.Product.SaleID
	signer, err := admit.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sign := func(buyer, sale string, from, to time.Time) string {
		tok, err := signer.Sign(buyer, sale, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	otherPriv, _ := waitroomKey(t)
	otherSigner, err := admit.NewSigner(otherPriv)
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{"sub": "alice", "sale": saleID, "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for k, v := range claims {
			c[k] = v
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	ours := map[string]any{"kid": signer.KeyID(), "typ": admit.Type}
	pubText := []byte(base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)))
	good := sign("alice", saleID, now, now.Add(time.Minute))
	bobs := sign("bob", saleID, now, now.Add(time.Minute))
	// segment replaces part i of token by that of other.
	segment := func(token, other string, i int) string {
		a, b := strings.Split(token, "."), strings.Split(other, ".")
		a[i] = b[i]
		return strings.Join(a, ".")
	}
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"` + admit.Type + `","kid":"` + signer.KeyID() + `"}`))
	parts := strings.Split(good, ".")
	flipped := []byte(parts[2])
	flipped[3] ^= 'A' ^ 'B' // another signature of the same length, base64url still
	if flipped[3] == parts[2][3] {
		t.Fatal("the signature did not change")
	}

	buyer := apptest.Client{URL: srv.URL}
	stats := func() apptest.Response {
		return admin.MustDo(t, http.MethodGet, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/stats", nil, nil)
	}
	var keys []string
	for _, tc := range []struct {
		name, pass, code, says string
	}{
		{"none", "", string(sale.CodePassRequired), "join its queue"},
		{"expired", sign("alice", saleID, now.Add(-30*time.Minute), now.Add(-time.Minute)), string(sale.CodePassExpired), "expired"},
		{"another buyer's", sign("bob", saleID, now, now.Add(time.Minute)), string(sale.CodePassInvalid), "another buyer"},
		{"another sale's", sign("alice", strconv.FormatInt(open, 10)+".1", now, now.Add(time.Minute)), string(sale.CodePassInvalid), "another sale"},
		{"the sale before a reset", sign("alice", strconv.FormatInt(id, 10)+".0", now, now.Add(time.Minute)), string(sale.CodePassInvalid), "another sale"},
		{"the sale after a reset", sign("alice", strconv.FormatInt(id, 10)+".2", now, now.Add(time.Minute)), string(sale.CodePassInvalid), "another sale"},
		{"bad signature", parts[0] + "." + parts[1] + "." + string(flipped), string(sale.CodePassInvalid), "not signed"},
		{"tampered payload: bob's claims under alice's signature", segment(bobs, good, 2), string(sale.CodePassInvalid), "not signed"},
		{"tampered payload: alice's claims under bob's signature", segment(good, bobs, 2), string(sale.CodePassInvalid), "not signed"},
		{"another key under our kid", forge(t, jwt.SigningMethodEdDSA, claims, ours, otherPriv), string(sale.CodePassInvalid), "not signed"},
		{"another Ed25519 key under its own kid", func() string {
			tok, err := otherSigner.Sign("alice", saleID, now, now.Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}(), string(sale.CodePassInvalid), "not signed"},
		{"our key, no kid", forge(t, jwt.SigningMethodEdDSA, claims, map[string]any{"kid": nil, "typ": admit.Type}, key), string(sale.CodePassInvalid), "not signed"},
		{"our key, another type of JWT", forge(t, jwt.SigningMethodEdDSA, claims, map[string]any{"kid": signer.KeyID(), "typ": "JWT"}, key), string(sale.CodePassInvalid), "not signed"},
		{"our key, no expiry", forge(t, jwt.SigningMethodEdDSA, with("exp", nil), ours, key), string(sale.CodePassInvalid), "not signed"},
		{"our key, longer than a session can be", forge(t, jwt.SigningMethodEdDSA, with("exp", now.Add(2*time.Hour).Unix()), ours, key), string(sale.CodePassInvalid), "not signed"},
		{"our key, issued in the future", forge(t, jwt.SigningMethodEdDSA, with("iat", now.Add(time.Hour).Unix()), ours, key), string(sale.CodePassInvalid), "not signed"},
		{"alg confusion: HS256 keyed with the public key", forge(t, jwt.SigningMethodHS256, claims, ours, []byte(key.Public().(ed25519.PublicKey))), string(sale.CodePassInvalid), "not signed"},
		{"alg confusion: HS256 keyed with the public key's text", forge(t, jwt.SigningMethodHS256, claims, ours, pubText), string(sale.CodePassInvalid), "not signed"},
		{"alg none", forge(t, jwt.SigningMethodNone, claims, ours, jwt.UnsafeAllowNoneSignatureType), string(sale.CodePassInvalid), "not signed"},
		{"alg none over the genuine payload, no signature", noneHeader + "." + parts[1] + ".", string(sale.CodePassInvalid), "not signed"},
		{"alg none over the genuine payload and signature", noneHeader + "." + parts[1] + "." + parts[2], string(sale.CodePassInvalid), "not signed"},
		{"malformed", "not.a.pass", string(sale.CodePassInvalid), "not signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, key := range []string{"", "forged-" + strconv.Itoa(len(keys))} {
				h := map[string]string{}
				if tc.pass != "" {
					h["Admission-Pass"] = tc.pass
				}
				if key != "" {
					h["Idempotency-Key"] = key
					keys = append(keys, key)
				}
				r := buyer.MustDo(t, http.MethodPost, path(id)+"/purchase", map[string]any{"user_id": "alice"}, h)
				if r.Status != http.StatusForbidden || r.ErrorCode() != tc.code || !strings.Contains(r.Raw, tc.says) {
					t.Errorf("purchase (key %q) with %s: %d %s; want 403 %s saying %q", key, tc.name, r.Status, r.Raw, tc.code, tc.says)
				}
			}
			if r := stats(); r.Num("stock") != 5 || r.Num("reserved") != 0 || r.Num("sold_units") != 0 {
				t.Fatalf("after a purchase with %s: %s; want stock 5, nothing reserved or sold", tc.name, r.Raw)
			}
		})
	}
	// The refused purchases' keys were never used: the genuine purchase takes one and buys.
	if r := buyer.MustDo(t, http.MethodPost, path(id)+"/purchase", map[string]any{"user_id": "alice"},
		map[string]string{"Admission-Pass": good, "Idempotency-Key": keys[0]}); r.Status != http.StatusAccepted {
		t.Fatalf("purchase with a genuine pass: %d %s; want 202", r.Status, r.Raw)
	}
	if r := stats(); r.Num("stock") != 4 || r.Num("reserved") != 1 {
		t.Errorf("after the genuine purchase: %s; want stock 4, one reserved", r.Raw)
	}

	// A reset starts sale 2: bob's genuine pass of sale 1 opens nothing in it.
	if r := admin.MustDo(t, http.MethodPost, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/reset", map[string]any{"stock": 5}, nil); r.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.Status, r.Raw)
	}
	if r := buyer.MustDo(t, http.MethodPost, path(id)+"/purchase", map[string]any{"user_id": "bob"}, map[string]string{"Admission-Pass": bobs}); r.Status != http.StatusForbidden ||
		r.ErrorCode() != string(sale.CodePassInvalid) || !strings.Contains(r.Raw, "another sale") {
		t.Errorf("bob buys in sale 2 with his pass of sale 1: %d %s; want 403 %s, another sale", r.Status, r.Raw, sale.CodePassInvalid)
	}
	if r := stats(); r.Num("stock") != 5 || r.Num("reserved") != 0 {
		t.Errorf("after the purchase with a pass of the sale before the reset: %s; want stock 5, nothing reserved", r.Raw)
	}
	if r := buyer.MustDo(t, http.MethodPost, path(id)+"/purchase", map[string]any{"user_id": "bob"},
		map[string]string{"Admission-Pass": sign("bob", strconv.FormatInt(id, 10)+".2", now, now.Add(time.Minute))}); r.Status != http.StatusAccepted {
		t.Errorf("bob buys in sale 2 with a pass of sale 2: %d %s; want 202", r.Status, r.Raw)
	}
	if r := buyer.MustDo(t, http.MethodPost, path(open)+"/purchase", map[string]any{"user_id": "carol"}, map[string]string{"Admission-Pass": "whatever"}); r.Status != http.StatusAccepted {
		t.Errorf("purchase in an open sale with a stray pass: %d %s; want 202 (ignored)", r.Status, r.Raw)
	}
}

// TestWaitingRoomJWKS: every replica publishes the key that verifies its passes: the configured
// one, shared; without one, a key of its own, which another replica does not share.
func TestWaitingRoomJWKS(t *testing.T) {
	itest.Integration(t)
	key, seed := waitroomKey(t)
	stack := apptest.NewStack(t)
	keysOf := func(srv *apptest.App) []admit.JWK {
		t.Helper()
		resp, err := http.Get(srv.URL + "/.well-known/jwks.json")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var doc struct{ Keys []admit.JWK }
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/jwk-set+json" ||
			resp.Header.Get("Cache-Control") != "public, max-age=3600" || resp.Header.Get("Etag") == "" {
			t.Errorf("GET /.well-known/jwks.json: %d %v", resp.StatusCode, resp.Header)
		}
		return doc.Keys
	}
	shared := keysOf(stack.Start(t, map[string]string{"SECKILL_WAITROOM_KEY": seed}))
	pub := key.Public().(ed25519.PublicKey)
	if len(shared) != 1 || shared[0].Kid != admit.KeyID(pub) {
		t.Fatalf("the configured key's replica publishes %+v; want the one key %s", shared, admit.KeyID(pub))
	}
	if got, err := shared[0].PublicKey(); err != nil || !got.Equal(pub) {
		t.Errorf("the published key: %x, %v; want %x", got, err, pub)
	}
	own := keysOf(stack.Start(t, nil))
	if len(own) != 1 || own[0].Kid == shared[0].Kid {
		t.Errorf("a replica without a key publishes %+v; want one key of its own", own)
	}
}

// waitingRoom is a waiting-room admission of rate per second, as the admin API takes it.
func waitingRoom(rate float64) map[string]any {
	return map[string]any{"mode": "waiting_room", "admit_rate": rate, "max_active": 10, "session_seconds": 60, "abandon_seconds": 30}
}

// TestWaitingRoomQueue, through the real app: a buyer joins a waiting-room sale's queue before
// the sale starts (the pre-queue; again: the same ticket), polls, and once the replica's ticker
// has admitted it at the opening gets a pass that buys; every refusal is the API's JSON error,
// and every answer no-store.
func TestWaitingRoomQueue(t *testing.T) {
	itest.Integration(t)
	_, seed := waitroomKey(t)
	stack := apptest.NewStack(t)
	srv := stack.Start(t, map[string]string{"SECKILL_WAITROOM_KEY": seed})
	admin := apptest.Client{URL: srv.URL, Token: apptest.AdminToken}
	now := time.Now().UTC().Truncate(time.Second)
	preQueue := waitingRoom(10)
	preQueue["queue_opens_at"] = now.Format(time.RFC3339)
	id := admin.CreateProduct(t, map[string]any{"name": "queued", "price_cents": 100, "stock": 5, "strategy": "mysql", "per_user_limit": 1, "listed": false,
		"sale_starts_at": now.Add(3 * time.Second).Format(time.RFC3339), "admission": preQueue})
	queue := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/queue"
	buyer := apptest.Client{URL: srv.URL}
	join := func(user string) apptest.Response {
		t.Helper()
		r := buyer.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": user}, nil)
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("join answer's Cache-Control: %q, want no-store", r.Header.Get("Cache-Control"))
		}
		return r
	}
	poll := func(user string) apptest.Response {
		t.Helper()
		r := buyer.MustDo(t, http.MethodGet, queue+"?user_id="+user, nil, nil)
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("poll answer's Cache-Control: %q, want no-store", r.Header.Get("Cache-Control"))
		}
		return r
	}
	saleID := strconv.FormatInt(id, 10) + ".1"

	first := join("alice")
	if first.Status != http.StatusOK || first.Str("state") != "pre_queue" || first.Num("ticket") != 1 || first.Num("ahead") != 0 ||
		first.Str("sale") != saleID || first.Body["eta_seconds"] == nil || first.Num("poll_after_ms") < 500 || first.Body["pass"] != nil {
		t.Fatalf("alice joins: %d %s; want 200 pre_queue, ticket 1, none ahead, an ETA, a poll within bounds, no pass", first.Status, first.Raw)
	}
	if again := join("alice"); again.Status != http.StatusOK || again.Num("ticket") != 1 {
		t.Errorf("alice joins again: %d %s; want her ticket 1", again.Status, again.Raw)
	}
	if bob := join("bob"); bob.Num("ticket") != 2 || bob.Num("ahead") != 1 {
		t.Errorf("bob joins: %s; want ticket 2, one ahead", bob.Raw)
	}
	if r := poll("carol"); r.Status != http.StatusOK || r.Str("state") != "not_joined" || r.Num("poll_after_ms") != 0 {
		t.Errorf("carol polls without joining: %d %s; want not_joined, no poll", r.Status, r.Raw)
	}
	if r := poll("alice"); r.Str("state") != "pre_queue" || r.Num("ticket") != 1 {
		t.Errorf("alice polls before the opening: %s", r.Raw)
	}

	var in apptest.Response
	itest.Eventually(t, 10*time.Second, func() (bool, string) { // the replica's ticker admits at the opening
		in = poll("alice")
		return in.Str("state") == "admitted", in.Raw
	})
	if in.Str("pass") == "" || in.Str("pass_expires_at") == "" || in.Num("ahead") != 0 {
		t.Fatalf("alice polls once admitted: %s; want a pass", in.Raw)
	}
	purchase := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
	if r := buyer.MustDo(t, http.MethodPost, purchase, map[string]any{"user_id": "bob"}, map[string]string{"Admission-Pass": in.Str("pass")}); r.Status != http.StatusForbidden {
		t.Errorf("bob buys with alice's pass: %d %s; want 403", r.Status, r.Raw)
	}
	var bought apptest.Response
	itest.Eventually(t, 5*time.Second, func() (bool, string) { // the room opened on Redis's clock, the sale opens on the replica's
		bought = buyer.MustDo(t, http.MethodPost, purchase, map[string]any{"user_id": "alice"}, map[string]string{"Admission-Pass": in.Str("pass")})
		return bought.ErrorCode() != "sale_not_started", bought.Raw
	})
	if bought.Status != http.StatusAccepted {
		t.Errorf("alice buys with her pass: %d %s; want 202", bought.Status, bought.Raw)
	}

	open := admin.CreateProduct(t, map[string]any{"name": "open", "price_cents": 100, "stock": 5, "strategy": "mysql", "listed": false})
	start := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	room := waitingRoom(10)
	room["queue_opens_at"] = time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)
	later := admin.CreateProduct(t, map[string]any{"name": "later", "price_cents": 100, "stock": 5, "strategy": "mysql", "listed": false,
		"sale_starts_at": start, "admission": room})
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"an open sale", http.MethodPost, "/api/v1/products/" + strconv.FormatInt(open, 10) + "/queue", map[string]any{"user_id": "alice"}, http.StatusConflict, "no_waiting_room"},
		{"an open sale's poll", http.MethodGet, "/api/v1/products/" + strconv.FormatInt(open, 10) + "/queue?user_id=alice", nil, http.StatusConflict, "no_waiting_room"},
		{"before the queue opens", http.MethodPost, "/api/v1/products/" + strconv.FormatInt(later, 10) + "/queue", map[string]any{"user_id": "alice"}, http.StatusForbidden, "queue_not_open"},
		{"an unknown product", http.MethodPost, "/api/v1/products/999999999/queue", map[string]any{"user_id": "alice"}, http.StatusNotFound, "not_found"},
		{"no user", http.MethodPost, queue, map[string]any{}, http.StatusBadRequest, "invalid_request"},
		{"a bad user", http.MethodPost, queue, map[string]any{"user_id": "a b"}, http.StatusBadRequest, "invalid_request"},
		{"an unknown field", http.MethodPost, queue, map[string]any{"user_id": "a", "ticket": 1}, http.StatusBadRequest, "invalid_request"},
		{"a poll without a user", http.MethodGet, queue, nil, http.StatusBadRequest, "invalid_request"},
		{"a bad product id", http.MethodGet, "/api/v1/products/01/queue?user_id=a", nil, http.StatusBadRequest, "invalid_request"},
	} {
		r := buyer.MustDo(t, tc.method, tc.path, tc.body, nil)
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("%s: %d %s; want %d %s", tc.name, r.Status, r.Raw, tc.status, tc.code)
		}
	}
}

// TestWaitingRoomQueueRedisDown: with the rooms' Redis away, a join is 503 unavailable, the
// API's JSON, never a 500.
func TestWaitingRoomQueueRedisDown(t *testing.T) {
	itest.Integration(t)
	redisSrv := itest.RedisServer(t)
	stack := apptest.NewStack(t)
	srv := stack.Start(t, map[string]string{"SECKILL_REDIS_MODE": "single", "SECKILL_REDIS_ADDR": redisSrv.Addr(), "SECKILL_REDIS_ADDRS": ""})
	admin := apptest.Client{URL: srv.URL, Token: apptest.AdminToken}
	id := admin.CreateProduct(t, map[string]any{"name": "queued", "price_cents": 100, "stock": 5, "strategy": "mysql", "listed": false, "admission": waitingRoom(10)})
	queue := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/queue"
	buyer := apptest.Client{URL: srv.URL}
	itest.Eventually(t, 10*time.Second, func() (bool, string) { // the board learns the product
		r := buyer.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": "alice"}, nil)
		return r.Status == http.StatusOK, r.Raw
	})
	redisSrv.Kill()
	r := buyer.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": "bob"}, nil)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCode() != "unavailable" {
		t.Errorf("join with Redis down: %d %s; want 503 unavailable", r.Status, r.Raw)
	}
}

// TestWaitingRoomThreeReplicas, through three real replicas on one Redis: buyers joined through
// any of them are admitted by the replicas' tickers at no more than the sale's rate (a second's
// worth at the opening, then the rate), and a pass one replica signs buys through another.
func TestWaitingRoomThreeReplicas(t *testing.T) {
	itest.Integration(t)
	_, seed := waitroomKey(t)
	stack, urls := apptest.Cluster(t, 3, map[string]string{"SECKILL_WAITROOM_KEY": seed})
	admin := apptest.Client{URL: urls[0], Token: apptest.AdminToken}
	now := time.Now().UTC().Truncate(time.Second)
	start := now.Add(3 * time.Second)
	const rate, buyers = 5, 60
	room := waitingRoom(rate)
	room["max_active"] = 1000
	room["queue_opens_at"] = now.Format(time.RFC3339)
	id := admin.CreateProduct(t, map[string]any{"name": "three", "price_cents": 100, "stock": 100, "strategy": "mysql", "per_user_limit": 1, "listed": false,
		"sale_starts_at": start.Format(time.RFC3339), "admission": room})
	queue := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/queue"
	for i := range buyers {
		c := apptest.Client{URL: urls[i%len(urls)]}
		itest.Eventually(t, 5*time.Second, func() (bool, string) { // each replica's board learns the product
			r := c.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": fmt.Sprint("buyer-", i)}, nil)
			return r.Status == http.StatusOK, r.Raw
		})
	}
	dsn, err := mysql.ParseDSN(stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	rooms, err := redisroom.New(itest.Redis(t), dsn.DBName)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	admitted, err := itest.Redis(t).ZCard(context.Background(), rooms.Keys(strconv.FormatInt(id, 10)+".1").Active).Result()
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	most := int64(rate*(elapsed.Seconds()+1)) + 1
	t.Logf("%d admitted %v after the opening by three replicas at %d/s (at most %d)", admitted, elapsed, rate, most)
	if admitted > most || admitted < rate {
		t.Errorf("%d admitted %v after the opening at %d/s: want between %d and %d", admitted, elapsed, rate, rate, most)
	}

	// buyer-0 joined on replica 0; its pass, signed by whichever replica it polls, buys on another.
	var in apptest.Response
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		in = apptest.Client{URL: urls[1]}.MustDo(t, http.MethodGet, queue+"?user_id=buyer-0", nil, nil)
		return in.Str("state") == "admitted", in.Raw
	})
	r := apptest.Client{URL: urls[2]}.MustDo(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(id, 10)+"/purchase",
		map[string]any{"user_id": "buyer-0"}, map[string]string{"Admission-Pass": in.Str("pass")})
	if r.Status != http.StatusAccepted {
		t.Errorf("buyer-0 buys on replica 2 with the pass replica 1 signed: %d %s; want 202", r.Status, r.Raw)
	}
}

// TestWaitingRoomSoldOutReturnedAndReset, through the real app: a waiting-room sale whose last
// unit sells empties its queue: every visitor in line polls the sold-out state within a second
// of the purchase that took it (the bound, measured from that purchase's request); the
// unit its buyer cancels goes to the next in line (a pass), and nobody else; a reset deletes the
// room of the sale before it.
func TestWaitingRoomSoldOutReturnedAndReset(t *testing.T) {
	itest.Integration(t)
	_, seed := waitroomKey(t)
	stack := apptest.NewStack(t)
	srv := stack.Start(t, map[string]string{"SECKILL_WAITROOM_KEY": seed})
	admin := apptest.Client{URL: srv.URL, Token: apptest.AdminToken}
	// One admission every 2 s: alice first; the sale sells out before bob's turn. (Not a session
	// for one: a session is held to its end, bought or not, and would keep bob out after a return.)
	room := waitingRoom(0.5)
	id := admin.CreateProduct(t, map[string]any{"name": "last unit", "price_cents": 100, "stock": 1, "strategy": "mysql", "per_user_limit": 1,
		"listed": false, "admission": room})
	product := "/api/v1/products/" + strconv.FormatInt(id, 10)
	buyer := apptest.Client{URL: srv.URL}
	poll := func(user string) apptest.Response {
		t.Helper()
		return buyer.MustDo(t, http.MethodGet, product+"/queue?user_id="+user, nil, nil)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		itest.Eventually(t, 5*time.Second, func() (bool, string) { // the board learns the product
			r := buyer.MustDo(t, http.MethodPost, product+"/queue", map[string]any{"user_id": u}, nil)
			return r.Status == http.StatusOK, r.Raw
		})
	}
	var alice apptest.Response
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		alice = poll("alice")
		return alice.Str("state") == "admitted", alice.Raw
	})
	if r := poll("bob"); r.Str("state") != "waiting" {
		t.Fatalf("bob polls after alice's admission: %s; want waiting", r.Raw)
	}

	start := time.Now()
	bought := buyer.MustDo(t, http.MethodPost, product+"/purchase", map[string]any{"user_id": "alice"}, map[string]string{"Admission-Pass": alice.Str("pass")})
	if bought.Status != http.StatusAccepted {
		t.Fatalf("alice buys the last unit: %d %s", bought.Status, bought.Raw)
	}
	for _, u := range []string{"bob", "carol"} {
		var r apptest.Response
		for r = poll(u); r.Str("state") != "sold_out" && time.Since(start) < 3*time.Second; r = poll(u) {
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(start)
		t.Logf("%s polls sold_out %v after the last unit's purchase was sent", u, took)
		if r.Status != http.StatusOK || r.Str("state") != "sold_out" || r.Body["eta_seconds"] != nil || r.Body["pass"] != nil || r.Num("poll_after_ms") <= 0 {
			t.Fatalf("%s polls after the sell-out: %d %s; want 200 sold_out, no estimate, no pass, a poll for returned units", u, r.Status, r.Raw)
		}
		if took > time.Second {
			t.Errorf("%s learned of the sell-out %v after the last unit's purchase: want within 1 s", u, took)
		}
	}
	if r := buyer.MustDo(t, http.MethodPost, product+"/queue", map[string]any{"user_id": "dave"}, nil); r.Str("state") != "sold_out" {
		t.Errorf("dave joins after the sell-out: %s; want sold_out", r.Raw)
	}

	// alice cancels: her unit goes to bob, the next in line, and to nobody else.
	order := "/api/v1/orders/" + bought.Str("order_id")
	itest.Eventually(t, 20*time.Second, func() (bool, string) { // the order comes through Kafka
		r := buyer.MustDo(t, http.MethodGet, order+"?user_id=alice", nil, nil)
		return r.Str("status") == "confirmed", r.Raw
	})
	if r := buyer.MustDo(t, http.MethodPost, order+"/cancel", map[string]any{"user_id": "alice"}, nil); r.Status != http.StatusOK || r.Str("status") != "cancelled" {
		t.Fatalf("alice cancels: %d %s", r.Status, r.Raw)
	}
	var bob apptest.Response
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		bob = poll("bob")
		return bob.Str("state") == "admitted", bob.Raw
	})
	if bob.Str("pass") == "" {
		t.Fatalf("bob admitted for the returned unit: %s; want a pass", bob.Raw)
	}
	if r := buyer.MustDo(t, http.MethodPost, product+"/purchase", map[string]any{"user_id": "bob"}, map[string]string{"Admission-Pass": bob.Str("pass")}); r.Status != http.StatusAccepted {
		t.Errorf("bob buys the returned unit: %d %s", r.Status, r.Raw)
	}
	for _, u := range []string{"carol", "dave"} {
		if r := poll(u); r.Str("state") != "sold_out" {
			t.Errorf("%s after the returned unit went to bob: %s; want sold_out", u, r.Raw)
		}
	}

	// A reset starts sale 2, and the room of sale 1 goes.
	dsn, err := mysql.ParseDSN(stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	rooms, err := redisroom.New(itest.Redis(t), dsn.DBName)
	if err != nil {
		t.Fatal(err)
	}
	old := rooms.Keys(strconv.FormatInt(id, 10) + ".1")
	if n, err := itest.Redis(t).Exists(context.Background(), old.All()...).Result(); err != nil || n == 0 {
		t.Fatalf("sale 1's room before the reset: %d keys (%v)", n, err)
	}
	if r := admin.MustDo(t, http.MethodPost, "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/reset", map[string]any{"stock": 1}, nil); r.Status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.Status, r.Raw)
	}
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		n, err := itest.Redis(t).Exists(context.Background(), old.All()...).Result()
		return err == nil && n == 0, fmt.Sprintf("%d keys of sale 1's room left (%v)", n, err)
	})
	if r := poll("bob"); r.Str("sale") != strconv.FormatInt(id, 10)+".2" || r.Str("state") != "not_joined" {
		t.Errorf("bob polls after the reset: %s; want not_joined in sale 2", r.Raw)
	}
}
