package redislock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Lease is one grant of a lock. It renews itself in the background until Release, so Release
// must always be called, also after Lost has closed. Its methods are safe for concurrent use.
//
// Renewal runs on two timers rather than a goroutine of its own, so that a lease released
// before its first renewal (the common case) starts no goroutine at all: the renewal timer
// extends the key every TTL/3, and the deadline timer closes Lost when the lease runs out
// before an extension is confirmed, even while an extension hangs in a slow Redis call (go-redis
// bounds calls by ctx only when the client has ContextTimeoutEnabled). Their callbacks register
// in running, and Release waits for them.
type Lease struct {
	c     *Client
	k     lockKeys
	owner string // random per grant: the value of the lock key while this grant holds it
	token uint64

	lost     chan struct{}
	lostOnce sync.Once

	ctx    context.Context // of renewal calls: the Acquire ctx's values without its end
	cancel context.CancelFunc

	mu        sync.Mutex
	stopped   bool      // released or lost: no more renewals
	expiresAt time.Time // when the lease runs out unless extended, on the safe side
	renewal   *time.Timer
	deadline  *time.Timer
	lastErr   error          // of the last failed extension
	running   sync.WaitGroup // timer callbacks in progress; Add only while !stopped

	stalled atomic.Bool // test hook (export_test.go): extensions are not sent
}

// newLease starts the renewal of a grant that runs out at expiresAt, counted from before the
// acquire script was sent.
func (c *Client) newLease(ctx context.Context, k lockKeys, owner string, token uint64, expiresAt time.Time) *Lease {
	l := &Lease{c: c, k: k, owner: owner, token: token, lost: make(chan struct{}), expiresAt: expiresAt}
	// The lease outlives the Acquire call: keep ctx's values, not its end.
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.mu.Lock() // the callbacks must see the timers
	defer l.mu.Unlock()
	l.renewal = time.AfterFunc(c.ttl/3, l.renew)
	l.deadline = time.AfterFunc(time.Until(expiresAt), l.expire)
	return l
}

// Token is the fencing token of this grant: strictly greater than every earlier grant's of the
// same name (see the package doc for the limits). Pass it to the storage with every write.
func (l *Lease) Token() uint64 { return l.token }

// Lost is closed once the lease can no longer be trusted: an extension found the key gone or
// owned by another grant, no extension was confirmed before the lease would have run out, or
// Release failed or found the grant already ended. A successful Release leaves it as it was.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release gives the lock up, announces it to the waiters and stops the renewal, waiting for an
// extension in flight. If the grant had already ended (it expired, was deleted or taken over,
// or was released before) it returns an error matching lock.ErrNotHeld and leaves the current
// holder alone. On any other error the lease is no longer renewed and runs out within the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	l.stopLocked()
	l.mu.Unlock()
	l.running.Wait()
	released, err := releaseScript.Run(ctx, l.c.rdb, []string{l.k.key}, l.owner, l.k.channel).Bool()
	switch {
	case err != nil:
		l.closeLost()
		return fmt.Errorf("redislock: release %q (token %d): %w", l.k.name, l.token, err)
	case !released:
		l.closeLost()
		return fmt.Errorf("redislock: release %q (token %d): %w", l.k.name, l.token, lock.ErrNotHeld)
	}
	return nil
}

func (l *Lease) stopLocked() {
	l.stopped = true
	l.renewal.Stop()
	l.deadline.Stop()
	l.cancel()
}

func (l *Lease) closeLost() { l.lostOnce.Do(func() { close(l.lost) }) }

// loseLocked ends the lease; the caller logs why once it has let go of mu.
func (l *Lease) loseLocked() {
	l.stopLocked()
	l.closeLost()
}

func (l *Lease) logLost(why string, err error) {
	l.c.log.WarnContext(l.ctx, "redislock: lease lost", "lock", l.k.name, "token", l.token, "why", why, "last_err", err)
}

// begin registers a timer callback with running, unless the lease has stopped.
func (l *Lease) begin() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.running.Add(1)
	return true
}

// renew is the renewal timer's callback: one extension, then the next timer.
func (l *Lease) renew() {
	if !l.begin() {
		return
	}
	defer l.running.Done()
	ttl := l.c.ttl
	every := ttl / 3
	var held bool
	var err error
	sent := time.Now()
	stalled := l.stalled.Load()
	if !stalled {
		held, err = renewScript.Run(l.ctx, l.c.rdb, []string{l.k.key}, l.owner, ttl.Milliseconds()).Bool()
	}

	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	switch {
	case stalled:
		l.renewal.Reset(every)
	case err == nil && held:
		l.lastErr = nil
		l.expiresAt = sent.Add(ttl)
		l.deadline.Reset(time.Until(l.expiresAt))
		l.renewal.Reset(every)
	case err == nil:
		l.loseLocked()
		l.mu.Unlock()
		l.logLost("the lock key is gone or belongs to another grant", nil)
		return
	default:
		l.lastErr = err
		l.renewal.Reset(max(every/10, time.Millisecond)) // retry until the deadline
	}
	l.mu.Unlock()
	if err != nil {
		l.c.log.DebugContext(l.ctx, "redislock: extension failed", "lock", l.k.name, "token", l.token, "err", err)
	}
}

// expire is the deadline timer's callback.
func (l *Lease) expire() {
	if !l.begin() {
		return
	}
	defer l.running.Done()
	l.mu.Lock()
	// An extension may have moved the deadline after this callback was already on its way.
	if l.stopped || time.Now().Before(l.expiresAt) {
		l.mu.Unlock()
		return
	}
	l.loseLocked()
	err := l.lastErr
	l.mu.Unlock()
	l.logLost("no extension confirmed before the lease ran out", err)
}
