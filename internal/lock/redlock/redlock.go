// Package redlock is the Redlock algorithm (antirez, "Distributed Locks with Redis",
// https://redis.io/docs/latest/develop/use/patterns/distributed-locks/) over N
// independent Redis servers, behind lock.Locker, so that the lock zoo can show what it promises
// and what breaks it. It knows nothing about products or sales, and is never to protect anything
// without the storage-side fence: Redlock's safety rests on timing assumptions it cannot check.
//
// # How it works
//
// One try at a lock named N, with a fresh 128-bit random value v:
//
//  1. Note the time; send `SET <prefix>{N} v NX PX ttl` to every server at once, each call bounded
//     by Options.ServerTimeout, so that a dead or hung server costs that much and no more.
//  2. validity = ttl − elapsed − drift, drift = ttl×DriftFactor + 2 ms (antirez's redlock-rb adds
//     the 2 ms for Redis's own expiry resolution; go-redsync leaves it out).
//  3. The try wins iff at least N/2+1 servers set the key and validity > 0. Otherwise it deletes v
//     from every server (compare-and-delete), also from those that gave no answer: a SET whose
//     reply was lost may have set the key. A try that every server refused outright owns nothing
//     anywhere and skips that.
//
// Acquire repeats tries, sleeping a random, growing delay between them (as in
// internal/lock/redisnaive), until one wins or ctx ends. Redlock has no way to wake a waiter:
// that is polling, and under contention most tries are wasted (BenchmarkRedlockVsRedis).
//
// A grant is valid until the time step 2 computed (Lease.Until); Lease.Lost closes then, from a
// timer: nothing else tells a Redlock holder anything. There is no renewal. go-redsync has
// Extend (a compare-and-PEXPIRE on a majority); this package leaves it out because the write-ups
// use Redlock as a lease that simply runs out, and because the zoo's faults are about what
// happens within one validity period, where renewal changes nothing. Release deletes v from every
// server (compare-and-delete), and succeeds iff it deleted it on a majority.
//
// # What breaks it
//
//   - A server that restarts without persistence (or with an fsync policy that lost the write)
//     forgets the key. Two restarted servers of the holder's three, with the two it never had,
//     make a majority for a second client while the first one's validity runs: two holders
//     (TestRestartedMajority). antirez's answer is to delay a restarted server's return by the
//     longest TTL, or to fsync always; neither is automatic.
//   - A holder that pauses (GC, swap, a stopped VM) longer than its validity comes back after the
//     keys expired and someone else won them, and writes anyway (TestPausePastValidity). Lost()
//     closes on time, but a paused process does not look at it.
//   - Clocks. Validity is measured on the client's monotonic clock, but the servers expire keys
//     by theirs: a server whose clock jumps forward (an operator, NTP stepping it) drops the key
//     early, which is the restart case again.
//
// Martin Kleppmann's critique ("How to do distributed locking", 2016,
// https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html) is that such a
// lock needs a fencing token to be safe against pauses, and that Redlock cannot make one: its
// random value is no ordered number, and no majority of independent counters yields one.
// antirez's reply ("Is Redlock safe?", 2016, http://antirez.com/news/101) argues that the random
// value can serve for compare-and-set in the storage, and that the timing assumptions are
// reasonable in practice; the zoo shows what happens when they are not.
//
// # Fencing tokens
//
// So the lock lends one: Options.Tokens (tokens.Redis, a counter in the project's main Redis,
// fsynced) hands out the grant's token after the lock was won. It is required: a lock.Lease must
// have a token, and a made-up one (a clock, a random number) would pretend to a fence that is
// not there. The zoo's redlock strategy runs unfenced, as the write-ups do; the fenced run shows
// that the project's fence refuses the older of two holders.
//
// # Keys
//
// A lock named N is the key `<prefix>{N}` (default prefix "seckill:redlock:") on every server,
// holding the grant's random value, PX the TTL. The servers are the caller's: independent
// masters, no replicas (a replica promoted after a failover is the restart case again).
package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Defaults of Options.
const (
	DefaultTTL           = 10 * time.Second
	DefaultPrefix        = "seckill:redlock:"
	DefaultServerTimeout = 50 * time.Millisecond
	DefaultMinBackoff    = lock.DefaultMinBackoff
	DefaultMaxBackoff    = lock.DefaultMaxBackoff
	DefaultDriftFactor   = 0.01
	// MinTTL is the shortest TTL New accepts: Redis expires keys in milliseconds, and the drift
	// allowance alone is 2 ms.
	MinTTL = 10 * time.Millisecond
)

// Tokens hands out the grants' fencing tokens (*tokens.Redis is one).
type Tokens = lock.Tokens

