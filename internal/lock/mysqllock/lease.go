package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Lease is one grant of a lock: the row with id Token() and this grant's owner. In shipped mode
// its watchdog renews the row's expiry every TTL/3 from two timers (renewal and deadline), whose
// callbacks register in running; Release stops them and waits for the one in flight.
type Lease struct {
	c     *Client
	name  string
	owner any // the row's owner: a string, or nil in naive mode
	token uint64

	lost     chan struct{} // never closed in naive mode: nothing watches the grant
	lostOnce sync.Once

	ctx    context.Context // of renewals: the Acquire ctx's values without its end; nil if naive
	cancel context.CancelFunc

	mu        sync.Mutex
	stopped   bool      // released or lost: no more renewals
	expiresAt time.Time // when the lease runs out unless renewed, on the safe side
	renewal   *time.Timer
	deadline  *time.Timer
	lastErr   error          // of the last failed renewal
	running   sync.WaitGroup // timer callbacks in progress; Add only while !stopped

	stalled atomic.Bool // test hook (export_test.go): renewals are not sent
}

// newLease returns the grant of row token; sent is when its insert was sent, so the lease runs
// out at sent+TTL at the latest as the database counts (its expiry was set after that).
func (c *Client) newLease(ctx context.Context, name string, owner any, token uint64, sent time.Time) *Lease {
	l := &Lease{c: c, name: name, owner: owner, token: token, lost: make(chan struct{})}
	if c.naive {
		return l
	}
	l.ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.mu.Lock() // the callbacks must see the timers
	defer l.mu.Unlock()
	l.expiresAt = sent.Add(c.ttl)
	l.renewal = time.AfterFunc(c.ttl/3, l.renew)
	l.deadline = time.AfterFunc(time.Until(l.expiresAt), l.expire)
	return l
}

// Token is the fencing token of this grant: the row's id (see Fencing tokens in the package doc
// for when it can be smaller than an earlier grant's). Pass it to the storage with every write.
func (l *Lease) Token() uint64 { return l.token }

// Lost is closed once the lease can no longer be trusted: a renewal found the row gone or
// expired, no renewal succeeded before the lease would have run out, or Release failed or found
// the grant already ended. A successful Release leaves it as it was. In naive mode nothing
// watches the grant, and Lost is never closed.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release deletes the grant's row and stops the watchdog, waiting for a renewal in flight. If the
// row was gone already (reaped after expiry, deleted by force, released before) it returns an
// error matching lock.ErrNotHeld and leaves the current holder alone. On any other error the row
// stays until it expires and is reaped.
//
// In naive mode it deletes the row of the lock's name, whoever's it is: a holder that was
// force-released and did not know releases its successor's lock.
func (l *Lease) Release(ctx context.Context) error {
	if l.c.naive {
		return l.finish(l.c.db.ExecContext(ctx, l.c.q.releaseByName, l.name))
	}
	l.mu.Lock()
	l.stopLocked()
	l.mu.Unlock()
	l.running.Wait()
	for range 3 { // a deadlock victim (see contended) only has to run again
		res, err := l.c.db.ExecContext(ctx, l.c.q.release, l.token, l.owner)
		if mysqlErrNo(err) != errDeadlock {
			return l.finish(res, err)
		}
	}
	return l.finish(l.c.db.ExecContext(ctx, l.c.q.release, l.token, l.owner))
}

// finish is the end of Release: the delete's result or error.
func (l *Lease) finish(res sql.Result, err error) error {
	if err != nil {
		err = reachErr(err)
	} else if n, _ := res.RowsAffected(); n == 0 {
		err = lock.ErrNotHeld
	}
	if err != nil {
		if !l.c.naive {
			l.closeLost()
		}
		return fmt.Errorf("mysqllock: release %q (token %d): %w", l.name, l.token, err)
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

func (l *Lease) loseLocked() {
	l.stopLocked()
	l.closeLost()
}

func (l *Lease) logLost(why string, err error) {
	l.c.log.WarnContext(l.ctx, "mysqllock: lease lost", "lock", l.name, "token", l.token, "why", why, "last_err", err)
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

// renew is the renewal timer's callback: one renewal, then the next timer.
func (l *Lease) renew() {
	if !l.begin() {
		return
	}
	defer l.running.Done()
	ttl := l.c.ttl
	every := ttl / 3
	var n int64
	var err error
	sent := time.Now()
	stalled := l.stalled.Load()
	if !stalled {
		// Bounded: a renewal that hangs must not outlive the lease (the deadline timer loses it
		// meanwhile), and Release, which cancels l.ctx, waits for it.
		ctx, cancel := context.WithTimeout(l.ctx, ttl)
		var res sql.Result
		if res, err = l.c.db.ExecContext(ctx, l.c.q.renew, ttl.Microseconds(), l.token, l.owner); err == nil {
			n, err = res.RowsAffected()
		}
		cancel()
	}

	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	switch {
	case stalled:
		l.renewal.Reset(every)
	case err == nil && n > 0:
		l.lastErr = nil
		l.expiresAt = sent.Add(ttl)
		l.deadline.Reset(time.Until(l.expiresAt))
		l.renewal.Reset(every)
	case err == nil:
		l.loseLocked()
		l.mu.Unlock()
		l.logLost("the row is gone, expired or belongs to another grant", nil)
		return
	default:
		l.lastErr = err
		l.renewal.Reset(max(every/10, time.Millisecond)) // retry until the deadline
	}
	l.mu.Unlock()
	if err != nil {
		l.c.log.DebugContext(l.ctx, "mysqllock: renewal failed", "lock", l.name, "token", l.token, "err", err)
	}
}

// expire is the deadline timer's callback.
func (l *Lease) expire() {
	if !l.begin() {
		return
	}
	defer l.running.Done()
	l.mu.Lock()
	// A renewal may have moved the deadline after this callback was already on its way.
	if l.stopped || time.Now().Before(l.expiresAt) {
		l.mu.Unlock()
		return
	}
	l.loseLocked()
	err := l.lastErr
	l.mu.Unlock()
	l.logLost("no renewal succeeded before the lease ran out", err)
}

var _ lock.Lease = (*Lease)(nil)
