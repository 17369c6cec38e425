package stampede_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
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

type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (a answer) num(k string) int    { n, _ := a.body[k].(float64); return int(n) }
func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }
func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

var client = &http.Client{Timeout: 30 * time.Second}

func call(t *testing.T, method, url string, body any, admin bool) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if admin {
		req.Header.Set("Authorization", "Bearer "+apptest.AdminToken)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: %d with a non-JSON body %q", method, url, res.StatusCode, raw)
	}
	return a
}

func createProduct(t *testing.T, base, strategy string, stock int) int64 {
	t.Helper()
	return apptest.CreateProduct(t, base, map[string]any{
		"name": "stampede " + strategy, "price_cents": 500, "stock": stock, "strategy": strategy,
	})
}

func stampedeURL(base string, id int64) string {
	return base + "/api/v1/admin/products/" + strconv.FormatInt(id, 10) + "/stampede"
}

// waitFinished polls the progress of a stampede on the given replica until it finishes.
func waitFinished(t *testing.T, base, id string) answer {
	t.Helper()
	var last answer
	itest.Eventually(t, 60*time.Second, func() (bool, string) {
		last = call(t, "GET", base+"/api/v1/admin/stampedes/"+id, nil, true)
		return last.status == http.StatusOK && last.body["running"] == false, last.raw
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
			start := call(t, "POST", stampedeURL(runner, id), map[string]any{"buyers": buyers, "strategy": strategy, "stock": stock}, true)
			if start.status != http.StatusAccepted {
				t.Fatalf("start: %d %s", start.status, start.raw)
			}
			targets, _ := start.body["targets"].([]any)
			if len(targets) != len(urls) || start.num("buyers") != buyers || start.num("product_id") != int(id) {
				t.Fatalf("start answered %s, want %d buyers on product %d over %d targets", start.raw, buyers, id, len(urls))
			}
			p := waitFinished(t, other, start.str("stampede_id"))
			if p.num("accepted") != stock || p.num("sold_out") != buyers-stock || p.num("sent") != buyers ||
				p.num("errors") != 0 || p.num("rejected_other") != 0 || p.num("limit_reached") != 0 || p.str("finished_at") == "" {
				t.Errorf("progress %s: want %d accepted and %d sold out of %d sent", p.raw, stock, buyers-stock, buyers)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			f, err := audit.WaitDrained(ctx, db, id, 50*time.Millisecond)
			if err != nil {
				t.Fatalf("queue did not drain: %+v: %v", f, err)
			}
			if v := f.Violations(true); len(v) > 0 || f.InitialStock != stock || f.Stock != 0 || f.Orders != stock {
				t.Fatalf("audit of product %d: %+v, violations %v", id, f, v)
			}
			product := call(t, "GET", runner+"/api/v1/products/"+strconv.FormatInt(id, 10), nil, false)
			if product.str("strategy") != strategy {
				t.Errorf("product after the stampede's reset: %s, want strategy %s", product.raw, strategy)
			}

			// Every buyer reached a replica's purchase use case within the last seconds. A retry
			// (after a lock wait ran out on a busy machine, say) is one more attempt, unless it was
			// shed before the use case.
			retries := p.num("retries")
			itest.Eventually(t, 10*time.Second, func() (bool, string) {
				st := call(t, "GET", runner+"/api/v1/products/"+strconv.FormatInt(id, 10)+"/stats", nil, false)
				req, acc := sumSeries(st, "requests"), sumSeries(st, "accepted")
				ok := st.body["rates_available"] == true && req >= buyers && req <= buyers+retries && acc == stock && st.num("oversold") == 0
				return ok, fmt.Sprintf("stats %s: %d attempts and %d accepted counted, want %d to %d and %d", st.raw, req, acc, buyers, buyers+retries, stock)
			})
		})
	}
}

