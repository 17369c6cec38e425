package checkout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
	"github.com/seckill-go/seckill-go/internal/payment"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
	"github.com/seckill-go/seckill-go/internal/store"
)

// env is one test's database, its strategies (as deductors and returners) and what the change
// feed was told.
type env struct {
	st       *store.Store
	deduct   map[sale.Strategy]sale.Deductor
	returner map[sale.Strategy]sale.Returner
	feed     *feed
}

// feed records the changes published (the real one broadcasts through Redis to other replicas;
// here the test only needs to see that units coming back are announced).
type feed struct {
	mu      sync.Mutex
	changes []sale.Change
}

func (f *feed) Publish(_ context.Context, c sale.Change) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, c)
}

func (f *feed) restocked(productID int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.changes {
		if c.Kind == sale.ChangeRestocked && c.ProductID == productID {
			n++
		}
	}
	return n
}

func newEnv(t *testing.T) *env {
	t.Helper()
	itest.Integration(t)
	st, _ := itest.Store(t)
	e := &env{st: st, deduct: map[sale.Strategy]sale.Deductor{}, returner: map[sale.Strategy]sale.Returner{}, feed: &feed{}}
	add := func(s sale.Strategy, d interface {
		sale.Deductor
		sale.Returner
	}) {
		e.deduct[s], e.returner[s] = d, d
	}
	my, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	add(sale.StrategyMySQL, my)
	rdb := itest.Redis(t)
	rl, err := redislock.New(rdb, redislock.Options{TTL: 5 * time.Second, Logger: itest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rl.Close)
	rd, err := stock.NewLocked(stock.LockedOptions{Store: st, Strategy: sale.StrategyRedis, Locker: rl.Locker(), Wait: 10 * time.Second, Observer: nopObserver{}})
	if err != nil {
		t.Fatal(err)
	}
	add(sale.StrategyRedis, rd)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	zc, err := zklock.Connect(ctx, itest.ZKServers, zklock.Options{SessionTimeout: 4 * time.Second, Logger: itest.Logger()})
	if err != nil {
		t.Fatalf("zookeeper: %v", err)
	}
	t.Cleanup(zc.Close)
	zd, err := stock.NewLocked(stock.LockedOptions{Store: st, Strategy: sale.StrategyZK, Locker: zc.Locker(), Wait: 10 * time.Second, Observer: nopObserver{}})
	if err != nil {
		t.Fatal(err)
	}
	add(sale.StrategyZK, zd)
	add(sale.StrategyRedisLua, newLua(t, st, rdb))
	return e
}

// lua is the redis-lua strategy with its persister drained after each deduction and return, so
// that what MySQL holds (the orders, the audit) follows what the scripts decided at once.
type lua struct {
	d  *redislua.Deductor
	ps *redislua.Persister
}

func newLua(t *testing.T, st *store.Store, rdb redis.UniversalClient) *lua {
	s, err := redislua.New(rdb, "checkout-"+itest.Suffix(8))
	if err != nil {
		t.Fatal(err)
	}
	d, err := redislua.NewDeductor(rdb, s, st.ReloadSale, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.SetReturned(st.ReturnedOrders)
	ps, err := redislua.NewPersister(rdb, s, st, redislua.PersisterOptions{Consumer: "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	return &lua{d: d, ps: ps}
}

func (l *lua) Deduct(ctx context.Context, r sale.Reservation) error {
	if err := l.d.Deduct(ctx, r); err != nil {
		return err
	}
	_, err := l.ps.Drain(ctx, r.ProductID)
	return err
}

func (l *lua) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	n, err := l.d.Return(ctx, b)
	if err != nil {
		return n, err
	}
	_, err = l.ps.Drain(ctx, b.ProductID)
	return n, err
}

// service returns a checkout service whose provider declines the given share of charges.
func (e *env) service(t *testing.T, failureRate float64, latency time.Duration, o checkout.Options) *checkout.Service {
	t.Helper()
	p, err := payment.New(e.st.DB(), payment.Options{Latency: latency, FailureRate: failureRate})
	if err != nil {
		t.Fatal(err)
	}
	o.Log = itest.Logger()
	s, err := checkout.New(e.st, p, e.returner, e.feed, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *env) product(t *testing.T, strategy sale.Strategy, stockN int) sale.Product {
	t.Helper()
	now := time.Now().UTC()
	p, err := e.st.CreateProduct(t.Context(), sale.NewProduct{
		Name: "checkout " + itest.Suffix(6), PriceCents: 250, Stock: stockN, Strategy: strategy,
		SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1,
	}, now)
	if err != nil {
		t.Fatalf("create product: %v", err)
	}
	return p
}

// buy buys one unit for user and, unless queued, has the consumer create its order.
func (e *env) buy(t *testing.T, p sale.Product, user string, confirm bool) (string, error) {
	t.Helper()
	r := sale.Reservation{
		Receipt: sale.Receipt{OrderID: "o-" + itest.Suffix(20), Status: sale.StatusQueued, ProductID: p.ID,
			UserID: user, Quantity: 1, Strategy: p.Strategy},
		Epoch: p.Epoch, CreatedAt: time.Now().UTC(),
	}
	if err := e.deduct[p.Strategy].Deduct(t.Context(), r); err != nil {
		return "", err
	}
	if confirm {
		if _, err := e.st.ConfirmOrders(t.Context(), []string{r.OrderID}); err != nil {
			t.Fatal(err)
		}
	}
	return r.OrderID, nil
}

// due moves the orders' payment window to its end.
func (e *env) due(t *testing.T, orderIDs ...string) {
	t.Helper()
	if _, err := e.st.DB().ExecContext(t.Context(), "UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id IN (?"+
		repeat(",?", len(orderIDs)-1)+")", anys(orderIDs)...); err != nil {
		t.Fatal(err)
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (e *env) audit(t *testing.T, p sale.Product) audit.Facts {
	t.Helper()
	f, err := audit.Load(t.Context(), e.st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := f.Violations(true); len(v) > 0 {
		t.Errorf("audit of product %d: %q (%+v)", p.ID, v, f)
	}
	return f
}

func (e *env) order(t *testing.T, id string) sale.Order {
	t.Helper()
	o, err := e.st.Order(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func want(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

func TestPayOnceReplayedAndRefusedAfter(t *testing.T) {
	e := newEnv(t)
	svc := e.service(t, 0, 0, checkout.Options{})
	p := e.product(t, sale.StrategyMySQL, 5)
	ctx := t.Context()

	queued, err := e.buy(t, p, "queued", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Pay(ctx, queued, "queued", "k1")
	want(t, err, sale.ErrOrderNotConfirmed)

	id, err := e.buy(t, p, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if o := e.order(t, id); o.Status != sale.StatusConfirmed || o.ExpiresAt.IsZero() || o.AmountCents != 250 {
		t.Fatalf("a new order = %+v, want confirmed with an expiry and 250 cents", o)
	}
	_, err = svc.Pay(ctx, id, "mallory", "k1")
	want(t, err, sale.ErrNotFound)
	paid, err := svc.Pay(ctx, id, "alice", "k1")
	if err != nil || paid.Status != sale.StatusPaid || paid.PaymentID == "" {
		t.Fatalf("Pay = %+v, %v; want paid with a payment id", paid, err)
	}
	again, err := svc.Pay(ctx, id, "alice", "k1")
	if err != nil || again.PaymentID != paid.PaymentID {
		t.Fatalf("the same payment again = %+v, %v; want the first answer", again, err)
	}
	_, err = svc.Pay(ctx, id, "alice", "k2")
	want(t, err, sale.ErrOrderPaid)
	_, err = svc.Cancel(ctx, id, "alice")
	want(t, err, sale.ErrOrderPaid)
	e.due(t, id)
	if expired, _ := svc.Round(ctx); expired != 0 {
		t.Fatalf("the expirer expired %d orders, want 0: a paid order does not expire", expired)
	}
	var charges int
	if err := e.st.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM payment_charges WHERE order_id = ?", id).Scan(&charges); err != nil || charges != 1 {
		t.Fatalf("charges of the order = %d (%v), want 1", charges, err)
	}
	if _, err := e.st.ConfirmOrders(ctx, []string{queued}); err != nil {
		t.Fatal(err)
	}
	e.audit(t, p)
}

func TestPayDeclinedLeavesTheOrderToPay(t *testing.T) {
	e := newEnv(t)
	p := e.product(t, sale.StrategyMySQL, 5)
	id, err := e.buy(t, p, "bob", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.service(t, 1, 0, checkout.Options{}).Pay(t.Context(), id, "bob", "k1")
	want(t, err, sale.ErrPaymentDeclined)
	if o := e.order(t, id); o.Status != sale.StatusConfirmed {
		t.Fatalf("after a decline the order is %s, want confirmed", o.Status)
	}
	ok := e.service(t, 0, 0, checkout.Options{})
	_, err = ok.Pay(t.Context(), id, "bob", "k1")
	want(t, err, sale.ErrPaymentDeclined) // a declined key stays declined
	if o, err := ok.Pay(t.Context(), id, "bob", "k2"); err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("a new payment = %+v, %v; want paid", o, err)
	}
	e.audit(t, p)
}

// TestUnpaidUnitsGoBackOnce: for every safe strategy, a sold-out sale whose buyers pay, cancel
// or let the window run out gets the unpaid units back exactly once, through its strategy; they
// sell again, but not to the buyers who let them go.
func TestUnpaidUnitsGoBackOnce(t *testing.T) {
	e := newEnv(t)
	for _, strategy := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua} {
		t.Run(string(strategy), func(t *testing.T) {
			svc := e.service(t, 0, 0, checkout.Options{})
			ctx := t.Context()
			p := e.product(t, strategy, 3)
			ids := map[string]string{}
			for _, u := range []string{"payer", "canceller", "sleeper"} {
				id, err := e.buy(t, p, u, true)
				if err != nil {
					t.Fatal(err)
				}
				ids[u] = id
			}
			_, err := e.buy(t, p, "late", true)
			want(t, err, sale.ErrSoldOut)

			if _, err := svc.Pay(ctx, ids["payer"], "payer", "k"); err != nil {
				t.Fatal(err)
			}
			if o, err := svc.Cancel(ctx, ids["canceller"], "canceller"); err != nil || o.Status != sale.StatusCancelled || !o.Returned {
				t.Fatalf("Cancel = %+v, %v; want cancelled and returned at once", o, err)
			}
			if o, err := svc.Cancel(ctx, ids["canceller"], "canceller"); err != nil || o.Status != sale.StatusCancelled {
				t.Fatalf("Cancel again = %+v, %v; want the same answer", o, err)
			}
			_, err = svc.Pay(ctx, ids["canceller"], "canceller", "k")
			want(t, err, sale.ErrOrderCancelled)
			e.due(t, ids["sleeper"])
			_, err = svc.Pay(ctx, ids["sleeper"], "sleeper", "k")
			want(t, err, sale.ErrOrderExpired) // past its window, before the expirer came by
			if expired, returned := svc.Round(ctx); expired != 1 || returned != 1 {
				t.Fatalf("Round = %d expired, %d units returned; want 1, 1", expired, returned)
			}
			if expired, returned := svc.Round(ctx); expired != 0 || returned != 0 {
				t.Fatalf("a second Round = %d expired, %d returned; want nothing", expired, returned)
			}
			if n := e.feed.restocked(p.ID); n != 2 {
				t.Errorf("%d restocked changes published, want 2 (the cancel's and the expiry's)", n)
			}
			if o := e.order(t, ids["sleeper"]); o.Status != sale.StatusExpired || !o.Returned || o.ClosedAt.IsZero() {
				t.Errorf("the unpaid order = %+v, want expired and returned", o)
			}
			f := e.audit(t, p)
			if f.Stock != 2 || f.ReturnedUnits != 2 || f.PaidUnits != 1 {
				t.Errorf("stock %d, returned %d, paid %d; want 2, 2, 1", f.Stock, f.ReturnedUnits, f.PaidUnits)
			}
			_, err = e.buy(t, p, "sleeper", true)
			want(t, err, sale.ErrAlreadyPurchased) // one chance per buyer per sale
			for _, u := range []string{"second-1", "second-2"} {
				if _, err := e.buy(t, p, u, true); err != nil {
					t.Fatalf("a second-wave buyer: %v", err)
				}
			}
			_, err = e.buy(t, p, "second-3", true)
			want(t, err, sale.ErrSoldOut)
			e.audit(t, p)
		})
	}
}

// TestPayRacesExpiry: payments and expirers race on orders whose window ends as they run.
// Exactly one wins each order: it ends paid with one successful charge, or expired with none
// and its unit back in stock.
func TestPayRacesExpiry(t *testing.T) {
	e := newEnv(t)
	const n = 60
	p := e.product(t, sale.StrategyMySQL, n)
	ids := make([]string, n)
	for i := range ids {
		id, err := e.buy(t, p, fmt.Sprintf("u%d", i), true)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	if _, err := e.st.DB().ExecContext(t.Context(), "UPDATE orders SET expires_at = NOW(6) + INTERVAL 150000 MICROSECOND WHERE product_id = ?", p.ID); err != nil {
		t.Fatal(err)
	}
	payer := e.service(t, 0.2, 20*time.Millisecond, checkout.Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			time.Sleep(time.Duration(i%30) * 10 * time.Millisecond)
			_, err := payer.Pay(ctx, id, fmt.Sprintf("u%d", i), "k")
			if err != nil && !errors.Is(err, sale.ErrOrderExpired) && !errors.Is(err, sale.ErrPaymentDeclined) {
				t.Errorf("Pay(%s) = %v", id, err)
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			exp := e.service(t, 0, 0, checkout.Options{Batch: 7})
			deadline := time.Now().Add(time.Second)
			for time.Now().Before(deadline) {
				exp.Round(ctx)
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	e.service(t, 0, 0, checkout.Options{}).Round(ctx) // what declines left to expire
	f := e.audit(t, p)
	if f.PaidUnits+f.ClosedUnits != n || f.ReturnedUnits != f.ClosedUnits || f.PaidUnits == 0 || f.ClosedUnits == 0 {
		t.Fatalf("paid %d, closed %d, returned %d of %d: want every order paid or expired and returned, some of each",
			f.PaidUnits, f.ClosedUnits, f.ReturnedUnits, n)
	}
	t.Logf("%d paid, %d expired and returned", f.PaidUnits, f.ClosedUnits)
}

// TestStuckPaymentIsSettled: a payer that died at the provider leaves its order `paying`; the
// expirer's recovery settles it by the provider's record of the key.
func TestStuckPaymentIsSettled(t *testing.T) {
	e := newEnv(t)
	p := e.product(t, sale.StrategyMySQL, 5)
	ctx := t.Context()
	charged, err := e.buy(t, p, "charged", true)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := e.buy(t, p, "lost", true)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := payment.New(e.st.DB(), payment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, user string }{{charged, "charged"}, {lost, "lost"}} {
		if _, _, err := e.st.ClaimPayment(ctx, c.id, c.user, "k"); err != nil {
			t.Fatal(err)
		}
	}
	// The first payer's charge reached the provider; the second died before it did.
	if _, err := prov.Charge(ctx, checkout.ChargeRequest{Key: charged + "/k", OrderID: charged, ProductID: p.ID, AmountCents: 250}); err != nil {
		t.Fatal(err)
	}
	svc := e.service(t, 0, 0, checkout.Options{StuckAfter: time.Millisecond, ChargeTimeout: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	e.due(t, lost)
	svc.Round(ctx) // settles both; the released one is past its window
	if o := e.order(t, charged); o.Status != sale.StatusPaid {
		t.Fatalf("the charged order is %s, want paid", o.Status)
	}
	if o := e.order(t, lost); o.Status != sale.StatusConfirmed {
		t.Fatalf("the uncharged order is %s, want confirmed again", o.Status)
	}
	late, err := prov.Charge(ctx, checkout.ChargeRequest{Key: lost + "/k", OrderID: lost, ProductID: p.ID, AmountCents: 250})
	if err != nil || late.Outcome != checkout.Voided {
		t.Fatalf("a late charge of the voided key = %+v, %v; want voided, nothing charged", late, err)
	}
	svc.Round(ctx)
	if o := e.order(t, lost); o.Status != sale.StatusExpired || !o.Returned {
		t.Fatalf("the uncharged order is %+v, want expired and returned", o)
	}
	e.audit(t, p)
}

// TestExpirersClaimOnce: expirers racing over the same due orders expire and return each once.
func TestExpirersClaimOnce(t *testing.T) {
	e := newEnv(t)
	const n = 200
	p := e.product(t, sale.StrategyMySQL, n)
	var ids []string
	for i := range n {
		id, err := e.buy(t, p, fmt.Sprintf("u%d", i), true)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	e.due(t, ids...)
	var mu sync.Mutex
	expired, returned := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			x, r := e.service(t, 0, 0, checkout.Options{Batch: 16}).Round(t.Context())
			mu.Lock()
			expired, returned = expired+x, returned+r
			mu.Unlock()
		})
	}
	wg.Wait()
	if expired != n || returned != n {
		t.Fatalf("expirers expired %d and returned %d units of %d", expired, returned, n)
	}
	if f := e.audit(t, p); f.Stock != n {
		t.Fatalf("stock %d, want %d: every unit back once", f.Stock, n)
	}
}

type nopObserver struct{}

func (nopObserver) ObserveLockWait(sale.Strategy, time.Duration) {}
func (nopObserver) LockLost(sale.Strategy)                       {}

// TestReturnsRaceASecondWave: for every safe strategy, the expirer returns a sold-out sale's
// lapsed units while a second wave of buyers hammers it: the wave gets exactly the returned
// units, never one more, and the audit is clean.
func TestReturnsRaceASecondWave(t *testing.T) {
	e := newEnv(t)
	for _, strategy := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua} {
		t.Run(string(strategy), func(t *testing.T) {
			const n, wave = 20, 40
			p := e.product(t, strategy, n)
			var ids []string
			for i := range n {
				id, err := e.buy(t, p, fmt.Sprintf("first-%d", i), true)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			e.due(t, ids...)
			ctx := t.Context()
			var returning sync.WaitGroup
			done := make(chan struct{})
			returning.Go(func() {
				defer close(done)
				svc := e.service(t, 0, 0, checkout.Options{Batch: 3}) // small batches: returns interleave with the wave
				// Until all n are back: a round can return 0 while redis-lua's persister has not yet
				// marked the last batch returned in MySQL (the round hands the same orders again,
				// which return nothing the second time); the next round after it has them.
				deadline := time.Now().Add(30 * time.Second)
				for total := 0; total < n; {
					_, returned := svc.Round(ctx)
					total += returned
					if returned == 0 {
						if time.Now().After(deadline) {
							t.Errorf("the expirer returned %d of the %d lapsed units in 30 s", total, n)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
			var mu sync.Mutex
			accepted := 0
			var buyers sync.WaitGroup
			for i := range wave {
				buyers.Go(func() {
					for {
						_, err := e.buy(t, p, fmt.Sprintf("second-%d", i), false)
						switch {
						case err == nil:
							mu.Lock()
							accepted++
							mu.Unlock()
							return
						case errors.Is(err, sale.ErrSoldOut):
							select {
							case <-done:
								if _, err := e.buy(t, p, fmt.Sprintf("second-%d", i), false); err == nil {
									mu.Lock()
									accepted++
									mu.Unlock()
								}
								return
							case <-time.After(2 * time.Millisecond):
							}
						case errors.Is(err, sale.ErrRateLimited):
							time.Sleep(2 * time.Millisecond)
						default:
							t.Errorf("second-wave buyer: %v", err)
							return
						}
					}
				})
			}
			buyers.Wait()
			returning.Wait()
			if accepted != n {
				t.Fatalf("the second wave bought %d units, want exactly the %d returned", accepted, n)
			}
			var second []string
			rows, err := e.st.DB().QueryContext(ctx, "SELECT order_id FROM reservations WHERE product_id = ? AND user_id LIKE 'second-%'", p.ID)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					t.Fatal(err)
				}
				second = append(second, id)
			}
			rows.Close()
			if _, err := e.st.ConfirmOrders(ctx, second); err != nil {
				t.Fatal(err)
			}
			if f := e.audit(t, p); f.Stock != 0 || f.ReturnedUnits != n {
				t.Fatalf("stock %d, returned %d; want 0 and %d", f.Stock, f.ReturnedUnits, n)
			}
		})
	}
}

// TestPaymentTimeoutResumedWithItsKey: a charge that outlives its timeout is answered 503 and
// leaves the order claimed; the buyer's retry with the same key resumes it, and the provider's
// idempotency on the key makes it one charge.
func TestPaymentTimeoutResumedWithItsKey(t *testing.T) {
	e := newEnv(t)
	p := e.product(t, sale.StrategyMySQL, 5)
	id, err := e.buy(t, p, "slow", true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.service(t, 0, 300*time.Millisecond, checkout.Options{ChargeTimeout: 20 * time.Millisecond}).Pay(t.Context(), id, "slow", "k")
	want(t, err, sale.ErrUnavailable)
	if o := e.order(t, id); o.Status != sale.StatusPaying {
		t.Fatalf("after the timeout the order is %s, want paying (claimed by the payment)", o.Status)
	}
	_, err = e.service(t, 0, 0, checkout.Options{}).Pay(t.Context(), id, "slow", "other")
	want(t, err, sale.ErrPaymentInProgress)
	o, err := e.service(t, 0, 0, checkout.Options{}).Pay(t.Context(), id, "slow", "k")
	if err != nil || o.Status != sale.StatusPaid {
		t.Fatalf("the retry with the same key = %+v, %v; want paid", o, err)
	}
	var charges int
	if err := e.st.DB().QueryRowContext(t.Context(), "SELECT COUNT(*) FROM payment_charges WHERE order_id = ?", id).Scan(&charges); err != nil || charges != 1 {
		t.Fatalf("charges = %d (%v), want 1", charges, err)
	}
	e.audit(t, p)
}
