package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/memlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
)

var _ memlock.Tokens = (*tokens.Redis)(nil)

// client returns a memcache client of the test's own on addr, with room for the contract's 50
// contenders' connections and a timeout a slow machine does not hit.
func client(tb testing.TB, addr string) *memcache.Client {
	tb.Helper()
	mc := memcache.New(addr)
	mc.Timeout = 2 * time.Second
	mc.MaxIdleConns = 64
	tb.Cleanup(func() { _ = mc.Close() })
	return mc
}

// counters are fencing-token counters in the test Redis.
func counters(tb testing.TB) *tokens.Redis {
	tb.Helper()
	tk, err := tokens.NewRedis(itest.Redis(tb), "")
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// newLock returns a Memcached lock on a client of its own on addr, with opts' Tokens defaulted.
func newLock(tb testing.TB, addr string, opts memlock.Options) *memlock.Lock {
	tb.Helper()
	if opts.Tokens == nil {
		opts.Tokens = counters(tb)
	}
	l, err := memlock.New(client(tb, addr), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// TestContract runs the shared lock contract. One part cannot hold by design, and is skipped
// with the reason: "release after expiry does nothing" needs Lost() to close when the grant
// ends and Release to leave the successor alone, and this lock has no watcher and deletes
// without an owner check. What happens instead is TestExpiredHolderDeletesSuccessor's subject.
func TestContract(t *testing.T) {
	srv := itest.Memcached(t)
	var lost sync.Map // test name → *atomic.Int64: the lost adds of that test's locker
	locktest.Run(t, locktest.Suite{
		New: func(t *testing.T) lock.Locker {
			n, _ := lost.LoadOrStore(t.Name(), new(atomic.Int64))
			return newLock(t, srv.Addr(), memlock.Options{TTL: 30 * time.Second, OnAttempt: func(won bool) {
				if !won {
					n.(*atomic.Int64).Add(1)
				}
			}}).Locker()
		},
		Expire: func(t *testing.T, _ lock.Lease) {
			t.Skip("by design: Lost() never closes (nothing watches the item) and Release deletes " +
				"without an owner check; see TestExpiredHolderDeletesSuccessor")
		},
		// No waiter is visible in memcached: a waiter is one whose add was refused.
		Waiting: func(t *testing.T, _ string) bool {
			n, ok := lost.Load(t.Name())
			return ok && n.(*atomic.Int64).Load() > 0
		},
	})
}

// TestRestartForgetsLock is the write-ups' fault at library level: A holds the lock; memcached
// restarts, empty; B's add wins at once: two holders. The negative control: before the restart
// B is refused. A's release then deletes B's lock (no owner check), and C gets in: a third.
func TestRestartForgetsLock(t *testing.T) {
	srv := itest.Memcached(t)
	tk := counters(t)
	la := newLock(t, srv.Addr(), memlock.Options{TTL: 30 * time.Second, Tokens: tk})
	lb := newLock(t, srv.Addr(), memlock.Options{TTL: 30 * time.Second, Tokens: tk})
	name := locktest.Name(t)

	a, err := la.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lb.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("control: B's TryAcquire of A's live lock = %v, want ErrNotAcquired", err)
	}
	srv.Restart()
	b, err := lb.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("B's TryAcquire after the restart = %v: want the forgotten lock granted again", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d: the fence could not tell them apart", b.Token(), a.Token())
	}
	t.Logf("two holders: A (token %d) and B (token %d)", a.Token(), b.Token())

	// A still believes it holds the lock; nothing tells it otherwise.
	if locktest.IsClosed(a.Lost()) {
		t.Fatal("A's Lost() closed; this lock has nothing that would close it")
	}
	if err := a.Release(t.Context()); err != nil { // on a connection from before the restart
		t.Fatalf("A's release = %v, want it to delete the item (B's)", err)
	}
	c, err := la.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("C after A deleted B's lock = %v: want a third holder", err)
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("B's release = %v, want ErrNotHeld (A deleted its item)", err)
	}
}

// TestExpiredHolderDeletesSuccessor: a holder paused past its TTL releases with a plain delete,
// and deletes the lock of whoever got it after the expiry. A second release of the same lease is
// refused without reaching memcached.
func TestExpiredHolderDeletesSuccessor(t *testing.T) {
	srv := itest.Memcached(t)
	l := newLock(t, srv.Addr(), memlock.Options{TTL: 2 * time.Second})
	name := locktest.Name(t)
	a := locktest.MustAcquire(t, l.Acquire, name)
	var b *memlock.Lease
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		var err error
		b, err = l.TryAcquire(t.Context(), name)
		return err == nil, fmt.Sprintf("A's item has not expired: %v", err)
	})
	if err := a.Release(t.Context()); err != nil {
		t.Fatalf("A's late release = %v, want it to delete B's item", err)
	}
	c, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("after A's late release, TryAcquire = %v: want B's lock deleted", err)
	}
	if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("A's second release = %v, want ErrNotHeld", err)
	}
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("A's second release freed C's lock (TryAcquire = %v)", err)
	}
	if err := c.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("B's release = %v, want ErrNotHeld (A deleted its item)", err)
	}
}

