package redisnaive

// GetSet is the timestamp lock of the seckill write-ups: the key holds the time at which the
// holder's lock runs out, as Unix milliseconds by the holder's clock, and has no Redis expiry.
//
//	SETNX key now+ttl                    won if it set the key
//	GET key → t; if t > now: held        else the holder's time is up:
//	GETSET key now+ttl → old             won iff old == t (no other waiter got there first)
//	… critical section …
//	DEL key if now < our deadline        release
//
// What the write-ups say breaks it, and what its tests show (internal/stock/redisnaive_test.go):
//
//   - Every client's clock decides. A client whose clock runs ahead (Options.ClockOffset) sees
//     an honest holder's deadline as passed, GETSETs, and two holders are in the critical
//     section; unfenced, both sell the last unit.
//   - A holder paused past its deadline is replaced the same way, and writes on when it resumes.
//   - A losing GETSET still wrote its deadline over the winner's, and release has no owner: a
//     holder whose clock is behind deletes the key of whoever holds it now.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// GetSet is the timestamp lock. It is safe for concurrent use and runs no goroutine.
type GetSet struct {
	base
	offset time.Duration
}

// NewGetSet returns the timestamp lock on rdb, which stays the caller's to close.
func NewGetSet(rdb redis.UniversalClient, opts Options) (*GetSet, error) {
	b, err := newBase(rdb, opts, DefaultGetSetPrefix)
	if err != nil {
		return nil, err
	}
	return &GetSet{base: b, offset: opts.ClockOffset}, nil
}

// Locker returns g as a lock.Locker.
func (g *GetSet) Locker() lock.Locker { return lock.Adapt[*Lease](g) }

// Acquire tries until it wins or ctx ends (lock.ErrTimeout), with back-off between tries.
func (g *GetSet) Acquire(ctx context.Context, name string) (*Lease, error) {
	return g.wait(ctx, name, g.try)
}

// TryAcquire tries once and returns lock.ErrNotAcquired if the lock is held.
func (g *GetSet) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return tryOnce(ctx, name, g.try)
}

// now is this client's clock, in Unix milliseconds.
func (g *GetSet) now() int64 { return time.Now().Add(g.offset).UnixMilli() }

func (g *GetSet) try(ctx context.Context, name string) (*Lease, error) {
	key := g.Key(name)
	deadline := g.now() + g.ttl.Milliseconds()
	won, err := g.rdb.SetNX(ctx, key, deadline, 0).Result()
	if err != nil {
		return nil, reachErr(err)
	}
	if !won {
		won, err = g.takeOver(ctx, key, deadline)
		if err != nil {
			return nil, err
		}
	}
	g.onAttempt(won)
	if !won {
		return nil, errHeld
	}
	token, err := g.token(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Lease{token: token, release: func(ctx context.Context) error {
		if g.now() >= deadline {
			// Our time is up: the key may be someone else's. (By our clock, which may be wrong.)
			return fmt.Errorf("redisnaive: release %s: deadline passed: %w", key, lock.ErrNotHeld)
		}
		return del(ctx, g.rdb, key) // no owner: whoever's key it is by now
	}}, nil
}

// takeOver is the held branch: GET the holder's deadline and, if it has passed by our clock,
// GETSET ours; won iff the value replaced is the one read.
func (g *GetSet) takeOver(ctx context.Context, key string, deadline int64) (bool, error) {
	seen, err := g.rdb.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil // released meanwhile: the next try's SETNX
	case err != nil:
		return false, reachErr(err)
	}
	t, err := strconv.ParseInt(seen, 10, 64)
	if err == nil && t > g.now() {
		return false, nil // held, and in time by our clock
	}
	old, err := g.rdb.GetSet(ctx, key, deadline).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, reachErr(err)
	}
	return old == seen, nil
}
