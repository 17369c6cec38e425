package stock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/redisreentrant"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// rlockClient returns a Redisson-style re-entrant lock client on a Redis client of its own.
func rlockClient(tb testing.TB, ttl time.Duration) *redisreentrant.Client {
	tb.Helper()
	rdb := itest.RedisWith(tb, redis.UniversalOptions{MaxRetries: -1, DialerRetries: 1})
	c, err := redisreentrant.New(rdb, redisreentrant.Options{TTL: ttl, Logger: itest.Logger()})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// redisReentrantLocked returns the redis-reentrant strategy as the app makes it: the batch and
// its write step take the product's lock for one owner (stock.Reentrant), fenced.
func redisReentrantLocked(tb testing.TB, st *store.Store, wait time.Duration) sale.Deductor {
	tb.Helper()
	return newLocked(tb, st, sale.StrategyRedisReentrant, rlockClient(tb, 30*time.Second).Locker(), wait, reentrant)
}

// TestRedisReentrantConcurrentBuyers: 200 buyers for 50 units, each purchase a batch whose write
// step re-enters the batch's lock. Exactly the stock is sold, the audit is clean, and every
// owner's acquisitions (the batch's, and its write step's when it had stock to write) carry one
// token, each owner another.
func TestRedisReentrantConcurrentBuyers(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	const buyers, stockN = 200, 50
	rec := &recording{Locker: rlockClient(t, 30*time.Second).Locker()}
	d := newLocked(t, st, sale.StrategyRedisReentrant, rec, 30*time.Second, reentrant)
	p := newProduct(t, st, sale.StrategyRedisReentrant, stockN)
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
	v := f.Violations(false)
	t.Logf("accepted %d, sold out %d, stock %d, reserved %d, violations %q", accepted.Load(), soldOut.Load(), f.Stock, f.ReservedUnits, v)
	if accepted.Load() != stockN || f.Stock != 0 || f.ReservedUnits != stockN || len(v) > 0 {
		t.Fatalf("accepted %d, stock %d, reserved %d, violations %q; want %d, 0, %d, none",
			accepted.Load(), f.Stock, f.ReservedUnits, v, stockN, stockN)
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	tokens := map[string]map[string]int{} // owner → token → acquisitions
	for _, s := range rec.seen {
		owner, token, _ := strings.Cut(s, " ")
		if tokens[owner] == nil {
			tokens[owner] = map[string]int{}
		}
		tokens[owner][token]++
	}
	nested, seen := 0, map[string]string{}
	for owner, byToken := range tokens {
		if len(byToken) != 1 {
			t.Fatalf("owner %s acquired with tokens %v: want one grant per owner", owner, byToken)
		}
		for token, n := range byToken {
			if prev, ok := seen[token]; ok {
				t.Fatalf("token %s granted to %s and %s", token, prev, owner)
			}
			seen[token] = owner
			if n == 2 {
				nested++
			}
		}
	}
	// Each sale's write step re-entered its batch's lock; a sold-out answer writes nothing.
	if len(tokens) != buyers || nested != stockN {
		t.Fatalf("%d owners, %d of them nested; want one per buyer, %d nested (one per sale)", len(tokens), nested, stockN)
	}
}

// TestRedisReentrantForcedExpiry: the watchdog keeps a paused goroutine's lock alive (only its
// process could stop the renewals), so the hold is ended by force instead: holder A's hash is
// deleted in its critical section, after its read and its nested acquisition, before its write.
// Buyer B then takes the lock and the last unit. A does not learn of the loss (unaware: as a
// holder whose Lost() comes too late), and writes. With the fence, the write carries A's older
// token and is refused, and the audit is clean; the control without the fence sells the unit
// twice, which shows that the fence is what stopped A.
func TestRedisReentrantForcedExpiry(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	rdb := naiveRDB(t)
	for _, fenced := range []bool{true, false} {
		t.Run(fencedName(fenced), func(t *testing.T) {
			t.Parallel()
			p := newProduct(t, st, sale.StrategyRedisReentrant, 1)
			la, lb := rlockClient(t, 300*time.Millisecond), rlockClient(t, 30*time.Second)
			opts := []lockedOpt{reentrant}
			if !fenced {
				opts = append(opts, unfenced)
			}
			a := newLocked(t, st, sale.StrategyRedisReentrant, unaware{la.Locker()}, 30*time.Second, opts...)
			b := newLocked(t, st, sale.StrategyRedisReentrant, lb.Locker(), 30*time.Second, opts...)
			key := la.Key(stock.LockName(st.Name(), p.ID))
			var bErr error
			var deleted bool
			var once sync.Once
			a.SetHold(func(ctx context.Context) {
				once.Do(func() {
					deleted = rdb.Del(ctx, key).Val() == 1 // A's hold ends by force
					bErr = b.Deduct(ctx, reservation(p, "buyer-b", 1, ""))
					time.Sleep(300 * time.Millisecond) // A's watchdog finds its hold gone meanwhile
				})
			})
			aErr := a.Deduct(t.Context(), reservation(p, "holder-a", 1, ""))
			if !deleted || bErr != nil {
				t.Fatalf("A's hash deleted: %v; B = %v: want B to take the lock and the unit", deleted, bErr)
			}
			f := mustAudit(t, st, p.ID)
			if !fenced {
				if aErr != nil || f.Oversold() == 0 || f.Reservations != 2 {
					t.Fatalf("A = %v, audit %+v: want the holder that lost its lock to sell the unit twice", aErr, f)
				}
				t.Logf("oversold: %q", f.Violations(false))
				return
			}
			if !errors.Is(aErr, sale.ErrFenced) {
				t.Fatalf("A's write after its hold ended = %v, want %v", aErr, sale.ErrFenced)
			}
			if v := f.Violations(false); len(v) > 0 || f.Reservations != 1 || f.Stock != 0 {
				t.Fatalf("audit %+v %q: want B's sale only", f, v)
			}
			if rdb.Exists(t.Context(), key).Val() != 0 {
				t.Fatal("a lock left behind: A's releases must not touch B's grant, and B released its own")
			}
		})
	}
}

// TestRedisReentrantWriteStep: the strategy as the app makes it (and as the contract table's row
// builds it) sells through the nested write step and leaves no lock behind; the same strategy
// over the project's plain Redis lock waits for itself and sells nothing (the control: it is the
// re-entry that lets the write step through).
func TestRedisReentrantWriteStep(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	t.Run("re-entrant lock", func(t *testing.T) {
		t.Parallel()
		d := redisReentrantLocked(t, st, 30*time.Second)
		p := newProduct(t, st, sale.StrategyRedisReentrant, 5)
		mustDeduct(t, d, reservation(p, "u1", 2, ""))
		mustDeduct(t, d, reservation(p, "u2", 1, ""))
		assertStock(t, st, p.ID, 2)
		key := rlockClient(t, time.Second).Key(stock.LockName(st.Name(), p.ID))
		if n := naiveRDB(t).Exists(t.Context(), key).Val(); n != 0 {
			t.Fatalf("lock %s left behind after the purchases", key)
		}
	})
	t.Run("control: the plain redis lock waits for itself", func(t *testing.T) {
		t.Parallel()
		// A wait long enough that a busy machine's Redis round trips fit in it: the lock waits
		// for itself whatever the wait, and a wait spent on slow calls reads as unreachable.
		d := newLocked(t, st, sale.StrategyRedisReentrant, redisLocker(t, itest.RedisAddr, 5*time.Second), 2*time.Second, reentrant)
		p := newProduct(t, st, sale.StrategyRedisReentrant, 5)
		assertErr(t, d.Deduct(t.Context(), reservation(p, "u1", 1, "")), sale.ErrLockTimeout)
		assertStock(t, st, p.ID, 5)
	})
}
