package livestats

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

func TestTallyAggregatesPerProductAndSecond(t *testing.T) {
	tl := tally{}
	for _, e := range []event{
		{product: 1, sec: 100, accepted: true},
		{product: 1, sec: 100},
		{product: 1, sec: 100},
		{product: 1, sec: 101, accepted: true},
		{product: 2, sec: 100},
	} {
		tl.add(e)
	}
	want := tally{
		{1, 100}: {requests: 3, accepted: 1},
		{1, 101}: {requests: 1, accepted: 1},
		{2, 100}: {requests: 1},
	}
	if diff := cmp.Diff(want, tl, cmp.AllowUnexported(bucketCounts{})); diff != "" {
		t.Errorf("tally (-want +got):\n%s", diff)
	}
	if tl.events() != 5 {
		t.Errorf("events() = %d, want 5", tl.events())
	}
}

// TestKeysUseHashTags: a product's counters share a slot (one MGET reads them), and so do the
// active sets of a namespace (one node answers a call's SMEMBERS).
func TestKeysUseHashTags(t *testing.T) {
	r := &Recorder{ns: "shop"}
	for _, tc := range []struct{ got, want string }{
		{r.key(42, kindRequests, 1700000000), "seckill:live:{shop:42}:req:1700000000"},
		{r.key(42, kindAccepted, 1700000001), "seckill:live:{shop:42}:acc:1700000001"},
		{r.activeKey(1700000000), "seckill:live:{shop}:active:1700000000"},
	} {
		if tc.got != tc.want {
			t.Errorf("key = %q, want %q", tc.got, tc.want)
		}
	}
}

type countingMetrics struct {
	mu      sync.Mutex
	dropped map[string]int
}

func (m *countingMetrics) LiveStatsDropped(reason string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dropped == nil {
		m.dropped = map[string]int{}
	}
	m.dropped[reason] += n
}

func (m *countingMetrics) get(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped[reason]
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestObserveDropsWhenTheBufferIsFull(t *testing.T) {
	m := &countingMetrics{}
	r, err := NewRecorder(quietLog(), redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), Options{Buffer: 2, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { // ObservePurchase must never block, whatever the state of the flusher
		defer close(done)
		for range 5 {
			r.ObservePurchase(sale.Observation{ProductID: 1, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted})
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ObservePurchase blocked with a full buffer")
	}
	if got := m.get("buffer_full"); got != 3 {
		t.Fatalf("dropped %d, want 3", got)
	}
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// TestRecorderAgainstRedis records purchases from two "replicas" (two recorders, one namespace)
// over a few seconds and reads them back summed per second.
func TestRecorderAgainstRedis(t *testing.T) {
	rdb := itest.Redis(t)
	ns := "test-" + itest.Suffix(8)
	base := time.Unix(1_800_000_000, 0)
	clk := &clock{now: base}
	m := &countingMetrics{}
	opts := Options{Namespace: ns, FlushEvery: 5 * time.Millisecond, History: 5, Metrics: m, Now: clk.Now}
	a, err := NewRecorder(quietLog(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRecorder(quietLog(), rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	wg.Go(func() { _ = b.Run(ctx) })

	// Second 0: 3 attempts, 2 accepted (one by each replica); second 2: 1 attempt, a replay;
	// product 8 at second 0 must not leak into product 7.
	a.ObservePurchase(sale.Observation{ProductID: 7, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted})
	b.ObservePurchase(sale.Observation{ProductID: 7, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted})
	b.ObservePurchase(sale.Observation{ProductID: 7, Strategy: sale.StrategyMySQL, Code: sale.CodeSoldOut})
	a.ObservePurchase(sale.Observation{ProductID: 8, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted})
	clk.set(base.Add(2 * time.Second))
	a.ObservePurchase(sale.Observation{ProductID: 7, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted, Replayed: true})
	cancel() // Run flushes what is queued before it returns
	wg.Wait()

	clk.set(base.Add(3*time.Second + 500*time.Millisecond))
	got, err := a.Rates(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	want := Rates{Start: base.Add(-2 * time.Second).UTC(), Requests: []int64{0, 0, 3, 0, 1}, Accepted: []int64{0, 0, 2, 0, 0}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rates of product 7 (-want +got):\n%s", diff)
	}
	other, err := a.Rates(context.Background(), 8)
	if err != nil || other.Requests[2] != 1 {
		t.Errorf("rates of product 8: %+v, %v", other, err)
	}
	// The board reads them all at once: the same figures.
	both, err := a.RatesOf(context.Background(), []int64{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[int64]Rates{7: got, 8: other}, both); diff != "" {
		t.Errorf("RatesOf(7, 8) against Rates of each (-want +got):\n%s", diff)
	}

	// The counters expire.
	key := a.key(7, kindRequests, base.Unix())
	if ttl := rdb.TTL(context.Background(), key).Val(); ttl <= 0 || ttl > 2*time.Minute {
		t.Errorf("TTL of %s = %s, want (0, 2m]", key, ttl)
	}
	// So do the sets of the products counted in each second.
	active := a.activeKey(base.Unix())
	members, err := rdb.SMembers(context.Background(), active).Result()
	slices.Sort(members)
	if diff := cmp.Diff([]string{"7", "8"}, members); err != nil || diff != "" {
		t.Errorf("members of %s (-want +got):\n%s%v", active, diff, err)
	}
	if ttl := rdb.TTL(context.Background(), active).Val(); ttl <= 0 || ttl > 2*time.Minute {
		t.Errorf("TTL of %s = %s, want (0, 2m]", active, ttl)
	}
	// A second that ended less than a flush period (and a margin) ago is not reported yet.
	clk.set(base.Add(3*time.Second + 20*time.Millisecond))
	early, _ := a.Rates(context.Background(), 7)
	if early.Start.Unix() != base.Unix()-3 {
		t.Errorf("rates at +3.02 s start at %d, want %d (the last second counted is +1)", early.Start.Unix(), base.Unix()-3)
	}
	if m.get("redis_error") != 0 || m.get("buffer_full") != 0 {
		t.Errorf("drops: %v", m.dropped)
	}
}

// TestRecorderWithoutRedis: a Redis that does not answer makes Rates fail fast and the flush drop
// (and count) its events; Run still stops.
func TestRecorderWithoutRedis(t *testing.T) {
	itest.Integration(t)
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:" + strconv.Itoa(itest.FreePort(t)), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
	})
	defer rdb.Close()
	m := &countingMetrics{}
	r, err := NewRecorder(quietLog(), rdb, Options{FlushEvery: 5 * time.Millisecond, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	r.ObservePurchase(sale.Observation{ProductID: 1, Strategy: sale.StrategyMySQL, Code: sale.CodeAccepted})
	r.ObservePurchase(sale.Observation{ProductID: 1, Strategy: sale.StrategyMySQL, Code: sale.CodeSoldOut})
	deadline := time.Now().Add(5 * time.Second)
	for m.get("redis_error") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if got := m.get("redis_error"); got != 2 {
		t.Errorf("redis_error drops = %d, want 2", got)
	}
	if _, err := r.Rates(context.Background(), 1); err == nil {
		t.Error("Rates without Redis succeeded")
	}
}
