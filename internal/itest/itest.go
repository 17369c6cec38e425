// Package itest gives integration tests the real services of the local stack (`make services`):
// a fresh MySQL database per test, the Redis, ZooKeeper and Kafka addresses, a fresh Kafka topic.
// It is imported only by _test files. Tests that need these services skip under -short and fail
// loudly, naming the fix, when a service does not answer.
package itest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/store"
)

// Service addresses, overridable through SECKILL_TEST_* variables.
var (
	// ServerDSN is the MySQL server without a database.
	ServerDSN = envOr("SECKILL_TEST_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/")
	RedisAddr = envOr("SECKILL_TEST_REDIS_ADDR", "127.0.0.1:6379")
	// RedisTopology is the Redis that Redis (the function) connects to: RedisAddr alone, unless
	// SECKILL_TEST_REDIS_MODE names a cluster (seeds SECKILL_TEST_REDIS_ADDRS) or a sentinel set
	// (sentinels SECKILL_TEST_REDIS_ADDRS, master SECKILL_TEST_REDIS_MASTER): the Redis users'
	// tests then run on that topology, `make test-topology` does so.
	RedisTopology = redisconn.Topology{
		Mode:   redisconn.Mode(envOr("SECKILL_TEST_REDIS_MODE", string(redisconn.Single))),
		Addrs:  strings.Split(envOr("SECKILL_TEST_REDIS_ADDRS", RedisAddr), ","),
		Master: envOr("SECKILL_TEST_REDIS_MASTER", "seckill"),
	}
	ZKServers    = strings.Split(envOr("SECKILL_TEST_ZK_SERVERS", "127.0.0.1:2181"), ",")
	KafkaBrokers = strings.Split(envOr("SECKILL_TEST_KAFKA_BROKERS", "127.0.0.1:9092"), ",")
)

const hint = "start the services with `make services` (or run `make test`)"

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Integration skips the test under -short.
func Integration(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration test: needs MySQL, Redis, ZooKeeper and Kafka")
	}
}

// LogWriter is where the apps under test log: nowhere, unless SECKILL_TEST_LOG is set.
func LogWriter() io.Writer {
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

// Logger returns a logger for the code under test: silent unless SECKILL_TEST_LOG is set, in
// which case it writes to stderr at that level.
func Logger() *slog.Logger {
	lvl := os.Getenv("SECKILL_TEST_LOG")
	if lvl == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(lvl))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Suffix returns n random hex characters, to name per-test databases, topics and keys.
func Suffix(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// DatabaseDSN creates an empty, migrated database for this test, drops it when the test ends and
// returns its DSN.
func DatabaseDSN(tb testing.TB) string {
	tb.Helper()
	Integration(tb)
	cfg, err := mysql.ParseDSN(ServerDSN)
	if err != nil {
		tb.Fatalf("SECKILL_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = "seckill_it_" + Suffix(10)
	dsn := cfg.FormatDSN()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.CreateDatabase(ctx, dsn); err != nil {
		tb.Fatalf("create test database (%s): %v", hint, err)
	}
	tb.Cleanup(func() { dropDatabase(tb, dsn, cfg.DBName) })
	st, err := store.Open(ctx, Logger(), dsn, store.Options{MaxOpenConns: 2})
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	defer st.Close()
	if err := store.Migrate(ctx, Logger(), st.DB()); err != nil {
		tb.Fatalf("migrate test database: %v", err)
	}
	return dsn
}

func dropDatabase(tb testing.TB, dsn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, Logger(), dsn, store.Options{MaxOpenConns: 1})
	if err != nil {
		tb.Logf("drop test database %s: %v", name, err)
		return
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, "DROP DATABASE `"+name+"`"); err != nil {
		tb.Logf("drop test database %s: %v", name, err)
	}
}

// Store opens a fresh test database (see DatabaseDSN) and returns the store on it.
func Store(tb testing.TB) (*store.Store, string) {
	tb.Helper()
	dsn := DatabaseDSN(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.Open(ctx, Logger(), dsn, store.Options{MaxOpenConns: 16})
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, dsn
}

// Topic creates a Kafka topic of its own for this test and returns its config, with a group id
// of its own too.
func Topic(tb testing.TB, partitions int) orderqueue.KafkaConfig {
	tb.Helper()
	Integration(tb)
	name := "seckill.test." + Suffix(10)
	cfg := orderqueue.KafkaConfig{Brokers: KafkaBrokers, Topic: name, GroupID: name + ".orders", Partitions: partitions}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := orderqueue.EnsureTopic(ctx, cfg); err != nil {
		tb.Fatalf("create Kafka topic (%s): %v", hint, err)
	}
	return cfg
}

// Redis returns a client of the test Redis (RedisTopology), with hooks added before its first
// use, closed when the test ends. It fails the test, naming the fix, when Redis does not answer.
func Redis(tb testing.TB, hooks ...redis.Hook) redis.UniversalClient {
	tb.Helper()
	return RedisWith(tb, redis.UniversalOptions{}, hooks...)
}

// RedisWith is Redis with the client tuned by opts (pool, timeouts, retries).
func RedisWith(tb testing.TB, opts redis.UniversalOptions, hooks ...redis.Hook) redis.UniversalClient {
	tb.Helper()
	Integration(tb)
	if err := RedisTopology.Validate(); err != nil {
		tb.Fatalf("SECKILL_TEST_REDIS_*: %v", err)
	}
	rdb := redisconn.Open(RedisTopology, opts)
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(tb.Context(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		tb.Fatalf("Redis, %s: %v (%s, or set SECKILL_TEST_REDIS_ADDR)", RedisTopology, err, hint)
	}
	return rdb
}

// SingleRedis skips the test unless the test Redis is one server: the test reaches it at
// RedisAddr by itself (through a proxy it cuts, say), which a cluster or a sentinel set is not.
func SingleRedis(tb testing.TB) {
	tb.Helper()
	if RedisTopology.Mode != redisconn.Single {
		tb.Skipf("needs the test Redis to be one server at %s, not %s", RedisAddr, RedisTopology)
	}
}

// DeleteKeys deletes the keys matching pattern on every master of rdb (a SCAN pattern).
func DeleteKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	return redisconn.ForEachMaster(ctx, rdb, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	})
}

// Eventually polls cond every 50 ms until it returns true or timeout passes, then fails the test
// with the last explanation cond gave. timeout bounds a wait for asynchronous work; it is not a
// performance assertion, so make it generous.
func Eventually(tb testing.TB, timeout time.Duration, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("condition not met after %s: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Subscribers is the number of subscribers of a lock's release channel: classic Pub/Sub's on one
// server or a sentinel's master, sharded Pub/Sub's on the cluster node that owns the channel's
// slot (the locks subscribe sharded on a cluster).
func Subscribers(tb testing.TB, rdb redis.UniversalClient, channel string) int64 {
	tb.Helper()
	var n map[string]int64
	var err error
	if c, ok := rdb.(*redis.ClusterClient); ok {
		var node *redis.Client
		if node, err = c.MasterForKey(tb.Context(), channel); err == nil {
			n, err = node.PubSubShardNumSub(tb.Context(), channel).Result()
		}
	} else {
		n, err = rdb.PubSubNumSub(tb.Context(), channel).Result()
	}
	if err != nil {
		tb.Fatalf("subscribers of %s: %v", channel, err)
	}
	return n[channel]
}
