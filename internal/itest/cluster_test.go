package itest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestRedisClusterFailover: a write the replica has survives its master's SIGKILL: the replica is
// promoted, a cluster client finds it by itself, and the old master rejoins as its replica.
func TestRedisClusterFailover(t *testing.T) {
	t.Parallel() // servers of its own
	c := itest.RedisCluster(t, itest.ClusterOptions{})
	rdb := c.Client(t, nil)
	ctx := t.Context()
	const key = "{failover}k"
	master := c.MasterFor(key)
	replica := c.ReplicaOf(master)
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return c.Has(replica, key), "the replica does not have the write"
	})

	killed := time.Now()
	master.Kill()
	var fails int
	var lastErr error
	itest.Eventually(t, 90*time.Second, func() (bool, string) {
		v, err := rdb.Get(ctx, key).Result()
		if err != nil {
			fails++
			lastErr = err
			return false, err.Error()
		}
		if v != "v" {
			t.Fatalf("GET %s after the failover = %q, want v", key, v)
		}
		return true, ""
	})
	served := time.Since(killed)
	c.WaitMaster(replica)
	t.Logf("SIGKILL → the cluster client's GET succeeds again: %s (%d failed GETs meanwhile, last: %v); → promotion seen by every node: %s",
		served.Round(time.Millisecond), fails, lastErr, time.Since(killed).Round(time.Millisecond))
	if got := c.MasterFor(key); got != replica {
		t.Fatalf("MasterFor = %s, want the promoted %s", got.Addr(), replica.Addr())
	}

	master.Start()
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		return c.ReplicaOf(replica) == master, "the old master has not rejoined as a replica"
	})
	c.WaitOK()
}

// TestCutReplicationLosesWrite: a write made while the replica's replication is cut does not
// reach it (and does after HealReplication); one made while cut, then the master's SIGKILL and
// the replica's promotion, is lost. The healthy failover of TestRedisClusterFailover is the
// control: there the write survives.
func TestCutReplicationLosesWrite(t *testing.T) {
	t.Parallel() // servers of its own
	c := itest.RedisCluster(t, itest.ClusterOptions{})
	rdb := c.Client(t, nil)
	ctx := t.Context()
	const key = "{cut}k"
	master := c.MasterFor(key)
	replica := c.ReplicaOf(master)

	// The control of the cut: before it, the replica acknowledges a write.
	if acked := setAndWait(t, master, "{cut}before", "v"); acked != 1 {
		t.Fatalf("WAIT 1 before the cut = %d replicas, want 1", acked)
	}
	c.CutReplication(replica)
	// WAIT on the master, after a write on the same connection: no replica acknowledges it.
	if acked := setAndWait(t, master, key, "healed"); acked != 0 {
		t.Fatalf("WAIT 1 after the cut = %d replicas, want 0", acked)
	}
	if c.Has(replica, key) {
		t.Fatal("the cut replica got the write")
	}
	c.HealReplication(replica)
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return c.Has(replica, key), "the healed replica did not catch up"
	})

	const lost = "{cut}lost"
	c.CutReplication(replica)
	if err := rdb.Set(ctx, lost, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // the replica retries its sync every second
	if c.Has(replica, lost) {
		t.Fatal("the cut replica got the write")
	}
	killed := time.Now()
	master.Kill()
	c.WaitMaster(replica)
	t.Logf("SIGKILL → cut replica promoted: %s", time.Since(killed).Round(time.Millisecond))
	var got error
	itest.Eventually(t, 90*time.Second, func() (bool, string) {
		got = rdb.Get(ctx, lost).Err()
		return got == nil || errors.Is(got, redis.Nil), "GET: " + errString(got)
	})
	if !errors.Is(got, redis.Nil) {
		t.Fatalf("GET %s after the failover = %v, want redis.Nil: the write made while cut survived", lost, got)
	}
	if v, err := rdb.Get(ctx, key).Result(); err != nil || v != "healed" {
		t.Fatalf("GET %s = %q, %v: the write replicated before the cut is gone", key, v, err)
	}
}

// setAndWait sets key on the server s and returns how many replicas acknowledged the write
// within 500 ms (WAIT counts the writes of its own connection).
func setAndWait(t *testing.T, s *itest.Server, key, value string) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 1})
	defer rdb.Close()
	conn := rdb.Conn()
	defer conn.Close()
	if err := conn.Set(t.Context(), key, value, 0).Err(); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Wait(t.Context(), 1, 500*time.Millisecond).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestClusterAppendOnly: a master SIGKILLed and started again at once, before the cluster fails it
// over, keeps its slots; with AppendOnly it comes back with an acknowledged write, without it
// empty (the control).
func TestClusterAppendOnly(t *testing.T) {
	t.Parallel()
	for _, aof := range []bool{true, false} {
		t.Run(map[bool]string{true: "appendonly", false: "no-persistence"}[aof], func(t *testing.T) {
			t.Parallel()
			c := itest.RedisCluster(t, itest.ClusterOptions{AppendOnly: aof, Replicas: -1})
			rdb := c.Client(t, nil)
			const key = "{aof}k"
			if err := rdb.Set(t.Context(), key, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			m := c.MasterFor(key)
			m.Kill()
			m.Start()
			c.WaitOK()
			if c.MasterFor(key) != m {
				t.Fatal("the restarted master lost its slots")
			}
			if has := c.Has(m, key); has != aof {
				t.Fatalf("after the restart the master has the write: %v, want %v", has, aof)
			}
		})
	}
}
