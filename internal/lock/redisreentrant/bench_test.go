package redisreentrant_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/redisreentrant"
)

// BenchmarkReentrantVsRedisLock measures, by one goroutine on one lock name, an uncontended
// acquire+release of the re-entrant lock (a first acquisition: the hash, the token's INCR, a
// watchdog) beside the project's plain Redis lock, and the cost of a nested level: acquire and
// release by the owner that already holds the lock (a round trip each, as in Redisson; the
// token and the watchdog are the outer grant's).
func BenchmarkReentrantVsRedisLock(b *testing.B) {
	cycles := []struct {
		name  string
		setup func(b *testing.B) func(ctx context.Context) error
	}{
		{"redislock/acquire-release", func(b *testing.B) func(ctx context.Context) error {
			c, err := redislock.New(itest.Redis(b), redislock.Options{TTL: 10 * time.Second, Prefix: testPrefix(b)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(c.Close)
			return cycle(c.Locker(), "bench")
		}},
		{"redisreentrant/acquire-release", func(b *testing.B) func(ctx context.Context) error {
			return cycle(newClient(b, itest.Redis(b), redisreentrant.Options{}).Locker(), "bench")
		}},
		{"redisreentrant/acquire-release-owner", func(b *testing.B) func(ctx context.Context) error {
			l := cycle(newClient(b, itest.Redis(b), redisreentrant.Options{}).Locker(), "bench")
			return func(ctx context.Context) error { return l(lock.WithOwner(ctx, "bench-owner")) }
		}},
		{"redisreentrant/nested-acquire-release", func(b *testing.B) func(ctx context.Context) error {
			c := newClient(b, itest.Redis(b), redisreentrant.Options{})
			outer := locktest.MustAcquire(b, as(c, "bench-owner"), "bench")
			b.Cleanup(func() { _ = outer.Release(context.Background()) })
			l := cycle(c.Locker(), "bench")
			return func(ctx context.Context) error { return l(lock.WithOwner(ctx, "bench-owner")) }
		}},
	}
	for _, cy := range cycles {
		b.Run(cy.name, func(b *testing.B) {
			run := cy.setup(b)
			ctx := b.Context()
			if err := run(ctx); err != nil { // warm: scripts loaded, connections dialled
				b.Fatal(err)
			}
			for b.Loop() {
				if err := run(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

func cycle(l lock.Locker, name string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
}
