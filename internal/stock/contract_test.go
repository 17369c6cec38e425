package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
	"github.com/seckill-go/seckill-go/internal/lock/redisnaive"
	"github.com/seckill-go/seckill-go/internal/lock/redlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
	"github.com/seckill-go/seckill-go/internal/store"
)

// deductorCase is one strategy under the contract. safe=false marks the negative control.
// keysPerProduct marks a strategy whose Idempotency-Keys are scoped per buyer and product rather
// than per buyer (redis-lua: a key lives in its sale's Redis slot).
type deductorCase struct {
	strategy       sale.Strategy
	safe           bool
	build          func(tb testing.TB, st *store.Store) sale.Deductor
	keysPerProduct bool
}

// pollingWait is the lock wait of the strategies whose waiters poll (the lock tables, the naive
// Redis locks, Redlock, Memcached): 300 one-buyer contenders are 300 grants one after another,
// handed out by chance rather than in order, and on a loaded 2-core CI machine under the race
// detector some of them waited past 30 s for a sale that was correct (100 sold, the rest told
// sold out). The case is about correctness, not latency.
const pollingWait = 2 * time.Minute

func deductorCases() []deductorCase {
	return []deductorCase{
		{sale.StrategyMySQL, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			d, err := stock.NewMySQL(st)
			if err != nil {
				tb.Fatal(err)
			}
			return d
		}, false},
		{sale.StrategyRedis, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newLocked(tb, st, sale.StrategyRedis, redisLocker(tb, itest.RedisAddr, 5*time.Second), 30*time.Second)
		}, false},
		{sale.StrategyZK, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newLocked(tb, st, sale.StrategyZK, zkLocker(tb, itest.ZKServers), 30*time.Second)
		}, false},
		// The herd's lock wait is longer: its 300 concurrent buyers wait on one session, and
		// every change of the queue wakes every one of them to list it again, O(N²) in all
		// (24 s under -race on the project's two cores, against a second for zk).
		{sale.StrategyZKHerd, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return zkLocked(tb, st, sale.StrategyZKHerd, 2*time.Minute)
		}, false},
		{sale.StrategyZKReentrant, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return zkLocked(tb, st, sale.StrategyZKReentrant, 30*time.Second)
		}, false},
		{sale.StrategyRedisLua, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newPersisted(tb, st)
		}, true},
		{sale.StrategyMySQLForUpdate, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newForUpdate(tb, st, 30*time.Second, &attempts{})
		}, false},
		{sale.StrategyMySQLVersion, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newOptimistic(tb, st, 30*time.Second, &attempts{}, false)
		}, false},
		{sale.StrategyMySQLVersionCapped, false, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newOptimistic(tb, st, 30*time.Second, &attempts{}, true)
		}, false},
		{sale.StrategyMySQLLockTable, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newLocked(tb, st, sale.StrategyMySQLLockTable, lockTable(tb, st.DB(), mysqllock.Options{TTL: 5 * time.Second}).Locker(), pollingWait)
		}, false},
		// Unsafe only under faults (a holder that dies or pauses: TestLockTableNaivePausedHolder);
		// without them the naive lock table excludes, and sells exactly the stock.
		{sale.StrategyMySQLLockTableNaive, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newNaiveLockTable(tb, st, pollingWait)
		}, false},
		// Unsafe only under faults too: a holder that dies between SETNX and EXPIRE, pauses past
		// the TTL, or runs on a skewed clock (redisnaive_test.go).
		{sale.StrategyRedisSetnx, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newLocked(tb, st, sale.StrategyRedisSetnx, setnxLock(tb, naiveRDB(tb), redisnaive.Options{TTL: 10 * time.Second}).Locker(), pollingWait, unfenced)
		}, false},
		{sale.StrategyRedisGetset, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return newLocked(tb, st, sale.StrategyRedisGetset, getsetLock(tb, naiveRDB(tb), redisnaive.Options{TTL: 10 * time.Second}).Locker(), pollingWait, unfenced)
		}, false},
		{sale.StrategyRedisReentrant, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			return redisReentrantLocked(tb, st, 30*time.Second)
		}, false},
		// Unsafe only under faults: memcached restarted or evicting during a hold, or a holder
		// paused past the expiry (memcached_test.go). On a memcached of the test's own.
		{sale.StrategyMemcached, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			tk, err := tokens.NewRedis(naiveRDB(tb), "")
			if err != nil {
				tb.Fatal(err)
			}
			return newLocked(tb, st, sale.StrategyMemcached, memLock(tb, itest.Memcached(tb).Addr(), tk).Locker(), pollingWait, unfenced)
		}, false},
		// Unsafe only under faults: servers restarted empty during a hold, a holder paused past
		// the validity (redlock_test.go). On five Redis servers of the test's own. Its waiters
		// poll five servers: 300 of them polling every 100 ms at most, under the race detector,
		// kept the machine so busy that a third of them waited out 30 s (4 s without -race);
		// polling at most every second, the holders get the machine.
		{sale.StrategyRedlock, true, func(tb testing.TB, st *store.Store) sale.Deductor {
			tk, err := tokens.NewRedis(naiveRDB(tb), "")
			if err != nil {
				tb.Fatal(err)
			}
			servers := make([]*itest.Server, 5)
			for i := range servers {
				servers[i] = itest.RedisServer(tb)
			}
			l := redlockClient(tb, servers, tk, func(o *redlock.Options) { o.MaxBackoff = time.Second })
			return newLocked(tb, st, sale.StrategyRedlock, l.Locker(), pollingWait, unfenced)
		}, false},
		{sale.StrategyNone, false, func(tb testing.TB, st *store.Store) sale.Deductor {
			d, err := stock.NewNone(st)
			if err != nil {
				tb.Fatal(err)
			}
			return d
		}, false},
	}
}

