package itest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestRedisSentinelFailover: after the master's SIGKILL the sentinels promote the replica, and a
// failover client made before the kill writes to it without being told; a write the replica
// had survives, one made while its replication was cut is lost (the control and the fault in
// one run).
func TestRedisSentinelFailover(t *testing.T) {
	t.Parallel() // servers of its own
	s := itest.RedisSentinel(t)
	rdb := s.Client(t, nil)
	ctx := t.Context()
	master, replica := s.Master(), s.Replica()
	if err := rdb.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return s.Has(replica, "kept"), "the replica does not have the write"
	})
	s.CutReplication(replica)
	if err := rdb.Set(ctx, "lost", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the replica retries its sync every second
	if s.Has(replica, "lost") {
		t.Fatal("the cut replica got the write")
	}

	killed := time.Now()
	master.Kill()
	var fails int
	var lastErr error
	itest.Eventually(t, 60*time.Second, func() (bool, string) {
		err := rdb.Set(ctx, "after", "v", 0).Err()
		if err != nil {
			fails++
			lastErr = err
			return false, err.Error()
		}
		return true, ""
	})
	served := time.Since(killed)
	if got := s.WaitFailover(master); got != replica {
		t.Fatalf("new master %s, want the replica %s", got.Addr(), replica.Addr())
	}
	t.Logf("SIGKILL → the failover client's SET succeeds on the new master: %s (%d failed SETs meanwhile, last: %v); → every sentinel names it: %s",
		served.Round(time.Millisecond), fails, lastErr, time.Since(killed).Round(time.Millisecond))
	if !s.Has(replica, "after") {
		t.Fatal("the failover client's write did not land on the promoted replica")
	}
	if v, err := rdb.Get(ctx, "kept").Result(); err != nil || v != "v" {
		t.Fatalf("GET kept = %q, %v: a replicated write was lost", v, err)
	}
	if err := rdb.Get(ctx, "lost").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET lost = %v, want redis.Nil: the write made while cut survived", err)
	}
}
