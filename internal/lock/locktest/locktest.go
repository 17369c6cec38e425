// Package locktest is the contract every lock.Locker must pass, run by each implementation's
// tests against its real server: mutual exclusion under contention (with a control that shows the
// check catches lost updates), strictly increasing fencing tokens, release only by the holder,
// and prompt, clean cancellation of a wait.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
)

// Suite describes the implementation under test.
type Suite struct {
	// New returns a Locker for one test; lock names are unique per test, so Lockers may share a
	// server.
	New func(t *testing.T) lock.Locker
	// Expire ends the lease's grant as a stalled holder would see it end (Redis: the key expires
	// unrenewed; ZooKeeper: the session expires). Lost() must close afterwards.
	Expire func(t *testing.T, l lock.Lease)
	// Waiting reports whether the server sees a call of Acquire(name) waiting for the held lock
	// (Redis: a subscriber to its release channel; ZooKeeper: a node queued behind the holder's),
	// so that a wait is cancelled once it is one, however slow the machine.
	Waiting func(t *testing.T, name string) bool
}

// Run runs the contract.
func Run(t *testing.T, s Suite) {
	t.Run("mutual exclusion", func(t *testing.T) { t.Parallel(); testMutualExclusion(t, s) })
	t.Run("tokens strictly increase", func(t *testing.T) { t.Parallel(); testTokens(t, s) })
	t.Run("try acquire", func(t *testing.T) { t.Parallel(); testTryAcquire(t, s) })
	t.Run("release only once", func(t *testing.T) { t.Parallel(); testReleaseTwice(t, s) })
	t.Run("release after expiry does nothing", func(t *testing.T) { t.Parallel(); testReleaseAfterExpiry(t, s) })
	t.Run("cancel while waiting", func(t *testing.T) { t.Parallel(); testCancelWhileWaiting(t, s) })
	t.Run("names are independent", func(t *testing.T) { t.Parallel(); testIndependentNames(t, s) })
}

// Workers and rounds of the mutual-exclusion test: 2,000 critical sections.
const (
	Workers = 50
	Rounds  = 40
)

var names atomic.Int64

// Name returns a lock name unique in this process run.
func Name(t *testing.T) string {
	return fmt.Sprintf("locktest-%d-%d", time.Now().UnixNano(), names.Add(1))
}

// Increments runs Workers×Rounds read-yield-write increments of one counter, each inside
// withLock, and returns the final count: Workers*Rounds exactly when withLock excludes. The
// counter is read and written with separate atomic operations so that the race detector stays
// quiet (a distributed lock gives Go no happens-before edge) while the increment itself is as
// breakable as a plain one.
func Increments(t *testing.T, withLock func(critical func()) error) int64 {
	var counter atomic.Int64
	var wg sync.WaitGroup
	for range Workers {
		wg.Go(func() {
			for range Rounds {
				err := withLock(func() {
					v := counter.Load()
					runtime.Gosched()
					time.Sleep(50 * time.Microsecond)
					counter.Store(v + 1)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return counter.Load()
}

func testMutualExclusion(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	got := Increments(t, func(critical func()) error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a lock that never grants fails, not hangs
		defer cancel()
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			return err
		}
		critical()
		return lease.Release(ctx)
	})
	if got != Workers*Rounds {
		t.Fatalf("counter = %d after %d locked increments: the lock let updates be lost", got, Workers*Rounds)
	}
	// The control: the same increments without the lock lose updates, so the check above can fail.
	if unlocked := Increments(t, func(critical func()) error { critical(); return nil }); unlocked >= Workers*Rounds {
		t.Fatalf("control: %d unlocked increments lost nothing; the test cannot tell a lock from none", unlocked)
	}
}

func testTokens(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	var mu sync.Mutex
	var tokens []uint64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a lock that never grants fails, not hangs
			defer cancel()
			for range 8 {
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				tokens = append(tokens, lease.Token())
				mu.Unlock()
				if err := lease.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d has token %d after token %d: tokens must strictly increase (%v)", i, tokens[i], tokens[i-1], tokens)
		}
	}
}

func testTryAcquire(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	a := mustAcquire(t, l, name)
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock = %v, want ErrNotAcquired", err)
	}
	mustRelease(t, a)
	b, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("TryAcquire of a free lock = %v", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
	mustRelease(t, b)
}

func testReleaseTwice(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	a := mustAcquire(t, l, name)
	mustRelease(t, a)
	b := mustAcquire(t, l, name)
	if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("an old lease's Release freed the current holder's lock (TryAcquire = %v)", err)
	}
	mustRelease(t, b)
}

func testReleaseAfterExpiry(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	a := mustAcquire(t, l, name)
	s.Expire(t, a)
	select {
	case <-a.Lost():
	case <-time.After(time.Minute):
		t.Fatal("Lost() not closed a minute after the lease expired")
	}
	b := mustAcquire(t, s.New(t), name)
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after an expired grant's %d", b.Token(), a.Token())
	}
	if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after expiry = %v, want ErrNotHeld", err)
	}
	if _, err := l.TryAcquire(t.Context(), name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("the expired lease's Release freed the new holder's lock (TryAcquire = %v)", err)
	}
	if IsClosed(b.Lost()) {
		t.Fatal("the new holder's lease was lost")
	}
	mustRelease(t, b)
}

