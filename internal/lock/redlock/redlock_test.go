package redlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
)

// cluster is throwaway Redis servers of the test's own (no persistence), which it may kill and
// restart empty.
type cluster []*itest.Server

func newCluster(tb testing.TB, n int) cluster {
	tb.Helper()
	c := make(cluster, n)
	for i := range c {
		c[i] = itest.RedisServer(tb)
	}
	return c
}

// clients returns a client of every server, as one process of its own would have them.
func (c cluster) clients(tb testing.TB, hooks ...redis.Hook) []redis.UniversalClient {
	tb.Helper()
	out := make([]redis.UniversalClient, len(c))
	for i, s := range c {
		// As New asks: one try per call and per dial, and the server timeout bounds reads too.
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true})
		for _, h := range hooks {
			rdb.AddHook(h)
		}
		tb.Cleanup(func() { _ = rdb.Close() })
		out[i] = rdb
	}
	return out
}

// fence returns token counters in the main Redis under a prefix of the test's own, deleted when
// the test ends.
func fence(tb testing.TB) *tokens.Redis {
	tb.Helper()
	rdb := itest.Redis(tb)
	prefix := "seckill:test:" + itest.Suffix(10) + ":fence:"
	tk, err := tokens.NewRedis(rdb, prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { // before itest.Redis closes rdb: cleanups run last-in first-out
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			tb.Logf("delete the test's token counters: %v", err)
		}
	})
	return tk
}

// newClient returns a Redlock client over servers. Unless opts says otherwise, tokens come from
// fence and each server call may take a second: on a slow, busy test machine, a healthy server
// that answers late would make a test about something else fail (the servers these tests kill
// refuse connections at once).
func newClient(tb testing.TB, servers []redis.UniversalClient, opts redlock.Options) *redlock.Client {
	tb.Helper()
	if opts.Tokens == nil {
		opts.Tokens = fence(tb)
	}
	if opts.ServerTimeout == 0 {
		opts.ServerTimeout = time.Second
	}
	c, err := redlock.New(servers, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// refusals is a go-redis hook that records the keys of refused SET NX calls: a try that found
// the lock held.
type refusals struct{ keys sync.Map }

func (r *refusals) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *refusals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if b, ok := cmd.(*redis.BoolCmd); ok && err == nil && cmd.Name() == "set" && !b.Val() {
			r.keys.Store(cmd.Args()[1], true)
		}
		return err
	}
}

func (r *refusals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// holders returns how many servers hold key with some value, and the values by server.
func holders(t *testing.T, servers []redis.UniversalClient, key string) (int, []string) {
	t.Helper()
	n := 0
	values := make([]string, len(servers))
	for i, s := range servers {
		v, err := s.Get(t.Context(), key).Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			values[i] = "(unreachable)"
		default:
			values[i] = v
			n++
		}
	}
	return n, values
}

func TestContract(t *testing.T) {
	c := newCluster(t, 5)
	seen := &refusals{}
	servers := c.clients(t, seen)
	tk := fence(t)
	// The TTL is long enough for the cancel test's holder to hold while its waiters wait and give
	// up (Redlock never renews), and short enough for the expiry test, which waits out the
	// validity: Lost is a timer, nothing else tells a Redlock holder.
	opts := redlock.Options{TTL: 5 * time.Second, Tokens: tk}
	probe := newClient(t, servers, opts)
	locktest.Run(t, locktest.Suite{
		New: func(t *testing.T) lock.Locker { return newClient(t, servers, opts).Locker() },
		Expire: func(t *testing.T, l lock.Lease) {
			// The servers forget the lock, as when its keys expire; the holder learns when its
			// validity has passed.
			key := redlock.LeaseKey(l.(*redlock.Lease))
			for _, s := range servers {
				if err := s.Del(t.Context(), key).Err(); err != nil {
					t.Fatalf("DEL %s: %v", key, err)
				}
			}
		},
		Waiting: func(t *testing.T, name string) bool {
			_, ok := seen.keys.Load(probe.Key(name))
			return ok
		},
	})
}

