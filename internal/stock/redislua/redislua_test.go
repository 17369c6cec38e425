package redislua

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// newSale returns a Sale on the test Redis under a namespace of the test's own, and its client.
func newSale(t *testing.T) (*Sale, redis.UniversalClient) {
	t.Helper()
	rdb := itest.Redis(t)
	ns := "test-" + itest.Suffix(8)
	s, err := New(rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, id := range []int64{1, 2} {
			_ = rdb.Del(context.Background(), s.Keys(id).all()...).Err()
		}
	})
	return s, rdb
}

func TestKeysShareOneSlot(t *testing.T) {
	k := KeysFor("db", 42)
	want := "{db:42}"
	for _, key := range k.all() {
		if got := key[len("seckill:") : len("seckill:")+len(want)]; got != want {
			t.Errorf("%s: hash tag %q, want %q", key, got, want)
		}
	}
	if KeysFor("db", 4).State == KeysFor("db", 42).State || KeysFor("a", 1).State == KeysFor("b", 1).State {
		t.Fatal("two sales share a key")
	}
}

func TestDecisions(t *testing.T) {
	ctx := t.Context()
	s, rdb := newSale(t)
	if err := s.Load(ctx, rdb, 1, State{Epoch: 3, Gen: 5, Initial: 5, Stock: 3, Limit: 2,
		Buyers: map[string]Bought{"old": {OrderID: "o-old", Quantity: 2, Key: "k-old"}, "nokey": {OrderID: "o-nokey", Quantity: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		a    Attempt
		want Outcome
	}{
		{"accepted", Attempt{Epoch: 3, UserID: "alice", Quantity: 2, Key: "k1", OrderID: "o1"}, Outcome{Result: Accepted, OrderID: "o1", Left: 1}},
		{"same key, same buyer: replayed", Attempt{Epoch: 3, UserID: "alice", Quantity: 2, Key: "k1", OrderID: "o2"}, Outcome{Result: Replayed, OrderID: "o1"}},
		{"loaded receipt replayed", Attempt{Epoch: 3, UserID: "old", Quantity: 2, Key: "k-old", OrderID: "o3"}, Outcome{Result: Replayed, OrderID: "o-old"}},
		{"same key, another buyer: a purchase of its own", Attempt{Epoch: 3, UserID: "bob", Quantity: 2, Key: "k1", OrderID: "o4"}, Outcome{Result: SoldOut, Left: 1}},
		{"same key, another quantity", Attempt{Epoch: 3, UserID: "alice", Quantity: 1, Key: "k1", OrderID: "o5"}, Outcome{Result: KeyInUse}},
		{"bought already, new key", Attempt{Epoch: 3, UserID: "alice", Quantity: 1, Key: "k2", OrderID: "o6"}, Outcome{Result: LimitReached}},
		{"loaded buyer", Attempt{Epoch: 3, UserID: "old", Quantity: 1, OrderID: "o7"}, Outcome{Result: LimitReached}},
		{"loaded buyer without a key, now with one", Attempt{Epoch: 3, UserID: "nokey", Quantity: 1, Key: "k-late", OrderID: "o7b"}, Outcome{Result: LimitReached}},
		{"over the limit", Attempt{Epoch: 3, UserID: "carol", Quantity: 3, OrderID: "o8"}, Outcome{Result: LimitReached}},
		{"more than is left", Attempt{Epoch: 3, UserID: "carol", Quantity: 2, OrderID: "o9"}, Outcome{Result: SoldOut, Left: 1}},
		{"the last unit, no key", Attempt{Epoch: 3, UserID: "carol", Quantity: 1, OrderID: "o10"}, Outcome{Result: Accepted, OrderID: "o10", Left: 0}},
		{"sold out", Attempt{Epoch: 3, UserID: "dave", Quantity: 1, Key: "k3", OrderID: "o11"}, Outcome{Result: SoldOut}},
		{"replayed after the sell-out", Attempt{Epoch: 3, UserID: "alice", Quantity: 2, Key: "k1", OrderID: "o12"}, Outcome{Result: Replayed, OrderID: "o1"}},
		{"another epoch", Attempt{Epoch: 4, UserID: "erin", Quantity: 1, OrderID: "o13"}, Outcome{Result: StaleEpoch, Epoch: 3}},
	}
	for _, st := range steps {
		got, err := s.Purchase(ctx, 1, st.a)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Fatalf("%s (-want +got):\n%s", st.name, diff)
		}
	}
	// The stream holds exactly the two accepted reservations, in order, with what the persister needs.
	entries, err := rdb.XRange(ctx, s.Keys(1).Stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, e := range entries {
		got = append(got, e.Values)
	}
	want := []map[string]any{
		{"rs": "o1 alice 2 3 5 k1"},
		{"rs": "o10 carol 1 3 5 "},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stream (-want +got):\n%s", diff)
	}
	if got, _ := s.Purchase(ctx, 2, Attempt{Epoch: 1, UserID: "x", Quantity: 1, OrderID: "o"}); got.Result != NotLoaded {
		t.Fatalf("a product never loaded: %v, want not_loaded", got.Result)
	}
}

// TestNoOversell: many buyers at once, through one script, never take more than the stock; the
// control, the same decision made in Go with separate commands, does.
func TestNoOversell(t *testing.T) {
	const stock, buyers = 50, 400
	ctx := t.Context()
	s, rdb := newSale(t)
	if err := s.Load(ctx, rdb, 1, State{Epoch: 1, Initial: stock, Stock: stock, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int64
	run(t, buyers, func(i int) error {
		o, err := s.Purchase(ctx, 1, Attempt{Epoch: 1, UserID: "u" + strconv.Itoa(i), Quantity: 1, Key: "k" + strconv.Itoa(i), OrderID: "o" + strconv.Itoa(i)})
		if o.Result == Accepted {
			accepted.Add(1)
		}
		return err
	})
	n, _ := rdb.XLen(ctx, s.Keys(1).Stream).Result()
	left, _ := rdb.HGet(ctx, s.Keys(1).State, "stock").Int()
	if accepted.Load() != stock || n != stock || left != 0 {
		t.Fatalf("accepted %d, stream %d, left %d; want %d, %d, 0", accepted.Load(), n, left, stock, stock)
	}

	// Negative control: read, check, then decrement as three round trips. Many buyers pass the check
	// before any decrement lands, and the stock goes below zero: what the script prevents.
	k := s.Keys(2)
	if err := rdb.HSet(ctx, k.State, "stock", stock).Err(); err != nil {
		t.Fatal(err)
	}
	var sold atomic.Int64
	run(t, buyers, func(int) error {
		left, err := rdb.HGet(ctx, k.State, "stock").Int()
		if err != nil || left < 1 {
			return err
		}
		sold.Add(1)
		return rdb.HIncrBy(ctx, k.State, "stock", -1).Err()
	})
	if sold.Load() <= stock {
		t.Fatalf("the unsafe control sold %d of %d: it proves nothing on this run", sold.Load(), stock)
	}
	t.Logf("unsafe control: %d sold of %d", sold.Load(), stock)
}

func run(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			if err := f(i); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestLoadKeepsTheStream(t *testing.T) {
	ctx := t.Context()
	s, rdb := newSale(t)
	if err := s.Load(ctx, rdb, 1, State{Epoch: 1, Initial: 2, Stock: 2, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Purchase(ctx, 1, Attempt{Epoch: 1, UserID: "a", Quantity: 1, OrderID: "o1"}); err != nil {
		t.Fatal(err)
	}
	// A reload (a rebuild) replaces the state and keeps the entries the persister has not written.
	if err := s.Load(ctx, rdb, 1, State{Epoch: 1, Initial: 2, Stock: 1, Limit: 1, Buyers: map[string]Bought{"a": {OrderID: "o1", Quantity: 1}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.XLen(ctx, s.Keys(1).Stream).Result(); n != 1 {
		t.Fatalf("stream length %d after a reload, want 1", n)
	}
	if o, _ := s.Purchase(ctx, 1, Attempt{Epoch: 1, UserID: "a", Quantity: 1, OrderID: "o2"}); o.Result != LimitReached {
		t.Fatalf("a reloaded buyer: %v, want limit_reached", o.Result)
	}
}

func TestInvalidAttempt(t *testing.T) {
	s, _ := newSale(t)
	for _, a := range []Attempt{
		{Epoch: 1, UserID: "", Quantity: 1, OrderID: "o"},
		{Epoch: 1, UserID: "a b", Quantity: 1, OrderID: "o"},
		{Epoch: 1, UserID: "a", Quantity: 0, OrderID: "o"},
		{Epoch: 1, UserID: "a", Quantity: 1, OrderID: ""},
		{Epoch: 1, UserID: "a", Quantity: 1, OrderID: "o", Key: "k 1"},
	} {
		if _, err := s.Purchase(t.Context(), 1, a); err == nil {
			t.Errorf("%+v accepted", a)
		}
	}
	if _, err := New(nil, "x"); err == nil {
		t.Error("New without a client")
	}
	if _, err := New(redis.NewClient(&redis.Options{}), "a{b"); err == nil {
		t.Error("New with a brace in the namespace")
	}
}

// BenchmarkPurchase: decisions per second of the script alone, from parallel clients (the whole
// purchase of a redis-lua sale in Redis: key, limit, decrement, stream append), stock never out.
func BenchmarkPurchase(b *testing.B) {
	rdb := itest.Redis(b)
	s, err := New(rdb, "bench-"+itest.Suffix(6))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rdb.Del(context.Background(), s.Keys(1).all()...).Err() })
	if err := s.Load(b.Context(), rdb, 1, State{Epoch: 1, Initial: 1 << 30, Stock: 1 << 30, Limit: 1}); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := strconv.FormatInt(n.Add(1), 10)
			o, err := s.Purchase(context.Background(), 1, Attempt{Epoch: 1, UserID: "u" + i, Quantity: 1, Key: "k" + i, OrderID: "o" + i})
			if err != nil || o.Result != Accepted {
				b.Fatal(o.Result, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// TestBatchDecisions: one run of the script decides a batch in order, exactly as separate runs
// would (a buyer repeated in the batch included, which the combiner never sends), and writes the
// accepted ones as one stream entry, one reservation a line.
func TestBatchDecisions(t *testing.T) {
	ctx := t.Context()
	s, rdb := newSale(t)
	if err := s.Load(ctx, rdb, 1, State{Epoch: 3, Gen: 5, Initial: 4, Stock: 3, Limit: 1,
		Buyers: map[string]Bought{"old": {OrderID: "o-old", Quantity: 1, Key: "k-old"}}}); err != nil {
		t.Fatal(err)
	}
	batch := []Attempt{
		{UserID: "a", Quantity: 1, Key: "ka", OrderID: "o1"},
		{UserID: "old", Quantity: 1, Key: "k-old", OrderID: "o2"},
		{UserID: "b", Quantity: 2, OrderID: "o3"},
		{UserID: "a", Quantity: 1, Key: "ka", OrderID: "o4"},
		{UserID: "a", Quantity: 1, OrderID: "o5"},
		{UserID: "c", Quantity: 1, OrderID: "o6"},
		{UserID: "d", Quantity: 1, Key: "kd", OrderID: "o7"},
		{UserID: "e", Quantity: 1, OrderID: "o8"},
	}
	got, err := s.PurchaseBatch(ctx, 1, 3, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []Outcome{
		{Result: Accepted, OrderID: "o1", Left: 2},
		{Result: Replayed, OrderID: "o-old"},
		{Result: LimitReached},
		{Result: Replayed, OrderID: "o1"}, // bought earlier in this batch, same key
		{Result: LimitReached},
		{Result: Accepted, OrderID: "o6", Left: 1},
		{Result: Accepted, OrderID: "o7", Left: 0},
		{Result: SoldOut},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	entries, err := rdb.XRange(ctx, s.Keys(1).Stream, "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("%d stream entries, %v; want one for the batch", len(entries), err)
	}
	if diff := cmp.Diff(map[string]any{"rs": "o1 a 1 3 5 ka\no6 c 1 3 5 \no7 d 1 3 5 kd"}, entries[0].Values); diff != "" {
		t.Fatalf("the batch's entry (-want +got):\n%s", diff)
	}
	if ids := OrderIDs(entries[0]); !slices.Equal(ids, []string{"o1", "o6", "o7"}) {
		t.Fatalf("OrderIDs = %v", ids)
	}
	buyers, _ := rdb.HGetAll(ctx, s.Keys(1).Buyers).Result()
	wantBuyers := map[string]string{"old": "o-old 1 k-old", "a": "o1 1 ka", "c": "o6 1 ", "d": "o7 1 kd"}
	if diff := cmp.Diff(wantBuyers, buyers); diff != "" {
		t.Fatalf("buyers (-want +got):\n%s", diff)
	}
	if left, _ := rdb.HGet(ctx, s.Keys(1).State, "stock").Int(); left != 0 {
		t.Fatalf("stock %d, want 0", left)
	}
	if out, err := s.PurchaseBatch(ctx, 1, 3, nil); err != nil || len(out) != 0 {
		t.Fatalf("an empty batch: %v, %v", out, err)
	}
	// A batch that accepts nothing writes nothing.
	if _, err := s.PurchaseBatch(ctx, 1, 3, []Attempt{{UserID: "f", Quantity: 1, OrderID: "o9"}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.XLen(ctx, s.Keys(1).Stream).Result(); n != 1 {
		t.Fatalf("stream length %d after a refused batch, want 1", n)
	}
}