func testCancelWhileWaiting(t *testing.T, s Suite) {
	l := s.New(t)
	name := Name(t)
	a := mustAcquire(t, l, name)

	// Cancelled once it waits. The deadline only ends a wait that ignores the cancellation.
	waitCtx, cancelWait := context.WithTimeout(t.Context(), time.Minute)
	defer cancelWait()
	type result struct {
		lease lock.Lease
		err   error
	}
	got := make(chan result, 1)
	go func() {
		lease, err := l.Acquire(waitCtx, name)
		got <- result{lease, err}
	}()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		return s.Waiting(t, name), "the server sees no call waiting for " + name
	})
	cancelWait()
	// A liveness bound, not a speed claim: a wait that ignores ctx would hang for its minute.
	select {
	case r := <-got:
		if r.err == nil {
			t.Fatalf("Acquire of a held lock returned a lease (token %d)", r.lease.Token())
		}
		if !errors.Is(r.err, lock.ErrTimeout) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Acquire after its ctx was cancelled = %v, want ErrTimeout and context.Canceled", r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waiting 5 s after its ctx was cancelled")
	}

	// A deadline that passes while it waits (or before it could even ask, on a stalled machine:
	// the answer is the same).
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	lease, err := l.Acquire(ctx, name)
	if err == nil {
		t.Fatalf("Acquire of a held lock returned a lease (token %d)", lease.Token())
	}
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire after its deadline = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if end, _ := ctx.Deadline(); time.Since(end) > 5*time.Second {
		t.Fatalf("Acquire returned %s after its deadline", time.Since(end))
	}

	mustRelease(t, a)
	// The abandoned waits left nothing behind that would queue ahead of a new holder.
	b, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatalf("after abandoned waits, TryAcquire of the released lock = %v", err)
	}
	mustRelease(t, b)
}

func testIndependentNames(t *testing.T, s Suite) {
	l := s.New(t)
	a := mustAcquire(t, l, Name(t))
	b, err := l.TryAcquire(t.Context(), Name(t))
	if err != nil {
		t.Fatalf("a lock of another name is held back: %v", err)
	}
	mustRelease(t, b)
	mustRelease(t, a)
}

// Acquire calls acquire (the Acquire method of a Locker or of an implementation's client) for the
// lock name, with up to 30 s to wait: a lock that never grants fails the test rather than hanging it.
func Acquire[L any](tb testing.TB, acquire func(context.Context, string) (L, error), name string) (L, error) {
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()
	return acquire(ctx, name)
}

// MustAcquire is Acquire that fails the test if it returns an error.
func MustAcquire[L any](tb testing.TB, acquire func(context.Context, string) (L, error), name string) L {
	tb.Helper()
	l, err := Acquire(tb, acquire, name)
	if err != nil {
		tb.Fatalf("Acquire(%s) = %v", name, err)
	}
	return l
}

func mustAcquire(t *testing.T, l lock.Locker, name string) lock.Lease {
	t.Helper()
	return MustAcquire(t, l.Acquire, name)
}

func mustRelease(t *testing.T, l lock.Lease) {
	t.Helper()
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
}

// IsClosed reports whether ch is closed (a Lease's Lost(), say), without waiting.
func IsClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
