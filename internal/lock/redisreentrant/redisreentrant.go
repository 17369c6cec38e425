// Package redisreentrant is Redisson's RLock in Go: a re-entrant mutual-exclusion lock held in
// one Redis server, for the lock zoo's `redis-reentrant` strategy. It knows nothing about
// products or sales.
//
// # What Redisson's RLock is
//
// Redisson (the Java Redis client) keeps a lock named N as a Redis hash N of owner → hold count,
// where the owner is the client's UUID and the calling thread's id. One Lua script acquires: if
// the hash is missing, or the caller's field is in it, HINCRBY the field by 1, PEXPIRE the hash
// and return nil; otherwise return the hash's PTTL. So the owner that holds the lock re-enters at
// once, and every other owner gets the time it would have to wait at most. Release is another
// script: no field, nothing held (nil); else HINCRBY −1, and while the count is positive PEXPIRE
// again and return 0; at zero DEL the hash, PUBLISH an unlock message on the lock's channel and
// return 1. A waiter subscribes to that channel and sleeps on a semaphore the message releases,
// for at most the PTTL the failed try returned. A lock taken without a lease time is renewed by
// the "lock watchdog": every lockWatchdogTimeout/3 (30 s / 3 by default) a script PEXPIREs the
// hash if the caller's field is still in it, and stops renewing when it is not; a client that
// dies stops renewing, and its lock is gone within lockWatchdogTimeout.
//
// # What this package does
//
// The same scripts, with these changes:
//
//   - The owner is explicit (see internal/lock's owner.go): lock.WithOwner names it in the
//     acquiring ctx. The hash field is the Client's random id, a colon and that name, as
//     Redisson's is its client's UUID, a colon and the thread id: an owner re-enters only
//     through the Client it first acquired with (as zklock's count lives in its Reentrant), so
//     two processes, or two Clients of one, that happen to name owners alike never share a hold.
//     An operator's HGETALL shows who holds the lock and how deep. An Acquire whose ctx names no
//     owner is an owner of its own, with a random name: it never re-enters, and a nested Acquire
//     of it waits for itself until its ctx ends, as zklock's Reentrant does. Goroutines that
//     share an owner share its holds: an owner is one flow of work, not a goroutine.
//   - Fencing. The first acquisition of a hold INCRs a counter next to the hash (the same hash
//     tag) and stores the result in the hash's "token" field; a nested acquisition returns that
//     field. Reentry is the same grant, so it carries the same token; a new hold after a release
//     or an expiry carries a larger one. Renewal and release compare the token as well as the
//     owner, so a lease whose grant ended never renews, counts down or deletes a later grant of
//     the same owner. The counter has no expiry and never goes back while Redis keeps its data
//     (the project's Redis fsyncs its append-only file on every write).
//   - Each acquisition returns a Lease of its own, which releases one level once: a second
//     Release of the same Lease returns lock.ErrNotHeld instead of counting down another level.
//     The leases of one hold share its token and its Lost(), and one internal/lock/watchdog per
//     hold and Client renews it every TTL/3 (Options.TTL, default 30 s, Redisson's
//     lockWatchdogTimeout) until the Client's last lease of the hold is released.
//   - Waiting: the waiters of one Client for one name share one subscription to the release
//     channel; a release message wakes one of them (Redisson's semaphore), which tries again.
//     Every sleep is bounded by min(PTTL, TTL/10 within 100 ms..1 s): a holder that dies
//     announces nothing, and a lost message costs latency, never a grant. Waiting is not fair.
//
// # What the write-ups say
//
// Nothing in the zoo's table breaks it: the owner re-enters instead of deadlocking on itself,
// the watchdog keeps a long hold alive without a guessed lease, and a dead owner's lock expires
// within the TTL. Two limits remain. Re-entry is only as right as the owner's name (a name two
// flows share lets both in; a count out of balance holds the lock until its holder dies). And it
// is a single-master lock: when the Redis master fails over to a replica that missed the grant,
// the replica hands the lock to someone else while the first holder still holds it (make chaos's
// redis-failover fault). The fencing token is what keeps that safe: the storage claims a token
// before it reads and refuses any token not larger than the largest it has seen, so of two
// holders only the later claim writes. A failover can also roll the counter back (the replica
// missed INCRs) and hand out a token again or a smaller one: the storage then refuses the new
// holder until the counter passes the old value, which costs availability, not correctness.
// (redislock seeds its tokens with the server's clock to avoid that; this package keeps
// Redisson's plain counter.)
//
// What it must never do: renew, count down or delete a grant that is not the lease's own.
package redisreentrant

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
)

// Defaults of Options.
const (
	// DefaultTTL is Redisson's lockWatchdogTimeout.
	DefaultTTL    = 30 * time.Second
	DefaultPrefix = "seckill:rlock:"
	// MinTTL is the shortest lease New accepts, redislock's: the same renewal every TTL/3, on
	// the same millisecond expiry.
	MinTTL = redislock.MinTTL
)

