package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/watchdog"
)

// Lease is one grant of a lock. It renews itself in the background (internal/lock/watchdog)
// until Release, so Release must always be called, also after Lost has closed. Its methods are
// safe for concurrent use.
type Lease struct {
	c     *Client
	k     lockKeys
	owner string // random per grant: the value of the lock key while this grant holds it
	token uint64
	dog   *watchdog.Watchdog
}

// newLease starts the renewal of a grant that runs out at expiresAt, counted from before the
// acquire script was sent.
func (c *Client) newLease(ctx context.Context, k lockKeys, owner string, token uint64, expiresAt time.Time) *Lease {
	l := &Lease{c: c, k: k, owner: owner, token: token}
	ctx = context.WithoutCancel(ctx) // the lease outlives the Acquire call: its values, for the log
	l.dog = watchdog.Start(ctx, watchdog.Options{
		TTL: c.ttl, ExpiresAt: expiresAt,
		// go-redis bounds a call by ctx only when the client has ContextTimeoutEnabled: the
		// watchdog's deadline timer loses the lease meanwhile.
		Renew: func(ctx context.Context) (bool, error) {
			return renewScript.Run(ctx, c.rdb, []string{k.key}, owner, c.ttl.Milliseconds()).Bool()
		},
		Gone: "the lock key is gone or belongs to another grant",
		Lost: func(why string, err error) {
			c.log.WarnContext(ctx, "redislock: lease lost", "lock", k.name, "token", token, "why", why, "last_err", err)
		},
		Failed: func(err error) {
			c.log.DebugContext(ctx, "redislock: extension failed", "lock", k.name, "token", token, "err", err)
		},
	})
	return l
}

// Token is the fencing token of this grant: strictly greater than every earlier grant's of the
// same name (see the package doc for the limits). Pass it to the storage with every write.
func (l *Lease) Token() uint64 { return l.token }

// Lost is closed once the lease can no longer be trusted: an extension found the key gone or
// owned by another grant, no extension was confirmed before the lease would have run out, or
// Release failed or found the grant already ended. A successful Release leaves it as it was.
func (l *Lease) Lost() <-chan struct{} { return l.dog.Lost() }

// Release gives the lock up, announces it to the waiters and stops the renewal, waiting for an
// extension in flight. If the grant had already ended (it expired, was deleted or taken over,
// or was released before) it returns an error matching lock.ErrNotHeld and leaves the current
// holder alone. On any other error the lease is no longer renewed and runs out within the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.dog.Stop()
	released, err := releaseScript.Run(ctx, l.c.rdb, []string{l.k.key}, l.owner, l.k.channel, l.c.publish()).Bool()
	switch {
	case err != nil:
		l.dog.Lose()
		return fmt.Errorf("redislock: release %q (token %d): %w", l.k.name, l.token, err)
	case !released:
		l.dog.Lose()
		return fmt.Errorf("redislock: release %q (token %d): %w", l.k.name, l.token, lock.ErrNotHeld)
	}
	return nil
}
