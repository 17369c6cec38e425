package redisnaive

// SetNX is the write-ups' first Redis lock:
//
//	SETNX key 1          won if it set the key
//	EXPIRE key ttl       a second command, so that a dead holder's key goes away
//	… critical section …
//	DEL key              release
//
// What the write-ups say breaks it, and what its tests show (internal/stock/redisnaive_test.go):
//
//   - The two commands are not atomic. A holder that dies between them (a crash, a kill, a lost
//     connection) leaves a key with no expiry: every later Acquire waits out its ctx and the
//     sale stalls until a person deletes the key. (SET key v NX PX ttl, one command, fixes it.)
//   - DEL has no owner check. A holder paused past the TTL comes back after the key expired and
//     someone else took it, and its DEL deletes the new holder's lock, letting a third in.
//   - Nothing tells a paused holder that its lock expired: unfenced, its late write sells a unit
//     someone else already sold. The fencing token (see the package doc) would refuse it.

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// SetNX is the SETNX-then-EXPIRE lock. It is safe for concurrent use and runs no goroutine.
type SetNX struct {
	base
	between func() bool
}

// NewSetNX returns the SETNX lock on rdb, which stays the caller's to close.
func NewSetNX(rdb redis.UniversalClient, opts Options) (*SetNX, error) {
	b, err := newBase(rdb, opts, DefaultSetNXPrefix)
	if err != nil {
		return nil, err
	}
	return &SetNX{base: b, between: opts.BetweenSetnxAndExpire}, nil
}

// Locker returns s as a lock.Locker.
func (s *SetNX) Locker() lock.Locker { return lock.Adapt[*Lease](s) }

// Acquire tries SETNX until it wins or ctx ends (lock.ErrTimeout), with back-off between tries.
func (s *SetNX) Acquire(ctx context.Context, name string) (*Lease, error) {
	return s.wait(ctx, name, s.try)
}

// TryAcquire tries SETNX once and returns lock.ErrNotAcquired if the key exists.
func (s *SetNX) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return tryOnce(ctx, name, s.try)
}

func (s *SetNX) try(ctx context.Context, name string) (*Lease, error) {
	key := s.Key(name)
	won, err := s.rdb.SetNX(ctx, key, 1, 0).Result()
	if err != nil {
		return nil, reachErr(err)
	}
	s.onAttempt(won)
	if !won {
		return nil, errHeld
	}
	if s.between != nil && !s.between() {
		return nil, ErrAbandoned // the key stays, with no expiry
	}
	// PEXPIRE: EXPIRE's in milliseconds, so that tests may use leases shorter than a second.
	if err := s.rdb.PExpire(ctx, key, s.ttl).Err(); err != nil {
		return nil, fmt.Errorf("expire after setnx (the key stays with no expiry): %w", reachErr(err))
	}
	token, err := s.token(ctx, name)
	if err != nil {
		return nil, err
	}
	return &Lease{token: token, release: func(ctx context.Context) error {
		return del(ctx, s.rdb, key) // whoever's key it is by now
	}}, nil
}