// Options configures a Client. Tokens is required; the rest may be left zero.
type Options struct {
	// TTL is the keys' expiry and the bound of a grant's validity. Never renewed. Whole
	// milliseconds; default DefaultTTL, at least MinTTL.
	TTL time.Duration
	// Prefix starts every key; default DefaultPrefix.
	Prefix string
	// ServerTimeout bounds each call to one server, so that a dead or hung one costs a try that
	// much. Default DefaultServerTimeout. It bounds the dial always, but a read only when the
	// clients have ContextTimeoutEnabled (go-redis otherwise waits its ReadTimeout).
	ServerTimeout time.Duration
	// MinBackoff and MaxBackoff bound the sleep between two tries of a waiting Acquire: it starts
	// at MinBackoff and doubles after each lost try up to MaxBackoff, each sleep drawn from its
	// upper half. Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// DriftFactor is the share of the TTL allowed for the servers' clocks running faster than the
	// client's; default DefaultDriftFactor. The drift is TTL×DriftFactor + 2 ms.
	DriftFactor float64
	// OnAttempt, if set, is called after every try that a majority of the servers answered:
	// won, or lost (held elsewhere, split, or won too late to be valid). For metrics.
	OnAttempt func(won bool)
	// Tokens gives every grant its fencing token, once the lock is won. Required: Redlock has
	// none of its own (see the package doc).
	Tokens Tokens
}

// Client acquires locks on a set of independent Redis servers. It is safe for concurrent use;
// it runs goroutines only inside its calls, and a Lease's expiry timer.
type Client struct {
	servers       []redis.UniversalClient
	quorum        int
	ttl, drift    time.Duration
	prefix        string
	serverTimeout time.Duration
	backoff       lock.Backoff
	onAttempt     func(bool)
	tokens        Tokens
}

// New returns a Redlock client over servers, one client per independent Redis server (an odd
// number, usually 5). They stay the caller's to close, after every Lease is released. Give them
// MaxRetries: -1 and DialerRetries: 1, since Redlock tries each server once and moves on (go-redis
// would otherwise redial a dead server for the whole ServerTimeout), and ContextTimeoutEnabled:
// true, so that Options.ServerTimeout bounds a hung server's reply too.
func New(servers []redis.UniversalClient, opts Options) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("redlock: no Redis servers")
	}
	for i, s := range servers {
		if s == nil {
			return nil, fmt.Errorf("redlock: Redis server %d is nil", i)
		}
	}
	if opts.Tokens == nil {
		return nil, errors.New("redlock: Options.Tokens is required (Redlock has no fencing token of its own)")
	}
	c := &Client{
		servers: servers, quorum: len(servers)/2 + 1,
		prefix: opts.Prefix, serverTimeout: opts.ServerTimeout,
		onAttempt: opts.OnAttempt, tokens: opts.Tokens,
	}
	var err error
	if c.ttl, err = lock.LeaseTTL(opts.TTL, time.Millisecond, DefaultTTL, MinTTL); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	factor := opts.DriftFactor
	if factor == 0 {
		factor = DefaultDriftFactor
	}
	if factor < 0 || factor >= 1 {
		return nil, fmt.Errorf("redlock: drift factor %v outside [0, 1)", factor)
	}
	c.drift = time.Duration(float64(c.ttl)*factor) + 2*time.Millisecond
	if c.drift >= c.ttl {
		return nil, fmt.Errorf("redlock: TTL %s leaves no validity after the drift %s", c.ttl, c.drift)
	}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	switch {
	case c.serverTimeout == 0:
		c.serverTimeout = DefaultServerTimeout
	case c.serverTimeout < 0:
		return nil, fmt.Errorf("redlock: negative server timeout %s", c.serverTimeout)
	}
	if c.backoff, err = (lock.Backoff{Min: opts.MinBackoff, Max: opts.MaxBackoff}).Checked(); err != nil {
		return nil, fmt.Errorf("redlock: %w", err)
	}
	if c.onAttempt == nil {
		c.onAttempt = lock.NoAttempts
	}
	return c, nil
}

// Locker returns c as a lock.Locker.
func (c *Client) Locker() lock.Locker { return lock.Adapt[*Lease](c) }

// Key returns the Redis key of the lock called name, the same on every server.
func (c *Client) Key(name string) string { return c.prefix + "{" + name + "}" }

// Quorum is how many servers a grant needs: a majority, N/2+1.
func (c *Client) Quorum() int { return c.quorum }

// Acquire tries until a try wins or ctx ends, sleeping a random, growing delay between tries.
// When ctx ends it returns an error matching lock.ErrUnavailable if the last finished try could
// not reach a majority of the servers (the wait was for the servers, not for a holder), and
// lock.ErrTimeout otherwise, each wrapped together with ctx's error. A won try that cannot get
// its fencing token gives the lock back and ends the wait at once, with lock.ErrUnavailable.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	if name == "" {
		return nil, errors.New("redlock: empty lock name")
	}
	backoff := c.backoff.Start()
	unreachable := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, c.waitEnded(name, unreachable, err)
		}
		l, err := c.try(ctx, name)
		switch {
		case err == nil:
			return l, nil
		case ctx.Err() != nil:
			// The wait ran out during the try: its answers say nothing about the servers.
			return nil, c.waitEnded(name, unreachable, ctx.Err())
		case errors.Is(err, errNoMajority):
			unreachable = true
		case errors.Is(err, errLost):
			unreachable = false
		default:
			return nil, fmt.Errorf("redlock: acquire %q: %w", name, err)
		}
		if err := backoff.Sleep(ctx); err != nil {
			return nil, c.waitEnded(name, unreachable, err)
		}
	}
}

