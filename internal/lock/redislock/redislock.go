// Package redislock is a mutual-exclusion lock held in one Redis server (or one Redis Cluster
// shard): it lets processes take turns at a critical section named by a string, and hands every
// grant a fencing token that the storage behind the critical section uses to refuse the writes
// of a holder whose lease ran out. It knows nothing about products or sales.
//
// What it must never do: extend or delete a grant that is not its own (every write to the lock
// key is a compare-on-owner Lua script; the owner value is 128 random bits per grant); hand out
// a token lower than one it handed out before while Redis keeps its memory or its clock (see
// Fencing tokens); or be trusted on its own for safety. A lease is advisory: a holder that stalls
// (GC, swap, a slow network) past its lease may still act after someone else got the lock, and
// only the storage-side token check (for example `UPDATE … WHERE fence_token < ?`) stops it.
// Lost() is a hint that arrives in time in the common case, not a guarantee.
//
// # Keys
//
// A lock named N uses, with the default prefix:
//
//	seckill:lock:{N}           the owner id of the current grant, PX the lease
//	seckill:lock:{N}:fence     the fencing counter, no expiry (one small key per name ever used)
//	seckill:lock:{N}:released  the Pub/Sub channel a release is announced on
//
// The braces are a Redis Cluster hash tag: both keys hash to one slot, so the acquire script may
// touch both. Names must not be empty.
//
// # Acquiring, waiting, renewing
//
// One Lua script does `SET key owner NX PX ttl` and, when that succeeds, INCR of the counter
// (the token); when it fails it returns the key's PTTL (Redisson's RLock does the same). Acquire
// tries once; if the lock is held, it waits to be told of a release on the lock's channel,
// subscribing before its next try so that no release can fall between the two, and tries again
// when a release is announced or when a re-check timer of min(PTTL, Options.Recheck) fires: a
// holder that dies announces nothing, and its key simply expires. Notifications only shorten
// waits; every wait is bounded by the re-check, so a lost message or a dead Pub/Sub connection
// costs latency, never a grant, and ctx is honoured throughout.
//
// The Acquire calls of one Client that wait for the same name take turns (see the room type):
// only one of them waits in Redis, on one subscription that is handed from turn to turn and
// closed Options.KeepSubscribed after nobody waits any more (a name contended by several
// processes has a waiter in each, one after another: without the delay, every wait would dial).
// A release therefore wakes one goroutine per Client, not every waiting one, and a contended name
// costs one Pub/Sub connection per Client, not one per waiting call (go-redis never pools Pub/Sub
// connections: each one dials). A subscription per waiting call is simpler, but every waiter
// woke on every release and most woke only to fail again, and dials came with the wakes
// (BenchmarkAcquireRelease reports the attempts and dials per cycle). Waiting is not fair: a call that
// finds the lock free takes it, even while others wait (as with RLock).
//
// A Lease extends its key (compare-and-PEXPIRE) every TTL/3. When an extension finds the key
// gone or owned by another grant, or none is confirmed before the lease would have run out
// (counted from before the acquire or the last extension was sent, so on the safe side),
// Lost() closes and renewal stops. Release stops it too, and waits for an extension in flight.
//
// # Failing fast
//
// A call that fails to reach Redis (a dial, read or write error, or a connection closed under
// it) marks Redis down: from then on Acquire and TryAcquire refuse at once, the calls in
// progress are cut short, and waiters give up, all with an error matching lock.ErrUnavailable;
// a wait that runs out inside a call to Redis, rather than while waiting for a holder, is
// reported the same way, not as lock.ErrTimeout. One goroutine PINGs Redis every Options.ProbeEvery
// until it answers, and the Client recovers by itself. How soon the first call notices depends on
// the go-redis client: its defaults retry a refused dial 5 times and a failed command 3 times
// (over a second against a stopped server); DialerRetries: 1 makes it milliseconds.
//
// # Fencing tokens
//
// Each grant's token is max(counter+1, the server's TIME in microseconds), and the counter is
// set to it, all in the acquire script. So tokens strictly increase per name while the counter
// survives, and they also survive its loss or rollback: Redis restarted without persistence,
// FLUSHALL, eviction under maxmemory, a failover to a replica that missed the latest grants, a
// restart from an older RDB or AOF. Why: no token is ever larger than the server clock at the
// moment it was granted plus the grants that followed within the same microsecond, and a name is
// not granted a million times a second (each grant follows a release or an expiry). A counter
// that comes back lost or older is therefore overtaken by the clock at the next grant, which has
// moved on. Tokens are large (about 1.8e15 today), exact in a double (below 2^53) and in int64,
// and a storage column holding them must be a BIGINT.
//
// What remains:
//
//   - If the Redis clock goes backwards (a restart or failover onto a host whose clock is
//     behind), tokens can repeat or go backwards. A storage that checks `fence_token < ?` then
//     refuses the new holders' writes instead of accepting stale ones: safe, but unavailable
//     until the clock catches up or an operator resets the stored token.
//   - This is a single-instance lock, not Redlock: with a replica and failover, a grant
//     acknowledged by the old primary can be lost, and two clients can both believe they hold the
//     lock. The storage-side token check keeps their writes apart only as far as the previous
//     point allows.
package redislock

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Defaults of Options.
const (
	DefaultTTL    = 10 * time.Second
	DefaultPrefix = "seckill:lock:"
	// MinTTL is the shortest lease New accepts: renewal runs every TTL/3, and Redis expiry has
	// millisecond resolution.
	MinTTL = 10 * time.Millisecond
)

