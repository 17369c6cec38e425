package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/memlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// memLock returns a Memcached lock on a client of its own on addr, with tokens from tk.
func memLock(tb testing.TB, addr string, tk memlock.Tokens) *memlock.Lock {
	tb.Helper()
	mc := memcache.New(addr)
	mc.Timeout = 2 * time.Second
	tb.Cleanup(func() { _ = mc.Close() })
	l, err := memlock.New(mc, memlock.Options{TTL: 30 * time.Second, Tokens: tk})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestMemcachedRestartDuringHold: holder A is in its critical section (after its read, before
// its write) when memcached restarts, empty, and forgets A's lock; buyer B's add wins at once and
// B sells the last unit while A still holds: two holders. Unfenced, A's write sells the unit a
// second time; with the fence, A's write (the older token) is refused. The negative control: while
// memcached keeps the lock, B cannot get it.
func TestMemcachedRestartDuringHold(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	tk, err := tokens.NewRedis(itest.Redis(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, fenced := range []bool{false, true} {
		t.Run(fencedName(fenced), func(t *testing.T) {
			t.Parallel()
			srv := itest.Memcached(t) // restarted by this subtest alone
			p := newProduct(t, st, sale.StrategyMemcached, 1)
			la, lb := memLock(t, srv.Addr(), tk), memLock(t, srv.Addr(), tk)
			a := newLocked(t, st, sale.StrategyMemcached, la.Locker(), 30*time.Second, naiveOpts(fenced)...)
			b := newLocked(t, st, sale.StrategyMemcached, lb.Locker(), 300*time.Millisecond, naiveOpts(fenced)...)
			var controlErr, bErr error
			var once sync.Once
			a.SetHold(func(ctx context.Context) {
				once.Do(func() {
					controlErr = b.Deduct(ctx, reservation(p, "buyer-b-before", 1, ""))
					srv.Restart()
					bErr = b.Deduct(ctx, reservation(p, "buyer-b", 1, ""))
				})
			})
			aErr := a.Deduct(t.Context(), reservation(p, "holder-a", 1, ""))
			if !errors.Is(controlErr, sale.ErrLockTimeout) {
				t.Fatalf("control: B while memcached kept A's lock = %v, want %v", controlErr, sale.ErrLockTimeout)
			}
			if bErr != nil {
				t.Fatalf("B after the restart = %v: want it to get the forgotten lock at once", bErr)
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
		})
	}
}