// TestDeductorCasesCoverRegistry: the contract suite runs every strategy of the registry
// (sale.Catalog), once, and none it lacks.
func TestDeductorCasesCoverRegistry(t *testing.T) {
	var got []sale.Strategy
	for _, dc := range deductorCases() {
		got = append(got, dc.strategy)
	}
	if diff := cmp.Diff(sale.Strategies, got, cmpopts.SortSlices(func(a, b sale.Strategy) bool { return a < b })); diff != "" {
		t.Errorf("the contract's strategies (-registry +cases):\n%s", diff)
	}
}

// TestDeductorContract runs the same suite against every strategy: what a Deductor must do for a
// single buyer, and, concurrently, that a safe one never oversells while `none` does.
func TestDeductorContract(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for _, dc := range deductorCases() {
		t.Run(string(dc.strategy), func(t *testing.T) {
			t.Parallel()
			d := dc.build(t, st)
			t.Run("deducts and reserves", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 5)
				mustDeduct(t, d, reservation(p, "u1", 2, ""))
				assertStock(t, st, p.ID, 3)
				f := mustAudit(t, st, p.ID)
				if f.Reservations != 1 || f.ReservedUnits != 2 {
					t.Errorf("reservations = %d (%d units), want 1 (2 units)", f.Reservations, f.ReservedUnits)
				}
			})
			t.Run("sold out", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 1)
				mustDeduct(t, d, reservation(p, "u1", 1, ""))
				assertErr(t, d.Deduct(t.Context(), reservation(p, "u2", 1, "")), sale.ErrSoldOut)
				assertStock(t, st, p.ID, 0)
			})
			t.Run("more than left", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 2)
				assertErr(t, d.Deduct(t.Context(), reservation(p, "u1", 3, "")), sale.ErrSoldOut)
				assertStock(t, st, p.ID, 2)
			})
			t.Run("second purchase by the same user deducts nothing", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 5)
				mustDeduct(t, d, reservation(p, "u1", 1, ""))
				assertErr(t, d.Deduct(t.Context(), reservation(p, "u1", 1, "")), sale.ErrAlreadyPurchased)
				assertStock(t, st, p.ID, 4)
			})
			t.Run("a used idempotency key deducts nothing", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 5)
				q := newProduct(t, st, dc.strategy, 5)
				user := "u-" + itest.Suffix(8) // keys are scoped per user, and other tests run at once
				mustDeduct(t, d, reservation(p, user, 1, "key-1"))
				assertErr(t, d.Deduct(t.Context(), reservation(p, user, 1, "key-1")), sale.ErrIdempotencyKeyInUse)
				assertStock(t, st, p.ID, 4)
				if dc.keysPerProduct {
					// Another product's sale does not know the key: the purchase is its own, and
					// MySQL keeps the key with the first product's reservation.
					mustDeduct(t, d, reservation(q, user, 1, "key-1"))
					assertStock(t, st, q.ID, 4)
					if r, err := st.StoredReceipt(t.Context(), user, "key-1"); err != nil || r.ProductID != p.ID {
						t.Fatalf("stored receipt of key-1: %+v %v, want product %d's", r, err, p.ID)
					}
					return
				}
				assertErr(t, d.Deduct(t.Context(), reservation(q, user, 1, "key-1")), sale.ErrIdempotencyKeyInUse)
				assertStock(t, st, q.ID, 5)
			})
			t.Run("strategy switched underneath", func(t *testing.T) {
				t.Parallel()
				other := sale.StrategyMySQL
				if dc.strategy == sale.StrategyMySQL {
					other = sale.StrategyNone
				}
				p := newProduct(t, st, other, 5)
				r := reservation(p, "u1", 1, "")
				r.Strategy = dc.strategy
				assertErr(t, d.Deduct(t.Context(), r), sale.ErrStrategyChanged)
				assertStock(t, st, p.ID, 5)
			})
			t.Run("unknown product", func(t *testing.T) {
				t.Parallel()
				r := reservation(sale.Product{ID: 1 << 40, Strategy: dc.strategy}, "u1", 1, "")
				assertErr(t, d.Deduct(t.Context(), r), sale.ErrNotFound)
			})
			t.Run("300 concurrent buyers, stock 100", func(t *testing.T) {
				t.Parallel()
				testConcurrentBuyers(t, st, d, dc)
			})
		})
	}
}

