// Package tokens hands out fencing tokens to the locks of the lock zoo that have none of their
// own (Redlock, the Memcached lock): a counter per lock name in the project's main Redis, whose
// append-only file is fsynced on every write (scripts/services.sh), so a token survives a crash of
// Redis and never goes back. Kleppmann's point about Redlock is that it cannot make such a number
// itself; this is the project's fence lent to it, from a store that can.
//
// A token is taken after the lock was won: the counter orders grants, the lock does not enter
// into it. Two holders at once (the failures the zoo shows) get two different tokens, the later
// grant the larger one, and the storage's fence refuses the older holder's writes.
package tokens

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// DefaultPrefix starts every counter key.
const DefaultPrefix = "seckill:fence:"

// Redis is a token counter per lock name in one Redis.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedis returns counters on rdb, which stays the caller's to close, under prefix (default
// DefaultPrefix). Keys are prefix + "{" + name + "}", one per lock name, with no expiry.
func NewRedis(rdb redis.UniversalClient, prefix string) (*Redis, error) {
	if rdb == nil {
		return nil, errors.New("tokens: nil Redis client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Redis{rdb: rdb, prefix: prefix}, nil
}

// Key is the counter key of name.
func (r *Redis) Key(name string) string { return r.prefix + "{" + name + "}" }

// Next returns name's next token: strictly greater than every token Next returned for name before.
func (r *Redis) Next(ctx context.Context, name string) (uint64, error) {
	n, err := r.rdb.Incr(ctx, r.Key(name)).Uint64()
	if err != nil {
		return 0, fmt.Errorf("tokens: next of %q: %w", name, err)
	}
	return n, nil
}
