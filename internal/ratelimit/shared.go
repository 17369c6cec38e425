// Package ratelimit caps how often a key — a buyer, a client address — may act, across every
// replica: a GCRA limit held in Redis (go-redis/redis_rate), with local leases so that most
// requests cost no round trip, and a local limiter while Redis is away: never "no limit".
//
// What it must never do: let a key exceed its limit while Redis answers (leased tokens are taken
// from the shared limit before they are handed out, so a lease can only make a key stricter, when
// it expires unused), or wait on Redis for long on the request path (every call is bounded).
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Limit is how often a key may act: PerSecond on average, Burst at once. PerSecond 0 means no
// limit.
type Limit struct {
	PerSecond float64
	Burst     int
}

// Unlimited reports whether the limit lets everything through.
func (l Limit) Unlimited() bool { return l.PerSecond <= 0 }

func (l Limit) String() string {
	if l.Unlimited() {
		return "unlimited"
	}
	return fmt.Sprintf("%g/s (burst %d)", l.PerSecond, max(l.Burst, 1))
}

// gcra is l as redis_rate takes it: whole events per period. A fractional rate is counted per
// minute.
func (l Limit) gcra() redis_rate.Limit {
	burst := max(l.Burst, 1)
	if l.PerSecond == math.Trunc(l.PerSecond) {
		return redis_rate.Limit{Rate: int(l.PerSecond), Burst: burst, Period: time.Second}
	}
	return redis_rate.Limit{Rate: max(1, int(math.Round(l.PerSecond*60))), Burst: burst, Period: time.Minute}
}

