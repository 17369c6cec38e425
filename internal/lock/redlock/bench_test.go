package redlock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/redlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
)

// BenchmarkRedlockVsRedis measures acquire+release cycles of one lock name, by one goroutine
// (uncontended) and by 8×GOMAXPROCS goroutines (contended), of:
//
//   - redislock: the project's single-Redis lock, on one throwaway server (its token is made in
//     its acquire script);
//   - redlock: five throwaway servers, tokens from a sixth (no fsync), the cost of the algorithm;
//   - redlock-main-tokens: the same, tokens from the main Redis, whose append-only file is fsynced
//     on every write, as the app lends them.
//
// It reports grants/s and, for Redlock, tries per grant (a waiter polls: the rest are wasted).
func BenchmarkRedlockVsRedis(b *testing.B) {
	itest.Integration(b)
	five := newCluster(b, 5)
	one := itest.RedisServer(b)
	counters := itest.RedisServer(b)
	var tries atomic.Int64
	countTry := func(bool) { tries.Add(1) }

	redlockOn := func(b *testing.B, tk redlock.Tokens) lock.Locker {
		c, err := redlock.New(five.clients(b), redlock.Options{Tokens: tk, OnAttempt: countTry})
		if err != nil {
			b.Fatal(err)
		}
		return c.Locker()
	}
	libs := []struct {
		name string
		new  func(b *testing.B) lock.Locker
	}{
		{"redislock", func(b *testing.B) lock.Locker {
			rdb := redis.NewClient(&redis.Options{Addr: one.Addr()})
			b.Cleanup(func() { _ = rdb.Close() })
			c, err := redislock.New(rdb, redislock.Options{TTL: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			return c.Locker()
		}},
		{"redlock", func(b *testing.B) lock.Locker {
			rdb := redis.NewClient(&redis.Options{Addr: counters.Addr()})
			b.Cleanup(func() { _ = rdb.Close() })
			tk, err := tokens.NewRedis(rdb, "")
			if err != nil {
				b.Fatal(err)
			}
			return redlockOn(b, tk)
		}},
		{"redlock-main-tokens", func(b *testing.B) lock.Locker { return redlockOn(b, fence(b)) }},
	}
	for _, lib := range libs {
		for _, contenders := range []int{0, 8} {
			mode := "uncontended"
			if contenders > 0 {
				mode = "contended"
			}
			b.Run(lib.name+"/"+mode, func(b *testing.B) {
				l := lib.new(b)
				name := "bench-" + itest.Suffix(10)
				ctx := b.Context()
				cycle := func() error {
					lease, err := l.Acquire(ctx, name)
					if err != nil {
						return err
					}
					return lease.Release(ctx)
				}
				if err := cycle(); err != nil { // warm: connections dialled, scripts loaded
					b.Fatal(err)
				}
				tries.Store(0)
				var grants atomic.Int64
				b.ResetTimer()
				if contenders == 0 {
					for b.Loop() {
						if err := cycle(); err != nil {
							b.Fatal(err)
						}
						grants.Add(1)
					}
				} else {
					b.SetParallelism(contenders)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := cycle(); err != nil {
								b.Error(err)
								return
							}
							grants.Add(1)
						}
					})
				}
				b.StopTimer()
				n := float64(grants.Load())
				b.ReportMetric(n/b.Elapsed().Seconds(), "grants/s")
				if t := tries.Load(); t > 0 {
					b.ReportMetric(float64(t)/n, "tries/grant")
				}
			})
		}
	}
}
