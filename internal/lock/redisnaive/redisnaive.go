// Package redisnaive keeps the two Redis locks of the flash-sale write-ups that the project's own
// lock (internal/lock/redislock) was built to avoid, behind lock.Locker, so that the lock zoo can
// show how each one fails: SetNX (setnx.go), SETNX then EXPIRE as two commands, and GetSet
// (getset.go), the timestamp lock with GETSET. Both release by a plain DEL with no owner check,
// and neither is ever to protect anything. It knows nothing about products or sales.
//
// Neither lock has a fencing token of its own. So that the zoo can show that the project's fence
// would have refused their stale holders, each grant takes one from an INCR of a per-name
// counter key after the lock was won (strictly increasing per name while Redis keeps the key);
// the zoo's strategies run unfenced, as the write-ups do.
//
// Keys, with the default prefixes, for a lock named N (apart per mechanism, so that a product
// switched from one to the other never meets the other's value, or its dead holder's key):
//
//	seckill:setnx:{N}              SetNX's lock, "1"
//	seckill:getset:{N}             GetSet's lock, a deadline in Unix milliseconds
//	seckill:<mechanism>:{N}:fence  the token counter, no expiry
package redisnaive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Defaults of Options.
const (
	DefaultTTL          = 10 * time.Second
	DefaultSetNXPrefix  = "seckill:setnx:"
	DefaultGetSetPrefix = "seckill:getset:"
	DefaultMinBackoff   = lock.DefaultMinBackoff
	DefaultMaxBackoff   = lock.DefaultMaxBackoff
)

// Options configures a lock of this package. The zero value is valid.
type Options struct {
	// TTL is the lock's expiry: EXPIRE's for SetNX, the stored deadline's distance for GetSet.
	// Never renewed. Whole milliseconds; default DefaultTTL.
	TTL time.Duration
	// Prefix starts every key; default DefaultSetNXPrefix or DefaultGetSetPrefix.
	Prefix string
	// MinBackoff and MaxBackoff bound the sleep between two tries of a waiting Acquire: it starts
	// at MinBackoff and doubles after each lost try up to MaxBackoff, each sleep drawn from its
	// upper half.
	MinBackoff, MaxBackoff time.Duration
	// OnAttempt, if set, is called after every try that reached Redis: won, or lost to a holder.
	OnAttempt func(won bool)
	// ClockOffset is added to the local clock (GetSet only): a host whose clock is off. Tests
	// and the zoo only.
	ClockOffset time.Duration
	// BetweenSetnxAndExpire, if set, runs after a won SETNX and before its EXPIRE (SetNX only);
	// returning false abandons the grant there, as a holder that dies between the two commands
	// does: the key stays, with no expiry, and Acquire returns ErrAbandoned. Tests only.
	BetweenSetnxAndExpire func() (goOn bool)
}

// ErrAbandoned is returned by SetNX's Acquire when Options.BetweenSetnxAndExpire abandoned the
// grant: the test's stand-in for a holder that died between SETNX and EXPIRE.
var ErrAbandoned = errors.New("redisnaive: holder died between SETNX and EXPIRE")

// base is what both locks share: the client, the key names, the back-off and the token counter.
type base struct {
	rdb       redis.UniversalClient
	ttl       time.Duration
	prefix    string
	backoff   lock.Backoff
	onAttempt func(bool)
}

func newBase(rdb redis.UniversalClient, opts Options, defaultPrefix string) (base, error) {
	if rdb == nil {
		return base{}, errors.New("redisnaive: nil Redis client")
	}
	b := base{rdb: rdb, prefix: opts.Prefix, onAttempt: opts.OnAttempt}
	var err error
	if b.ttl, err = lock.LeaseTTL(opts.TTL, time.Millisecond, DefaultTTL, time.Millisecond); err != nil {
		return base{}, fmt.Errorf("redisnaive: %w", err)
	}
	if b.prefix == "" {
		b.prefix = defaultPrefix
	}
	if b.backoff, err = (lock.Backoff{Min: opts.MinBackoff, Max: opts.MaxBackoff}).Checked(); err != nil {
		return base{}, fmt.Errorf("redisnaive: %w", err)
	}
	if b.onAttempt == nil {
		b.onAttempt = lock.NoAttempts
	}
	return b, nil
}

