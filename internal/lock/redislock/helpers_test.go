package redislock_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/redisconn"
)

// TestMain fails the run if a goroutine outlives the tests: a lease's renewal, a waiter's
// Pub/Sub subscription. Not go-redis's own re-dialler: a pool whose dial failed (a server the
// failover tests killed) probes it once a second in a goroutine that ends within a second of the
// client's Close, and may still be asleep when the tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// counter is a go-redis hook that counts what a client sends: acquire-script runs, all
// commands, and dialled connections (Pub/Sub ones included).
type counter struct {
	acquires, cmds, dials atomic.Int64
	isAcquire             func(redis.Cmder) bool
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		if c.isAcquire != nil && c.isAcquire(cmd) {
			c.acquires.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// hookFunc is a go-redis hook around single commands.
type hookFunc func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error

func (h hookFunc) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h hookFunc) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { return h(ctx, cmd, next) }
}

func (h hookFunc) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// isOurAcquire matches a run of this package's acquire script.
func isOurAcquire(cmd redis.Cmder) bool {
	args := cmd.Args()
	return len(args) > 1 && cmd.Name() == "evalsha" && args[1] == redislock.AcquireScriptHash
}

// testPrefix returns a key prefix of its own for this test and deletes its keys when the test
// ends.
func testPrefix(tb testing.TB) string {
	tb.Helper()
	prefix := "seckill:test:" + itest.Suffix(10) + ":lock:"
	tb.Cleanup(func() {
		rdb := redisconn.Open(itest.RedisTopology, redis.UniversalOptions{})
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := itest.DeleteKeys(ctx, rdb, prefix+"*"); err != nil {
			tb.Logf("clean up %s*: %v", prefix, err)
		}
	})
	return prefix
}

// newClient returns a lock client on rdb with a key prefix of its own unless opts has one.
func newClient(tb testing.TB, rdb redis.UniversalClient, opts redislock.Options) *redislock.Client {
	tb.Helper()
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(tb)
	}
	if opts.Logger == nil {
		opts.Logger = itest.Logger()
	}
	c, err := redislock.New(rdb, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

func mustAcquire(tb testing.TB, c *redislock.Client, name string) *redislock.Lease {
	tb.Helper()
	return locktest.MustAcquire(tb, c.Acquire, name)
}

// acquireRelease takes the lock name, releases it at once and sends the first error, or nil, to
// done: a waiter, when run in a goroutine of its own.
func acquireRelease(ctx context.Context, c *redislock.Client, name string, done chan<- error) {
	l, err := c.Acquire(ctx, name)
	if err == nil {
		err = l.Release(ctx)
	}
	done <- err
}

func mustRelease(tb testing.TB, l *redislock.Lease) {
	tb.Helper()
	if err := l.Release(tb.Context()); err != nil {
		tb.Fatalf("Release = %v", err)
	}
}

// subscribers is the number of subscribers of channel (sharded on a cluster).
func subscribers(tb testing.TB, rdb redis.UniversalClient, channel string) int64 {
	tb.Helper()
	return itest.Subscribers(tb, rdb, channel)
}
