package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Local is a token bucket per key, in this process only: the fallback of a Shared limiter while
// Redis is away, and what a replica uses when no Redis is configured. Idle buckets are swept so
// that memory stays bounded by the keys active in the last sweep interval.
//
// The buckets are golang.org/x/time/rate's arithmetic (refill since the last allowed request,
// capped at the burst; TestLocalMatchesRate holds them to it) kept as values in the map: a flash
// sale brings a new key per request, and a *rate.Limiter each was two allocations and two more
// objects for the GC to scan. Times are wall-clock nanoseconds.
//
// The keys are spread over shards, each with its own lock, so that a sweep holds one shard at a
// time. A key is known by a 64-bit hash under a seed drawn at start, not by its text: the maps
// hold no pointer for the GC to scan and keep no key alive. Two keys would share a bucket only if
// their hashes collided: less than one chance in 10^7 with a million keys tracked at once, and
// never by a caller's design, since the seed is secret.
type Local struct {
	rate  float64 // tokens per second
	burst float64
	seed  maphash.Seed

	lastSweep atomic.Int64
	shards    [shards]localShard
}

const shards = 16

type localShard struct {
	mu   sync.Mutex
	keys map[uint64]bucket
	_    [64 - 16]byte // a cache line each: shards locked from two cores do not share one
}

type bucket struct {
	tokens float64
	last   int64 // when tokens was last taken (and computed)
	seen   int64 // the last request, allowed or not: the sweep's clock
}

const sweepEvery = time.Minute

// NewLocal returns a Local limiter of l; nil when l is unlimited (a nil *Local allows all).
func NewLocal(l Limit) *Local {
	if l.Unlimited() {
		return nil
	}
	x := &Local{rate: l.PerSecond, burst: float64(max(l.Burst, 1)), seed: maphash.MakeSeed()}
	for i := range x.shards {
		x.shards[i].keys = map[uint64]bucket{}
	}
	return x
}

// Allow reports whether key may act at now, and if not, how long it should wait.
func (l *Local) Allow(key string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	t := now.UnixNano()
	if last := l.lastSweep.Load(); t-last > int64(sweepEvery) && l.lastSweep.CompareAndSwap(last, t) {
		l.sweep(t)
	}
	h := maphash.String(l.seed, key)
	sh := &l.shards[h%shards]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b, ok := sh.keys[h]
	if !ok {
		b = bucket{tokens: l.burst, last: t} // a bucket unused for ever is full
	}
	b.seen = t
	last := min(b.last, t) // a clock stepped back refills nothing
	tokens := min(b.tokens+time.Duration(t-last).Seconds()*l.rate, l.burst) - 1
	// Short of a token, rate allows the request anyway when the wait it would need rounds down
	// to 0 ns.
	wait := time.Duration(-tokens / l.rate * float64(time.Second))
	allowed := tokens >= 0 || wait <= 0
	if allowed {
		b.tokens, b.last = tokens, t
		wait = 0
	}
	sh.keys[h] = b
	return allowed, wait
}

// sweep forgets the keys not seen for sweepEvery, one shard at a time.
func (l *Local) sweep(now int64) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, b := range sh.keys {
			if now-b.seen > int64(sweepEvery) {
				delete(sh.keys, k)
			}
		}
		sh.mu.Unlock()
	}
}

// tracked returns how many keys have a bucket.
func (l *Local) tracked() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}
