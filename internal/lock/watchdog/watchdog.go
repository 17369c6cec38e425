// Package watchdog keeps a lock's lease alive while its holder works, as Redisson's lock
// watchdog does: it renews the lease every third of its TTL and reports it lost, through a
// channel the holder watches, when a renewal finds the lock no longer the grant's or when no
// renewal succeeded before the lease would have run out. The leases of internal/lock/redislock
// (a key's expiry) and internal/lock/mysqllock (a row's expiry) share it; it knows nothing of
// what it renews.
//
// It runs on two timers rather than a goroutine of its own, so that a lease released before its
// first renewal (the common case) starts no goroutine at all: the renewal timer renews every
// TTL/3, and the deadline timer closes Lost when the lease runs out before a renewal is
// confirmed, even while a renewal hangs in a slow call. Their callbacks register in running, and
// Stop waits for them.
package watchdog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Options say what to renew and whom to tell.
type Options struct {
	// TTL is the lease's length: renewed every TTL/3, each renewal for TTL from when it was sent.
	TTL time.Duration
	// ExpiresAt is when the lease runs out unless renewed, on the safe side (counted from before
	// the grant's request was sent).
	ExpiresAt time.Time
	// Renew extends the lease by TTL. held false means the lock is gone or another grant's: the
	// lease is lost at once. An error is retried (every TTL/30) until the deadline.
	Renew func(ctx context.Context) (held bool, err error)
	// Gone says, for the log, what held false means ("the lock key is gone or ...").
	Gone string
	// Lost is called once when the watchdog loses the lease: why, and the last renewal error.
	Lost func(why string, lastErr error)
	// Failed is called for each failed renewal that will be tried again; may be nil.
	Failed func(err error)
}

// Watchdog renews one lease. Its methods are safe for concurrent use.
type Watchdog struct {
	o Options

	lost     chan struct{}
	lostOnce sync.Once

	ctx    context.Context // of renewals: the grant's ctx's values without its end
	cancel context.CancelFunc

	mu        sync.Mutex
	stopped   bool      // released or lost: no more renewals
	expiresAt time.Time // when the lease runs out unless renewed, on the safe side
	renewal   *time.Timer
	deadline  *time.Timer
	lastErr   error          // of the last failed renewal
	running   sync.WaitGroup // timer callbacks in progress; Add only while !stopped

	stalled atomic.Bool // test hook (Stall): renewals are not sent
}

// Start watches a lease granted under ctx (whose values it keeps, not its end).
func Start(ctx context.Context, o Options) *Watchdog {
	w := &Watchdog{o: o, lost: make(chan struct{}), expiresAt: o.ExpiresAt}
	w.ctx, w.cancel = context.WithCancel(context.WithoutCancel(ctx))
	w.mu.Lock() // the callbacks must see the timers
	defer w.mu.Unlock()
	w.renewal = time.AfterFunc(o.TTL/3, w.renew)
	w.deadline = time.AfterFunc(time.Until(o.ExpiresAt), w.expire)
	return w
}

// Lost is closed once the lease can no longer be trusted (or Lose was called).
func (w *Watchdog) Lost() <-chan struct{} { return w.lost }

// Stop ends the renewals and waits for one in flight; Lost is left as it was. A holder calls it
// before it releases the lock.
func (w *Watchdog) Stop() {
	w.mu.Lock()
	w.stopLocked()
	w.mu.Unlock()
	w.running.Wait()
}

// Lose closes Lost: the holder found the grant ended (a release that failed or found it gone).
func (w *Watchdog) Lose() { w.lostOnce.Do(func() { close(w.lost) }) }

// Stall makes the renewals not be sent, as a holder cut off from its lock service: a test hook.
func (w *Watchdog) Stall() { w.stalled.Store(true) }

func (w *Watchdog) stopLocked() {
	w.stopped = true
	w.renewal.Stop()
	w.deadline.Stop()
	w.cancel()
}

// loseLocked ends the lease; the caller reports why once it has let go of mu.
func (w *Watchdog) loseLocked() {
	w.stopLocked()
	w.Lose()
}

// begin registers a timer callback with running, unless the lease has stopped.
func (w *Watchdog) begin() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	w.running.Add(1)
	return true
}

// renew is the renewal timer's callback: one renewal, then the next timer.
func (w *Watchdog) renew() {
	if !w.begin() {
		return
	}
	defer w.running.Done()
	ttl := w.o.TTL
	every := ttl / 3
	var held bool
	var err error
	sent := time.Now()
	stalled := w.stalled.Load()
	if !stalled {
		held, err = w.o.Renew(w.ctx)
	}

	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	switch {
	case stalled:
		w.renewal.Reset(every)
	case err == nil && held:
		w.lastErr = nil
		w.expiresAt = sent.Add(ttl)
		w.deadline.Reset(time.Until(w.expiresAt))
		w.renewal.Reset(every)
	case err == nil:
		w.loseLocked()
		w.mu.Unlock()
		w.o.Lost(w.o.Gone, nil)
		return
	default:
		w.lastErr = err
		w.renewal.Reset(max(every/10, time.Millisecond)) // retry until the deadline
	}
	w.mu.Unlock()
	if err != nil && w.o.Failed != nil {
		w.o.Failed(err)
	}
}

// expire is the deadline timer's callback.
func (w *Watchdog) expire() {
	if !w.begin() {
		return
	}
	defer w.running.Done()
	w.mu.Lock()
	// A renewal may have moved the deadline after this callback was already on its way.
	if w.stopped || time.Now().Before(w.expiresAt) {
		w.mu.Unlock()
		return
	}
	w.loseLocked()
	err := w.lastErr
	w.mu.Unlock()
	w.o.Lost("no renewal succeeded before the lease ran out", err)
}
