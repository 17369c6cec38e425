package redislock_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	bsm "github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
)

func critical(hold time.Duration) {
	if hold > 0 {
		time.Sleep(hold)
	}
}

// lockLib is one lock library under benchmark: setup returns one acquire, hold, release cycle
// of the lock called key; isAttempt tells an acquire attempt among the commands sent.
type lockLib struct {
	name      string
	isAttempt func(redis.Cmder) bool
	setup     func(b *testing.B, rdb redis.UniversalClient, key string, hold time.Duration) func(ctx context.Context) error
}

var lockLibs = []lockLib{
	{
		name:      "redislock",
		isAttempt: isOurAcquire,
		setup: func(b *testing.B, rdb redis.UniversalClient, key string, hold time.Duration) func(ctx context.Context) error {
			c := newClient(b, rdb, redislock.Options{TTL: 10 * time.Second})
			return func(ctx context.Context) error {
				l, err := c.Acquire(ctx, key)
				if err != nil {
					return err
				}
				critical(hold)
				return l.Release(ctx)
			}
		},
	},
	{
		// No blocking wait: it polls with its RetryStrategy.
		name: "bsm-redislock-linear1ms",
		isAttempt: func(cmd redis.Cmder) bool {
			// EVALSHA sha 1 key value tokenLen ttl; its release passes one argument less.
			return cmd.Name() == "evalsha" && len(cmd.Args()) == 7
		},
		setup: func(b *testing.B, rdb redis.UniversalClient, key string, hold time.Duration) func(ctx context.Context) error {
			c := bsm.New(rdb)
			key = testPrefix(b) + key
			opts := &bsm.Options{RetryStrategy: bsm.LinearBackoff(time.Millisecond)} // stateless, so shareable
			return func(ctx context.Context) error {
				l, err := c.Obtain(ctx, key, 10*time.Second, opts)
				if err != nil {
					return err
				}
				critical(hold)
				return l.Release(ctx)
			}
		},
	},
	{
		// Polls too: SET NX, and on failure a DEL script, then sleeps its retry delay.
		name:      "redsync-retry1ms",
		isAttempt: func(cmd redis.Cmder) bool { return cmd.Name() == "set" },
		setup: func(b *testing.B, rdb redis.UniversalClient, key string, hold time.Duration) func(ctx context.Context) error {
			rs := redsync.New(goredis.NewPool(rdb))
			key = testPrefix(b) + key
			return func(ctx context.Context) error {
				m := rs.NewMutex(key, redsync.WithExpiry(10*time.Second),
					redsync.WithTries(math.MaxInt32), redsync.WithRetryDelay(time.Millisecond))
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				critical(hold)
				_, err := m.UnlockContext(ctx)
				return err
			}
		},
	},
}

// BenchmarkAcquireRelease measures acquire+release cycles of one lock name: by one goroutine,
// and by 8×GOMAXPROCS goroutines contending, with an empty critical section and with one of
// 1 ms (about a MySQL read and write). Besides ops/s it reports, per cycle, the Redis commands
// the client sent, the acquire attempts among them (a cycle needs one; the rest are wasted),
// and the connections it dialled (a wait subscribes on a connection of its own).
func BenchmarkAcquireRelease(b *testing.B) {
	modes := []struct {
		name       string
		contenders int // per GOMAXPROCS
		hold       time.Duration
	}{
		{"uncontended", 0, 0},
		{"contended", 8, 0},
		{"contended-hold1ms", 8, time.Millisecond},
	}
	for _, lib := range lockLibs {
		for _, mode := range modes {
			b.Run(lib.name+"/"+mode.name, func(b *testing.B) {
				hook := &counter{isAcquire: lib.isAttempt}
				rdb := itest.Redis(b, hook)
				cycle := lib.setup(b, rdb, "bench", mode.hold)
				ctx := b.Context()
				if err := cycle(ctx); err != nil { // warm: scripts loaded, connections dialled
					b.Fatal(err)
				}
				hook.cmds.Store(0)
				hook.acquires.Store(0)
				hook.dials.Store(0)
				var ops atomic.Int64
				b.ResetTimer()
				if mode.contenders == 0 {
					for b.Loop() {
						if err := cycle(ctx); err != nil {
							b.Fatal(err)
						}
						ops.Add(1)
					}
				} else {
					b.SetParallelism(mode.contenders)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := cycle(ctx); err != nil {
								b.Error(err)
								return
							}
							ops.Add(1)
						}
					})
				}
				b.StopTimer()
				n := float64(ops.Load())
				b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(hook.cmds.Load())/n, "cmds/op")
				b.ReportMetric(float64(hook.acquires.Load())/n, "attempts/op")
				b.ReportMetric(float64(hook.dials.Load())/n, "dials/op")
			})
		}
	}
}
