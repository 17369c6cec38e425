package redislua

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// luaService is the sale service over the redis-lua deductor alone, on the real Redis and MariaDB,
// and the persister its deductor wakes (not running unless the test runs it).
func luaService(t *testing.T) (*sale.Service, *Sale, redis.UniversalClient, *store.Store, *Persister) {
	t.Helper()
	s, rdb := newSale(t)
	st, _ := itest.Store(t)
	ps := persister(t, rdb, s, st, "p-"+itest.Suffix(4), time.Minute)
	d, err := NewDeductor(rdb, s, st.ReloadSale, ps.Wake)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var mu sync.Mutex
	svc, err := sale.NewService(sale.Options{
		Store: st, Deductors: map[sale.Strategy]sale.Deductor{Strategy: d}, DefaultStrategy: Strategy,
		NewOrderID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return "o-" + itest.Suffix(6) + "-" + strconv.Itoa(n)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc, s, rdb, st, ps
}

func newLuaProduct(t *testing.T, svc *sale.Service, s *Sale, rdb redis.UniversalClient, stock int) sale.Product {
	t.Helper()
	now := time.Now().UTC()
	p, err := svc.CreateProduct(t.Context(), sale.NewProduct{Name: "lua", PriceCents: 1, Stock: stock, Strategy: Strategy,
		SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), s.Keys(p.ID).all()...).Err() })
	return p
}

// TestDeductorThroughTheService: the service's answers with redis-lua deciding: accepted, a retry
// replayed from Redis before any persister ran, a second purchase refused, sold out, and a key
// reused for another quantity refused; then the persister makes MySQL agree.
func TestDeductorThroughTheService(t *testing.T) {
	ctx := t.Context()
	svc, s, rdb, st, ps := luaService(t)
	p := newLuaProduct(t, svc, s, rdb, 2)
	if left(t, rdb, s, p) != 2 {
		t.Fatal("the create did not load the sale into Redis")
	}
	req := sale.PurchaseRequest{ProductID: p.ID, UserID: "alice", Quantity: 1, IdempotencyKey: "k1"}
	first, err := svc.Purchase(ctx, req)
	if err != nil || first.Strategy != Strategy {
		t.Fatalf("first purchase: %+v %v", first, err)
	}
	again, err := svc.Purchase(ctx, req)
	if err != nil || !again.Replayed || again.OrderID != first.OrderID {
		t.Fatalf("retry before the persister ran: %+v %v, want a replay of %s", again, err, first.OrderID)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "alice", Quantity: 1}); !errors.Is(err, sale.ErrAlreadyPurchased) {
		t.Fatalf("second purchase: %v, want already purchased", err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "bob", Quantity: 1, IdempotencyKey: "k1"}); err != nil {
		t.Fatalf("bob's purchase with alice's key (keys are per buyer): %v", err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "carol", Quantity: 1}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("third buyer: %v, want sold out", err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "dave", Quantity: 1}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("fourth buyer: %v, want sold out (from memory)", err)
	}
	if again, err := svc.Purchase(ctx, req); err != nil || again.OrderID != first.OrderID {
		t.Fatalf("retry after the sell-out: %+v %v", again, err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "alice", Quantity: 2, IdempotencyKey: "k1"}); !errors.Is(err, sale.ErrInvalid) {
		t.Fatalf("key reused for another quantity: %v, want invalid", err)
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	check(t, rdb, s, st, p, 2)
	if o, err := svc.BuyerOrder(ctx, first.OrderID, "alice"); err != nil || o.UserID != "alice" {
		t.Fatalf("order in MySQL: %+v %v", o, err)
	}
}

// TestDeductorRebuildsALostState: with the state gone from Redis, the next purchase rebuilds it
// from MySQL and the stream and is decided on it; while another process holds the rebuild lease,
// purchases are refused as unavailable and deduct nothing.
func TestDeductorRebuildsALostState(t *testing.T) {
	ctx := t.Context()
	svc, s, rdb, st, ps := luaService(t)
	p := newLuaProduct(t, svc, s, rdb, 10)
	for i := range 4 {
		if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "u" + strconv.Itoa(i), Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 6; i++ { // two more, only in the stream
		if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "u" + strconv.Itoa(i), Quantity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	k := s.Keys(p.ID)
	if err := rdb.Del(ctx, k.State, k.Buyers).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, k.Rebuild, "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "x", Quantity: 1}); !errors.Is(err, sale.ErrUnavailable) || sale.CodeOf(err) != sale.CodeUnavailable {
		t.Fatalf("while another process rebuilds: %v (%s), want unavailable", err, sale.CodeOf(err))
	}
	if err := rdb.Del(ctx, k.Rebuild).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "u5", Quantity: 1}); !errors.Is(err, sale.ErrAlreadyPurchased) {
		t.Fatalf("a stream-only buyer after the rebuild: %v, want already purchased", err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "x", Quantity: 1}); err != nil {
		t.Fatalf("a new buyer after the rebuild: %v", err)
	}
	if got := left(t, rdb, s, p); got != 3 {
		t.Fatalf("stock after the rebuild and one purchase: %d, want 3", got)
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	check(t, rdb, s, st, p, 7)
}

// TestDeductorAcrossAReset: a reset loads the new epoch into Redis at once, so a purchase under the
// old rules is told the sale changed and decided again under the new ones; a reset to another
// strategy drops the sale from Redis, and a purchase still holding redis-lua rules is refused
// rather than accepted by a state no persister will write.
func TestDeductorAcrossAReset(t *testing.T) {
	ctx := t.Context()
	svc, s, rdb, st, ps := luaService(t)
	p := newLuaProduct(t, svc, s, rdb, 5)
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "a", Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	p2, err := svc.ResetProduct(ctx, p.ID, sale.Reset{Stock: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := left(t, rdb, s, p); got != 3 {
		t.Fatalf("stock in Redis after the reset: %d, want 3", got)
	}
	d := deductorOf(t, rdb, s, st)
	old := sale.Reservation{Receipt: sale.Receipt{OrderID: "o-old", ProductID: p.ID, UserID: "b", Quantity: 1, Strategy: Strategy}, Epoch: p.Epoch}
	if err := d.Deduct(ctx, old); !errors.Is(err, sale.ErrSaleChanged) {
		t.Fatalf("a purchase under the old epoch: %v, want sale changed", err)
	}
	if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: p.ID, UserID: "a", Quantity: 1}); err != nil {
		t.Fatalf("a's purchase in the new sale: %v", err)
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	p2.InitialStock = 3
	check(t, rdb, s, st, p2, 1)

	// To another strategy (the store's, since this service serves redis-lua only).
	if _, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 3, Strategy: sale.StrategyMySQL}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	p3, err := st.Product(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, p3); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, s.Keys(p.ID).State).Result(); n != 0 {
		t.Fatal("the sale's state is still in Redis after it left redis-lua")
	}
	stale := sale.Reservation{Receipt: sale.Receipt{OrderID: "o-stale", ProductID: p.ID, UserID: "c", Quantity: 1, Strategy: Strategy}, Epoch: p2.Epoch}
	if err := d.Deduct(ctx, stale); !errors.Is(err, sale.ErrSaleChanged) {
		t.Fatalf("a purchase with the redis-lua rules after the switch: %v, want sale changed", err)
	}
}

func deductorOf(t *testing.T, rdb redis.UniversalClient, s *Sale, st *store.Store) *Deductor {
	t.Helper()
	d, err := NewDeductor(rdb, s, st.ReloadSale, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
