package redisreentrant

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/watchdog"
)

type holdKey struct{ name, field string }

// hold is one grant of a lock to one owner, as this Client sees it: its token, the watchdog
// that renews it, and how many of this Client's leases of it are not yet released.
type hold struct {
	key   holdKey
	token uint64
	dog   *watchdog.Watchdog
	count int // guarded by Client.mu
}

// enter records an acquisition the script granted with token. The owner's hold is shared when
// this Client has it already; a new token is a new grant (the old one ended, and its leases
// find that out when they renew or release).
func (c *Client) enter(ctx context.Context, k lockKeys, who caller, token uint64, expiresAt time.Time) *Lease {
	hk := holdKey{k.name, who.field}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[hk]
	if h == nil || h.token != token {
		h = &hold{key: hk, token: token}
		h.dog = c.watch(ctx, k, who, token, expiresAt)
		c.holds[hk] = h
	}
	h.count++
	return &Lease{c: c, k: k, who: who, h: h}
}

// watch starts the renewal of a hold granted at expiresAt's TTL, counted from before the acquire
// script was sent.
func (c *Client) watch(ctx context.Context, k lockKeys, who caller, token uint64, expiresAt time.Time) *watchdog.Watchdog {
	ctx = context.WithoutCancel(ctx) // the hold outlives the Acquire call: its values, for the log
	return watchdog.Start(ctx, watchdog.Options{
		TTL: c.ttl, ExpiresAt: expiresAt,
		Renew: func(ctx context.Context) (bool, error) {
			return renewScript.Run(ctx, c.rdb, []string{k.key}, who.field, token, c.ttl.Milliseconds()).Bool()
		},
		Gone: "the lock hash is gone, or no longer the owner's grant",
		Lost: func(why string, err error) {
			c.log.WarnContext(ctx, "redisreentrant: hold lost", "lock", k.name, "owner", who.owner, "token", token, "why", why, "last_err", err)
		},
		Failed: func(err error) {
			c.log.DebugContext(ctx, "redisreentrant: renewal failed", "lock", k.name, "owner", who.owner, "token", token, "err", err)
		},
	})
}

// Lease is one acquisition of a lock: its owner's first, or a nested one. The leases of one
// hold share its token, its Lost() and its renewal, which runs until the last of them is
// released; so Release must always be called, also after Lost has closed. Its methods are safe
// for concurrent use.
type Lease struct {
	c   *Client
	k   lockKeys
	who caller
	h   *hold

	mu       sync.Mutex
	released bool
}

var _ lock.Lease = (*Lease)(nil)

// Token is the fencing token of the owner's grant: a nested acquisition is the same grant, and
// carries the same token. It is strictly greater than the tokens of every earlier grant of the
// name. Pass it to the storage with every write.
func (l *Lease) Token() uint64 { return l.h.token }

// Lost is the Lost channel of the owner's grant, closed once it can no longer be trusted: a
// renewal found the hash gone or another grant's, no renewal was confirmed before the TTL would
// have run out, or a Release failed or found the grant ended. When it closes, every level has
// lost the lock.
func (l *Lease) Lost() <-chan struct{} { return l.h.dog.Lost() }

// Owner returns the owner the lease was acquired for ("" for an owner of its own).
func (l *Lease) Owner() string { return l.who.owner }

// Release gives up this acquisition: a nested one counts the owner's hold down (and renews it
// for a TTL), the last one deletes the hash and announces the release to the waiters. This
// Client's last lease of the hold also stops its renewal, waiting for one in flight. If the
// grant had already ended (it expired, was deleted, or the lease was released before) it
// returns an error matching lock.ErrNotHeld and changes nothing. On any other error the hold is
// no longer renewed once this Client's leases of it are released, and runs out within the TTL.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.released = true
	l.mu.Unlock()
	if released {
		return fmt.Errorf("redisreentrant: release %q (token %d): %w (released before)", l.k.name, l.h.token, lock.ErrNotHeld)
	}
	c, h := l.c, l.h
	c.mu.Lock()
	h.count--
	last := h.count == 0
	if last && c.holds[h.key] == h {
		delete(c.holds, h.key)
	}
	c.mu.Unlock()
	if last {
		h.dog.Stop()
	}
	res, err := releaseScript.Run(ctx, c.rdb, []string{l.k.key}, l.who.field, h.token, c.ttl.Milliseconds(), l.k.channel, c.publish).Int64()
	switch {
	case err != nil:
		if last {
			h.dog.Lose()
		}
		return fmt.Errorf("redisreentrant: release %q (token %d): %w", l.k.name, h.token, err)
	case res < 0:
		h.dog.Lose()
		return fmt.Errorf("redisreentrant: release %q (token %d): %w", l.k.name, h.token, lock.ErrNotHeld)
	}
	return nil
}