func sumSeries(a answer, name string) int {
	ps, _ := a.body["per_second"].(map[string]any)
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
	url := stampedeURL(base, id)

	// A stampede that lasts a few seconds (zk grants one unit at a time), then a second one while
	// it runs.
	first := call(t, "POST", url, map[string]any{"buyers": 600}, true)
	if first.status != http.StatusAccepted {
		t.Fatalf("first stampede: %d %s", first.status, first.raw)
	}
	second := call(t, "POST", url, map[string]any{"buyers": 10, "stock": 5}, true)
	if second.status != http.StatusConflict || second.code() != "stampede_running" {
		t.Errorf("second stampede while the first runs: %d %s, want 409 stampede_running", second.status, second.raw)
	}
	p := call(t, "GET", base+"/api/v1/admin/stampedes/"+first.str("stampede_id"), nil, true)
	if p.status != http.StatusOK || p.body["running"] != true || p.body["finished_at"] != nil {
		t.Errorf("progress while running: %d %s", p.status, p.raw)
	}
	product := call(t, "GET", base+"/api/v1/products/"+strconv.FormatInt(id, 10), nil, false)
	if product.num("initial_stock") != 600 {
		t.Errorf("the refused stampede reset the product: %s", product.raw)
	}

	for _, tc := range []struct {
		name   string
		method string
		url    string
		body   any
		admin  bool
		status int
		code   string
	}{
		{"no token", "POST", url, map[string]any{"buyers": 1}, false, 401, "unauthorized"},
		{"no token for progress", "GET", base + "/api/v1/admin/stampedes/" + first.str("stampede_id"), nil, false, 401, "unauthorized"},
		{"no buyers", "POST", url, map[string]any{}, true, 400, "invalid_request"},
		{"zero buyers", "POST", url, map[string]any{"buyers": 0}, true, 400, "invalid_request"},
		{"too many buyers", "POST", url, map[string]any{"buyers": 601}, true, 400, "invalid_request"},
		{"buyers not a number", "POST", url, `{"buyers":"many"}`, true, 400, "invalid_request"},
		{"unknown field", "POST", url, map[string]any{"buyers": 5, "concurrency": 9}, true, 400, "invalid_request"},
		{"bad strategy", "POST", url, map[string]any{"buyers": 5, "strategy": "magic"}, true, 400, "invalid_request"},
		{"malformed JSON", "POST", url, `{"buyers":`, true, 400, "invalid_request"},
		{"bad product id", "POST", base + "/api/v1/admin/products/x/stampede", map[string]any{"buyers": 5}, true, 400, "invalid_request"},
		{"huge body", "POST", url, `{"buyers":1,"strategy":"` + strings.Repeat("a", 20<<10) + `"}`, true, 413, "payload_too_large"},
		{"unknown stampede", "GET", base + "/api/v1/admin/stampedes/0123456789ab", nil, true, 404, "not_found"},
		{"malformed stampede id", "GET", base + "/api/v1/admin/stampedes/..%2Fx", nil, true, 404, "not_found"},
		{"wrong method", "PUT", url, nil, true, 405, "method_not_allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, tc.method, tc.url, tc.body, tc.admin)
			if a.status != tc.status || a.code() != tc.code {
				t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.url, a.status, a.raw, tc.status, tc.code)
			}
		})
	}

	// Once the first stampede is over, an unknown product is a 404 and nothing starts.
	waitFinished(t, base, first.str("stampede_id"))
	unknown := call(t, "POST", stampedeURL(base, 999999), map[string]any{"buyers": 5}, true)
	if unknown.status != http.StatusNotFound || unknown.code() != "not_found" {
		t.Errorf("stampede on an unknown product: %d %s, want 404 not_found", unknown.status, unknown.raw)
	}
	again := call(t, "POST", url, map[string]any{"buyers": 5, "stock": 2, "strategy": "mysql"}, true)
	if again.status != http.StatusAccepted {
		t.Errorf("a stampede after the first one finished: %d %s", again.status, again.raw)
	}
	waitFinished(t, base, again.str("stampede_id"))
}

// TestStatsWithoutRedis: with Redis unreachable the stats still answer, with the rates marked
// unavailable, and never a 500.
func TestStatsWithoutRedis(t *testing.T) {
	s := apptest.NewStack(t)
	seeder := s.Start(t, nil)
	id := createProduct(t, seeder.URL, "mysql", 5)
	down := s.Start(t, map[string]string{"SECKILL_REDIS_ADDR": "127.0.0.1:" + strconv.Itoa(itest.FreePort(t))})
	begin := time.Now()
	st := call(t, "GET", down.URL+"/api/v1/products/"+strconv.FormatInt(id, 10)+"/stats", nil, false)
	if st.status != http.StatusOK || st.body["rates_available"] != false || st.num("requests_per_sec") != 0 ||
		st.body["per_second"] != nil || st.num("initial_stock") != 5 || st.num("rate_window_sec") != 5 {
		t.Fatalf("stats without Redis: %d %s", st.status, st.raw)
	}
	if took := time.Since(begin); took > 2*time.Second {
		t.Errorf("stats without Redis took %s", took)
	}
	// Purchases do not depend on the live counters.
	buy := call(t, "POST", down.URL+"/api/v1/products/"+strconv.FormatInt(id, 10)+"/purchase", map[string]any{"user_id": "no-redis"}, false)
	if buy.status != http.StatusAccepted {
		t.Fatalf("purchase with the live counters' Redis down: %d %s", buy.status, buy.raw)
	}
}
