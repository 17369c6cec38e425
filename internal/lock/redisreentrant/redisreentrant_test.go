package redisreentrant_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redisreentrant"
)

// The contract, each acquisition without an owner in ctx (an owner of its own): the re-entrant
// lock excludes every other owner as a plain lock does.
func TestContract(t *testing.T) {
	rdb := itest.Redis(t)
	prefix := testPrefix(t) // one for the suite: its expiry case takes a name over from a second Locker
	names := newClient(t, rdb, redisreentrant.Options{Prefix: prefix})
	locktest.Run(t, locktest.Suite{
		New: func(t *testing.T) lock.Locker {
			return newClient(t, rdb, redisreentrant.Options{TTL: time.Second, Prefix: prefix}).Locker()
		},
		Expire: func(t *testing.T, l lock.Lease) {
			lease := l.(*redisreentrant.Lease)
			redisreentrant.StallRenewal(lease)
			key, _, _ := redisreentrant.Keys(names, lockName(t, lease))
			if err := rdb.PExpire(t.Context(), key, time.Millisecond).Err(); err != nil {
				t.Fatalf("PEXPIRE: %v", err)
			}
		},
		Waiting: func(t *testing.T, name string) bool {
			_, _, channel := redisreentrant.Keys(names, name)
			return subscribers(t, rdb, channel) > 0
		},
	})
}

// lockName is the name the lease was acquired under.
func lockName(t *testing.T, l *redisreentrant.Lease) string {
	t.Helper()
	name := redisreentrant.Name(l)
	if name == "" {
		t.Fatal("lease without a name")
	}
	return name
}

func TestNewOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: itest.RedisAddr}) // never used for I/O
	t.Cleanup(func() { _ = rdb.Close() })
	type settings struct {
		TTL, Recheck time.Duration
		Key          string
	}
	for _, tc := range []struct {
		name string
		opts redisreentrant.Options
		want settings
	}{
		{"defaults: Redisson's lockWatchdogTimeout", redisreentrant.Options{},
			settings{30 * time.Second, time.Second, "seckill:rlock:{n}"}},
		{"short TTL: re-check at least 100 ms", redisreentrant.Options{TTL: 300 * time.Millisecond, Prefix: "p:"},
			settings{300 * time.Millisecond, 100 * time.Millisecond, "p:{n}"}},
		{"TTL truncated to ms", redisreentrant.Options{TTL: 2*time.Second + 500*time.Microsecond},
			settings{2 * time.Second, 200 * time.Millisecond, "seckill:rlock:{n}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redisreentrant.New(rdb, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got settings
			got.TTL, got.Recheck = redisreentrant.Settings(c)
			got.Key, _, _ = redisreentrant.Keys(c, "n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := redisreentrant.New(rdb, redisreentrant.Options{TTL: time.Millisecond}); err == nil {
		t.Error("New accepted a 1 ms TTL")
	}
	if _, err := redisreentrant.New(nil, redisreentrant.Options{}); err == nil {
		t.Error("New accepted a nil client")
	}
}

// TestNested: an owner that holds the lock gets it again at once, with the same token and Lost(),
// and the hash counts its levels; it takes as many releases as acquisitions (the hash is there
// after the first, gone after the last), and each lease releases once.
func TestNested(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redisreentrant.Options{})
	name := locktest.Name(t)
	key, _, _ := redisreentrant.Keys(c, name)
	a := lock.WithOwner(t.Context(), "host-a/batch-1")

	outer := locktest.MustAcquire(t, as(c, "host-a/batch-1"), name)
	if outer.Owner() != "host-a/batch-1" {
		t.Errorf("Owner() = %q", outer.Owner())
	}
	// A nested Acquire whose ctx has already little time left: it must not wait at all.
	quick, cancel := context.WithTimeout(a, 5*time.Second)
	defer cancel()
	inner, err := c.Acquire(quick, name)
	if err != nil {
		t.Fatalf("nested Acquire = %v", err)
	}
	third, err := c.TryAcquire(a, name)
	if err != nil {
		t.Fatalf("nested TryAcquire = %v", err)
	}
	for i, l := range []*redisreentrant.Lease{inner, third} {
		if l.Token() != outer.Token() || l.Lost() != outer.Lost() {
			t.Errorf("nested lease %d: token %d, want the outer grant's %d and its Lost()", i, l.Token(), outer.Token())
		}
	}
	if n := count(t, rdb, c, key, "host-a/batch-1"); n != 3 {
		t.Fatalf("hold count %d in %s, want 3", n, key)
	}
	if ttl := rdb.PTTL(t.Context(), key).Val(); ttl <= 0 {
		t.Fatalf("PTTL %s = %s, want the TTL", key, ttl)
	}

	mustRelease(t, third)
	assertNotHeld(t, "second release of the same nested lease", third.Release(t.Context()))
	mustRelease(t, inner)
	if !exists(t, rdb, key) || count(t, rdb, c, key, "host-a/batch-1") != 1 {
		t.Fatalf("after two of three releases: hash exists %v, count %d; want the outer level left",
			exists(t, rdb, key), count(t, rdb, c, key, "host-a/batch-1"))
	}
	if locktest.IsClosed(outer.Lost()) {
		t.Fatal("the nested releases lost the outer grant")
	}
	mustRelease(t, outer)
	if exists(t, rdb, key) {
		t.Fatal("hash still there after the last release")
	}
	assertNotHeld(t, "a release beyond the holds", outer.Release(t.Context()))
	assertNotHeld(t, "a release beyond the holds", inner.Release(t.Context()))

	again := locktest.MustAcquire(t, as(c, "host-a/batch-1"), name)
	if again.Token() <= outer.Token() {
		t.Errorf("a new hold's token %d after %d", again.Token(), outer.Token())
	}
	mustRelease(t, again)
}

// TestOtherOwnerWaits: while an owner holds the lock at two levels, another owner (on the same
// Client, as two batches of one process) is refused by TryAcquire and waits in Acquire, asleep
// on the release channel rather than polling; it gets the lock only after the last release, with
// a larger token.
func TestOtherOwnerWaits(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	var lost atomic.Int64
	c := newClient(t, rdb, redisreentrant.Options{OnAttempt: func(won bool) {
		if !won {
			lost.Add(1)
		}
	}})
	name := locktest.Name(t)
	key, _, channel := redisreentrant.Keys(c, name)

	outer := locktest.MustAcquire(t, as(c, "owner-a"), name)
	inner := locktest.MustAcquire(t, as(c, "owner-a"), name)
	if _, err := c.TryAcquire(lock.WithOwner(t.Context(), "owner-b"), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another owner's TryAcquire = %v, want ErrNotAcquired", err)
	}
	got := make(chan *redisreentrant.Lease, 1)
	go func() {
		l, err := locktest.Acquire(t, as(c, "owner-b"), name)
		if err != nil {
			t.Errorf("the other owner's Acquire = %v", err)
		}
		got <- l
	}()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		return subscribers(t, rdb, channel) == 1, "the other owner is not subscribed to the release channel"
	})

	mustRelease(t, inner)
	time.Sleep(300 * time.Millisecond) // time enough to take a lock that was wrongly freed
	select {
	case l := <-got:
		t.Fatalf("the other owner got the lock (%v) while the outer acquisition still holds it", l != nil)
	default:
	}
	before := lost.Load()
	released := time.Now()
	mustRelease(t, outer)
	var l *redisreentrant.Lease
	select {
	case l = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the other owner still waiting 20 s after the last release")
	}
	if l == nil {
		t.FailNow()
	}
	t.Logf("the waiter got the lock %s after the last release; %d failed tries until then (TryAcquire included)",
		time.Since(released).Round(time.Millisecond), before)
	if l.Token() <= outer.Token() {
		t.Errorf("the other owner's token %d after %d", l.Token(), outer.Token())
	}
	if n := count(t, rdb, c, key, "owner-b"); n != 1 {
		t.Errorf("owner-b's count %d, want 1", n)
	}
	// Not polling: the TryAcquire, Acquire's first try, one after subscribing, and a re-check a
	// second (the default TTL's re-check) at most; a busy loop would have tried hundreds of times.
	if before > 10 {
		t.Errorf("%d failed tries during a wait of about 300 ms: the waiter polls", before)
	}
	mustRelease(t, l)
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return subscribers(t, rdb, channel) == 0, "the subscription outlived the wait"
	})
}