// DefaultRecheck is how long a waiter of a lease of ttl sleeps, by default, without a release
// notification before it tries again: a tenth of the lease, at least 100 ms (a lost notification
// costs little) and at most a second (a short lease is rechecked well before it runs out).
func DefaultRecheck(ttl time.Duration) time.Duration {
	return min(max(ttl/10, 100*time.Millisecond), time.Second)
}

// Options configures a Client. The zero value is valid.
type Options struct {
	// TTL is the lease: how long a grant outlives its holder when the holder stops renewing it
	// (crashes, stalls, loses Redis). Renewal runs every TTL/3. Truncated to whole milliseconds;
	// default DefaultTTL, at least MinTTL.
	TTL time.Duration
	// Prefix starts every key and channel name; default DefaultPrefix. Without a '{' in it, the
	// lock name is the Cluster hash tag; with one, every lock lands in the prefix's slot.
	Prefix string
	// Recheck bounds how long a waiter sleeps without a release notification before it tries
	// again (the wait is also bounded by the holder's remaining lease). Default DefaultRecheck(TTL).
	Recheck time.Duration
	// KeepSubscribed is how long a lock name's release subscription stays open after its last
	// waiter left, so that the next wait for that name need not dial a new Pub/Sub connection
	// (go-redis dials one per subscription). Default 5 s; negative closes it at once.
	KeepSubscribed time.Duration
	// ProbeEvery is how often a Client that found Redis unreachable PINGs it. From the call that
	// failed to reach Redis until a PING succeeds, Acquire and TryAcquire refuse at once with an
	// error wrapping lock.ErrUnavailable and waiters give up with it (see Failing fast). Default
	// 100 ms.
	ProbeEvery time.Duration
	// Logger receives lost leases and renewal failures; default discards.
	Logger *slog.Logger
}

// Client acquires locks in one Redis. It is safe for concurrent use; beyond the leases and waits
// in progress, it holds the release subscriptions of names waited for in the last
// Options.KeepSubscribed. Close closes those.
type Client struct {
	rdb     redis.UniversalClient
	ttl     time.Duration
	prefix  string
	recheck time.Duration
	keep    time.Duration
	log     *slog.Logger
	// sharded says the release notifications go by sharded Pub/Sub (SPUBLISH, SSUBSCRIBE): on a
	// Redis Cluster, where a classic PUBLISH is copied to every node.
	sharded bool

	probeEvery time.Duration
	done       chan struct{}  // closed by Close
	wg         sync.WaitGroup // the prober and background undos

	mu     sync.Mutex
	rooms  map[string]*room // by lock key: the names some Acquire of this Client waits for
	health health
	closed bool
}

// New returns a Client on rdb. rdb stays the caller's to close, after every Lease is released.
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	if rdb == nil {
		return nil, errors.New("redislock: nil redis client")
	}
	ttl, err := lock.LeaseTTL(opts.TTL, time.Millisecond, DefaultTTL, MinTTL)
	if err != nil {
		return nil, fmt.Errorf("redislock: %w", err)
	}
	recheck := opts.Recheck
	switch {
	case recheck == 0:
		recheck = DefaultRecheck(ttl)
	case recheck < 0:
		return nil, fmt.Errorf("redislock: negative Recheck %s", recheck)
	}
	prefix := cmp.Or(opts.Prefix, DefaultPrefix)
	log := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	keep := opts.KeepSubscribed
	if keep == 0 {
		keep = 5 * time.Second
	}
	probe := opts.ProbeEvery
	switch {
	case probe == 0:
		probe = 100 * time.Millisecond
	case probe < 0:
		return nil, fmt.Errorf("redislock: negative ProbeEvery %s", probe)
	}
	return &Client{
		rdb: rdb, ttl: ttl, prefix: prefix, recheck: recheck, keep: keep, log: log, sharded: isCluster(rdb),
		probeEvery: probe, done: make(chan struct{}),
		rooms: map[string]*room{}, health: health{outage: make(chan struct{})},
	}, nil
}

