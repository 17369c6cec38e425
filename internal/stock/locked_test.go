package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// redisLocker returns a Redis lock client on its own connection to addr, which dials once per
// attempt, as the app's does.
func redisLocker(tb testing.TB, addr string, ttl time.Duration) lock.Locker {
	tb.Helper()
	var rdb redis.UniversalClient
	opts := redis.UniversalOptions{MaxRetries: -1, DialerRetries: 1}
	if addr == itest.RedisAddr {
		rdb = itest.RedisWith(tb, opts) // the test Redis, in whatever topology it runs
	} else {
		opts.Addrs = []string{addr} // a proxy in front of the one test server
		rdb = redis.NewUniversalClient(&opts)
		tb.Cleanup(func() { rdb.Close() })
	}
	c, err := redislock.New(rdb, redislock.Options{TTL: ttl, Logger: itest.Logger()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c.Locker()
}

// zkClient returns a ZooKeeper lock client with a session of its own on servers.
func zkClient(tb testing.TB, servers []string) *zklock.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := zklock.Connect(ctx, servers, zklock.Options{SessionTimeout: 4 * time.Second, Logger: itest.Logger()})
	if err != nil {
		tb.Fatalf("zookeeper: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// zkLocker returns the zk strategy's locker on a session of its own on servers.
func zkLocker(tb testing.TB, servers []string) lock.Locker {
	tb.Helper()
	return zkClient(tb, servers).Locker()
}

// zkLocked returns the strategy st (zk, zk-herd or zk-reentrant) as the app makes it, on a
// ZooKeeper session of its own.
func zkLocked(tb testing.TB, st *store.Store, strategy sale.Strategy, wait time.Duration) *stock.Locked {
	tb.Helper()
	c := zkClient(tb, itest.ZKServers)
	switch strategy {
	case sale.StrategyZK:
		return newLocked(tb, st, strategy, c.Locker(), wait)
	case sale.StrategyZKHerd:
		return newLocked(tb, st, strategy, c.Mutex(zklock.MutexOptions{Herd: true}).Locker(), wait)
	case sale.StrategyZKReentrant:
		return newLocked(tb, st, strategy, c.Reentrant(zklock.MutexOptions{}).Locker(), wait, reentrant)
	}
	tb.Fatalf("zkLocked: %s is no ZooKeeper strategy", strategy)
	return nil
}

// lockedOpt sets one of a test's LockedOptions beyond its store, strategy, locker and wait.
type lockedOpt func(*stock.LockedOptions)

// unfenced and reentrant set LockedOptions.Unfenced and LockedOptions.Reentrant.
var (
	unfenced  lockedOpt = func(o *stock.LockedOptions) { o.Unfenced = true }
	reentrant lockedOpt = func(o *stock.LockedOptions) { o.Reentrant = true }
)

func newLocked(tb testing.TB, st *store.Store, strategy sale.Strategy, l lock.Locker, wait time.Duration, opts ...lockedOpt) *stock.Locked {
	tb.Helper()
	o := stock.LockedOptions{Store: st, Strategy: strategy, Locker: l, Wait: wait, Observer: nopObserver{}}
	for _, set := range opts {
		set(&o)
	}
	d, err := stock.NewLocked(o)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

type nopObserver struct{}

func (nopObserver) ObserveLockWait(sale.Strategy, time.Duration) {}
func (nopObserver) LockLost(sale.Strategy)                       {}

// unaware hides Lost() from the deductor: a holder stalled in a GC pause or partitioned from
// the lock service does not learn in time that its lease is gone.
type unaware struct{ lock.Locker }

func (u unaware) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	l, err := u.Locker.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return unawareLease{l}, nil
}

type unawareLease struct{ lock.Lease }

func (unawareLease) Lost() <-chan struct{} { return nil }

// Issuer is the wrapped lease's: the holder is unaware of its lease's loss, not of where its
// token comes from.
func (u unawareLease) Issuer() string { return lock.IssuerOf(u.Lease) }

// TestFenceRefusesStaleHolder stalls holder A inside its critical section (after it read the
// stock, before it writes) and cuts it off from the lock service until its lease is gone; buyer
// B then takes the lock and the last unit. When A resumes, unaware, its write must be refused by
// the fence: one unit, one sale. The same run without the fence sells the unit twice, which
// shows that the fence is what stopped A.
func TestFenceRefusesStaleHolder(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for _, tc := range []struct {
		strategy sale.Strategy
		dial     func(t *testing.T, viaProxy bool) (lock.Locker, *itest.Proxy)
	}{
		{sale.StrategyRedis, func(t *testing.T, viaProxy bool) (lock.Locker, *itest.Proxy) {
			if !viaProxy {
				return redisLocker(t, itest.RedisAddr, 300*time.Millisecond), nil
			}
			itest.SingleRedis(t)
			p := itest.NewProxy(t, itest.RedisAddr)
			return redisLocker(t, p.Addr(), 300*time.Millisecond), p
		}},
		{sale.StrategyZK, func(t *testing.T, viaProxy bool) (lock.Locker, *itest.Proxy) {
			if !viaProxy {
				return zkLocker(t, itest.ZKServers), nil
			}
			p := itest.NewProxy(t, itest.ZKServers[0])
			return zkLocker(t, []string{p.Addr()}), p
		}},
	} {
		for _, n := range []int{1, 3} { // A's batch: one buyer, or three combined
			for _, fenced := range []bool{true, false} {
				name := fmt.Sprintf("%s/batch of %d/fenced", tc.strategy, n)
				if !fenced {
					name = fmt.Sprintf("%s/batch of %d/control without fence", tc.strategy, n)
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					testStaleHolder(t, st, tc.strategy, tc.dial, n, fenced)
				})
			}
		}
	}
}

// testStaleHolder: A deducts a batch of n buyers for n units and stalls between its read and its
// write while cut off from the lock service; B, the legitimate holder after A's lease, takes one
// unit; then A writes. The fence must refuse A's whole batch; without it, A's write oversells.
func testStaleHolder(t *testing.T, st *store.Store, strategy sale.Strategy, dial func(*testing.T, bool) (lock.Locker, *itest.Proxy), n int, fenced bool) {
	p := newProduct(t, st, strategy, n)
	aLocker, partition := dial(t, true)
	bLocker, _ := dial(t, false)
	a := newLocked(t, st, strategy, unaware{aLocker}, 30*time.Second)
	b := newLocked(t, st, strategy, bLocker, 60*time.Second)
	if !fenced {
		a.DisableFence()
		b.DisableFence()
	}
	var bErr error
	var once sync.Once
	a.SetHold(func(context.Context) {
		once.Do(func() {
			partition.Cut() // A is cut off from the lock service; its lease runs out
			bErr = b.Deduct(t.Context(), reservation(p, "buyer-b", 1, ""))
		})
	})
	batch := make([]sale.Reservation, n)
	for i := range batch {
		batch[i] = reservation(p, fmt.Sprintf("buyer-a%d", i), 1, "")
	}
	aErrs, aErr := a.DeductBatch(t.Context(), batch)
	if bErr != nil {
		t.Fatalf("B, the legitimate holder, failed: %v", bErr)
	}
	f := mustAudit(t, st, p.ID)
	if !fenced {
		if aErr != nil || f.Oversold() == 0 {
			t.Fatalf("control: A = %v %v and the audit saw %+v; without the fence A's stale write should have oversold", aErrs, aErr, f)
		}
		return
	}
	if !errors.Is(aErr, sale.ErrFenced) {
		t.Fatalf("A's stale write = %v %v, want the whole batch refused by the fence (%v)", aErrs, aErr, sale.ErrFenced)
	}
	if v := f.Violations(false); len(v) > 0 || f.Reservations != 1 || f.Stock != n-1 {
		t.Fatalf("after the stale write: %+v %q; want B's reservation only, stock %d", f, v, n-1)
	}
}

// TestLockServiceOutage cuts a lock strategy off from its lock service: every purchase is
// answered sale.ErrUnavailable (503) far sooner than the lock wait, and deducts nothing; once the
// service is back, the strategy sells again by itself.
func TestLockServiceOutage(t *testing.T) {
	st, _ := itest.Store(t)
	const wait = 3 * time.Second // the app's default SECKILL_LOCK_WAIT
	for _, tc := range []struct {
		strategy sale.Strategy
		server   string
		locker   func(tb testing.TB, addr string) lock.Locker
	}{
		{sale.StrategyRedis, itest.RedisAddr, func(tb testing.TB, addr string) lock.Locker { return redisLocker(tb, addr, 5*time.Second) }},
		{sale.StrategyZK, itest.ZKServers[0], func(tb testing.TB, addr string) lock.Locker { return zkLocker(tb, []string{addr}) }},
	} {
		t.Run(string(tc.strategy), func(t *testing.T) {
			t.Parallel()
			if tc.strategy == sale.StrategyRedis {
				itest.SingleRedis(t)
			}
			proxy := itest.NewProxy(t, tc.server)
			d := newLocked(t, st, tc.strategy, tc.locker(t, proxy.Addr()), wait)
			p := newProduct(t, st, tc.strategy, 10)
			// Idempotency keys are unique per user, whatever the product.
			user := func(what string) string { return string(tc.strategy) + "-" + what + "-" + itest.Suffix(6) }
			mustDeduct(t, d, reservation(p, user("before"), 1, "k-before"))

			proxy.Cut()
			// The first purchase may be the one that finds the service gone (a dial, or
			// ZooKeeper's FailAfter); the bound is a liveness claim far below the lock wait.
			for i := range 5 {
				start := time.Now()
				err := d.Deduct(t.Context(), reservation(p, user(fmt.Sprint("during-", i)), 1, "k-during"))
				took := time.Since(start)
				if !errors.Is(err, sale.ErrUnavailable) {
					t.Fatalf("purchase %d during the outage = %v, want ErrUnavailable", i, err)
				}
				if took > wait/3 {
					t.Errorf("purchase %d during the outage answered after %s; the lock wait is %s", i, took, wait)
				}
				t.Logf("purchase %d during the outage: ErrUnavailable after %s", i, took.Round(time.Microsecond))
			}
			assertStock(t, st, p.ID, 9)

			proxy.Heal()
			healed := time.Now()
			after := reservation(p, user("after"), 1, "k-after")
			itest.Eventually(t, 20*time.Second, func() (bool, string) {
				err := d.Deduct(t.Context(), after)
				return err == nil, fmt.Sprint(err)
			})
			t.Logf("selling again %s after the service came back", time.Since(healed).Round(time.Millisecond))
			assertStock(t, st, p.ID, 8)
		})
	}
}

// recording records every acquisition made through it: for which owner, with which token.
type recording struct {
	lock.Locker
	mu   sync.Mutex
	seen []string // "owner token"
}

func (r *recording) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	l, err := r.Locker.Acquire(ctx, name)
	if err == nil {
		owner, _ := lock.OwnerFrom(ctx)
		r.mu.Lock()
		r.seen = append(r.seen, fmt.Sprintf("%s %d", owner, l.Token()))
		r.mu.Unlock()
	}
	return l, err
}

// TestReentrantWriteStep: with stock.Reentrant a batch takes the product's lock twice, the
// batch and then its write step, for one owner, and both see one grant (one token). The control
// runs the same strategy over the plain zk lock, which does not know its holder: the write step
// waits for its own batch's lock until the lock wait runs out, and nothing is sold.
func TestReentrantWriteStep(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	t.Run("re-entrant lock", func(t *testing.T) {
		t.Parallel()
		rec := &recording{Locker: zkClient(t, itest.ZKServers).Reentrant(zklock.MutexOptions{}).Locker()}
		d := newLocked(t, st, sale.StrategyZKReentrant, rec, 30*time.Second, reentrant)
		p := newProduct(t, st, sale.StrategyZKReentrant, 5)
		mustDeduct(t, d, reservation(p, "u1", 2, ""))
		mustDeduct(t, d, reservation(p, "u2", 1, ""))
		assertStock(t, st, p.ID, 2)
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.seen) != 4 || rec.seen[0] != rec.seen[1] || rec.seen[2] != rec.seen[3] || rec.seen[0] == rec.seen[2] {
			t.Fatalf("acquisitions %q; want two per batch, each pair for one owner with one token, the batches apart", rec.seen)
		}
	})
	t.Run("control: the plain zk lock waits for itself", func(t *testing.T) {
		t.Parallel()
		d := newLocked(t, st, sale.StrategyZKReentrant, zkLocker(t, itest.ZKServers), 500*time.Millisecond, reentrant)
		p := newProduct(t, st, sale.StrategyZKReentrant, 5)
		assertErr(t, d.Deduct(t.Context(), reservation(p, "u1", 1, "")), sale.ErrLockTimeout)
		assertStock(t, st, p.ID, 5)
	})
}
