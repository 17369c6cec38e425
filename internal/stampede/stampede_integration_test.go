package stampede_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// admin and public are clients of the API of the instance at base, with and without the admin
// token.
func admin(base string) apptest.Client  { return apptest.Client{URL: base, Token: apptest.AdminToken} }
func public(base string) apptest.Client { return apptest.Client{URL: base} }

func createProduct(t *testing.T, base, strategy string, stock int) int64 {
	t.Helper()
	return admin(base).CreateProduct(t, map[string]any{
		"name": "stampede " + strategy, "price_cents": 500, "stock": stock, "strategy": strategy,
	})
}

func stampedePath(id int64) string {
	return "/api/v1/admin/products/" + strconv.FormatInt(id, 10) + "/stampede"
}

func productPath(id int64) string { return "/api/v1/products/" + strconv.FormatInt(id, 10) }

// waitFinished polls the progress of a stampede on the given replica until it finishes.
func waitFinished(t *testing.T, base, id string) apptest.Response {
	t.Helper()
	var last apptest.Response
	itest.Eventually(t, 60*time.Second, func() (bool, string) {
		last = admin(base).MustDo(t, "GET", "/api/v1/admin/stampedes/"+id, nil, nil)
		return last.Status == http.StatusOK && last.Body["running"] == false, last.Raw
	})
	return last
}

// TestStampedeNeverOversells runs a stampede per safe strategy through the admin API of a
// three-replica cluster: the buyers are spread over every replica, the product is reset first
// with the stock asked for, exactly that stock is sold, and the database audit agrees. The
// progress is read from another replica than the one that runs the stampede (the shared board),
// and the stats' live rates count every attempt.
func TestStampedeNeverOversells(t *testing.T) {
	s, urls := apptest.Cluster(t, 3, nil)
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	const buyers, stock = 240, 40
	for i, strategy := range []string{"mysql", "redis", "zk"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			runner, other := urls[i], urls[(i+1)%len(urls)] // one stampede per replica at a time
			id := createProduct(t, runner, "mysql", 7)
			start := admin(runner).MustDo(t, "POST", stampedePath(id), map[string]any{"buyers": buyers, "strategy": strategy, "stock": stock}, nil)
			if start.Status != http.StatusAccepted {
				t.Fatalf("start: %d %s", start.Status, start.Raw)
			}
			targets, _ := start.Body["targets"].([]any)
			if len(targets) != len(urls) || start.Num("buyers") != buyers || start.Num("product_id") != int(id) {
				t.Fatalf("start answered %s, want %d buyers on product %d over %d targets", start.Raw, buyers, id, len(urls))
			}
			p := waitFinished(t, other, start.Str("stampede_id"))
			if p.Num("accepted") != stock || p.Num("sold_out") != buyers-stock || p.Num("sent") != buyers ||
				p.Num("errors") != 0 || p.Num("rejected_other") != 0 || p.Num("limit_reached") != 0 || p.Str("finished_at") == "" {
				t.Errorf("progress %s: want %d accepted and %d sold out of %d sent", p.Raw, stock, buyers-stock, buyers)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			f, err := audit.WaitDrained(ctx, db, id, stock, 50*time.Millisecond)
			if err != nil {
				t.Fatalf("queue did not drain: %+v: %v", f, err)
			}
			if v := f.Violations(true); len(v) > 0 || f.InitialStock != stock || f.Stock != 0 || f.Orders != stock {
				t.Fatalf("audit of product %d: %+v, violations %v", id, f, v)
			}
			product := public(runner).MustDo(t, "GET", productPath(id), nil, nil)
			if product.Str("strategy") != strategy {
				t.Errorf("product after the stampede's reset: %s, want strategy %s", product.Raw, strategy)
			}

			// Every buyer reached a replica's purchase use case within the last seconds. A retry
			// (after a lock wait ran out on a busy machine, say) is one more attempt, unless it was
			// shed before the use case.
			retries := p.Num("retries")
			itest.Eventually(t, 10*time.Second, func() (bool, string) {
				st := admin(runner).MustDo(t, "GET", "/api/v1/admin/products/"+strconv.FormatInt(id, 10)+"/stats", nil, nil)
				req, acc := sumSeries(st, "requests"), sumSeries(st, "accepted")
				ok := st.Body["rates_available"] == true && req >= buyers && req <= buyers+retries && acc == stock && st.Num("oversold") == 0
				return ok, fmt.Sprintf("stats %s: %d attempts and %d accepted counted, want %d to %d and %d", st.Raw, req, acc, buyers, buyers+retries, stock)
			})
		})
	}
}

func sumSeries(r apptest.Response, name string) int {
	ps, _ := r.Body["per_second"].(map[string]any)
	xs, _ := ps[name].([]any)
	n := 0
	for _, x := range xs {
		f, _ := x.(float64)
		n += int(f)
	}
	return n
}