// An owner re-enters only through the Client it acquired with, as a Redisson owner is its
// client's UUID and a thread: two Clients (processes) whose owners happen to have the same name
// exclude each other.
func TestOwnerScopedToClient(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redisreentrant.Options{})
	other := newClient(t, itest.Redis(t), redisreentrant.Options{Prefix: prefixOf(c)})
	name := locktest.Name(t)
	key, _, _ := redisreentrant.Keys(c, name)
	l := locktest.MustAcquire(t, as(c, "host/batch-1"), name)
	if _, err := other.TryAcquire(lock.WithOwner(t.Context(), "host/batch-1"), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the same owner name through another Client = %v, want ErrNotAcquired", err)
	}
	fields, err := rdb.HGetAll(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{redisreentrant.OwnerField(c, "host/batch-1"): "1", "token": strconv.FormatUint(l.Token(), 10)}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("HGETALL %s (-want +got):\n%s", key, diff)
	}
	mustRelease(t, l)
}

// Without an owner there is no one to re-enter as: a nested acquisition waits for itself until
// its ctx ends, as a non-re-entrant lock does.
func TestWithoutOwner(t *testing.T) {
	t.Parallel()
	c := newClient(t, itest.Redis(t), redisreentrant.Options{})
	name := locktest.Name(t)
	outer := locktest.MustAcquire(t, c.Acquire, name)
	if outer.Owner() != "" {
		t.Errorf("Owner() = %q without an owner in ctx", outer.Owner())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, name); !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("nested Acquire without an owner = %v, want ErrTimeout", err)
	}
	mustRelease(t, outer)
}

// When the grant is lost (here its hash deleted, as an operator or a failover would), every level
// has lost the lock: one Lost() closes for all, their releases say so, and none of them counts
// down or deletes the owner's next grant, which has a larger token.
func TestLostReachesEveryLevel(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redisreentrant.Options{TTL: 300 * time.Millisecond})
	name := locktest.Name(t)
	key, _, _ := redisreentrant.Keys(c, name)
	outer := locktest.MustAcquire(t, as(c, "owner-a"), name)
	inner := locktest.MustAcquire(t, as(c, "owner-a"), name)
	if err := rdb.Del(t.Context(), key).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inner.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the nested lease's Lost() not closed 30 s after the hash was deleted")
	}
	next := locktest.MustAcquire(t, as(c, "owner-a"), name)
	if next.Token() <= outer.Token() || next.Lost() == outer.Lost() {
		t.Fatalf("the owner's acquisition after the loss: token %d after %d, want a new grant", next.Token(), outer.Token())
	}
	assertNotHeld(t, "nested release after the loss", inner.Release(t.Context()))
	assertNotHeld(t, "outer release after the loss", outer.Release(t.Context()))
	if n := count(t, rdb, c, key, "owner-a"); n != 1 || locktest.IsClosed(next.Lost()) {
		t.Fatalf("count %d after the lost grant's releases, want the new grant's 1 untouched", n)
	}
	mustRelease(t, next)
}

