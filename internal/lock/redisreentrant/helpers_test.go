package redisreentrant_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redisreentrant"
	"github.com/seckill-go/seckill-go/internal/redisconn"
)

// TestMain fails the run if a goroutine outlives the tests: a hold's renewal, a waiter's
// subscription.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testPrefix returns a key prefix of its own for this test and deletes its keys when the test
// ends.
func testPrefix(tb testing.TB) string {
	tb.Helper()
	prefix := "seckill:test:" + itest.Suffix(10) + ":rlock:"
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
func newClient(tb testing.TB, rdb redis.UniversalClient, opts redisreentrant.Options) *redisreentrant.Client {
	tb.Helper()
	if opts.Prefix == "" {
		opts.Prefix = testPrefix(tb)
	}
	if opts.Logger == nil {
		opts.Logger = itest.Logger()
	}
	c, err := redisreentrant.New(rdb, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return c
}

// prefixOf returns the key prefix c was made with.
func prefixOf(c *redisreentrant.Client) string {
	key, _, _ := redisreentrant.Keys(c, "x")
	return key[:len(key)-len("{x}")]
}

// as returns an acquire function of c for owner ("" for none).
func as(c *redisreentrant.Client, owner string) func(context.Context, string) (*redisreentrant.Lease, error) {
	return func(ctx context.Context, name string) (*redisreentrant.Lease, error) {
		if owner != "" {
			ctx = lock.WithOwner(ctx, owner)
		}
		return c.Acquire(ctx, name)
	}
}

func mustRelease(tb testing.TB, l *redisreentrant.Lease) {
	tb.Helper()
	if err := l.Release(tb.Context()); err != nil {
		tb.Fatalf("Release = %v", err)
	}
}

func assertNotHeld(tb testing.TB, what string, err error) {
	tb.Helper()
	if !errors.Is(err, lock.ErrNotHeld) {
		tb.Fatalf("%s = %v, want ErrNotHeld", what, err)
	}
}

// subscribers is the number of subscribers of channel (sharded on a cluster).
func subscribers(tb testing.TB, rdb redis.UniversalClient, channel string) int64 {
	tb.Helper()
	return itest.Subscribers(tb, rdb, channel)
}

// count is the hold count of owner through c in the lock hash key (0: no field).
func count(tb testing.TB, rdb redis.UniversalClient, c *redisreentrant.Client, key, owner string) int64 {
	tb.Helper()
	n, err := rdb.HGet(tb.Context(), key, redisreentrant.OwnerField(c, owner)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		tb.Fatalf("HGET %s: %v", key, err)
	}
	return n
}

func exists(tb testing.TB, rdb redis.UniversalClient, key string) bool {
	tb.Helper()
	n, err := rdb.Exists(tb.Context(), key).Result()
	if err != nil {
		tb.Fatalf("EXISTS %s: %v", key, err)
	}
	return n == 1
}
