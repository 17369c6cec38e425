package zklock

// Re-entry: the zk lock with its holder's identity in the lock node.
//
// How it works. Apache Curator's InterProcessMutex keeps, per mutex object, a map from the
// owning thread to its lock node and a count. A thread that acquires a lock it already holds
// increments the count and returns at once, without a request to ZooKeeper; each release
// decrements it, and the last one deletes the node. Any other thread, of this process or
// another, queues behind the node as usual. The node's data names the holder (Curator's default
// data: the host's address), so an operator listing the lock sees who holds it.
//
// What the write-ups say breaks it. Re-entry is only as right as the identity it keys on.
// Per-thread identity breaks when work hops threads (an async continuation comes back as a
// stranger and waits for itself) and, the other way round, lets two tasks that share a pooled
// thread share a lock each believes is its own. Counts out of balance either hold the lock until
// the session ends (a release missed) or free it under a caller that still believes it holds it
// (one release too many). And all levels stand on one grant: when the session expires, every
// nested holder has lost the lock at once, with its count still positive.
//
// What this implementation does. Go has no thread identity, so the owner is explicit: the caller
// names it in ctx (lock.WithOwner), and its node's data is that owner. Each acquisition returns a
// lease of its own, so that a lease released twice is refused instead of counting down someone
// else's level; the last release deletes the node. A nested lease is the outer grant seen again:
// the same fencing token, the same Lost(). The count lives in this Reentrant, as Curator's lives
// in its mutex object: an owner re-enters through the Reentrant it first acquired with.