// Options tunes a Shared limiter; zero values take the defaults in brackets.
type Options struct {
	// Name separates this limiter's keys in Redis from others' (per user, per client, …); the
	// app adds the database's name, as products are numbered per database. Required.
	Name string
	// Lease is how many tokens one Redis call takes for a key at most, to spend locally
	// [max(1, Burst/4)]. More means fewer round trips for a busy key; a lease unused after
	// LeaseTTL is lost, which only ever makes the key stricter.
	Lease int
	// LeaseTTL is how long leased tokens may be spent [1s].
	LeaseTTL time.Duration
	// Timeout bounds one Redis call [100ms]: past it, the local limiter decides.
	Timeout time.Duration
	// FallbackFor is how long the local limiter decides alone after a Redis call failed, before
	// Redis is tried again [1s].
	FallbackFor time.Duration
	// FirstLocal lets a key this replica has not seen for a minute act once without asking
	// Redis. For the per-buyer limit of a flash sale, where nearly every buyer tries once, it
	// saves a round trip on nearly every purchase; the price is one attempt per replica and per
	// minute of quiet that the shared limit does not count (over N replicas: the burst plus N).
	FirstLocal bool
	// Log is told when Redis fails and when it is back; optional.
	Log *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// Shared is a rate limiter shared by every replica through Redis. It is safe for concurrent use.
type Shared struct {
	rr    *redis_rate.Limiter
	limit redis_rate.Limit
	opts  Options
	local *Local
	seed  maphash.Seed

	failing   atomic.Bool
	downUntil atomic.Int64 // unix ns: until then the local limiter decides alone
	lastSweep atomic.Int64
	shards    [shards]leaseShard
}

type leaseShard struct {
	mu     sync.Mutex
	leases map[uint64]lease
	// asking holds the keys a Redis call is under way for: the key's other requests wait for
	// its lease instead of asking Redis too (a busy key would otherwise cost as many calls as
	// it has requests in flight when its lease runs out).
	asking map[uint64]chan struct{}
	_      [64 - 24]byte
}

// lease is what a replica knows of a key: tokens it may spend until expires, or a refusal Redis
// gave that holds until deniedUntil (so that a key hammering a closed door costs no round trip).
type lease struct {
	tokens      int
	expires     int64
	deniedUntil int64
	seenUntil   int64 // FirstLocal: the key acted here lately
}

// NewShared returns a Shared limiter of l over rdb; nil when l is unlimited (a nil *Shared
// allows all).
func NewShared(rdb redis.UniversalClient, l Limit, o Options) (*Shared, error) {
	if l.Unlimited() {
		return nil, nil
	}
	switch {
	case rdb == nil:
		return nil, errors.New("ratelimit: a Redis client is required")
	case o.Name == "":
		return nil, errors.New("ratelimit: a name is required")
	}
	if o.Lease <= 0 {
		o.Lease = max(1, l.Burst/4)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 100 * time.Millisecond
	}
	if o.FallbackFor <= 0 {
		o.FallbackFor = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Shared{rr: redis_rate.NewLimiter(&batcher{rdb: rdb, timeout: o.Timeout}), limit: l.gcra(), opts: o, local: NewLocal(l), seed: maphash.MakeSeed()}
	for i := range s.shards {
		s.shards[i].leases = map[uint64]lease{}
		s.shards[i].asking = map[uint64]chan struct{}{}
	}
	return s, nil
}

// Allow reports whether key may act now, and if not, how long it should wait. It costs a Redis
// round trip only when the key has no lease left and no standing refusal, and no call for the key
// is under way already (then it waits for that call's lease: twice the timeout at most).
func (s *Shared) Allow(ctx context.Context, key string) (bool, time.Duration) {
	if s == nil {
		return true, 0
	}
	now := s.opts.Now()
	t := now.UnixNano()
	if last := s.lastSweep.Load(); t-last > int64(sweepEvery) && s.lastSweep.CompareAndSwap(last, t) {
		s.sweep(t)
	}
	h := maphash.String(s.seed, key)
	sh := &s.shards[h%shards]
	var asking chan struct{}
	giveUp := t + int64(2*s.opts.Timeout) // a request waits for others' calls this long at most
	for {
		sh.mu.Lock()
		ls := sh.leases[h]
		switch {
		case ls.deniedUntil > t:
			sh.mu.Unlock()
			return false, time.Duration(ls.deniedUntil - t)
		case ls.tokens > 0 && ls.expires > t:
			ls.tokens--
			sh.leases[h] = ls
			sh.mu.Unlock()
			return true, 0
		case s.opts.FirstLocal && ls.seenUntil <= t:
			sh.leases[h] = lease{seenUntil: t + int64(sweepEvery)}
			sh.mu.Unlock()
			return true, 0
		}
		if t < s.downUntil.Load() {
			sh.mu.Unlock()
			return s.local.Allow(key, now)
		}
		other, busy := sh.asking[h]
		if !busy || t >= giveUp {
			if !busy {
				asking = make(chan struct{})
				sh.asking[h] = asking
			}
			sh.mu.Unlock()
			break
		}
		sh.mu.Unlock()
		select {
		case <-other:
		case <-time.After(s.opts.Timeout):
		}
		now = s.opts.Now()
		t = now.UnixNano()
	}
	if asking != nil {
		defer func() {
			sh.mu.Lock()
			delete(sh.asking, h)
			sh.mu.Unlock()
			close(asking)
		}()
	}
	return s.askRedis(ctx, sh, h, key, now)
}

// askRedis decides key (hashed to h, in shard sh) with one call to the shared limit: it takes a
// lease of up to Lease tokens, one of them spent now, or keeps Redis's refusal for as long as it
// holds, so that the key's next requests are answered here. When the call fails, the local
// limiter decides, alone for FallbackFor: a Redis that is away is not asked on every request.
func (s *Shared) askRedis(ctx context.Context, sh *leaseShard, h uint64, key string, now time.Time) (bool, time.Duration) {
	t := now.UnixNano()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
	res, err := s.rr.AllowAtMost(rctx, s.opts.Name+":"+key, s.limit, s.opts.Lease)
	cancel()
	if err != nil {
		s.downUntil.Store(t + int64(s.opts.FallbackFor))
		if !s.failing.Swap(true) {
			s.opts.Log.Warn("rate limit: Redis failed; each replica limits on its own until it is back",
				"limiter", s.opts.Name, "err", err)
		}
		return s.local.Allow(key, now)
	}
	if s.failing.Swap(false) {
		s.opts.Log.Info("rate limit: Redis is back", "limiter", s.opts.Name)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if res.Allowed == 0 {
		wait := max(res.RetryAfter, time.Millisecond)
		sh.leases[h] = lease{deniedUntil: t + int64(wait), seenUntil: t + int64(sweepEvery)}
		return false, wait
	}
	sh.leases[h] = lease{tokens: res.Allowed - 1, expires: t + int64(s.opts.LeaseTTL), seenUntil: t + int64(sweepEvery)}
	return true, 0
}

// sweep forgets the leases and refusals that ended, one shard at a time.
func (s *Shared) sweep(now int64) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for k, ls := range sh.leases {
			if ls.expires <= now && ls.deniedUntil <= now && ls.seenUntil <= now {
				delete(sh.leases, k)
			}
		}
		sh.mu.Unlock()
	}
}
