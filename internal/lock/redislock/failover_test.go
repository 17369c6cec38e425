package redislock_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
)

// The tests of this file run the lock on a replicated Redis of their own (a Redis Cluster, a
// master with a replica under Sentinel) and SIGKILL the master that holds a lock. They show the
// limit the package doc states: replication is asynchronous, so a grant the replica has not
// received is gone after the failover, and a second client is granted the lock while the first
// one's lease is still valid. Its token is larger, which is what lets the storage fence the first
// holder out. The control: a grant the replica has received survives the failover, and nobody
// else gets the lock before its holder releases it.

// failoverTTL is the lease of the failover tests: long enough that a failover (about 3 s here)
// and the client finding the new master fit well inside it, so that a second grant inside the
// first lease comes from the lost write, not from an expiry.
const failoverTTL = 8 * time.Second

func TestClusterFailover(t *testing.T) {
	itest.Integration(t)
	t.Parallel()
	for _, cut := range []bool{false, true} {
		t.Run(cutName(cut), func(t *testing.T) {
			t.Parallel() // servers of their own; the lease leaves a failover ample time
			failover(t, itest.ClusterFailover(t), cut)
		})
	}
}

func TestSentinelFailover(t *testing.T) {
	itest.Integration(t)
	t.Parallel()
	for _, cut := range []bool{false, true} {
		t.Run(cutName(cut), func(t *testing.T) {
			t.Parallel()
			failover(t, itest.SentinelFailover(t), cut)
		})
	}
}

func cutName(cut bool) string {
	if cut {
		return "replication-cut"
	}
	return "replicated"
}

// failover: A takes a lock, the master holding it is SIGKILLed and its replica promoted, and B,
// another client made before the kill that never hears of the failover but through its go-redis
// client, tries the lock every 50 ms until A's lease would have run out. With the replication
// cut before A's grant, B must be granted within A's lease, with a larger token; without the
// cut, B must not be, and A's Release must find its grant on the new master.
func failover(t *testing.T, topo itest.Failover, cut bool) {
	ctx := t.Context()
	opts := redislock.Options{TTL: failoverTTL, Prefix: "seckill:test:lock:"}
	a := newClient(t, topo.Client(t), opts)
	b := newClient(t, topo.Client(t), opts)
	const name = "product-1"
	key, _, _ := redislock.Keys(a, name)
	master := topo.Master(key)
	replica := topo.Replica(master)
	if cut {
		topo.Cut(replica)
	}

	leaseFrom := time.Now() // A's lease runs at least until leaseFrom+TTL, as A counts it
	la := mustAcquire(t, a, name)
	if cut {
		time.Sleep(100 * time.Millisecond)
		if topo.Has(replica, key) {
			t.Fatal("the cut replica has A's grant")
		}
	} else {
		itest.Eventually(t, 5*time.Second, func() (bool, string) {
			return topo.Has(replica, key), "the replica has not received A's grant"
		})
	}
	var lostAt atomic.Int64 // ns after the kill; 0: not lost
	lostSeen := make(chan struct{})
	stopWatch := make(chan struct{})
	var bg sync.WaitGroup
	defer func() { close(stopWatch); bg.Wait() }()
	killed := time.Now()
	bg.Go(func() {
		select {
		case <-la.Lost():
			lostAt.Store(int64(time.Since(killed)))
			close(lostSeen)
		case <-stopWatch:
		}
	})
	master.Kill()

	// B tries in the background while the test watches the topology fail over.
	var (
		lb                        *redislock.Lease
		grantedAfter, firstAnswer time.Duration // after the kill; firstAnswer: B's first try that reached a master
		tries                     = map[string]int{}
		triesDone                 = make(chan struct{})
	)
	deadline := leaseFrom.Add(failoverTTL)
	bg.Go(func() {
		defer close(triesDone)
		for time.Now().Before(deadline) {
			l, err := b.TryAcquire(ctx, name)
			if firstAnswer == 0 && (err == nil || errors.Is(err, lock.ErrNotAcquired)) {
				firstAnswer = time.Since(killed)
			}
			if err == nil {
				lb, grantedAfter = l, time.Since(killed)
				return
			}
			tries[triedAs(err)]++
			time.Sleep(50 * time.Millisecond)
		}
	})
	topo.Promoted(master, replica)
	promotedAfter := time.Since(killed)
	<-triesDone
	leaseLeft := deadline.Sub(killed.Add(grantedAfter))
	t.Logf("A's token %d; SIGKILL → replica promoted: %s; → B's first answer from a master: %s; B's failed tries meanwhile: %v",
		la.Token(), promotedAfter.Round(time.Millisecond), firstAnswer.Round(time.Millisecond), tries)

	if cut {
		if lb == nil {
			t.Fatalf("B was not granted within A's lease: the lost grant should have let it in (tries %v)", tries)
		}
		defer mustRelease(t, lb)
		t.Logf("B granted %s after the SIGKILL, %s before A's lease ran out; B's token %d - A's %d = %d µs",
			grantedAfter.Round(time.Millisecond), leaseLeft.Round(time.Millisecond), lb.Token(), la.Token(), lb.Token()-la.Token())
		if lb.Token() <= la.Token() {
			t.Fatalf("B's token %d ≤ A's %d: a fence could not refuse A", lb.Token(), la.Token())
		}
		// A finds out when its next renewal meets B's key (or nothing); within its lease.
		select {
		case <-lostSeen:
			at := time.Duration(lostAt.Load())
			t.Logf("A's Lost fired %s after the SIGKILL, %s after B's grant: A believed it held the lock that long while B did",
				at.Round(time.Millisecond), (at - grantedAfter).Round(time.Millisecond))
		case <-time.After(time.Until(deadline) + time.Second):
			t.Errorf("A's Lost did not fire within its lease although B holds the lock")
		}
		if err := la.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Errorf("A's Release = %v, want ErrNotHeld: it must leave B's grant alone", err)
		}
		return
	}

	if lb != nil {
		_ = lb.Release(ctx)
		t.Fatalf("B granted %s after the SIGKILL, within A's lease: the replicated grant was lost", grantedAfter)
	}
	select {
	case <-lostSeen:
		t.Errorf("A's Lost fired %s after the SIGKILL although its grant survived", time.Duration(lostAt.Load()))
	default:
	}
	released := time.Now()
	if err := la.Release(ctx); err != nil {
		t.Fatalf("A's Release on the promoted replica = %v: want its grant found there", err)
	}
	lb = mustAcquire(t, b, name)
	defer mustRelease(t, lb)
	t.Logf("B refused until A released (A's lease renewed on the new master, Lost not fired); granted %s after A's release, token +%d µs",
		time.Since(released).Round(time.Millisecond), lb.Token()-la.Token())
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %d ≤ A's %d", lb.Token(), la.Token())
	}
}