// Options configures a Client. The zero value is valid.
type Options struct {
	// TTL is how long a hold outlives an owner that stops renewing it (crashes, stalls, loses
	// Redis); the watchdog renews it every TTL/3. Truncated to whole milliseconds; default
	// DefaultTTL, at least MinTTL.
	TTL time.Duration
	// Prefix starts every key and channel name; default DefaultPrefix. The lock name in braces
	// follows it: the Cluster hash tag of the lock's keys.
	Prefix string
	// Logger receives lost holds and renewal failures; default discards.
	Logger *slog.Logger
	// OnAttempt, if set, is called after every run of the acquire script that Redis answered:
	// won tells whether it granted (a nested acquisition included) or found another owner
	// holding the lock. For metrics; it must not block.
	OnAttempt func(won bool)
}

// Client acquires re-entrant locks in one Redis. It is safe for concurrent use. It holds
// nothing in the background beyond the watchdogs of holds not yet released and the release
// subscriptions of waits in progress, so it has no Close.
type Client struct {
	id        string // random: the first part of this Client's owner fields
	rdb       redis.UniversalClient
	ttl       time.Duration
	recheck   time.Duration
	prefix    string
	log       *slog.Logger
	onAttempt func(bool)
	// publish announces a release: SPUBLISH on a Redis Cluster (sharded Pub/Sub, the lock's
	// slot only; classic PUBLISH is copied to every node), PUBLISH otherwise.
	publish string

	mu    sync.Mutex
	holds map[holdKey]*hold // the holds this Client's leases share, by name and owner field
	subs  map[string]*sub   // by channel: the names some Acquire of this Client waits for
}

// New returns a Client on rdb. rdb stays the caller's to close, after every Lease is released.
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	if rdb == nil {
		return nil, errors.New("redisreentrant: nil redis client")
	}
	ttl, err := lock.LeaseTTL(opts.TTL, time.Millisecond, DefaultTTL, MinTTL)
	if err != nil {
		return nil, fmt.Errorf("redisreentrant: %w", err)
	}
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	onAttempt := opts.OnAttempt
	if onAttempt == nil {
		onAttempt = lock.NoAttempts
	}
	return &Client{
		id: rand.Text(), rdb: rdb, ttl: ttl, prefix: prefix, log: log, onAttempt: onAttempt, publish: publishCommand(rdb),
		recheck: redislock.DefaultRecheck(ttl),
		holds:   map[holdKey]*hold{}, subs: map[string]*sub{},
	}, nil
}

// publishCommand is the command that announces a release on rdb.
func publishCommand(rdb redis.UniversalClient) string {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// Scripts. Their results are never nil (go-redis would turn a nil into redis.Nil). Tokens are
// compared as numbers: HSET stores the INCR result as Lua formats it.
var (
	// KEYS[1] lock hash, KEYS[2] fence counter; ARGV[1] owner field, ARGV[2] lease in ms.
	// Returns {token, count} when granted (count 1: a new hold), {0, pttl} when another owner
	// holds it.
	acquireScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then
  local token = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], ARGV[1], 1, 'token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {token, 1}
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  local n = redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {tonumber(redis.call('HGET', KEYS[1], 'token')), n}
end
return {0, redis.call('PTTL', KEYS[1])}
`)

	// KEYS[1] lock hash; ARGV[1] owner field, ARGV[2] token, ARGV[3] lease in ms.
	// Returns 1 if extended, 0 if the hold is gone.
	renewScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'token')) ~= tonumber(ARGV[2])
   or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

	// KEYS[1] lock hash; ARGV[1] owner field, ARGV[2] token, ARGV[3] lease in ms, ARGV[4]
	// release channel, ARGV[5] PUBLISH or SPUBLISH (the channel shares the key's hash tag).
	// Returns -1 if the hold is gone, 0 if a level was released and others
	// remain, 1 if the lock was released.
	releaseScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'token')) ~= tonumber(ARGV[2])
   or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return -1
end
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[5], ARGV[4], 'released')
return 1
`)

	// KEYS[1] lock hash; ARGV[1] owner field (an owner of its own), ARGV[2] release channel,
	// ARGV[3] PUBLISH or SPUBLISH.
	// Takes back an acquisition whose answer was lost: the owner's one level.
	undoScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], ARGV[2], 'released')
