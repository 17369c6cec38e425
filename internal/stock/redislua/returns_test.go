package redislua

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/payment"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// luaReturns is a redis-lua product sold out through the service, its orders confirmed, with the
// deductor wired for returns and a persister (run by the test).
type luaReturns struct {
	svc    *sale.Service
	s      *Sale
	rdb    redis.UniversalClient
	st     *store.Store
	ps     *Persister
	d      *Deductor
	p      sale.Product
	orders map[string]string // buyer → order id
}

// soldOut sells the n units of a new redis-lua product to buyers u0…u(n-1), one each, and
// persists and confirms their orders.
func soldOut(t *testing.T, n int) *luaReturns {
	t.Helper()
	svc, s, rdb, st, ps := luaService(t)
	e := &luaReturns{svc: svc, s: s, rdb: rdb, st: st, ps: ps, d: deductorOf(t, rdb, s, st), orders: map[string]string{}}
	e.d.SetReturned(st.ReturnedOrders)
	e.p = newLuaProduct(t, svc, s, rdb, n)
	ids := make([]string, 0, n)
	for i := range n {
		u := "u" + strconv.Itoa(i)
		r, err := svc.Purchase(t.Context(), sale.PurchaseRequest{ProductID: e.p.ID, UserID: u, Quantity: 1})
		if err != nil {
			t.Fatal(err)
		}
		e.orders[u] = r.OrderID
		ids = append(ids, r.OrderID)
	}
	e.drain(t)
	if _, err := st.ConfirmOrders(t.Context(), ids); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *luaReturns) drain(t *testing.T) {
	t.Helper()
	if _, err := e.ps.Drain(t.Context(), e.p.ID); err != nil {
		t.Fatal(err)
	}
}

