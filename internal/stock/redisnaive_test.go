package stock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/redisnaive"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// naiveRDB is a Redis client of the test's own.
func naiveRDB(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	return itest.Redis(tb)
}

func setnxLock(tb testing.TB, rdb redis.UniversalClient, opts redisnaive.Options) *redisnaive.SetNX {
	tb.Helper()
	l, err := redisnaive.NewSetNX(rdb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

func getsetLock(tb testing.TB, rdb redis.UniversalClient, opts redisnaive.Options) *redisnaive.GetSet {
	tb.Helper()
	l, err := redisnaive.NewGetSet(rdb, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// naiveOpts are the options of the strategies built on a redisnaive lock: unfenced, as the app
// builds them, or fenced, the positive half of a pair.
func naiveOpts(fenced bool) []lockedOpt {
	if fenced {
		return nil
	}
	return []lockedOpt{unfenced}
}

func fencedName(fenced bool) string {
	if fenced {
		return "with the fence, refused"
	}
	return "unfenced, as the write-ups"
}

// TestRedisSetnxDiesBeforeExpire: the holder dies between SETNX and EXPIRE (the hook abandons the
// grant there). Its key has no expiry (TTL -1), so every later buyer waits out its lock wait, again
// and again: the sale stalls. A person deletes the key, and the next buyer sells.
func TestRedisSetnxDiesBeforeExpire(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	rdb := naiveRDB(t)
	p := newProduct(t, st, sale.StrategyRedisSetnx, 1)
	var died atomic.Bool
	dying := setnxLock(t, rdb, redisnaive.Options{TTL: 200 * time.Millisecond, BetweenSetnxAndExpire: func() bool {
		return died.Swap(true) // the first grant dies before its EXPIRE; later ones go on
	}})
	a := newLocked(t, st, sale.StrategyRedisSetnx, dying.Locker(), 30*time.Second, unfenced)
	b := newLocked(t, st, sale.StrategyRedisSetnx, setnxLock(t, rdb, redisnaive.Options{TTL: 200 * time.Millisecond}).Locker(), 300*time.Millisecond, unfenced)

	if err := a.Deduct(t.Context(), reservation(p, "dies", 1, "")); !errors.Is(err, redisnaive.ErrAbandoned) {
		t.Fatalf("the holder that dies = %v, want %v", err, redisnaive.ErrAbandoned)
	}
	key := dying.Key(stock.LockName(st.Name(), p.ID))
	if ttl, err := rdb.Do(t.Context(), "TTL", key).Int(); err != nil || ttl != -1 {
		t.Fatalf("TTL %s = %d %v, want -1 (the key exists, with no expiry)", key, ttl, err)
	}
	for i := range 3 {
		time.Sleep(300 * time.Millisecond) // longer than the TTL the EXPIRE would have set
		err := b.Deduct(t.Context(), reservation(p, fmt.Sprint("stalled-", i), 1, ""))
		if !errors.Is(err, sale.ErrLockTimeout) {
			t.Fatalf("buyer %d after the holder died = %v, want ErrLockTimeout (the sale stalls)", i, err)
		}
	}
	if err := rdb.Del(t.Context(), key).Err(); err != nil { // the person's DEL
		t.Fatal(err)
	}
	mustDeduct(t, b, reservation(p, "after-cleanup", 1, ""))
	f := mustAudit(t, st, p.ID)
	if v := f.Violations(false); len(v) > 0 || f.Reservations != 1 || f.Stock != 0 {
		t.Fatalf("audit %+v %q: want the one unit sold once, after the cleanup", f, v)
	}
}

// TestRedisSetnxPausedHolder: holder A pauses in its critical section (after its read, before its
// write) past the TTL. Its key expires; buyer B takes the lock and the last unit, and then C takes
// the lock and still holds it when A resumes. Unfenced, A's write sells the unit a second time
// and A's DEL deletes C's lock; with the fence, A's write is refused (its DEL still deletes C's
// lock: the fence protects the stock, not the lock).
func TestRedisSetnxPausedHolder(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	rdb := naiveRDB(t)
	const ttl = 300 * time.Millisecond
	for _, fenced := range []bool{false, true} {
		t.Run(fencedName(fenced), func(t *testing.T) {
			t.Parallel()
			p := newProduct(t, st, sale.StrategyRedisSetnx, 1)
			la := setnxLock(t, rdb, redisnaive.Options{TTL: ttl})
			lb := setnxLock(t, rdb, redisnaive.Options{TTL: 30 * time.Second})
			key := la.Key(stock.LockName(st.Name(), p.ID))
			a := newLocked(t, st, sale.StrategyRedisSetnx, la.Locker(), 30*time.Second, naiveOpts(fenced)...)
			b := newLocked(t, st, sale.StrategyRedisSetnx, lb.Locker(), 30*time.Second, naiveOpts(fenced)...)
			var bErr, cErr error
			var cHolds bool
			var once sync.Once
			a.SetHold(func(ctx context.Context) {
				once.Do(func() {
					for rdb.Exists(ctx, key).Val() == 1 { // A is paused; its key expires
						time.Sleep(20 * time.Millisecond)
					}
					bErr = b.Deduct(ctx, reservation(p, "buyer-b", 1, ""))
					_, cErr = lb.TryAcquire(ctx, stock.LockName(st.Name(), p.ID)) // C: the holder now
					cHolds = cErr == nil
				})
			})
			aErr := a.Deduct(t.Context(), reservation(p, "paused-a", 1, ""))
			if bErr != nil || !cHolds {
				t.Fatalf("B = %v, C = %v; both should have got the expired lock", bErr, cErr)
			}
			if n := rdb.Exists(t.Context(), key).Val(); n != 0 {
				t.Errorf("C's key exists = %d after A released: want A's DEL to have deleted C's lock", n)
			}
			f := mustAudit(t, st, p.ID)
			if !fenced {
				if aErr != nil || f.Oversold() == 0 || f.Reservations != 2 {
					t.Fatalf("A = %v, audit %+v: want the paused holder's write to sell the unit twice", aErr, f)
				}
				t.Logf("oversold: %q", f.Violations(false))
				return
			}
			if !errors.Is(aErr, sale.ErrFenced) {
				t.Fatalf("A's stale write = %v, want %v", aErr, sale.ErrFenced)
			}
			if v := f.Violations(false); len(v) > 0 || f.Reservations != 1 || f.Stock != 0 {
				t.Fatalf("audit %+v %q: want B's sale only", f, v)
			}
		})
	}
}

// TestRedisGetsetSkewedClock: honest A holds the timestamp lock; B's clock is an hour ahead, so
// A's deadline has passed by B's clock, and B takes the lock over with GETSET while A is still in
// its critical section: two holders. Unfenced, both sell the last unit; with the fence, A's write
// (the older token) is refused.
func TestRedisGetsetSkewedClock(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	rdb := naiveRDB(t)
	for _, fenced := range []bool{false, true} {
		t.Run(fencedName(fenced), func(t *testing.T) {
			t.Parallel()
			testGetsetSkew(t, st, rdb, fenced)
		})
	}
}

func testGetsetSkew(t *testing.T, st *store.Store, rdb redis.UniversalClient, fenced bool) {
	p := newProduct(t, st, sale.StrategyRedisGetset, 1)
	la := getsetLock(t, rdb, redisnaive.Options{TTL: 30 * time.Second})
	lb := getsetLock(t, rdb, redisnaive.Options{TTL: 30 * time.Second, ClockOffset: time.Hour})
	a := newLocked(t, st, sale.StrategyRedisGetset, la.Locker(), 30*time.Second, naiveOpts(fenced)...)
	b := newLocked(t, st, sale.StrategyRedisGetset, lb.Locker(), 300*time.Millisecond, naiveOpts(fenced)...)
	var bErr error
	var once sync.Once
	a.SetHold(func(ctx context.Context) {
		once.Do(func() { bErr = b.Deduct(ctx, reservation(p, "skewed-b", 1, "")) })
	})
	aErr := a.Deduct(t.Context(), reservation(p, "honest-a", 1, ""))
	if bErr != nil {
		t.Fatalf("B, an hour ahead, = %v: want it to take over A's live lock at once", bErr)
	}
	f := mustAudit(t, st, p.ID)
	if !fenced {
		if aErr != nil || f.Oversold() == 0 || f.Reservations != 2 {
			t.Fatalf("A = %v, audit %+v: want two holders to sell the unit twice", aErr, f)
		}
		t.Logf("oversold: %q", f.Violations(false))
		return
	}
	if !errors.Is(aErr, sale.ErrFenced) {
		t.Fatalf("A's write = %v, want %v (B's token is larger)", aErr, sale.ErrFenced)
	}
	if v := f.Violations(false); len(v) > 0 || f.Reservations != 1 || f.Stock != 0 {
		t.Fatalf("audit %+v %q: want B's sale only", f, v)
	}
}