// TestWatchdogKeepsLongHold: with a TTL of 300 ms, a hold of 2 s (almost seven TTLs) stays
// alive: the watchdog renews it every 100 ms, no other owner can take it, and Lost() stays open.
func TestWatchdogKeepsLongHold(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	const hold = 2 * time.Second
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redisreentrant.Options{TTL: ttl})
	other := newClient(t, itest.Redis(t), redisreentrant.Options{TTL: ttl, Prefix: prefixOf(c)})
	name := locktest.Name(t)
	key, _, _ := redisreentrant.Keys(c, name)
	l := locktest.MustAcquire(t, as(c, "long-holder"), name)
	start := time.Now()
	tries := 0
	for time.Since(start) < hold {
		tries++
		if o, err := other.TryAcquire(lock.WithOwner(t.Context(), "other"), name); !errors.Is(err, lock.ErrNotAcquired) {
			if err == nil {
				_ = o.Release(t.Context())
			}
			t.Fatalf("another owner's TryAcquire %s into the hold = %v, want ErrNotAcquired", time.Since(start), err)
		}
		if locktest.IsClosed(l.Lost()) {
			t.Fatalf("Lost() closed %s into the hold", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	pttl := rdb.PTTL(t.Context(), key).Val()
	t.Logf("held %s with a %s TTL; %d takeover attempts refused; PTTL now %s", time.Since(start).Round(time.Millisecond), ttl, tries, pttl)
	if pttl <= 0 || pttl > ttl {
		t.Errorf("PTTL %s after the hold, want within (0, %s]", pttl, ttl)
	}
	mustRelease(t, l)
	if exists(t, rdb, key) {
		t.Fatal("hash left after the release")
	}
}

// TestOwnerDies: the holder's process dies without releasing, at two levels deep: its Redis
// connection is cut (no more renewals reach Redis), or its Redis client is closed. Its hash
// expires within about a TTL, another owner waiting for it gets it, and the dead holder's Lost()
// closes.
func TestOwnerDies(t *testing.T) {
	t.Parallel()
	const ttl = 500 * time.Millisecond
	for _, tc := range []struct {
		name string
		die  func(proxy *itest.Proxy, rdb *redis.Client)
	}{
		{"connection cut", func(proxy *itest.Proxy, _ *redis.Client) { proxy.Cut() }},
		{"client closed", func(_ *itest.Proxy, rdb *redis.Client) { _ = rdb.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			itest.SingleRedis(t)
			proxy := itest.NewProxy(t, itest.RedisAddr)
			holderRedis := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, DialerRetries: 1})
			t.Cleanup(func() { _ = holderRedis.Close() })
			holder := newClient(t, holderRedis, redisreentrant.Options{TTL: ttl})
			rdb := itest.Redis(t)
			taker := newClient(t, rdb, redisreentrant.Options{TTL: ttl, Prefix: prefixOf(holder)})
			name := locktest.Name(t)
			key, _, channel := redisreentrant.Keys(holder, name)

			outer := locktest.MustAcquire(t, as(holder, "dies"), name)
			inner := locktest.MustAcquire(t, as(holder, "dies"), name)
			got := make(chan *redisreentrant.Lease, 1)
			go func() {
				l, err := locktest.Acquire(t, as(taker, "taker"), name)
				if err != nil {
					t.Errorf("the taker's Acquire = %v", err)
				}
				got <- l
			}()
			itest.Eventually(t, 10*time.Second, func() (bool, string) {
				return subscribers(t, rdb, channel) == 1, "the taker is not waiting"
			})
			time.Sleep(2 * ttl) // the watchdog keeps the live holder's hold meanwhile
			select {
			case <-got:
				t.Fatal("the taker got the lock while its holder was alive")
			default:
			}

			died := time.Now()
			tc.die(proxy, holderRedis)
			var l *redisreentrant.Lease
			select {
			case l = <-got:
			case <-time.After(30 * time.Second):
				t.Fatalf("the taker still waiting 30 s after the holder died (hash exists: %v)", exists(t, rdb, key))
			}
			if l == nil {
				t.FailNow()
			}
			took := time.Since(died)
			select {
			case <-outer.Lost():
			case <-time.After(30 * time.Second):
				t.Fatal("the dead holder's Lost() not closed 30 s after it died")
			}
			t.Logf("TTL %s: the taker got the lock %s after the holder died", ttl, took.Round(time.Millisecond))
			if l.Token() <= outer.Token() {
				t.Errorf("the taker's token %d after the dead holder's %d", l.Token(), outer.Token())
			}
			if inner.Release(t.Context()) == nil || outer.Release(t.Context()) == nil {
				t.Error("a dead holder's release succeeded")
			}
			if n := count(t, rdb, taker, key, "taker"); n != 1 || locktest.IsClosed(l.Lost()) {
				t.Fatalf("the taker's count %d after the dead holder's releases, want 1 and its hold alive", n)
			}
			mustRelease(t, l)
		})
	}
}

// An Acquire whose ctx has ended does not touch Redis.
func TestEndedContext(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redisreentrant.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	name := locktest.Name(t)
	if _, err := c.Acquire(ctx, name); !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with an ended ctx = %v, want ErrTimeout and Canceled", err)
	}
	key, _, _ := redisreentrant.Keys(c, name)
	if exists(t, rdb, key) {
		t.Fatal("an Acquire with an ended ctx took the lock")
	}
	if _, err := c.Acquire(t.Context(), ""); err == nil {
		t.Fatal("Acquire of an empty name succeeded")
	}
}
