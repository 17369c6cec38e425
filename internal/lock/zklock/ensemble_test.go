package zklock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
)

// TestEnsembleLeaderKill: A holds a lock, B waits for it, on a three-server ensemble of the test's
// own (one for both cases); the leader is SIGKILLed. Every client loses its server for a moment (the followers drop
// their clients while they elect a new leader) and moves its session to a surviving server.
// Never two holders at once: B is granted only after A released or was told its lease was
// lost. After A releases, B gets the lock (nothing stuck). It logs whether A's lease was lost and
// how long after the kill a fresh Acquire succeeds again (the recovery time).
//
// A Client reports its leases lost after a third of its session timeout without a session (the
// grace). With 6 s (grace 2 s) the session comes back in time and A's lease is not lost; with
// 1.2 s (grace 400 ms, shorter than the election) it is, and the test checks that B still waits
// for A's release or for A to have been told.
func TestEnsembleLeaderKill(t *testing.T) {
	itest.Integration(t)
	e := itest.ZKEnsemble(t)
	for _, tc := range []struct {
		session  time.Duration
		wantLost bool
	}{
		{6 * time.Second, false},
		{1200 * time.Millisecond, true},
	} {
		t.Run("session-"+tc.session.String(), func(t *testing.T) {
			leaderKill(t, e, tc.session, tc.wantLost)
		})
	}
}

func leaderKill(t *testing.T, e *itest.Ensemble, ensembleSession time.Duration, wantLost bool) {
	root := "/seckill-test/ensemble-" + itest.Suffix(8)
	connect := func() *zklock.Client {
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		defer cancel()
		c, err := zklock.Connect(ctx, e.Servers(), zklock.Options{Root: root, SessionTimeout: ensembleSession, Logger: itest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	a, b, c := connect(), connect(), connect()
	const name = "product-1"

	var holders, maxHolders atomic.Int32
	enter := func() {
		n := holders.Add(1)
		for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
		}
	}
	la, err := a.Acquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	enter()

	var (
		lb        *zklock.Lease
		bErr      error
		bGranted  time.Time
		bDone     = make(chan struct{})
		aReleased atomic.Int64 // unix ns of A's release; 0 before
		aLost     atomic.Int64 // unix ns when A's Lost was seen; 0 before
	)
	var bg sync.WaitGroup
	stop := make(chan struct{})
	defer func() { close(stop); bg.Wait() }()
	bg.Go(func() {
		select {
		case <-la.Lost():
			aLost.Store(time.Now().UnixNano())
		case <-stop:
		}
	})
	bg.Go(func() {
		defer close(bDone)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for {
			lb, bErr = b.Acquire(ctx, name)
			// B's wait fails fast (ErrUnavailable) while it has no session: a buyer would
			// be told so and come back; this one comes back at once.
			if bErr == nil || !errors.Is(bErr, lock.ErrUnavailable) || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if bErr == nil {
			bGranted = time.Now()
			enter()
		}
	})
	time.Sleep(500 * time.Millisecond) // B is queued behind A

	leader := e.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	killed := time.Now()
	leader.Kill()

	// Recovery: how soon does a fresh Acquire, of another name, succeed again?
	var refused int
	for {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		l, err := c.Acquire(ctx, "probe")
		cancel()
		if err == nil {
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			break
		}
		refused++
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no Acquire succeeded within 30 s of the leader's SIGKILL: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recovered := time.Since(killed)
	e.WaitQuorum()
	t.Logf("leader %s SIGKILLed → a fresh Acquire succeeds again after %s (%d tries refused before); new leader %s",
		leader.Addr(), recovered.Round(time.Millisecond), refused, e.Leader().Addr())

	// Never two holders: B may only have been granted after A was told its lease was lost.
	select {
	case <-bDone:
		if bErr != nil {
			t.Fatalf("B gave up waiting: %v", bErr)
		}
		lostAt := aLost.Load()
		if lostAt == 0 || bGranted.Before(time.Unix(0, lostAt)) {
			t.Fatalf("B was granted %s after the kill while A held the lock and was not told (A lost at %d)", bGranted.Sub(killed), lostAt)
		}
		t.Logf("B granted %s after the kill, after A's lease was reported lost (A's session expired)", bGranted.Sub(killed).Round(time.Millisecond))
	case <-time.After(time.Second): // B still waits
	}
	lostNote := "A's lease was not lost: its session moved to another server within the grace (" + (ensembleSession / 3).String() + ")"
	if at := aLost.Load(); at != 0 {
		lostNote = "A's lease was reported lost " + time.Unix(0, at).Sub(killed).Round(time.Millisecond).String() +
			" after the kill: disconnected longer than the grace (" + (ensembleSession / 3).String() + "), or its session expired"
	}
	t.Log(lostNote)
	if lost := aLost.Load() != 0; lost != wantLost {
		t.Errorf("A's lease lost = %v, want %v", lost, wantLost)
	}

	holders.Add(-1)
	aReleased.Store(time.Now().UnixNano())
	relErr := la.Release(t.Context())
	t.Logf("A's Release = %v", relErr)
	if relErr != nil && aLost.Load() == 0 {
		t.Fatalf("A's Release = %v, with its lease not lost", relErr)
	}
	select {
	case <-bDone:
	case <-time.After(30 * time.Second):
		t.Fatal("B not granted within 30 s of A's release: the lock is stuck")
	}
	if bErr != nil {
		t.Fatalf("B's Acquire = %v", bErr)
	}
	released := time.Unix(0, aReleased.Load())
	t.Logf("B granted %s after A's release; tokens A %d, B %d", bGranted.Sub(released).Round(time.Millisecond), la.Token(), lb.Token())
	if m := maxHolders.Load(); m != 1 && aLost.Load() == 0 {
		t.Fatalf("%d holders at once, want 1", m)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %d ≤ A's %d", lb.Token(), la.Token())
	}
	if err := lb.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	leader.Start() // the next case finds three servers again
	e.WaitQuorum()
}
