package itest_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestRedisServerRestartsEmpty: a key written before a Restart is gone after it, and the server
// answers on the same address; Kill then Start does the same.
func TestRedisServerRestartsEmpty(t *testing.T) {
	s := itest.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: 3})
	defer rdb.Close()
	for i, restart := range []func(){s.Restart, func() { s.Kill(); s.Start() }} {
		if err := rdb.Set(t.Context(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		restart()
		n, err := rdb.Exists(t.Context(), "k").Result()
		if err != nil || n != 0 {
			t.Fatalf("restart %d: EXISTS k = %d, %v; want 0: the server came back with its data", i, n, err)
		}
	}
}

// TestMemcachedStartsAndKills: the memcached answers, and a killed one refuses connections until
// started again.
func TestMemcachedStartsAndKills(t *testing.T) {
	s := itest.Memcached(t)
	s.Kill()
	s.Kill() // twice is harmless
	s.Start()
	s.Start()
}
