package zklock

// The herd: the naive ZooKeeper lock of the write-ups.
//
// How it works. Each contender creates an ephemeral-sequential child of the lock's node; the one
// with the lowest sequence number holds the lock. A waiter lists the children with a watch
// (getChildren(watch=true)) and, whenever the list changes, lists them again, until its own node
// is the lowest.
//
// What breaks it. Nothing breaks its safety, but every change of the list wakes every waiter: a
// release wakes all N of them, and so does every new contender that joins the queue. Each woken
// waiter lists the children again (and sets a new watch), N−1 of them only to learn that they
// still wait. With N waiters a grant costs O(N) notifications and listings, O(N²) over the N
// grants that drain the queue: the herd effect, which the ZooKeeper recipe ("Locks", in the
// ZooKeeper documentation) avoids by having each waiter watch only its predecessor.
//
// What this implementation does. It is a mode of the careful lock, not a copy of the naive
// code: the same protected creates, session handling, grant and fencing token (the czxid), so it
// stays safe; only the wait differs (Client.wait), and it counts the wake-ups that the herd
// costs (MutexOptions.OnWake) so that a test and the metrics can show them next to the
// predecessor watch's one per grant.

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// MutexOptions choose how the waiters of a Mutex wait, and let the caller count what they do.
// The zero value is the Client's own lock: each waiter watches its predecessor.
type MutexOptions struct {
	// Herd makes every waiter watch the whole list of the lock's children, as the naive lock of
	// the write-ups does, instead of its predecessor: each release and each new waiter wakes them
	// all. Safe, and slower as waiters grow; kept to show why the recipe watches the predecessor.
	Herd bool
	// OnWake, if set, is called once for each wake-up of a waiter by a watch: about once per
	// grant with the predecessor watch, about once per waiter per change with the herd. It runs
	// on the waiter's goroutine and must not block.
	OnWake func()
	// OnLook, if set, is called every time an acquisition looks at the queue: won when its node
	// is the lowest, and not won when it must wait (a TryAcquire that finds the lock held, or a
	// waiter woken to find that it still waits: a wasted look). It must not block.
	OnLook func(won bool)
}

// Mutex acquires locks on its Client's session the way its MutexOptions say. The Client's own
// Acquire is a Mutex with the zero MutexOptions.
type Mutex struct {
	c *Client
	h how
}

// Mutex returns a Mutex on c's session.
func (c *Client) Mutex(o MutexOptions) *Mutex {
	return &Mutex{c: c, h: how{herd: o.Herd, onWake: o.OnWake, onLook: o.OnLook}}
}

// Acquire is Client.Acquire, waiting the Mutex's way.
func (m *Mutex) Acquire(ctx context.Context, name string) (*Lease, error) {
	return m.c.acquire(ctx, name, true, m.h)
}

// TryAcquire is Client.TryAcquire. It never waits, so it never wakes.
func (m *Mutex) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return m.c.acquire(ctx, name, false, m.h)
}

// Locker returns m as a lock.Locker.
func (m *Mutex) Locker() lock.Locker { return lock.Adapt[*Lease](m) }
