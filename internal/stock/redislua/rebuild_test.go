package redislua

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// rebuildCase: 12 buyers persisted to MySQL, 8 more still in the stream, then the state lost.
func rebuildCase(t *testing.T) (*Sale, redis.UniversalClient, *store.Store, sale.Product) {
	t.Helper()
	s, rdb, st, p := saleInMySQL(t, 50)
	buy(t, s, p, 12)
	if _, err := persister(t, rdb, s, st, "a", 0).Drain(t.Context(), p.ID); err != nil {
		t.Fatal(err)
	}
	for i := 12; i < 20; i++ {
		u := "buyer" + strconv.Itoa(i)
		if o, err := s.Purchase(t.Context(), p.ID, Attempt{Epoch: p.Epoch, UserID: u, Quantity: 1, Key: "k-" + u, OrderID: "o-" + u}); err != nil || o.Result != Accepted {
			t.Fatalf("purchase: %v %v", o.Result, err)
		}
	}
	k := s.Keys(p.ID)
	if err := rdb.Del(t.Context(), k.State, k.Buyers).Err(); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Purchase(t.Context(), p.ID, Attempt{Epoch: p.Epoch, UserID: "x", Quantity: 1, OrderID: "ox"}); o.Result != NotLoaded {
		t.Fatalf("with the state lost: %v, want not_loaded", o.Result)
	}
	return s, rdb, st, p
}

func left(t *testing.T, rdb redis.UniversalClient, s *Sale, p sale.Product) int {
	t.Helper()
	n, err := rdb.HGet(t.Context(), s.Keys(p.ID).State, "stock").Int()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRebuild: the rebuilt stock is initial − units in MySQL − units still only in the stream, and
// the buyers and keys of both are known again.
func TestRebuild(t *testing.T) {
	s, rdb, st, p := rebuildCase(t)
	if err := s.Rebuild(t.Context(), rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	if got := left(t, rdb, s, p); got != 30 {
		t.Fatalf("rebuilt stock %d, want 50 − 12 − 8 = 30", got)
	}
	for _, tc := range []struct {
		name string
		a    Attempt
		want Result
	}{
		{"a persisted key replays", Attempt{Epoch: p.Epoch, UserID: "buyer3", Quantity: 1, Key: "k-buyer3", OrderID: "n1"}, Replayed},
		{"a key only in the stream replays", Attempt{Epoch: p.Epoch, UserID: "buyer15", Quantity: 1, Key: "k-buyer15", OrderID: "n2"}, Replayed},
		{"a buyer only in the stream bought", Attempt{Epoch: p.Epoch, UserID: "buyer17", Quantity: 1, OrderID: "n3"}, LimitReached},
		{"a new buyer buys", Attempt{Epoch: p.Epoch, UserID: "new", Quantity: 1, OrderID: "n4"}, Accepted},
	} {
		if o, err := s.Purchase(t.Context(), p.ID, tc.a); err != nil || o.Result != tc.want {
			t.Errorf("%s: %v %v, want %v", tc.name, o.Result, err, tc.want)
		}
	}
	// And everything ends in MySQL once.
	if _, err := persister(t, rdb, s, st, "b", 0).Drain(t.Context(), p.ID); err != nil {
		t.Fatal(err)
	}
	check(t, rdb, s, st, p, 21)
}

// TestRebuildOnce: replicas that find the state missing at once rebuild it once; the others are
// told ErrRebuilding (their purchases answer 503), and a rebuild never overwrites a state that is
// back (its purchases since would be forgotten).
func TestRebuildOnce(t *testing.T) {
	s, rdb, st, p := rebuildCase(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = s.Rebuild(t.Context(), rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders) })
	}
	wg.Wait()
	rebuilt := 0
	for _, err := range errs {
		switch {
		case err == nil:
			rebuilt++
		case !errors.Is(err, ErrRebuilding):
			t.Fatalf("rebuild: %v", err)
		}
	}
	if rebuilt == 0 || left(t, rdb, s, p) != 30 {
		t.Fatalf("%d rebuilds returned nil, stock %d; want at least one and 30", rebuilt, left(t, rdb, s, p))
	}
	if o, err := s.Purchase(t.Context(), p.ID, Attempt{Epoch: p.Epoch, UserID: "after", Quantity: 1, OrderID: "o-after"}); err != nil || o.Result != Accepted {
		t.Fatal(o.Result, err)
	}
	if err := s.Rebuild(t.Context(), rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	if got := left(t, rdb, s, p); got != 29 {
		t.Fatalf("a rebuild over a loaded state changed its stock to %d, want 29", got)
	}
}

// TestRebuildAfterFlushAll: with the stream gone too (FLUSHALL, or a Redis restarted without its
// data), the purchases not yet in MySQL are lost to the rebuild: it restores what MySQL holds. This
// is the durability gap the Redis persistence setting decides (appendonly, appendfsync).
func TestRebuildAfterFlushAll(t *testing.T) {
	s, rdb, st, p := rebuildCase(t)
	if err := rdb.Del(t.Context(), s.Keys(p.ID).Stream).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Rebuild(t.Context(), rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	if got := left(t, rdb, s, p); got != 38 {
		t.Fatalf("rebuilt stock %d, want 50 − 12 = 38 (the 8 in the lost stream are lost)", got)
	}
}

// TestRebuildFencesAPersisterOfTheLostState: a persister reads three purchases, Redis then loses
// the sale (state and stream), and the persister commits only after the rebuild read MySQL. The
// rebuilt state does not count those three (Redis lost them before any persister wrote them: the
// gap the AOF closes), so their late commit must not land either: it would take units and buyers
// the rebuilt state still sells, and the next purchases would oversell MySQL or jam the persister
// on a buyer's second reservation. The rebuild started a new generation; the late batch is of the
// old one, refused, and dropped. MySQL and the rebuilt state then agree, and sell on together.
func TestRebuildFencesAPersisterOfTheLostState(t *testing.T) {
	ctx := t.Context()
	s, rdb, st, p := saleInMySQL(t, 10)
	buy(t, s, p, 3)
	read, release := make(chan struct{}), make(chan struct{})
	late, err := NewPersister(rdb, s, st, PersisterOptions{Consumer: "late", BeforeCommit: func() {
		close(read)
		<-release
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := late.Drain(ctx, p.ID); done <- err }()
	<-read
	k := s.Keys(p.ID)
	if err := rdb.Del(ctx, k.State, k.Buyers, k.Stream).Err(); err != nil { // FLUSHALL, for this sale
		t.Fatal(err)
	}
	if err := s.Rebuild(ctx, rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the late persister: %v, want its batch dropped", err)
	}
	if got := left(t, rdb, s, p); got != 10 {
		t.Fatalf("rebuilt stock %d, want 10 (the three were lost with Redis)", got)
	}
	stats, err := st.Stats(ctx, p.ID)
	if err != nil || stats.ReservedUnits != 0 || stats.Stock != 10 {
		t.Fatalf("MySQL after the late commit: %+v %v, want nothing reserved, stock 10", stats, err)
	}
	// buyer0 was lost: the rebuilt sale lets them buy again, and it all reaches MySQL.
	buy(t, s, p, 10)
	if _, err := persister(t, rdb, s, st, "next", time.Minute).Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	check(t, rdb, s, st, p, 10)
	if o, _ := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "x", Quantity: 1, OrderID: "ox"}); o.Result != SoldOut {
		t.Fatalf("after the ten: %v, want sold out", o.Result)
	}
}