// crowds bounds how many strategies run their 300 buyers at once: each case holds its lock wait
// to 30 s, and seventeen crowds at once, under the race detector, kept this 2-core machine so busy
// that a polling lock's holders (the lock table's) could not finish 100 sales in time.
var crowds = make(chan struct{}, 4)

func testConcurrentBuyers(t *testing.T, st *store.Store, d sale.Deductor, dc deductorCase) {
	const buyers, stockN = 300, 100
	crowds <- struct{}{}
	defer func() { <-crowds }()
	p := newProduct(t, st, dc.strategy, stockN)
	var accepted, soldOut atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range buyers {
		wg.Go(func() {
			<-start
			err := d.Deduct(t.Context(), reservation(p, fmt.Sprintf("buyer-%03d", i), 1, ""))
			switch {
			case err == nil:
				accepted.Add(1)
			case errors.Is(err, sale.ErrSoldOut):
				soldOut.Add(1)
			default:
				t.Errorf("buyer %d: unexpected error %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	f := mustAudit(t, st, p.ID)
	violations := f.Violations(false)
	t.Logf("%s: accepted %d, sold out %d, stock %d, reserved %d, violations %q",
		dc.strategy, accepted.Load(), soldOut.Load(), f.Stock, f.ReservedUnits, violations)
	if dc.strategy == sale.StrategyMySQLVersionCapped {
		// Unsafe, but not by overselling: capped retries undersell (sold out answered while stock
		// remains), so it is held here to what it still guarantees, no oversell and a consistent
		// audit, and not to selling the whole stock. How much it undersells depends on how its
		// tries collide; TestOptimisticUnderContention asserts the undersell under a load that
		// makes it certain.
		if len(violations) > 0 || accepted.Load() > stockN {
			t.Errorf("accepted %d of %d, violations %q", accepted.Load(), stockN, violations)
		}
		return
	}
	if !dc.safe {
		// The negative control: the audit must catch the oversell that `none` produces.
		if f.Oversold() == 0 || len(violations) == 0 {
			t.Fatalf("the unsafe strategy did not oversell (accepted %d of %d): the test could not catch one", accepted.Load(), stockN)
		}
		return
	}
	if accepted.Load() != stockN || f.Stock != 0 || f.ReservedUnits != stockN {
		t.Errorf("accepted %d, stock %d, reserved %d; want %d, 0, %d", accepted.Load(), f.Stock, f.ReservedUnits, stockN, stockN)
	}
	if len(violations) > 0 {
		t.Errorf("invariants broken: %q", violations)
	}
}

func newProduct(tb testing.TB, st *store.Store, strategy sale.Strategy, stockN int) sale.Product {
	tb.Helper()
	now := time.Now().UTC()
	p, err := st.CreateProduct(tb.Context(), sale.NewProduct{
		Name: "contract " + itest.Suffix(6), PriceCents: 100, Stock: stockN, Strategy: strategy,
		SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 5,
	}, now)
	if err != nil {
		tb.Fatalf("create product: %v", err)
	}
	return p
}

func reservation(p sale.Product, user string, qty int, key string) sale.Reservation {
	return sale.Reservation{
		Receipt: sale.Receipt{
			OrderID: "o-" + itest.Suffix(24), Status: sale.StatusQueued, ProductID: p.ID,
			UserID: user, Quantity: qty, Strategy: p.Strategy,
		},
		IdempotencyKey: key,
		Epoch:          p.Epoch,
		CreatedAt:      time.Now().UTC(),
	}
}

func mustDeduct(tb testing.TB, d sale.Deductor, r sale.Reservation) {
	tb.Helper()
	if err := d.Deduct(tb.Context(), r); err != nil {
		tb.Fatalf("Deduct(%s, qty %d) = %v, want nil", r.UserID, r.Quantity, err)
	}
}

func assertErr(tb testing.TB, got, want error) {
	tb.Helper()
	if !errors.Is(got, want) {
		tb.Fatalf("error = %v, want %v", got, want)
	}
}

func assertStock(tb testing.TB, st *store.Store, id int64, want int) {
	tb.Helper()
	p, err := st.Product(tb.Context(), id)
	if err != nil {
		tb.Fatal(err)
	}
	if p.Stock != want {
		tb.Errorf("stock = %d, want %d", p.Stock, want)
	}
}

func mustAudit(tb testing.TB, st *store.Store, id int64) audit.Facts {
	tb.Helper()
	f, err := audit.Load(tb.Context(), st.DB(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// persisted is the redis-lua strategy with its persister run after each deduction, so that the
// contract's checks of MySQL see what the script decided: the real script on the real Redis, the
// real persister on the real MariaDB, only the persister's schedule made synchronous.
type persisted struct {
	d  *redislua.Deductor
	ps *redislua.Persister
}

func newPersisted(tb testing.TB, st *store.Store) *persisted {
	tb.Helper()
	rdb := itest.Redis(tb)
	// One namespace per database, as the app has: every deductor built on st shares the sales.
	s, err := redislua.New(rdb, fmt.Sprintf("contract-%p", st))
	if err != nil {
		tb.Fatal(err)
	}
	d, err := redislua.NewDeductor(rdb, s, st.ReloadSale, nil)
	if err != nil {
		tb.Fatal(err)
	}
	d.SetReturned(st.ReturnedOrders)
	ps, err := redislua.NewPersister(rdb, s, st, redislua.PersisterOptions{Consumer: "contract"})
	if err != nil {
		tb.Fatal(err)
	}
	return &persisted{d: d, ps: ps}
}

func (p *persisted) Deduct(ctx context.Context, r sale.Reservation) error {
	if err := p.d.Deduct(ctx, r); err != nil {
		return err
	}
	_, err := p.ps.Drain(ctx, r.ProductID)
	return err
}

func (p *persisted) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	errs, err := p.d.DeductBatch(ctx, batch)
	if err != nil {
		return nil, err
	}
	_, err = p.ps.Drain(ctx, batch[0].ProductID)
	return errs, err
}
