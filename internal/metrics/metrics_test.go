package metrics

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestObserveHTTP: each request lands in the series of its own route, method and code, however
// many goroutines observe at once.
func TestObserveHTTP(t *testing.T) {
	m := New()
	type obs struct {
		route, method string
		code          int
	}
	calls := []obs{
		{"/api/v1/products/:id/purchase", "POST", 409},
		{"/api/v1/products/:id/purchase", "POST", 409},
		{"/api/v1/products/:id/purchase", "POST", 202},
		{"/api/v1/products/:id", "GET", 200},
		{"unmatched", "BREW", 404},
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, c := range calls {
				m.ObserveHTTP(c.route, c.method, c.code, time.Millisecond)
			}
		})
	}
	wg.Wait()
	got := map[obs]float64{}
	for _, c := range calls {
		got[c] = counterValue(t, m.httpRequests.WithLabelValues(c.route, c.method, strconv.Itoa(c.code)))
	}
	want := map[obs]float64{calls[0]: 16, calls[2]: 8, calls[3]: 8, calls[4]: 8}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(obs{})); diff != "" {
		t.Errorf("seckill_http_requests_total (-want +got):\n%s", diff)
	}
	if n := seriesCount(t, m, "seckill_http_request_duration_seconds"); n != 3 {
		t.Errorf("%d duration series, want 3 (by route and method)", n)
	}
}

// TestObservePurchase: outcomes land in their strategy's series; no strategy is "unknown".
func TestObservePurchase(t *testing.T) {
	m := New()
	m.ObservePurchase(sale.Observation{Strategy: sale.StrategyMySQL, Code: "sold_out", Took: time.Millisecond})
	m.ObservePurchase(sale.Observation{Strategy: sale.StrategyMySQL, Code: "sold_out", Took: time.Millisecond})
	m.ObservePurchase(sale.Observation{Strategy: sale.StrategyMySQL, Code: "accepted", Took: time.Millisecond})
	m.ObservePurchase(sale.Observation{Strategy: "", Code: "not_found", Took: time.Millisecond})
	got := map[string]float64{}
	for _, l := range [][2]string{{"mysql", "sold_out"}, {"mysql", "accepted"}, {"unknown", "not_found"}} {
		got[l[0]+"/"+l[1]] = counterValue(t, m.purchases.WithLabelValues(l[0], l[1]))
	}
	if diff := cmp.Diff(map[string]float64{"mysql/sold_out": 2, "mysql/accepted": 1, "unknown/not_found": 1}, got); diff != "" {
		t.Errorf("seckill_purchases_total (-want +got):\n%s", diff)
	}
}

// TestSeriesCacheBound: beyond maxCachedSeries label sets, observations still count but the
// cache stops growing.
func TestSeriesCacheBound(t *testing.T) {
	m := New()
	for i := range maxCachedSeries + 10 {
		m.ObserveHTTP("unmatched", "M"+strconv.Itoa(i), 404, time.Millisecond)
	}
	m.ObserveHTTP("unmatched", "M"+strconv.Itoa(maxCachedSeries+5), 404, time.Millisecond)
	if n := len(*m.httpSeries.m.Load()); n != maxCachedSeries {
		t.Errorf("cache holds %d label sets, want %d", n, maxCachedSeries)
	}
	if got := counterValue(t, m.httpRequests.WithLabelValues("unmatched", "M"+strconv.Itoa(maxCachedSeries+5), "404")); got != 2 {
		t.Errorf("an uncached series counted %v, want 2", got)
	}
}

// TestObserveAllocs: a known label set is observed without allocating.
func TestObserveAllocs(t *testing.T) {
	m := New()
	route, method := "/api/v1/products/:id/purchase", "POST"
	m.ObserveHTTP(route, method, 409, time.Millisecond)
	m.ObservePurchase(sale.Observation{Strategy: sale.StrategyMySQL, Code: "sold_out", Took: time.Millisecond})
	if n := testing.AllocsPerRun(100, func() {
		m.ObserveHTTP(route, method, 409, time.Millisecond)
		m.ObservePurchase(sale.Observation{Strategy: sale.StrategyMySQL, Code: "sold_out", Took: time.Millisecond})
	}); n != 0 {
		t.Errorf("%v allocations per observation, want 0", n)
	}
}

func counterValue(tb testing.TB, c prometheus.Counter) float64 {
	tb.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		tb.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

func seriesCount(tb testing.TB, m *Metrics, name string) int {
	tb.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func BenchmarkObserveHTTP(b *testing.B) {
	m := New()
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveHTTP("/api/v1/products/:id/purchase", "POST", 409, time.Millisecond)
	}
}

// TestCountRedisLuaRefused: the counter reads the persister's count at every scrape.
func TestCountRedisLuaRefused(t *testing.T) {
	m := New()
	var n int64 = 3
	m.CountRedisLuaRefused(func() int64 { return n })
	n = 5
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "seckill_redislua_refused_orders_total" {
			if got := f.GetMetric()[0].GetCounter().GetValue(); got != 5 {
				t.Fatalf("seckill_redislua_refused_orders_total = %v, want 5 (read at the scrape)", got)
			}
			return
		}
	}
	t.Fatal("seckill_redislua_refused_orders_total not registered")
}

// TestLostLockSeriesFromRegistry: every strategy of the registry with a lease of its own (and no
// other) has its lost-lock series from the start, at 0; zk-herd and zk-reentrant among them.
func TestLostLockSeriesFromRegistry(t *testing.T) {
	m := New()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "seckill_locks_lost_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "strategy" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{}
	for _, c := range sale.Catalog {
		if c.Lock == sale.LockLease {
			want[string(c.Strategy)] = 0
		}
	}
	if _, ok := want[string(sale.StrategyZKHerd)]; !ok {
		t.Errorf("zk-herd takes no lease in the registry")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seckill_locks_lost_total series (-want +got):\n%s", diff)
	}
}