// cancel cancels the buyers' orders; expire lets their payment window run out and expires them.
func (e *luaReturns) cancel(t *testing.T, buyers ...string) {
	t.Helper()
	for _, u := range buyers {
		if _, err := e.st.CancelOrder(t.Context(), e.orders[u], u); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *luaReturns) expire(t *testing.T, buyers ...string) {
	t.Helper()
	for _, u := range buyers {
		if _, err := e.st.DB().ExecContext(t.Context(), "UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id = ?", e.orders[u]); err != nil {
			t.Fatal(err)
		}
	}
	if closed, err := e.st.ExpireDue(t.Context(), 100); err != nil || sale.OrdersIn(closed) != len(buyers) {
		t.Fatalf("expired %d, %v; want %d", sale.OrdersIn(closed), err, len(buyers))
	}
}

// due is the product's closed orders not returned yet in MySQL, as the expirer reads them.
func (e *luaReturns) due(t *testing.T) sale.ReturnBatch {
	t.Helper()
	all, err := e.st.Unreturned(t.Context(), 100, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		if d.ProductID == e.p.ID {
			if d.Strategy != Strategy {
				t.Fatalf("due with strategy %s", d.Strategy)
			}
			return d.ReturnBatch
		}
	}
	return sale.ReturnBatch{ProductID: e.p.ID, Epoch: e.p.Epoch}
}

// only is b with the orders of the buyers alone.
func (e *luaReturns) only(b sale.ReturnBatch, buyers ...string) sale.ReturnBatch {
	out := sale.ReturnBatch{ProductID: b.ProductID, Epoch: b.Epoch}
	for _, o := range b.Orders {
		for _, u := range buyers {
			if o.UserID == u {
				out.Orders = append(out.Orders, o)
			}
		}
	}
	return out
}

func (e *luaReturns) ret(t *testing.T, b sale.ReturnBatch, want int) {
	t.Helper()
	if n, err := e.d.Return(t.Context(), b); err != nil || n != want {
		t.Fatalf("Return(%d orders) = %d, %v; want %d", len(b.Orders), n, err, want)
	}
}

// agree fails t unless Redis and MySQL both hold stock units, MySQL shows returned units back,
// and the stream is empty with nothing pending.
func (e *luaReturns) agree(t *testing.T, stock, returned int) {
	t.Helper()
	stats, err := e.st.Stats(t.Context(), e.p.ID)
	if err != nil {
		t.Fatal(err)
	}
	k := e.s.Keys(e.p.ID)
	n, _ := e.rdb.XLen(t.Context(), k.Stream).Result()
	var pending int64 // none, or no group: the stream is gone (a rebuild deletes it)
	if xp, err := e.rdb.XPending(t.Context(), k.Stream, "persisters").Result(); err == nil {
		pending = xp.Count
	}
	got := [5]int{left(t, e.rdb, e.s, e.p), stats.Stock, stats.ReturnedUnits, int(n), int(pending)}
	if want := [5]int{stock, stock, returned, 0, 0}; got != want {
		t.Fatalf("Redis stock, MySQL stock, returned, stream, pending = %v, want %v", got, want)
	}
}

// TestReturnOnce: the units of a cancelled and an expired order go back once, whatever number of
// times they are returned, in Redis at once and in MySQL once the persister wrote them; the
// returned units sell again, to other buyers: the buyers who let them go may not buy again.
func TestReturnOnce(t *testing.T) {
	ctx := t.Context()
	e := soldOut(t, 3)
	e.cancel(t, "u0")
	e.expire(t, "u1")
	due := e.due(t)
	if len(due.Orders) != 2 {
		t.Fatalf("due: %+v, want u0's and u1's orders", due)
	}
	e.ret(t, due, 2)
	e.ret(t, due, 0) // the expirer's next round, before the persister ran
	if got := left(t, e.rdb, e.s, e.p); got != 2 {
		t.Fatalf("stock in Redis after two returns of two orders: %d, want 2", got)
	}
	entries, err := e.rdb.XRange(ctx, e.s.Keys(e.p.ID).Stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, m := range entries {
		got = append(got, m.Values)
	}
	want := []map[string]any{
		{"ret": e.orders[due.Orders[0].UserID] + " " + due.Orders[0].UserID + " 1 " + strconv.FormatUint(e.p.Epoch, 10) + " 1"},
		{"ret": e.orders[due.Orders[1].UserID] + " " + due.Orders[1].UserID + " 1 " + strconv.FormatUint(e.p.Epoch, 10) + " 1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("stream (-want +got):\n%s", diff)
	}
	e.drain(t)
	e.agree(t, 2, 2)
	e.ret(t, due, 0) // a round that read them due before the persister wrote them
	if left := e.due(t); len(left.Orders) != 0 {
		t.Fatalf("still due after the persister: %+v", left)
	}

	// The service learns of the units back (the checkout's ChangeRestocked) and sells them again.
	e.svc.ApplyChange(sale.Change{Kind: sale.ChangeRestocked, ProductID: e.p.ID, Epoch: e.p.Epoch})
	for _, u := range []string{"u0", "u1"} {
		if _, err := e.svc.Purchase(ctx, sale.PurchaseRequest{ProductID: e.p.ID, UserID: u, Quantity: 1}); !errors.Is(err, sale.ErrAlreadyPurchased) {
			t.Fatalf("%s, whose order was returned, buys again: %v, want already purchased", u, err)
		}
	}
	for _, u := range []string{"v0", "v1"} {
		if _, err := e.svc.Purchase(ctx, sale.PurchaseRequest{ProductID: e.p.ID, UserID: u, Quantity: 1}); err != nil {
			t.Fatalf("%s buys a returned unit: %v", u, err)
		}
	}
	if _, err := e.svc.Purchase(ctx, sale.PurchaseRequest{ProductID: e.p.ID, UserID: "v2", Quantity: 1}); !errors.Is(err, sale.ErrSoldOut) {
		t.Fatalf("a third new buyer: %v, want sold out", err)
	}
	e.drain(t)
	e.agree(t, 0, 2)
	if stats, _ := e.st.Stats(ctx, e.p.ID); stats.ReservedUnits != 5 {
		t.Fatalf("%d units reserved, want the 3 first and the 2 returned ones sold again", stats.ReservedUnits)
	}
}

// TestReturnPersisterDiesAfterCommit: a persister that wrote a return to MySQL and died before
// acknowledging it leaves the entry pending; the persister that takes it over writes it again,
// and the units do not come back twice.
func TestReturnPersisterDiesAfterCommit(t *testing.T) {
	e := soldOut(t, 2)
	e.cancel(t, "u0")
	e.ret(t, e.due(t), 1)
	dead, err := NewPersister(e.rdb, e.s, e.st, PersisterOptions{Consumer: "dead", AfterCommit: runtime.Goexit})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = dead.Drain(context.Background(), e.p.ID)
	}()
	<-done
	stats, err := e.st.Stats(t.Context(), e.p.ID)
	if err != nil || stats.Stock != 1 || stats.ReturnedUnits != 1 {
		t.Fatalf("MySQL after the dead persister's commit: %+v, %v; want stock 1, 1 returned", stats, err)
	}
	pending, _ := e.rdb.XPending(t.Context(), e.s.Keys(e.p.ID).Stream, "persisters").Result()
	if pending.Count != 1 {
		t.Fatalf("%d entries pending, want the dead persister's return", pending.Count)
	}
	time.Sleep(2 * time.Millisecond) // XAUTOCLAIM's idle time is in milliseconds
	other := persister(t, e.rdb, e.s, e.st, "other", time.Millisecond)
	if n, err := other.Drain(t.Context(), e.p.ID); err != nil || n != 1 {
		t.Fatalf("the other persister settled %d, %v; want 1", n, err)
	}
	e.agree(t, 1, 1)
}

// TestReturnAcrossARebuild: Redis loses the sale (FLUSHALL) with one return written to MySQL and
// another only in the stream. The next return rebuilds the state from MySQL, which counts the
// first and knows its order: handed the expirer's listing from before both, read while neither was
// in MySQL, it returns the two others (the one lost with the stream, and one not returned yet) and
// not the first again. Redis and MySQL then agree.
func TestReturnAcrossARebuild(t *testing.T) {
	e := soldOut(t, 4)
	e.cancel(t, "u0", "u1")
	e.expire(t, "u2")
	stale := e.due(t) // u0, u1, u2
	e.ret(t, e.only(stale, "u0"), 1)
	e.drain(t)
	e.ret(t, e.only(stale, "u1"), 1) // only in the stream
	k := e.s.Keys(e.p.ID)
	if err := e.rdb.Del(t.Context(), k.data()...).Err(); err != nil { // FLUSHALL, for this sale
		t.Fatal(err)
	}
	e.ret(t, stale, 2)
	if got := left(t, e.rdb, e.s, e.p); got != 3 {
		t.Fatalf("stock in Redis: %d, want 1 (rebuilt: u0's) + 2", got)
	}
	e.ret(t, stale, 0)
	e.drain(t)
	e.agree(t, 3, 3)
	if o, err := e.s.Purchase(t.Context(), e.p.ID, Attempt{Epoch: e.p.Epoch, UserID: "u1", Quantity: 1, OrderID: "o-again"}); err != nil || o.Result != LimitReached {
		t.Fatalf("u1 after the rebuild: %v %v, want limit reached", o.Result, err)
	}
}

// TestRebuildKeepsReturnsOnce: a rebuild with returns in MySQL and in the stream (the state lost,
// the stream kept) counts MySQL's, drops the stream's, and refuses a persister that read them
// before the rebuild; their orders are due again, and returned once into the new state.
func TestRebuildKeepsReturnsOnce(t *testing.T) {
	ctx := t.Context()
	e := soldOut(t, 3)
	e.cancel(t, "u0", "u1")
	due := e.due(t)
	e.ret(t, e.only(due, "u0"), 1)
	e.drain(t)
	e.ret(t, e.only(due, "u1"), 1)
	read, release := make(chan struct{}), make(chan struct{})
	late, err := NewPersister(e.rdb, e.s, e.st, PersisterOptions{Consumer: "late", BeforeCommit: func() {
		close(read)
		<-release
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := late.Drain(ctx, e.p.ID); done <- err }()
	<-read
	k := e.s.Keys(e.p.ID)
	if err := e.rdb.Del(ctx, k.State, k.Buyers, k.Returned).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Rebuild(ctx, e.rdb, e.p.ID, 0, false, e.st.ReloadSale, e.st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the late persister: %v, want its return dropped", err)
	}
	if got := left(t, e.rdb, e.s, e.p); got != 1 {
		t.Fatalf("rebuilt stock %d, want u0's unit alone", got)
	}
	if members, _ := e.rdb.SMembers(ctx, k.Returned).Result(); !cmp.Equal(members, []string{e.orders["u0"]}) {
		t.Fatalf("rebuilt Returned set %v, want u0's order", members)
	}
	e.agree(t, 1, 1)
	again := e.due(t)
	if len(again.Orders) != 1 || again.Orders[0].UserID != "u1" {
		t.Fatalf("due after the rebuild: %+v, want u1's order", again)
	}
	e.ret(t, due, 1) // u0's and u1's: u1's alone gives
	e.drain(t)
	e.agree(t, 2, 2)
}

// TestReturnRefusals: a deductor not wired for returns refuses them (a rebuild of its would not
// know the returned orders); a batch of an epoch the sale has left is told so; orders the script
// cannot carry are refused before it runs.
func TestReturnRefusals(t *testing.T) {
	ctx := t.Context()
	e := soldOut(t, 2)
	e.cancel(t, "u0")
	due := e.due(t)
	if _, err := deductorOf(t, e.rdb, e.s, e.st).Return(ctx, due); err == nil {
		t.Fatal("a deductor without SetReturned returned units")
	}
	bad := due
	bad.Orders = []sale.ClosedOrder{{OrderID: "o 1", UserID: "u", Quantity: 1}}
	if _, err := e.d.Return(ctx, bad); err == nil {
		t.Fatal("an order id with a space returned")
	}
	if _, err := e.svc.ResetProduct(ctx, e.p.ID, sale.Reset{Stock: 2}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.d.Return(ctx, due); !errors.Is(err, sale.ErrSaleChanged) || n != 0 {
		t.Fatalf("a batch of the epoch before a reset: %d, %v; want sale changed", n, err)
	}
	if got := left(t, e.rdb, e.s, e.p); got != 2 {
		t.Fatalf("stock of the new sale %d, want 2", got)
	}
}

// restocks counts the changes the checkout publishes.
type restocks struct {
	mu sync.Mutex
	n  int
}

func (r *restocks) Publish(_ context.Context, c sale.Change) {
	if c.Kind == sale.ChangeRestocked {
		r.mu.Lock()
		r.n++
		r.mu.Unlock()
	}
}

// TestReturnThroughTheExpirer: the checkout service, with redis-lua's Returner as the app wires
// it, returns a cancelled order's unit at the cancel and an expired one's in its round, once; the
// orders show returned once the persister wrote the returns, and MySQL and Redis agree.
func TestReturnThroughTheExpirer(t *testing.T) {
	ctx := t.Context()
	e := soldOut(t, 3)
	provider, err := payment.New(e.st.DB(), payment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	feed := &restocks{}
	co, err := checkout.New(e.st, provider, map[sale.Strategy]sale.Returner{Strategy: e.d}, feed, checkout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := co.Pay(ctx, e.orders["u2"], "u2", "k"); err != nil {
		t.Fatal(err)
	}
	if o, err := co.Cancel(ctx, e.orders["u0"], "u0"); err != nil || o.Status != sale.StatusCancelled {
		t.Fatalf("Cancel = %+v, %v", o, err)
	}
	if got := left(t, e.rdb, e.s, e.p); got != 1 {
		t.Fatalf("stock in Redis after the cancel: %d, want 1", got)
	}
	if _, err := e.st.DB().ExecContext(ctx, "UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id = ?", e.orders["u1"]); err != nil {
		t.Fatal(err)
	}
	if expired, returned := co.Round(ctx); expired != 1 || returned != 1 {
		t.Fatalf("Round = %d expired, %d returned; want 1, 1 (u0's is in Redis already)", expired, returned)
	}
	if expired, returned := co.Round(ctx); expired != 0 || returned != 0 {
		t.Fatalf("a second Round before the persister ran = %d, %d; want nothing", expired, returned)
	}
	e.drain(t)
	e.agree(t, 2, 2)
	for _, u := range []string{"u0", "u1"} {
		if o, err := e.st.Order(ctx, e.orders[u]); err != nil || !o.Returned {
			t.Errorf("%s's order: %+v, %v; want returned", u, o, err)
		}
	}
	if expired, returned := co.Round(ctx); expired != 0 || returned != 0 {
		t.Fatalf("a Round after the persister = %d, %d; want nothing", expired, returned)
	}
	if feed.n != 2 {
		t.Errorf("%d restocked changes, want 2", feed.n)
	}
}
