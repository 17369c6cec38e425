package watchdog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a renewal that answers what the test says and counts the calls, and the Lost
// callback's report.
type recorder struct {
	calls  atomic.Int64
	answer atomic.Value // func() (bool, error)
	mu     sync.Mutex
	why    string
	last   error
	losses int
}

func (r *recorder) options(ttl time.Duration) Options {
	return Options{
		TTL: ttl, ExpiresAt: time.Now().Add(ttl), Gone: "gone",
		Renew: func(context.Context) (bool, error) {
			r.calls.Add(1)
			return r.answer.Load().(func() (bool, error))()
		},
		Lost: func(why string, err error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.why, r.last = why, err
			r.losses++
		},
	}
}

func (r *recorder) set(f func() (bool, error)) { r.answer.Store(f) }

func lostWithin(w *Watchdog, d time.Duration) bool {
	if d == 0 {
		select {
		case <-w.Lost():
			return true
		default:
			return false
		}
	}
	select {
	case <-w.Lost():
		return true
	case <-time.After(d):
		return false
	}
}

// TestRenewedLeaseLives: a lease whose renewals succeed outlives its TTL many times over.
func TestRenewedLeaseLives(t *testing.T) {
	r := &recorder{}
	r.set(func() (bool, error) { return true, nil })
	w := Start(context.Background(), r.options(60*time.Millisecond))
	if lostWithin(w, 400*time.Millisecond) {
		t.Fatal("lost while every renewal succeeded")
	}
	w.Stop()
	if n := r.calls.Load(); n < 3 {
		t.Errorf("%d renewals in ~6 TTLs, want one every TTL/3", n)
	}
	n := r.calls.Load()
	time.Sleep(100 * time.Millisecond)
	if r.calls.Load() != n || lostWithin(w, 0) {
		t.Error("renewals went on, or Lost closed, after Stop")
	}
}

// TestGoneIsLostAtOnce: a renewal that finds the lock another's loses the lease at once, once.
func TestGoneIsLostAtOnce(t *testing.T) {
	r := &recorder{}
	r.set(func() (bool, error) { return false, nil })
	w := Start(context.Background(), r.options(300*time.Millisecond))
	if !lostWithin(w, 200*time.Millisecond) { // the first renewal is at 100 ms, the deadline at 300
		t.Fatal("not lost after a renewal found the lock gone")
	}
	w.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.why != "gone" || r.losses != 1 {
		t.Errorf("lost %d times, why %q; want once, gone", r.losses, r.why)
	}
}

// TestFailingRenewalsLoseAtTheDeadline: renewals that fail are tried again, and the lease is lost
// when none succeeded before it ran out, with the last error; a stalled lease likewise.
func TestFailingRenewalsLoseAtTheDeadline(t *testing.T) {
	boom := errors.New("unreachable")
	r := &recorder{}
	r.set(func() (bool, error) { return false, boom })
	w := Start(context.Background(), r.options(90*time.Millisecond))
	if !lostWithin(w, time.Second) {
		t.Fatal("not lost although no renewal succeeded")
	}
	w.Stop()
	r.mu.Lock()
	if !errors.Is(r.last, boom) || r.calls.Load() < 2 { // tried again; how often depends on the scheduler
		t.Errorf("last error %v after %d tries; want the renewal's, tried again", r.last, r.calls.Load())
	}
	r.mu.Unlock()

	s := &recorder{}
	s.set(func() (bool, error) { return true, nil })
	stalled := Start(context.Background(), s.options(90*time.Millisecond))
	stalled.Stall()
	if !lostWithin(stalled, time.Second) || s.calls.Load() != 0 {
		t.Errorf("stalled: lost %v after %d renewals sent; want lost, none sent", lostWithin(stalled, 0), s.calls.Load())
	}
	stalled.Stop()
}

// TestStopWaitsForARenewalInFlight: Stop returns only once a renewal under way has returned,
// and that renewal's answer no longer counts.
func TestStopWaitsForARenewalInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r := &recorder{}
	r.set(func() (bool, error) {
		once.Do(func() { close(entered) })
		<-release
		return false, nil
	})
	w := Start(context.Background(), r.options(60*time.Millisecond))
	<-entered
	stopped := make(chan struct{})
	go func() { w.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a renewal was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	if lostWithin(w, 100*time.Millisecond) {
		t.Error("a renewal answered after Stop lost the lease")
	}
	w.Lose()
	if !lostWithin(w, 0) {
		t.Error("Lose did not close Lost")
	}
	w.Lose() // twice is fine
}
