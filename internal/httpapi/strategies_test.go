package httpapi

import (
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// getStrategies asks the real router of a server that serves served for GET /api/v1/strategies
// (and HEAD, which must answer the same status); the error is New's.
func getStrategies(tb testing.TB, served []sale.Strategy) (*response, error) {
	tb.Helper()
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m, Strategies: served},
		Config{AdminToken: "x", Metrics: m.Handler(), Web: fstest.MapFS{"index.html": {Data: []byte("x")}}})
	if err != nil {
		return nil, err
	}
	res := serve(h, "GET", "/api/v1/strategies", "", nil, "Cache-Control", "Content-Type")
	if head := serve(h, "HEAD", "/api/v1/strategies", "", nil); head.Status != res.Status {
		tb.Errorf("HEAD /api/v1/strategies = %d, GET %d", head.Status, res.Status)
	}
	return &res, nil
}

// TestStrategies: GET /api/v1/strategies lists the whole catalog, in its order, with what each
// strategy is and whether this server serves it; it may be cached for a minute.
func TestStrategies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served []sale.Strategy
	}{
		{"none served", nil},
		{"the safe ones built today", []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua}},
		{"with the negative control", []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua, sale.StrategyNone}},
		{"in any order", []sale.Strategy{sale.StrategyNone, sale.StrategyZKHerd, sale.StrategyMySQL}},
		{"all of them", sale.Strategies},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := getStrategies(t, tc.served)
			if err != nil {
				t.Fatal(err)
			}
			wantHeaders := map[string]string{"Cache-Control": "public, max-age=60", "Content-Type": jsonContentTypeV}
			if res.Status != 200 || !cmp.Equal(wantHeaders, res.Headers) {
				t.Fatalf("GET /api/v1/strategies = %d %v %s", res.Status, res.Headers, res.Body)
			}
			var got strategiesJSON
			if err := json.Unmarshal([]byte(res.Body), &got); err != nil {
				t.Fatal(err)
			}
			var want strategiesJSON
			for _, c := range sale.Catalog {
				want.Strategies = append(want.Strategies, strategyJSON{
					Name: string(c.Strategy), Family: c.Family, Safe: c.Safe, Served: slices.Contains(tc.served, c.Strategy), Summary: c.Summary,
				})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("strategies (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrategiesWire: the field names and values the storefront reads, spelled out.
func TestStrategiesWire(t *testing.T) {
	res, err := getStrategies(t, []sale.Strategy{sale.StrategyNone})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"name":"mysql","family":"mysql","safe":true,"served":false,"summary":"One conditional UPDATE on the product’s MySQL row: the row lock is the mutual exclusion."}`,
		`{"name":"zk-herd","family":"zookeeper","safe":true,"served":false,`,
		`{"name":"none","family":"control","safe":false,"served":true,"summary":"No lock and no condition: oversells under load, on purpose."}`,
	} {
		if !strings.Contains(res.Body, want) {
			t.Errorf("the answer has no %s:\n%s", want, res.Body)
		}
	}
	if !strings.HasPrefix(res.Body, `{"strategies":[{"name":"mysql",`) {
		t.Errorf("the answer does not start with the catalog's first strategy: %s", res.Body)
	}
}

// TestStrategiesUnknown: a served strategy that the catalog does not know is refused when the
// router is made, not listed as something no client can describe.
func TestStrategiesUnknown(t *testing.T) {
	_, err := getStrategies(t, []sale.Strategy{sale.StrategyMySQL, "mysql-for-sure"})
	if err == nil || !strings.Contains(err.Error(), `"mysql-for-sure"`) {
		t.Errorf("New with an unknown served strategy: %v, want an error naming it", err)
	}
}