import (
	"context"
	"fmt"
	"sync"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Reentrant is a re-entrant lock on its Client's session: an owner that holds a lock gets it
// again at once, and holds it until it has released it as many times as it acquired it. The
// owner is named by lock.WithOwner in the acquiring ctx; an acquisition without one is an owner
// of its own, which never re-enters (nested, it waits for itself until its ctx ends).
// Goroutines that share an owner share its locks: an owner is one flow of work, not a goroutine.
type Reentrant struct {
	m    *Mutex
	mu   sync.Mutex
	held map[heldKey]*hold
}

type heldKey struct{ name, owner string }

// hold is an owner's grant of one lock, and how many of its acquisitions are not yet released.
type hold struct {
	ready chan struct{} // closed once the first acquisition has ended
	lease *Lease        // the grant, set before ready is closed; nil if the first acquisition failed
	count int           // guarded by Reentrant.mu
}

// Reentrant returns a re-entrant lock on c's session whose waiters wait the way o says.
func (c *Client) Reentrant(o MutexOptions) *Reentrant {
	return &Reentrant{m: c.Mutex(o), held: map[heldKey]*hold{}}
}

// Acquire is Client.Acquire for the owner named in ctx: if that owner holds name (through r), it
// returns at once, with no request to ZooKeeper, a lease with the holder's token. If the owner's
// first acquisition of name is still waiting, it waits for that one's outcome.
func (r *Reentrant) Acquire(ctx context.Context, name string) (*ReentrantLease, error) {
	return r.acquire(ctx, name, true)
}

// TryAcquire is Client.TryAcquire for the owner named in ctx: it re-enters a lock the owner
// holds, and returns an error wrapping lock.ErrNotAcquired while another owner holds it, or while
// the owner's own first acquisition of it is still waiting.
func (r *Reentrant) TryAcquire(ctx context.Context, name string) (*ReentrantLease, error) {
	return r.acquire(ctx, name, false)
}

// Locker returns r as a lock.Locker.
func (r *Reentrant) Locker() lock.Locker { return lock.Adapt[*ReentrantLease](r) }

func (r *Reentrant) acquire(ctx context.Context, name string, wait bool) (*ReentrantLease, error) {
	owner, ok := lock.OwnerFrom(ctx)
	if !ok {
		l, err := r.m.c.acquire(ctx, name, wait, r.m.h)
		if err != nil {
			return nil, err
		}
		return &ReentrantLease{key: heldKey{name: name}, h: &hold{lease: l, count: 1}}, nil
	}
	key := heldKey{name, owner}
	for {
		r.mu.Lock()
		h := r.held[key]
		if h == nil {
			h = &hold{ready: make(chan struct{}), count: 1}
			r.held[key] = h
			r.mu.Unlock()
			return r.first(ctx, key, h, wait)
		}
		r.mu.Unlock()
		if !chanClosed(h.ready) {
			if !wait {
				return nil, fmt.Errorf("zklock: try acquire %q: %w (owner %q is still waiting for it)", name, lock.ErrNotAcquired, owner)
			}
			select {
			case <-h.ready:
			case <-ctx.Done():
				return nil, fmt.Errorf("zklock: acquire %q: %w: %w", name, lock.ErrTimeout, ctx.Err())
			}
		}
		r.mu.Lock()
		if r.held[key] == h { // granted, and not yet released by every level
			h.count++
			r.mu.Unlock()
			return &ReentrantLease{r: r, key: key, h: h}, nil
		}
		r.mu.Unlock()
		// The owner's first acquisition failed, or the owner released the lock meanwhile.
	}
}

// first makes the owner's node, holding the owner's name, and waits for its turn.
func (r *Reentrant) first(ctx context.Context, key heldKey, h *hold, wait bool) (*ReentrantLease, error) {
	how := r.m.h
	how.data = []byte(key.owner)
	l, err := r.m.c.acquire(ctx, key.name, wait, how)
	r.mu.Lock()
	if err != nil {
		delete(r.held, key)
	} else {
		h.lease = l
	}
	r.mu.Unlock()
	close(h.ready)
	if err != nil {
		return nil, err
	}
	return &ReentrantLease{r: r, key: key, h: h}, nil
}

// ReentrantLease is one acquisition of a Reentrant lock: the first of its owner, or a nested one.
type ReentrantLease struct {
	r   *Reentrant // nil for an acquisition without an owner
	key heldKey
	h   *hold

	mu       sync.Mutex
	released bool
}

var _ lock.Issued = (*ReentrantLease)(nil)

// Token returns the fencing token of the owner's grant: a nested acquisition is no new grant.
func (l *ReentrantLease) Token() uint64 { return l.h.lease.Token() }

// Issuer returns the issuer of the owner's grant's token (Lease.Issuer).
func (l *ReentrantLease) Issuer() string { return l.h.lease.Issuer() }

// Lost returns the Lost channel of the owner's grant: when it is lost, every level is.
func (l *ReentrantLease) Lost() <-chan struct{} { return l.h.lease.Lost() }

// Owner returns the owner the lease was acquired for ("" for none).
func (l *ReentrantLease) Owner() string { return l.key.owner }

// Release gives up this acquisition. The owner's last one deletes the node, as Lease.Release
// does; an earlier one returns at once, with no request to ZooKeeper, and with an error wrapping
// lock.ErrNotHeld if the grant was lost meanwhile. A second Release of the same lease returns an
// error wrapping lock.ErrNotHeld and changes nothing.
func (l *ReentrantLease) Release(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.released = true
	l.mu.Unlock()
	if released {
		return fmt.Errorf("zklock: release %q: %w (released before)", l.key.name, lock.ErrNotHeld)
	}
	last := true
	if l.r != nil {
		l.r.mu.Lock()
		l.h.count--
		if last = l.h.count == 0; last {
			delete(l.r.held, l.key)
		}
		l.r.mu.Unlock()
	}
	if last {
		return l.h.lease.Release(ctx)
	}
	if chanClosed(l.Lost()) {
		return fmt.Errorf("zklock: release %q by %q: %w (the grant was lost)", l.key.name, l.key.owner, lock.ErrNotHeld)
	}
	return nil
}

func chanClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