return 1
`)
)

// lockKeys are the name of one lock and the Redis names derived from it.
type lockKeys struct {
	name, key, fence, channel string
}

func (c *Client) keysOf(name string) (lockKeys, error) {
	if name == "" {
		return lockKeys{}, errors.New("redisreentrant: empty lock name")
	}
	key := c.Key(name)
	return lockKeys{name: name, key: key, fence: key + ":fence", channel: key + ":released"}, nil
}

// Key returns the Redis key of the lock called name: the hash of owner → count and the grant's
// "token", for an operator's HGETALL and the fault tests.
func (c *Client) Key(name string) string { return c.prefix + "{" + name + "}" }

// ownerField is the hash field of owner's holds through c.
func (c *Client) ownerField(owner string) string { return c.id + ":" + owner }

// caller is who an acquisition acts for.
type caller struct {
	owner string // "" for an owner of its own
	field string // the hash field
}

func (c *Client) callerOf(ctx context.Context) caller {
	if owner, ok := lock.OwnerFrom(ctx); ok {
		return caller{owner: owner, field: c.ownerField(owner)}
	}
	return caller{field: c.ownerField("anonymous-" + rand.Text())}
}

// Acquire blocks until the owner named in ctx holds the lock called name and returns the
// acquisition. An owner that holds it already gets it at once, nested: with the same token and
// Lost() as its first acquisition, and one more Release to make. Without an owner in ctx the
// call is an owner of its own and never re-enters. When ctx ends first it returns an error
// matching both lock.ErrTimeout and ctx.Err(); when Redis could not be reached, one matching
// lock.ErrUnavailable.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	k, err := c.keysOf(name)
	if err != nil {
		return nil, err
	}
	who := c.callerOf(ctx)
	if err := ctx.Err(); err != nil { // go-redis would run the script anyway
		return nil, acquireErr(ctx, k, err)
	}
	lease, _, err := c.try(ctx, k, who, 0)
	if lease != nil || err != nil {
		return lease, acquireErr(ctx, k, err)
	}
	lease, err = c.wait(ctx, k, who)
	return lease, acquireErr(ctx, k, err)
}

// TryAcquire is Acquire without the wait: it returns an error matching lock.ErrNotAcquired
// while another owner holds the lock.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	k, err := c.keysOf(name)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisreentrant: try %q: %w", name, err)
	}
	lease, _, err := c.try(ctx, k, c.callerOf(ctx), 0)
	switch {
	case err != nil:
		return nil, fmt.Errorf("redisreentrant: try %q: %w", name, err)
	case lease == nil:
		return nil, fmt.Errorf("redisreentrant: try %q: %w", name, lock.ErrNotAcquired)
	}
	return lease, nil
}

// Locker returns c as a lock.Locker, for code that accepts any lock implementation.
func (c *Client) Locker() lock.Locker { return lock.Adapt[*Lease](c) }

// acquireErr is the error of an Acquire of k that failed with err.
func acquireErr(ctx context.Context, k lockKeys, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lock.ErrUnavailable):
		return fmt.Errorf("redisreentrant: acquire %q: %w", k.name, err)
	case ctx.Err() != nil:
		return fmt.Errorf("redisreentrant: acquire %q: %w: %w", k.name, lock.ErrTimeout, ctx.Err())
	default:
		return fmt.Errorf("redisreentrant: acquire %q: %w", k.name, err)
	}
}

// answerBound is how long a call to Redis may go unanswered before the wait's end cutting it
// says Redis is slow rather than the lock busy (as in redislock).
const answerBound = 100 * time.Millisecond

// try runs the acquire script once: a lease, or the other owner's PTTL, or an error. A call that
// ctx's deadline cuts is lock.ErrUnavailable when it had at least minBudget to answer, and the
// wait for a busy lock running out otherwise: Acquire's first try passes 0, a waiter's retry
// answerBound (it may go with a sliver of the wait left).
func (c *Client) try(ctx context.Context, k lockKeys, who caller, minBudget time.Duration) (*Lease, time.Duration, error) {
	sent := time.Now()
	deadline, _ := ctx.Deadline()
	res, err := acquireScript.Run(ctx, c.rdb, []string{k.key, k.fence}, who.field, c.ttl.Milliseconds()).Int64Slice()
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && deadline.Sub(sent) < minBudget:
			// The wait for a busy lock ran out (acquireErr says lock.ErrTimeout).
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The caller's wait ran out inside the call: Redis did not answer in time, which is
			// no busy lock.
			err = fmt.Errorf("%w: no answer within the wait: %w", lock.ErrUnavailable, err)
		case ctx.Err() != nil: // the caller left
		case unreachable(err):
			err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
		}
		if who.owner == "" {
			// The script may have run and only its answer been lost: take back what would
			// otherwise block the name for a whole TTL. An owner's nested level cannot be told
			// from its earlier ones; it runs out with the hold.
			c.undo(ctx, k, who)
		}
		return nil, 0, err
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("acquire script returned %v", res)
	}
	won := res[0] > 0
	c.onAttempt(won)
	if !won {
		return nil, time.Duration(res[1]) * time.Millisecond, nil
	}
	return c.enter(ctx, k, who, uint64(res[0]), sent.Add(c.ttl)), 0, nil
}

func (c *Client) undo(ctx context.Context, k lockKeys, who caller) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(c.ttl, time.Second))
	defer cancel()
	if err := undoScript.Run(ctx, c.rdb, []string{k.key}, who.field, k.channel, c.publish).Err(); err != nil {
		c.log.DebugContext(ctx, "redisreentrant: undo of a failed acquire", "lock", k.name, "err", err)
	}
}

// unreachable reports whether err says that Redis could not be reached or that the connection
// broke.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, redis.ErrClosed)
}