// TestDeadHolderExpires: a holder that dies (never releases) holds the lock no longer than its
// TTL: a waiter gets it then. Memcached's expiry is in whole seconds on a clock that ticks once
// a second, so a 2 s TTL lasts between 1 and 2 s (logged, not asserted).
func TestDeadHolderExpires(t *testing.T) {
	srv := itest.Memcached(t)
	l := newLock(t, srv.Addr(), memlock.Options{TTL: 2 * time.Second})
	name := locktest.Name(t)
	dead := locktest.MustAcquire(t, l.Acquire, name)
	start := time.Now()
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("control: TryAcquire of the live lock = %v, want ErrNotAcquired", err)
	}
	next, err := locktest.Acquire(t, l.Acquire, name)
	if err != nil {
		t.Fatalf("waiter after a dead holder's TTL = %v", err)
	}
	t.Logf("the dead holder's lock went after %s (TTL 2s)", time.Since(start).Round(10*time.Millisecond))
	if next.Token() <= dead.Token() {
		t.Fatalf("token %d after the dead holder's %d", next.Token(), dead.Token())
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestUnreachable: with memcached down a try fails as unavailable, and a wait that runs out
// says the service was away, not held; once it is back the wait succeeds.
func TestUnreachable(t *testing.T) {
	srv := itest.Memcached(t)
	l := newLock(t, srv.Addr(), memlock.Options{TTL: 30 * time.Second})
	name := locktest.Name(t)
	locktest.MustAcquire(t, l.Acquire, name) // a pooled connection to the server about to die
	srv.Kill()
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("TryAcquire with memcached down = %v, want ErrUnavailable", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := l.Acquire(ctx, name)
	if !errors.Is(err, lock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with memcached down = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		lease, err := locktest.Acquire(t, l.Acquire, name)
		if err == nil {
			err = lease.Release(context.Background())
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // waiting through the outage
	srv.Start()                        // empty: the lock is free
	if err := <-got; err != nil {
		t.Fatalf("a wait through the outage = %v, want the lock once memcached is back", err)
	}
}

// TestEviction: memcached is a cache. In a memcached of 2 MB, a lock item that nobody touches
// is evicted by ordinary cache traffic of its size long before its TTL, and the lock is granted
// again while its holder works.
func TestEviction(t *testing.T) {
	addr := tinyMemcached(t)
	l := newLock(t, addr, memlock.Options{TTL: 3600 * time.Second})
	name := "lock-" + strings.Repeat("0", 12) // the filler's key length: the same slab class
	a, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("control: TryAcquire of the live lock = %v, want ErrNotAcquired", err)
	}
	// Cache traffic, in rounds larger than the memory; no lock call within a round (a refused add
	// moves the item up the LRU, and the next round must push it out again).
	const round, workers = 40_000, 8
	var b *memlock.Lease
	written := 0
	for b == nil {
		if written >= 5*round {
			t.Fatalf("the lock item outlived %d cache writes of its size in a 2 MB memcached", written)
		}
		var wg sync.WaitGroup
		var failed atomic.Value
		for w := range workers {
			mc := client(t, addr)
			wg.Go(func() {
				for i := written + w; i < written+round; i += workers {
					key := l.Key(fmt.Sprintf("fill-%012d", i))
					if err := mc.Set(&memcache.Item{Key: key, Value: []byte("0123456789abcdef")}); err != nil {
						failed.Store(err)
						return
					}
				}
			})
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			t.Fatal(err)
		}
		written += round
		b, err = l.TryAcquire(t.Context(), name)
		if err != nil && !errors.Is(err, lock.ErrNotAcquired) {
			t.Fatal(err)
		}
	}
	t.Logf("evicted by %d writes of its size: A (token %d) and B (token %d) hold the lock, an hour before its TTL", written, a.Token(), b.Token())
}

// tinyMemcached starts a memcached with 2 MB of item memory (its least with the default 1 MB item size limit) on a free port (itest.Memcached's
// has 64 MB and takes no options), killed when the test ends.
func tinyMemcached(t *testing.T) string {
	t.Helper()
	itest.Integration(t)
	port := strconv.Itoa(itest.FreePort(t))
	cmd := exec.Command("memcached", "-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "2", "-u", "nobody")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start memcached: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", port)
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, ""
	})
	return addr
}

// TestNew: the options and names memcached cannot take are refused with the reason.
func TestNew(t *testing.T) {
	itest.Integration(t)
	tk := counters(t)
	mc := memcache.New("127.0.0.1:1")
	for _, tc := range []struct {
		name string
		mc   *memcache.Client
		opts memlock.Options
		want string
	}{
		{"no client", nil, memlock.Options{Tokens: tk}, "nil memcache client"},
		{"no tokens", mc, memlock.Options{}, "no Tokens"},
		{"sub-second TTL", mc, memlock.Options{Tokens: tk, TTL: 500 * time.Millisecond}, "whole seconds"},
		{"fractional TTL", mc, memlock.Options{Tokens: tk, TTL: 1500 * time.Millisecond}, "whole seconds"},
		{"TTL over 30 days", mc, memlock.Options{Tokens: tk, TTL: 31 * 24 * time.Hour}, "whole seconds"},
		{"prefix with a space", mc, memlock.Options{Tokens: tk, Prefix: "a b:"}, "no spaces"},
		{"back-off bounds", mc, memlock.Options{Tokens: tk, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "back-off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := memlock.New(tc.mc, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error about %q", err, tc.want)
			}
		})
	}
	l, err := memlock.New(mc, memlock.Options{Tokens: tk})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Key("n"), memlock.DefaultPrefix+"n"; got != want {
		t.Fatalf("Key = %q, want %q", got, want)
	}
	for name, want := range map[string]string{
		"":                       "empty",
		"a b":                    "no spaces",
		"a\nb":                   "no spaces",
		strings.Repeat("x", 250): "250",
	} {
		if _, err := l.TryAcquire(t.Context(), name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TryAcquire(%q) = %v, want an error about %q", name, err, want)
		}
		if _, err := l.Acquire(t.Context(), name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Acquire(%q) = %v, want an error about %q", name, err, want)
		}
	}
}
