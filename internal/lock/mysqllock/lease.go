package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/watchdog"
)

// Lease is one grant of a lock: the row with id Token() and this grant's owner. In shipped mode
// a watchdog (internal/lock/watchdog) renews the row's expiry every TTL/3; Release stops it.
type Lease struct {
	c     *Client
	name  string
	owner any // the row's owner: a string, or nil in naive mode
	token uint64
	dog   *watchdog.Watchdog // nil in naive mode: nothing watches the grant
}

// newLease returns the grant of row token; sent is when its insert was sent, so the lease runs
// out at sent+TTL at the latest as the database counts (its expiry was set after that).
func (c *Client) newLease(ctx context.Context, name string, owner any, token uint64, sent time.Time) *Lease {
	l := &Lease{c: c, name: name, owner: owner, token: token}
	if c.naive {
		return l
	}
	ctx = context.WithoutCancel(ctx) // the lease outlives the Acquire call: its values, for the log
	l.dog = watchdog.Start(ctx, watchdog.Options{
		TTL: c.ttl, ExpiresAt: sent.Add(c.ttl),
		Renew: func(ctx context.Context) (bool, error) {
			// Bounded: a renewal that hangs must not outlive the lease (the deadline timer loses
			// it meanwhile), and Release, which cancels ctx, waits for it.
			ctx, cancel := context.WithTimeout(ctx, c.ttl)
			defer cancel()
			res, err := c.db.ExecContext(ctx, c.q.renew, c.ttl.Microseconds(), token, owner)
			if err != nil {
				return false, err
			}
			n, err := res.RowsAffected()
			return n > 0, err
		},
		Gone: "the row is gone, expired or belongs to another grant",
		Lost: func(why string, err error) {
			c.log.WarnContext(ctx, "mysqllock: lease lost", "lock", name, "token", token, "why", why, "last_err", err)
		},
		Failed: func(err error) {
			c.log.DebugContext(ctx, "mysqllock: renewal failed", "lock", name, "token", token, "err", err)
		},
	})
	return l
}

// Token is the fencing token of this grant: the row's id (see Fencing tokens in the package doc
// for when it can be smaller than an earlier grant's). Pass it to the storage with every write.
func (l *Lease) Token() uint64 { return l.token }

// Lost is closed once the lease can no longer be trusted: a renewal found the row gone or
// expired, no renewal succeeded before the lease would have run out, or Release failed or found
// the grant already ended. A successful Release leaves it as it was. In naive mode nothing
// watches the grant, and Lost is never closed.
func (l *Lease) Lost() <-chan struct{} {
	if l.dog == nil {
		return lock.NeverLost()
	}
	return l.dog.Lost()
}

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
	l.dog.Stop()
	return l.finish(retryDeadlocks(ctx, l.c, func() (sql.Result, error) {
		return l.c.db.ExecContext(ctx, l.c.q.release, l.token, l.owner)
	}))
}

// releaseTries bounds the runs of a release that InnoDB keeps choosing as a deadlock victim.
const releaseTries = 10

// retryDeadlocks runs exec until it is not chosen as a deadlock victim (see contended), backing
// off between runs as a waiter does, releaseTries times at the most or until ctx ends. Under a
// storm of waiters' inserts on the name a release can lose several times in a row (four in a row
// were seen in CI, on a loaded machine, with no pause between them): each failure leaves the lock
// held until its row expires.
func retryDeadlocks(ctx context.Context, c *Client, exec func() (sql.Result, error)) (sql.Result, error) {
	backoff := c.backoff.Start()
	for try := 1; ; try++ {
		res, err := exec()
		if mysqlErrNo(err) != errDeadlock || try == releaseTries {
			return res, err
		}
		if serr := backoff.Sleep(ctx); serr != nil {
			return res, err
		}
	}
}

// finish is the end of Release: the delete's result or error.
func (l *Lease) finish(res sql.Result, err error) error {
	if err != nil {
		err = reachErr(err)
	} else if n, _ := res.RowsAffected(); n == 0 {
		err = lock.ErrNotHeld
	}
	if err != nil {
		if l.dog != nil {
			l.dog.Lose()
		}
		return fmt.Errorf("mysqllock: release %q (token %d): %w", l.name, l.token, err)
	}
	return nil
}

var _ lock.Lease = (*Lease)(nil)
