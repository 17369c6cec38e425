package stock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/redlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
)

// redlockClient is a Redlock client over servers, with clients of its own (a process of its
// own), tokens from tk, its options changed by with.
func redlockClient(tb testing.TB, servers []*itest.Server, tk redlock.Tokens, with ...func(*redlock.Options)) *redlock.Client {
	tb.Helper()
	rdbs := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
		tb.Cleanup(func() { _ = rdb.Close() })
		rdbs[i] = rdb
	}
	// A long TTL: the holder's grant must stay valid through the restarts, so that the second
	// holder comes from the servers' forgetting, not from an expiry. A second per server call:
	// a slow test machine must not fail a healthy server.
	opts := redlock.Options{TTL: 30 * time.Second, ServerTimeout: time.Second, Tokens: tk}
	for _, w := range with {
		w(&opts)
	}
	c, err := redlock.New(rdbs, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestRedlockRestartedMajority is the Redlock fault of the write-ups, at the stock: servers 3 and 4
// of five are down when A takes the product's lock, so A holds it on servers 0, 1 and 2. While A
// is in its critical section (after its read, before its write), servers 1 and 2 crash and come
// back empty (no persistence), and 3 and 4 come back: B wins a majority (1 to 4) with A's grant
// still valid, and sells the last unit. Unfenced, as Redlock is, A's write sells it a second time;
// with the project's fence (tokens lent from the main Redis), A's write is refused. The control
// without restarts is the library's (internal/lock/redlock TestRestartedMajority).
func TestRedlockRestartedMajority(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	tk, err := tokens.NewRedis(itest.Redis(t), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, fenced := range []bool{false, true} {
		t.Run(fencedName(fenced), func(t *testing.T) {
			t.Parallel()
			servers := make([]*itest.Server, 5)
			for i := range servers {
				servers[i] = itest.RedisServer(t)
			}
			p := newProduct(t, st, sale.StrategyRedlock, 1)
			la, lb := redlockClient(t, servers, tk), redlockClient(t, servers, tk)
			a := newLocked(t, st, sale.StrategyRedlock, la.Locker(), 30*time.Second, naiveOpts(fenced)...)
			b := newLocked(t, st, sale.StrategyRedlock, lb.Locker(), 30*time.Second, naiveOpts(fenced)...)
			key := la.Key(stock.LockName(st.Name(), p.ID))

			servers[3].Kill()
			servers[4].Kill()
			var bErr error
			var heldBy []int
			var once sync.Once
			a.SetHold(func(ctx context.Context) {
				once.Do(func() {
					for i, s := range servers[:3] {
						if holds(ctx, s, key) {
							heldBy = append(heldBy, i)
						}
					}
					servers[1].Restart()
					servers[2].Restart()
					servers[3].Start()
					servers[4].Start()
					bErr = b.Deduct(ctx, reservation(p, "buyer-b", 1, ""))
				})
			})
			aErr := a.Deduct(t.Context(), reservation(p, "holder-a", 1, ""))
			if len(heldBy) != 3 {
				t.Fatalf("A's key on servers %v of 0..2 during its hold, want all three", heldBy)
			}
			if bErr != nil {
				t.Fatalf("B after the restarts = %v: want it to win the majority A's grant lost", bErr)
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

// holds reports whether the server s has the key.
func holds(ctx context.Context, s *itest.Server, key string) bool {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	return rdb.Exists(ctx, key).Val() == 1
}