// Key returns the Redis key of the lock called name.
func (b *base) Key(name string) string { return b.prefix + "{" + name + "}" }

func (b *base) fenceKey(name string) string { return b.Key(name) + ":fence" }

// token is the fencing token of a grant just won: the next value of the name's counter.
func (b *base) token(ctx context.Context, name string) (uint64, error) {
	n, err := b.rdb.Incr(ctx, b.fenceKey(name)).Uint64()
	if err != nil {
		return 0, reachErr(err)
	}
	return n, nil
}

// errHeld is the outcome of a try that found the lock held.
var errHeld = errors.New("held")

// wait calls try until it wins, fails, or ctx ends (lock.ErrTimeout), sleeping with back-off
// between tries: neither lock has anything to wake a waiter.
func (b *base) wait(ctx context.Context, name string, try func(context.Context, string) (*Lease, error)) (*Lease, error) {
	if name == "" {
		return nil, errors.New("redisnaive: empty lock name")
	}
	backoff := b.backoff.Start()
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("redisnaive: acquire %q: %w: %w", name, lock.ErrTimeout, err)
		}
		l, err := try(ctx, name)
		switch {
		case err == nil:
			return l, nil
		case !errors.Is(err, errHeld):
			if ctx.Err() != nil {
				// The wait ran out during a call: go-redis reports that as the connection's
				// i/o timeout, which is not Redis being away.
				return nil, fmt.Errorf("redisnaive: acquire %q: %w: %w (%v)", name, lock.ErrTimeout, ctx.Err(), err)
			}
			return nil, fmt.Errorf("redisnaive: acquire %q: %w", name, err)
		}
		if err := backoff.Sleep(ctx); err != nil {
			return nil, fmt.Errorf("redisnaive: acquire %q: %w: %w", name, lock.ErrTimeout, err)
		}
	}
}

// tryOnce is TryAcquire over try.
func tryOnce(ctx context.Context, name string, try func(context.Context, string) (*Lease, error)) (*Lease, error) {
	if name == "" {
		return nil, errors.New("redisnaive: empty lock name")
	}
	l, err := try(ctx, name)
	switch {
	case errors.Is(err, errHeld):
		return nil, fmt.Errorf("redisnaive: try %q: %w", name, lock.ErrNotAcquired)
	case err != nil:
		return nil, fmt.Errorf("redisnaive: try %q: %w", name, err)
	}
	return l, nil
}

// reachErr marks err as lock.ErrUnavailable when the call did not reach Redis.
func reachErr(err error) error {
	var ne net.Error
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.As(err, &ne) || errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return err
}

// Lease is one grant of either lock. Nothing watches it: Lost is never closed, and Release
// deletes whatever holds the key then.
type Lease struct {
	token   uint64
	release func(ctx context.Context) error
}

// Token is the grant's fencing token, from the name's counter.
func (l *Lease) Token() uint64 { return l.token }

// Lost is never closed: the holder is not told when its lock expired or was taken.
func (l *Lease) Lost() <-chan struct{} { return lock.NeverLost() }

// Release deletes the lock's key (see each lock for when). It returns lock.ErrNotHeld if there
// was no key to delete.
func (l *Lease) Release(ctx context.Context) error { return l.release(ctx) }

var _ lock.Lease = (*Lease)(nil)

// del deletes key and reports lock.ErrNotHeld if it was gone.
func del(ctx context.Context, rdb redis.UniversalClient, key string) error {
	n, err := rdb.Del(ctx, key).Result()
	switch {
	case err != nil:
		return fmt.Errorf("redisnaive: release %s: %w", key, reachErr(err))
	case n == 0:
		return fmt.Errorf("redisnaive: release %s: %w", key, lock.ErrNotHeld)
	}
	return nil
}