func TestNewOptions(t *testing.T) {
	servers := []redis.UniversalClient{redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})} // never used
	t.Cleanup(func() { _ = servers[0].Close() })
	tk, err := tokens.NewRedis(servers[0], "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		servers []redis.UniversalClient
		opts    redlock.Options
	}{
		{"no servers", nil, redlock.Options{Tokens: tk}},
		{"nil server", []redis.UniversalClient{nil}, redlock.Options{Tokens: tk}},
		{"no tokens", servers, redlock.Options{}},
		{"TTL below the minimum", servers, redlock.Options{Tokens: tk, TTL: 5 * time.Millisecond}},
		{"drift eats the TTL", servers, redlock.Options{Tokens: tk, TTL: 10 * time.Millisecond, DriftFactor: 0.9}},
		{"negative drift", servers, redlock.Options{Tokens: tk, DriftFactor: -0.1}},
		{"back-off bounds reversed", servers, redlock.Options{Tokens: tk, MinBackoff: time.Second, MaxBackoff: time.Millisecond}},
		{"negative server timeout", servers, redlock.Options{Tokens: tk, ServerTimeout: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := redlock.New(tc.servers, tc.opts); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	c, err := redlock.New([]redis.UniversalClient{servers[0], servers[0], servers[0], servers[0], servers[0]}, redlock.Options{Tokens: tk})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := redlock.Drift(c), redlock.DefaultTTL/100+2*time.Millisecond; got != want {
		t.Errorf("drift = %s, want %s (TTL×0.01 + 2 ms)", got, want)
	}
	if c.Quorum() != 3 {
		t.Errorf("quorum of 5 = %d, want 3", c.Quorum())
	}
}

// TestValidity: a grant is valid until the try's start plus the TTL less the drift, Lost closes
// when that time has passed, and the keys (PX the TTL) outlive it.
func TestValidity(t *testing.T) {
	servers := newCluster(t, 5).clients(t)
	const ttl = 500 * time.Millisecond
	c := newClient(t, servers, redlock.Options{TTL: ttl})
	drift := redlock.Drift(c)
	before := time.Now()
	l, err := c.TryAcquire(t.Context(), locktest.Name(t))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if u := l.Until(); u.Before(before.Add(ttl-drift)) || u.After(after.Add(ttl-drift)) {
		t.Fatalf("Until = start + %s, want between %s and %s", u.Sub(before), ttl-drift, after.Sub(before)+ttl-drift)
	}
	if n, values := holders(t, servers, redlock.LeaseKey(l)); n != 5 {
		t.Fatalf("%d servers hold the key (%q), want all 5", n, values)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Minute):
		t.Fatal("Lost not closed a minute after the validity")
	}
	if time.Now().Before(l.Until()) {
		t.Fatal("Lost closed before Until")
	}
}

// TestMinorityDown: with 2 of 5 servers down, a lock is still won (on the other 3) and released;
// with 3 down no majority answers, and Acquire waits out its ctx with lock.ErrUnavailable, not
// lock.ErrTimeout (nobody holds the lock: the servers are away), and TryAcquire fails with it at
// once.
func TestMinorityDown(t *testing.T) {
	c := newCluster(t, 5)
	servers := c.clients(t)
	rl := newClient(t, servers, redlock.Options{})
	name := locktest.Name(t)
	c[0].Kill()
	c[1].Kill()
	l := locktest.MustAcquire(t, rl.Acquire, name)
	if n, values := holders(t, servers, redlock.LeaseKey(l)); n != 3 {
		t.Fatalf("%d servers hold the key (%q), want the 3 up", n, values)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release with 2 of 5 down = %v", err)
	}

	l = locktest.MustAcquire(t, rl.Acquire, name)
	c[2].Kill()
	if err := l.Release(t.Context()); !errors.Is(err, lock.ErrUnavailable) {
		t.Errorf("Release with 3 of 5 down = %v, want ErrUnavailable (the dead servers may still hold it)", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err := rl.Acquire(ctx, name)
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("Acquire with 3 of 5 down = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if _, err := rl.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryAcquire with 3 of 5 down = %v, want ErrUnavailable", err)
	}

	// One back: a majority answers again, and the lock is free (the dead servers' keys died
	// with them).
	c[2].Start()
	l = locktest.MustAcquire(t, rl.Acquire, name)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRestartedMajority is the fault of the write-ups: A holds the lock on exactly servers 0, 1
// and 2 (3 and 4 were down when it acquired). Servers 1 and 2 crash and come back empty (no
// persistence), 3 and 4 come back: B wins a majority (1, 2, 3, 4) while A's grant is still valid.
// Two holders at once, and nothing tells A. The control: with all five servers up but none
// restarted, B cannot win (A's three keys are a majority).
func TestRestartedMajority(t *testing.T) {
	c := newCluster(t, 5)
	tk := fence(t)
	// A and B are two processes: clients of their own.
	aServers, bServers := c.clients(t), c.clients(t)
	a := newClient(t, aServers, redlock.Options{TTL: 30 * time.Second, Tokens: tk})
	b := newClient(t, bServers, redlock.Options{TTL: 30 * time.Second, Tokens: tk})
	name := locktest.Name(t)

	c[3].Kill()
	c[4].Kill()
	la := locktest.MustAcquire(t, a.Acquire, name)
	if n, values := holders(t, bServers, a.Key(name)); n != 3 || values[0] == "" || values[1] == "" || values[2] == "" {
		t.Fatalf("A's key on %d servers (%q), want on 0, 1 and 2", n, values)
	}
	c[3].Start()
	c[4].Start()

	// The control: every server answers, A's three keys win.
	if lb, err := b.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		if err == nil {
			_ = lb.Release(t.Context())
		}
		t.Fatalf("control: B's TryAcquire with A's keys on 3 of 5 = %v, want ErrNotAcquired", err)
	}

	start := time.Now()
	c[1].Restart()
	c[2].Restart()
	lb := locktest.MustAcquire(t, b.Acquire, name)
	t.Logf("B won %s after the restarts; A's grant valid for %s more", time.Since(start).Round(time.Millisecond), time.Until(la.Until()).Round(time.Millisecond))
	if n, values := holders(t, bServers, b.Key(name)); n != 5 || values[0] == values[1] {
		t.Fatalf("keys %q: want A's on server 0 and B's on 1 to 4", values)
	}
	if locktest.IsClosed(la.Lost()) || !time.Now().Before(la.Until()) {
		t.Fatal("A's grant ended: the test shows nothing")
	}
	if locktest.IsClosed(lb.Lost()) {
		t.Fatal("B's grant lost")
	}
	t.Logf("two holders: A (token %d, valid until +%s) and B (token %d)", la.Token(), time.Until(la.Until()).Round(time.Millisecond), lb.Token())
	if lb.Token() <= la.Token() {
		t.Errorf("B's token %d is not above A's %d: the fence could not tell them apart", lb.Token(), la.Token())
	}

	// A's release finds its key on server 0 only: not held. B's is untouched.
	if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A's Release = %v, want ErrNotHeld", err)
	}
	if !locktest.IsClosed(la.Lost()) {
		t.Error("A's Lost still open after its Release found it not held")
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Errorf("B's Release = %v", err)
	}
}

// TestPausePastValidity: A holds with a short TTL and pauses past it (a GC pause, a stopped VM);
// its keys expire and B wins the lock. A's Lost closed on time, but a paused holder does not look:
// only a fence stops its late write. A's Release then leaves B's grant alone.
func TestPausePastValidity(t *testing.T) {
	servers := newCluster(t, 5).clients(t)
	tk := fence(t)
	a := newClient(t, servers, redlock.Options{TTL: 300 * time.Millisecond, Tokens: tk})
	b := newClient(t, servers, redlock.Options{TTL: 30 * time.Second, Tokens: tk})
	name := locktest.Name(t)
	la := locktest.MustAcquire(t, a.Acquire, name)
	time.Sleep(time.Until(la.Until()) + 300*time.Millisecond) // the pause: past the validity and the keys' expiry
	lb := locktest.MustAcquire(t, b.Acquire, name)
	if !locktest.IsClosed(la.Lost()) {
		t.Fatal("A's Lost still open after its validity")
	}
	if lb.Token() <= la.Token() {
		t.Errorf("B's token %d is not above A's %d", lb.Token(), la.Token())
	}
	if err := la.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("A's Release after the pause = %v, want ErrNotHeld", err)
	}
	if _, err := a.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("A's late Release freed B's lock (TryAcquire = %v)", err)
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestTokensUnavailable: a grant without a fencing token is no grant. With the token store
// down, the won lock is given back and the try fails with lock.ErrUnavailable.
func TestTokensUnavailable(t *testing.T) {
	servers := newCluster(t, 5).clients(t)
	store := itest.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: store.Addr(), MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	tk, err := tokens.NewRedis(rdb, "")
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, servers, redlock.Options{Tokens: tk})
	name := locktest.Name(t)
	store.Kill()
	if _, err := c.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryAcquire with the token store down = %v, want ErrUnavailable", err)
	}
	if n, values := holders(t, servers, c.Key(name)); n != 0 {
		t.Fatalf("the tokenless grant left keys behind: %q", values)
	}
}