// TestStampedeAPI checks the endpoint's answers to everything but a plain run: a second stampede
// while one runs, bad input, auth, unknown ids.
func TestStampedeAPI(t *testing.T) {
	_, urls := apptest.Cluster(t, 1, map[string]string{"SECKILL_STAMPEDE_MAX_BUYERS": "600"})
	base := urls[0]
	id := createProduct(t, base, "zk", 600)
	path := stampedePath(id)

	// A stampede that lasts a few seconds (zk grants one unit at a time), then a second one while
	// it runs.
	first := admin(base).MustDo(t, "POST", path, map[string]any{"buyers": 600}, nil)
	if first.Status != http.StatusAccepted {
		t.Fatalf("first stampede: %d %s", first.Status, first.Raw)
	}
	second := admin(base).MustDo(t, "POST", path, map[string]any{"buyers": 10, "stock": 5}, nil)
	if second.Status != http.StatusConflict || second.ErrorCode() != "stampede_running" {
		t.Errorf("second stampede while the first runs: %d %s, want 409 stampede_running", second.Status, second.Raw)
	}
	p := admin(base).MustDo(t, "GET", "/api/v1/admin/stampedes/"+first.Str("stampede_id"), nil, nil)
	if p.Status != http.StatusOK || p.Body["running"] != true || p.Body["finished_at"] != nil {
		t.Errorf("progress while running: %d %s", p.Status, p.Raw)
	}
	product := public(base).MustDo(t, "GET", productPath(id), nil, nil)
	if product.Num("initial_stock") != 600 {
		t.Errorf("the refused stampede reset the product: %s", product.Raw)
	}

	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   any
		admin  bool
		status int
		code   string
	}{
		{"no token", "POST", path, map[string]any{"buyers": 1}, false, 401, "unauthorized"},
		{"no token for progress", "GET", "/api/v1/admin/stampedes/" + first.Str("stampede_id"), nil, false, 401, "unauthorized"},
		{"no buyers", "POST", path, map[string]any{}, true, 400, "invalid_request"},
		{"zero buyers", "POST", path, map[string]any{"buyers": 0}, true, 400, "invalid_request"},
		{"too many buyers", "POST", path, map[string]any{"buyers": 601}, true, 400, "invalid_request"},
		{"buyers not a number", "POST", path, `{"buyers":"many"}`, true, 400, "invalid_request"},
		{"unknown field", "POST", path, map[string]any{"buyers": 5, "concurrency": 9}, true, 400, "invalid_request"},
		{"bad strategy", "POST", path, map[string]any{"buyers": 5, "strategy": "magic"}, true, 400, "invalid_request"},
		{"malformed JSON", "POST", path, `{"buyers":`, true, 400, "invalid_request"},
		{"bad product id", "POST", "/api/v1/admin/products/x/stampede", map[string]any{"buyers": 5}, true, 400, "invalid_request"},
		{"huge body", "POST", path, `{"buyers":1,"strategy":"` + strings.Repeat("a", 20<<10) + `"}`, true, 413, "payload_too_large"},
		{"unknown stampede", "GET", "/api/v1/admin/stampedes/0123456789ab", nil, true, 404, "not_found"},
		{"malformed stampede id", "GET", "/api/v1/admin/stampedes/..%2Fx", nil, true, 404, "not_found"},
		{"wrong method", "PUT", path, nil, true, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := public(base)
			if tc.admin {
				c = admin(base)
			}
			r := c.MustDo(t, tc.method, tc.path, tc.body, nil)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, r.Status, r.Raw, tc.status, tc.code)
			}
		})
	}

	// Once the first stampede is over, an unknown product is a 404 and nothing starts.
	waitFinished(t, base, first.Str("stampede_id"))
	unknown := admin(base).MustDo(t, "POST", stampedePath(999999), map[string]any{"buyers": 5}, nil)
	if unknown.Status != http.StatusNotFound || unknown.ErrorCode() != "not_found" {
		t.Errorf("stampede on an unknown product: %d %s, want 404 not_found", unknown.Status, unknown.Raw)
	}
	again := admin(base).MustDo(t, "POST", path, map[string]any{"buyers": 5, "stock": 2, "strategy": "mysql"}, nil)
	if again.Status != http.StatusAccepted {
		t.Errorf("a stampede after the first one finished: %d %s", again.Status, again.Raw)
	}
	waitFinished(t, base, again.Str("stampede_id"))
}

// TestStatsWithoutRedis: with Redis unreachable the stats still answer, with the rates marked
// unavailable, and never a 500.
func TestStatsWithoutRedis(t *testing.T) {
	s := apptest.NewStack(t)
	seeder := s.Start(t, nil)
	id := createProduct(t, seeder.URL, "mysql", 5)
	down := s.Start(t, map[string]string{"SECKILL_REDIS_MODE": "single", "SECKILL_REDIS_ADDRS": "",
		"SECKILL_REDIS_ADDR": "127.0.0.1:" + strconv.Itoa(itest.FreePort(t))})
	begin := time.Now()
	st := public(down.URL).MustDo(t, "GET", productPath(id)+"/stats", nil, nil)
	if st.Status != http.StatusOK || st.Body["rates_available"] != false || st.Num("requests_per_sec") != 0 ||
		st.Body["per_second"] != nil || st.Num("initial_stock") != 5 || st.Num("rate_window_sec") != 5 {
		t.Fatalf("stats without Redis: %d %s", st.Status, st.Raw)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("stats without Redis took %s", took)
	}
	// Purchases do not depend on the live counters.
	buy := public(down.URL).MustDo(t, "POST", productPath(id)+"/purchase", map[string]any{"user_id": "no-redis"}, nil)
	if buy.Status != http.StatusAccepted {
		t.Fatalf("purchase with the live counters' Redis down: %d %s", buy.Status, buy.Raw)
	}
}