// triedAs names the outcome of a TryAcquire that failed, for the log.
func triedAs(err error) string {
	switch {
	case errors.Is(err, lock.ErrNotAcquired):
		return "held"
	case errors.Is(err, lock.ErrUnavailable):
		return "unavailable"
	}
	return err.Error()
}

// TestClusterMutualExclusion: clients of two processes take turns at locks on a Redis Cluster;
// never two holders of one name at once (the lock names spread over the masters).
func TestClusterMutualExclusion(t *testing.T) {
	itest.Integration(t)
	c := itest.RedisCluster(t, itest.ClusterOptions{})
	opts := redislock.Options{TTL: 5 * time.Second, Prefix: "seckill:test:lock:"}
	clients := []*redislock.Client{newClient(t, c.Client(t, nil), opts), newClient(t, c.Client(t, nil), opts)}
	names := []string{"p1", "p2", "p3"}
	masters := map[*itest.Server]bool{}
	for _, n := range names {
		key, _, _ := redislock.Keys(clients[0], n)
		masters[c.MasterFor(key)] = true
	}
	const perName, rounds = 6, 15
	inside := make([]atomic.Int32, len(names))
	var maxInside atomic.Int32
	var wg sync.WaitGroup
	for i, n := range names {
		for g := range perName {
			cl := clients[g%len(clients)]
			wg.Go(func() {
				for range rounds {
					l, err := cl.Acquire(t.Context(), n)
					if err != nil {
						t.Error(err)
						return
					}
					v := inside[i].Add(1)
					for {
						m := maxInside.Load()
						if v <= m || maxInside.CompareAndSwap(m, v) {
							break
						}
					}
					time.Sleep(time.Millisecond)
					inside[i].Add(-1)
					if err := l.Release(t.Context()); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if m := maxInside.Load(); m != 1 {
		t.Fatalf("at most %d holders of one name at once, want 1", m)
	}
	t.Logf("%d names on %d masters, %d goroutines each over 2 clients, %d grants each: never two holders",
		len(names), len(masters), perName, rounds)
}