// Scripts. Their results are never nil (go-redis would turn a nil into redis.Nil).
var (
	// KEYS[1] lock, KEYS[2] fence counter; ARGV[1] owner id, ARGV[2] lease in ms.
	// Returns {token, 0} when granted, {0, pttl} when held (pttl -1: the key has no expiry).
	// The token is max(counter+1, server time in µs) (see Fencing tokens). The seed joins TIME's
	// two strings: Lua's own number-to-string conversion (tostring, ..)
	// keeps 14 significant digits, too few for microseconds since 1970 (1.7600000001235e+15).
	acquireScript = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('PTTL', KEYS[1])}
end
local now = redis.call('TIME')
local seed = now[1] .. string.format('%06d', tonumber(now[2]))
local prev = redis.call('GET', KEYS[2])
local token
if prev and tonumber(prev) >= tonumber(seed) then
  token = redis.call('INCR', KEYS[2])
else
  redis.call('SET', KEYS[2], seed)
  token = tonumber(seed)
end
return {token, 0}
`)

	// KEYS[1] lock; ARGV[1] owner id, ARGV[2] lease in ms. Returns 1 if extended.
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

	// KEYS[1] lock; ARGV[1] owner id, ARGV[2] release channel, ARGV[3] PUBLISH or SPUBLISH
	// (the channel shares the key's hash tag, so a cluster node may publish it from a script).
	// Returns 1 if released.
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call(ARGV[3], ARGV[2], 'released')
return 1
`)
)

// isCluster reports whether rdb is a Redis Cluster client.
func isCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// publish is the command that announces a release.
func (c *Client) publish() string {
	if c.sharded {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// subscribe returns a subscription to channel, sharded on a cluster; it is confirmed once the
// server sends a Subscription of kind subscribed().
func (c *Client) subscribe(ctx context.Context, channel string) (*redis.PubSub, error) {
	if c.sharded {
		ps := c.rdb.SSubscribe(ctx) // no I/O yet
		return ps, ps.SSubscribe(ctx, channel)
	}
	ps := c.rdb.Subscribe(ctx)
	return ps, ps.Subscribe(ctx, channel)
}

// subscribed is the kind of a subscription's confirmation.
func (c *Client) subscribed() string {
	if c.sharded {
		return "ssubscribe"
	}
	return "subscribe"
}

// lockKeys are the name of one lock and the Redis names derived from it.
type lockKeys struct {
	name, key, fence, channel string
}

func (c *Client) keysOf(name string) (lockKeys, error) {
	if name == "" {
		return lockKeys{}, errors.New("redislock: empty lock name")
	}
	key := c.prefix + "{" + name + "}"
	return lockKeys{name: name, key: key, fence: key + ":fence", channel: key + ":released"}, nil
}

// Acquire blocks until it holds the lock called name and returns the grant. When ctx ends first
// it returns an error matching both lock.ErrTimeout and ctx.Err(). While Redis is unreachable
// it fails fast with an error matching lock.ErrUnavailable (see Failing fast). It is not
// re-entrant: a second Acquire of a name this process holds waits like any other.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	k, err := c.keysOf(name)
	if err != nil {
		return nil, err
	}
	if err := c.refuse(); err != nil {
		return nil, c.acquireErr(ctx, k, err)
	}
	if err := ctx.Err(); err != nil { // go-redis would run the script anyway (see try)
		return nil, c.acquireErr(ctx, k, err)
	}
	lease, pttl, err := c.try(ctx, k, 0)
	if lease != nil || err != nil {
		return lease, c.acquireErr(ctx, k, err)
	}
	lease, err = c.wait(ctx, k, pttl)
	return lease, c.acquireErr(ctx, k, err)
}

// acquireErr is the error of an Acquire of k that failed with err: try and wait have already
// marked what was an outage (lock.ErrUnavailable); a ctx end otherwise is a wait for a holder.
func (c *Client) acquireErr(ctx context.Context, k lockKeys, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lock.ErrUnavailable):
		return fmt.Errorf("redislock: acquire %q: %w", k.name, err)
	case ctx.Err() != nil:
		return fmt.Errorf("redislock: acquire %q: %w: %w", k.name, lock.ErrTimeout, ctx.Err())
	default:
		return fmt.Errorf("redislock: acquire %q: %w", k.name, err)
	}
}