func (c *Client) waitEnded(name string, unreachable bool, ctxErr error) error {
	if unreachable {
		return fmt.Errorf("redlock: acquire %q: %w (no majority of %d servers answered): %w", name, lock.ErrUnavailable, len(c.servers), ctxErr)
	}
	return fmt.Errorf("redlock: acquire %q: %w: %w", name, lock.ErrTimeout, ctxErr)
}

// TryAcquire tries once. It returns lock.ErrNotAcquired if a majority of the servers answered
// and the try lost, and an error matching lock.ErrUnavailable if no majority answered or no
// fencing token could be had.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if name == "" {
		return nil, errors.New("redlock: empty lock name")
	}
	l, err := c.try(ctx, name)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("redlock: try %q: %w (%v)", name, ctx.Err(), err)
	case errors.Is(err, errLost):
		return nil, fmt.Errorf("redlock: try %q: %w: %w", name, lock.ErrNotAcquired, err)
	case errors.Is(err, errNoMajority):
		return nil, fmt.Errorf("redlock: try %q: %w: %w", name, lock.ErrUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("redlock: try %q: %w", name, err)
	}
	return l, nil
}

// The outcomes of a try that did not win.
var (
	// errLost: a majority answered, and the try did not win a valid majority.
	errLost = errors.New("lost")
	// errNoMajority: fewer than a majority of the servers answered.
	errNoMajority = errors.New("no majority of the servers answered")
)

// answer is one server's reply to one call.
type answer int

const (
	failed    answer = iota // no reply: unreachable, timed out, or an error reply
	refused                 // SET NX: the key exists; release: the key holds another value or none
	succeeded               // SET NX set the key; release deleted it
)

// try is one round of the algorithm (see the package doc).
func (c *Client) try(ctx context.Context, name string) (*Lease, error) {
	key := c.Key(name)
	value := randomValue()
	start := time.Now()
	answers := c.onAll(ctx, func(ctx context.Context, s redis.UniversalClient) answer {
		ok, err := s.SetNX(ctx, key, value, c.ttl).Result()
		switch {
		case err != nil:
			return failed
		case ok:
			return succeeded
		}
		return refused
	})
	until := start.Add(c.ttl - c.drift)
	won, answered := count(answers)
	if answered < c.quorum {
		c.undo(ctx, key, value, answers)
		return nil, fmt.Errorf("%w (%d of %d)", errNoMajority, answered, len(c.servers))
	}
	if won < c.quorum || !time.Now().Before(until) {
		c.onAttempt(false)
		c.undo(ctx, key, value, answers)
		return nil, fmt.Errorf("%w: set on %d of %d servers, %d needed", errLost, won, len(c.servers), c.quorum)
	}
	c.onAttempt(true)
	token, err := c.tokens.Next(ctx, name)
	if err != nil {
		c.undo(ctx, key, value, answers)
		// The token store is part of the lock service: without it, no grant.
		return nil, fmt.Errorf("%w: fencing token: %w", lock.ErrUnavailable, err)
	}
	if !time.Now().Before(until) {
		// The token took the rest of the validity: the grant is over before it began.
		c.undo(ctx, key, value, answers)
		return nil, fmt.Errorf("%w: the validity ran out while taking the fencing token", errLost)
	}
	return c.newLease(name, key, value, token, until), nil
}

// undo deletes value from every server after a try that did not win. A try that every server
// refused owns nothing anywhere. It runs without ctx's cancellation: an Acquire that timed out
// must not leave its keys behind until they expire.
func (c *Client) undo(ctx context.Context, key, value string, answers []answer) {
	for _, a := range answers {
		if a != refused {
			c.release(context.WithoutCancel(ctx), key, value)
			return
		}
	}
}

// release deletes value from every server that holds it and returns the answers.
func (c *Client) release(ctx context.Context, key, value string) []answer {
	return c.onAll(ctx, func(ctx context.Context, s redis.UniversalClient) answer {
		n, err := releaseScript.Run(ctx, s, []string{key}, value).Int()
		switch {
		case err != nil:
			return failed
		case n == 1:
			return succeeded
		}
		return refused
	})
}

// onAll runs call on every server at once, each bounded by the server timeout, and returns
// their answers in the servers' order when all have returned.
func (c *Client) onAll(ctx context.Context, call func(context.Context, redis.UniversalClient) answer) []answer {
	answers := make([]answer, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, c.serverTimeout)
			defer cancel()
			answers[i] = call(ctx, s)
		})
	}
	wg.Wait()
	return answers
}

// count returns how many servers succeeded and how many answered at all.
func count(answers []answer) (ok, answered int) {
	for _, a := range answers {
		switch a {
		case succeeded:
			ok++
			answered++
		case refused:
			answered++
		}
	}
	return ok, answered
}

// randomValue is a grant's value: 128 random bits, so that no other try's value ever equals it.
func randomValue() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// releaseScript deletes KEYS[1] if it holds ARGV[1] and returns 1, else 0.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
`)
