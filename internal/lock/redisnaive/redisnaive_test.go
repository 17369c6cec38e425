package redisnaive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redisnaive"
)

func client(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	return itest.Redis(tb)
}

// lockers are both locks on one Redis, by name.
func lockers(t *testing.T, rdb redis.UniversalClient, opts redisnaive.Options) map[string]lock.Locker {
	s, err := redisnaive.NewSetNX(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	g, err := redisnaive.NewGetSet(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]lock.Locker{"setnx": s.Locker(), "getset": g.Locker()}
}

// TestWithoutFaults: with no holder dying, pausing or off in its clock, both locks exclude, hand
// out increasing tokens, refuse a TryAcquire of a held name, and time out a wait. Their failures
// need faults (internal/stock/redisnaive_test.go).
func TestWithoutFaults(t *testing.T) {
	itest.Integration(t)
	rdb := client(t)
	for name, l := range lockers(t, rdb, redisnaive.Options{TTL: 10 * time.Second}) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			t.Run("mutual exclusion", func(t *testing.T) {
				t.Parallel()
				n := locktest.Name(t)
				got := locktest.Increments(t, func(critical func()) error {
					lease, err := locktest.Acquire(t, l.Acquire, n)
					if err != nil {
						return err
					}
					critical()
					return lease.Release(t.Context())
				})
				if want := int64(locktest.Workers * locktest.Rounds); got != want {
					t.Fatalf("counter = %d, want %d: the lock let two holders in", got, want)
				}
			})
			t.Run("tokens increase, try acquire, timeout", func(t *testing.T) {
				t.Parallel()
				n := locktest.Name(t)
				var last uint64
				for range 3 {
					lease := locktest.MustAcquire(t, l.Acquire, n)
					if lease.Token() <= last {
						t.Fatalf("token %d after %d", lease.Token(), last)
					}
					last = lease.Token()
					if _, err := l.TryAcquire(t.Context(), n); !errors.Is(err, lock.ErrNotAcquired) {
						t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
					}
					ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
					_, err := l.Acquire(ctx, n)
					cancel()
					if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("Acquire of a held lock = %v, want ErrTimeout and DeadlineExceeded", err)
					}
					if err := lease.Release(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			})
		})
	}
}
