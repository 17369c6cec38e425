package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Lease is one grant of a lock: valid until Until, never renewed. Its methods are safe for
// concurrent use.
type Lease struct {
	c     *Client
	name  string
	key   string
	value string // random per grant: the keys' value while this grant holds them
	token uint64
	until time.Time

	lost     chan struct{}
	loseOnce sync.Once
	timer    *time.Timer
}

func (c *Client) newLease(name, key, value string, token uint64, until time.Time) *Lease {
	l := &Lease{c: c, name: name, key: key, value: value, token: token, until: until, lost: make(chan struct{})}
	l.timer = time.AfterFunc(time.Until(until), l.lose)
	return l
}

func (l *Lease) lose() { l.loseOnce.Do(func() { close(l.lost) }) }

// Token is the grant's fencing token, from Options.Tokens: Redlock has none of its own.
func (l *Lease) Token() uint64 { return l.token }

// Until is the end of the grant's validity: the time of the try's start plus the TTL less the
// drift allowance. The servers' keys outlive it a little; nobody can tell how little.
func (l *Lease) Until() time.Time { return l.until }

// Lost is closed when the validity has passed (a timer: a Redlock holder is told nothing else,
// so a lock that servers forgot, restarting, stays open here), or when Release found that the
// grant no longer held a majority. A successful Release leaves it as it was.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release deletes the grant's keys from every server (compare-and-delete: another grant's keys
// stay). It succeeds if it deleted them on a majority. If it deleted fewer, Lost closes and it
// returns an error matching lock.ErrNotHeld when a majority answered (the grant had expired or
// been forgotten by the servers, and released nothing that matters), or lock.ErrUnavailable when
// the servers it did not reach might still hold its keys: those expire within the TTL.
//
// Why a majority, not "deleted anywhere": a grant is a majority of keys, and a Release that found
// fewer of them is a Release of a lock that was no longer held, which the contract calls
// ErrNotHeld; the stray keys it did delete would have expired unheld anyway.
func (l *Lease) Release(ctx context.Context) error {
	answers := l.c.release(ctx, l.key, l.value)
	deleted, answered := count(answers)
	if deleted >= l.c.quorum {
		l.timer.Stop()
		return nil
	}
	l.lose()
	if failed := len(answers) - answered; deleted+failed >= l.c.quorum {
		return fmt.Errorf("redlock: release %q (token %d): deleted on %d of %d servers, %d unreachable: %w",
			l.name, l.token, deleted, len(answers), failed, lock.ErrUnavailable)
	}
	return fmt.Errorf("redlock: release %q (token %d): deleted on %d of %d servers: %w",
		l.name, l.token, deleted, len(answers), lock.ErrNotHeld)
}

var _ lock.Lease = (*Lease)(nil)
