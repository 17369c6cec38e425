// Package redisspent is the bot challenge's replay cache in Redis (challenge.Spent), shared by
// every replica: a solution spent on one replica is refused by all of them. One SET NX PX per
// genuine solution, on the Redis every replica already uses; a key lives until the challenge's
// expiry (plus a margin for the replicas' clocks), then Redis drops it.
package redisspent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

// Spent remembers spent challenges in Redis under its namespace.
type Spent struct {
	rdb    redis.UniversalClient
	prefix string
	now    func() time.Time
}

var _ challenge.Spent = (*Spent)(nil)

// New returns the replay cache on rdb, its keys under namespace ns (the deployment's, as every
// other key: tests and deployments sharing a Redis stay apart).
func New(rdb redis.UniversalClient, ns string) (*Spent, error) {
	if rdb == nil || ns == "" {
		return nil, errors.New("redisspent: a Redis client and a namespace are required")
	}
	return &Spent{rdb: rdb, prefix: "challenge:" + ns + ":spent:", now: time.Now}, nil
}

// Key is the key that records id as spent.
func (s *Spent) Key(id string) string { return s.prefix + id }

// Spend sets id's key if it is absent, for the time left until until (at least a millisecond):
// true if this call set it.
func (s *Spent) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	ttl := max(until.Sub(s.now()).Milliseconds(), 1)
	// SetNX would round the TTL to seconds (SET … EX … NX): PX keeps it.
	err := s.rdb.Do(ctx, "set", s.Key(id), "1", "px", ttl, "nx").Err()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("redisspent: spending %s: %w", id, err)
	}
	return true, nil
}
