// Package lock states what seckill-go's distributed locks promise, whatever they are built on
// (redislock and zklock, the fenced locks of the redis and zk strategies; mysqllock,
// redisreentrant, redlock, redisnaive and memlock, the lock zoo's): the errors they return and the
// Lease they hand out, and what the locks that poll share (Backoff, NeverLost). The lock packages
// know nothing of products or sales; locktest checks every implementation against the same
// contract. This package imports nothing but the standard library and pause.
//
// A lock is advisory: a holder that pauses (GC, swap, a slow network) beyond its lease may still
// believe it holds the lock after someone else got it. That is why every grant carries a fencing
// token that strictly increases with each grant of the same lock name: the storage the lock
// protects must remember the largest token it has seen and refuse older ones (Kleppmann, "How to
// do distributed locking", 2016).
package lock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/seckill-go/seckill-go/internal/pause"
)

var (
	// ErrTimeout is returned by Acquire when ctx ends before the lock is granted. It is returned
	// wrapped together with ctx's error, so errors.Is matches both.
	ErrTimeout = errors.New("lock: wait timed out")
	// ErrUnavailable is returned by Acquire, instead of ErrTimeout, when ctx ended while the lock
	// service could not be reached: the wait was not for a holder but for the service. It is
	// returned wrapped together with ctx's error.
	ErrUnavailable = errors.New("lock: lock service unreachable")
	// ErrNotAcquired is returned by TryAcquire when someone else holds the lock.
	ErrNotAcquired = errors.New("lock: held by someone else")
	// ErrNotHeld is returned by Release when the grant is no longer the holder (it expired or was
	// lost); nothing was released.
	ErrNotHeld = errors.New("lock: not held")
)

// Lease is one grant of a lock.
type Lease interface {
	// Token is the fencing token of this grant: strictly greater than the token of every earlier
	// grant of the same lock name.
	Token() uint64
	// Lost is closed once the lease can no longer be trusted (it could not be renewed, or the
	// session behind it expired). Writes made after that must be fenced out by the storage.
	Lost() <-chan struct{}
	// Release gives the lock up. It only ever releases this grant: after expiry, or by a holder
	// that lost the lock, it returns ErrNotHeld and leaves the current holder alone.
	Release(ctx context.Context) error
}

// Issued is a Lease whose tokens count from state the lock service can lose: ZooKeeper's czxids
// start low again on an ensemble whose data was wiped, so a token of the new data can be below
// every token of the old. Issuer names that state (for ZooKeeper, the ensemble's data lifetime):
// tokens compare only between leases of one issuer, and the storage that keeps the fence orders
// the issuers themselves (internal/store: in the order it first saw them). A Lease that is not
// Issued hands out tokens that never go back, whatever happens to its service.
type Issued interface {
	Lease
	// Issuer names the data the token was counted from; "" for none.
	Issuer() string
}

// IssuerOf returns l's Issuer, or "" if l is not Issued.
func IssuerOf(l Lease) string {
	if i, ok := l.(Issued); ok {
		return i.Issuer()
	}
	return ""
}

// Locker acquires locks by name. Implementations adapt their concrete lease type to Lease.
type Locker interface {
	// Acquire blocks until the lock is held, ctx ends (ErrTimeout, or ErrUnavailable if the lock
	// service was unreachable meanwhile) or the lock service fails.
	Acquire(ctx context.Context, name string) (Lease, error)
	// TryAcquire takes the lock if it is free and returns ErrNotAcquired otherwise.
	TryAcquire(ctx context.Context, name string) (Lease, error)
}

// Tokens hands out fencing tokens to a lock that cannot make its own (Redlock, the Memcached
// lock): Next returns, for name, a number strictly greater than every one it returned for name
// before, from a store that survives what the lock's servers do not (internal/lock/tokens).
type Tokens interface {
	Next(ctx context.Context, name string) (uint64, error)
}

// Client is a lock client whose methods return its own lease type L.
type Client[L Lease] interface {
	Acquire(ctx context.Context, name string) (L, error)
	TryAcquire(ctx context.Context, name string) (L, error)
}

// Adapt returns c as a Locker. Go has no covariant results, so a client returning *its* lease
// type is not a Locker by itself; Adapt bridges that without ever turning a nil lease into a
// non-nil Lease interface.
func Adapt[L Lease](c Client[L]) Locker { return adapter[L]{c} }

type adapter[L Lease] struct{ c Client[L] }

func (a adapter[L]) Acquire(ctx context.Context, name string) (Lease, error) {
	l, err := a.c.Acquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (a adapter[L]) TryAcquire(ctx context.Context, name string) (Lease, error) {
	l, err := a.c.TryAcquire(ctx, name)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// LeaseTTL returns the TTL a lock's Options ask for: ttl cut to whole units (the lock service's
// resolution), def when ttl is zero, or an error when it is shorter than least.
func LeaseTTL(ttl, unit, def, least time.Duration) (time.Duration, error) {
	t := ttl.Truncate(unit)
	switch {
	case ttl == 0:
		return def, nil
	case t < least:
		return 0, fmt.Errorf("TTL %s is shorter than %s", ttl, least)
	}
	return t, nil
}

// NeverLost returns the Lost of a lease that nothing watches (the lock zoo's naive locks, the
// lock table in naive mode): a channel that is never closed, shared by all of them. Its holder is
// never told that its lock expired or was taken.
func NeverLost() <-chan struct{} { return neverLost }

var neverLost = make(chan struct{})

// NoAttempts is the attempt observer of a lock whose Options.OnAttempt was left nil: it observes
// nothing.
func NoAttempts(won bool) {}

// Bounds of a Backoff whose Min or Max is left zero.
const (
	DefaultMinBackoff = 2 * time.Millisecond
	DefaultMaxBackoff = 100 * time.Millisecond
)

// Backoff is how a lock that cannot wake its waiters (they poll) spaces their tries: the sleep
// between two tries starts at Min and doubles after each lost try up to Max, each drawn from the
// upper half of its step, so that waiters that lost together do not try again in step.
type Backoff struct{ Min, Max time.Duration }

// Checked returns b with a zero Min set to DefaultMinBackoff and a zero Max to the larger of
// DefaultMaxBackoff and Min, or an error if the bounds are negative or crossed.
func (b Backoff) Checked() (Backoff, error) {
	if b.Min == 0 {
		b.Min = DefaultMinBackoff
	}
	if b.Max == 0 {
		b.Max = max(DefaultMaxBackoff, b.Min)
	}
	if b.Min < 0 || b.Max < b.Min {
		return Backoff{}, fmt.Errorf("back-off bounds %s..%s", b.Min, b.Max)
	}
	return b, nil
}

// Start returns the sleeps of one wait, the first one Min's.
func (b Backoff) Start() Backoffs { return Backoffs{b: b, step: b.Min} }

// Backoffs are the sleeps of one wait through a Backoff. Not safe for concurrent use.
type Backoffs struct {
	b    Backoff
	step time.Duration
}

// Next returns the next sleep, a draw from the upper half of the current step, and doubles the
// step up to Max.
func (w *Backoffs) Next() time.Duration {
	d := w.step/2 + mrand.N(w.step/2+1)
	w.step = min(2*w.step, w.b.Max)
	return d
}

// Sleep sleeps Next, or until ctx ends: then it returns ctx's error.
func (w *Backoffs) Sleep(ctx context.Context) error { return pause.For(ctx, w.Next()) }