// TryAcquire takes the lock called name if it is free and returns an error matching
// lock.ErrNotAcquired if someone holds it.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	k, err := c.keysOf(name)
	if err != nil {
		return nil, err
	}
	if err := c.refuse(); err != nil {
		return nil, fmt.Errorf("redislock: try %q: %w", name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redislock: try %q: %w", name, err)
	}
	lease, _, err := c.try(ctx, k, 0)
	switch {
	case err != nil:
		return nil, fmt.Errorf("redislock: try %q: %w", name, err)
	case lease == nil:
		return nil, fmt.Errorf("redislock: try %q: %w", name, lock.ErrNotAcquired)
	}
	return lease, nil
}

// answerBound is how long a call to Redis may go unanswered before the wait's end cutting it
// says Redis is slow rather than the lock busy. Redis answers the acquire script in well under a
// millisecond; a waiter that retries after a release sends its try whenever one comes, and the
// try in flight at the wait's end has had only what was left of it.
const answerBound = 100 * time.Millisecond

// try runs the acquire script once: a lease, or the holder's PTTL, or an error. Unless the
// client has ContextTimeoutEnabled, go-redis bounds the call by its ReadTimeout, not by ctx. The
// call is cut short (errCallCut) when another call finds Redis unreachable meanwhile: its
// dial retries would only confirm it.
//
// A call that ctx's deadline cuts is lock.ErrUnavailable (Redis did not answer in time) when it
// had at least minBudget to answer; with less, it is left to the caller as the wait running out
// (lock.ErrTimeout): Acquire's first try passes 0, for the whole wait went into that one call, and
// a waiter's retry passes answerBound, for it comes after the lock was seen busy and may go with
// a sliver of the wait left. (A retry counted as an outage answered a buyer 503 instead of 429
// in make bench's redis stampede at batch 1: 1–13 of ~600 purchases a round.)
func (c *Client) try(ctx context.Context, k lockKeys, minBudget time.Duration) (*Lease, time.Duration, error) {
	owner := rand.Text()
	sent := time.Now()
	deadline, _ := ctx.Deadline()
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := c.cutOnOutage(cctx, cancel)
	res, err := acquireScript.Run(cctx, c.rdb, []string{k.key, k.fence}, owner, c.ttl.Milliseconds()).Int64Slice()
	stop()
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && deadline.Sub(sent) < minBudget:
			// The caller's wait ran out inside a call sent with less than minBudget of it left:
			// the wait for a busy lock ended (acquireErr says lock.ErrTimeout).
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			// The caller's wait ran out inside the call: Redis did not answer in time, which is
			// no busy lock. Not proof of an outage either (the call was cut, not refused).
			err = fmt.Errorf("%w: no answer within the wait: %w", lock.ErrUnavailable, err)
		case ctx.Err() != nil: // the caller left
		case errors.Is(context.Cause(cctx), errCallCut):
			err = fmt.Errorf("%w: %w: %w", lock.ErrUnavailable, errCallCut, err)
		case unreachable(err):
			c.observe(err)
			err = fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
		}
		// The script may have run and only its reply been lost; take back what would otherwise
		// block the name for a whole lease. Best effort: the key expires anyway, and while Redis
		// is unreachable the undo waits in the background rather than delaying the answer.
		c.undo(ctx, k, owner)
		return nil, 0, err
	}
	if len(res) != 2 {
		return nil, 0, fmt.Errorf("acquire script returned %v", res)
	}
	if res[0] <= 0 {
		return nil, time.Duration(res[1]) * time.Millisecond, nil
	}
	return c.newLease(ctx, k, owner, uint64(res[0]), sent.Add(c.ttl)), 0, nil
}

func (c *Client) undo(ctx context.Context, k lockKeys, owner string) {
	ctx = context.WithoutCancel(ctx)
	run := func() {
		ctx, cancel := context.WithTimeout(ctx, c.ttl)
		defer cancel()
		if err := releaseScript.Run(ctx, c.rdb, []string{k.key}, owner, k.channel, c.publish()).Err(); err != nil {
			c.log.DebugContext(ctx, "redislock: undo of a failed acquire", "lock", k.name, "err", err)
		}
	}
	if c.refuse() == nil {
		run()
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		run()
	}()
}

// errCallCut says a call to Redis was abandoned because Redis was found unreachable meanwhile.
var errCallCut = errors.New("call abandoned: redis found unreachable meanwhile")

// cutOnOutage cancels ctx with errCallCut if Redis is found unreachable before stop is called.
func (c *Client) cutOnOutage(ctx context.Context, cancel context.CancelCauseFunc) (stop func()) {
	outage := c.outageCh()
	done := make(chan struct{})
	go func() {
		select {
		case <-outage:
			cancel(errCallCut)
		case <-ctx.Done():
		case <-done:
		}
	}()
	return func() { close(done) }
}

// Locker returns c as a lock.Locker, for code that accepts any lock implementation.
func (c *Client) Locker() lock.Locker { return lock.Adapt[*Lease](c) }

var _ lock.Lease = (*Lease)(nil)
