// Package livestats keeps the storefront's live, cluster-wide figures in Redis: the purchase
// attempts and accepted purchases of each product in each of the last seconds, summed over every
// replica, so that any replica can answer for them.
//
// Everything here is short-lived (keys expire within minutes) and best effort: a purchase never
// waits on it, and a Redis outage makes the figures unavailable, never a purchase fail. It must
// never hold anything that the sale's invariants depend on.
package livestats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Metrics counts what the recorder could not record.
type Metrics interface {
	// LiveStatsDropped counts n purchase events lost, because the buffer was full ("buffer_full")
	// or Redis refused the flush ("redis_error").
	LiveStatsDropped(reason string, n int)
}

// Options tunes a Recorder; the zero value of each field means its default.
type Options struct {
	// Namespace separates the counters of databases that share one Redis: product ids are only
	// unique within a database. The app passes the database name.
	Namespace string
	// Buffer is how many purchase events wait for the flusher before new ones are dropped [8192].
	Buffer int
	// FlushEvery is the flush period [250 ms].
	FlushEvery time.Duration
	// TTL is how long a per-second counter lives in Redis [2 min].
	TTL time.Duration
	// History is how many seconds Rates returns [30].
	History int
	// CachedProducts bounds how many products RatesOf keeps the window of [10,000]; past it the
	// others are read in full at each call, as if there were no cache.
	CachedProducts int
	// Metrics is optional.
	Metrics Metrics
	// Now defaults to time.Now.
	Now func() time.Time
}

// Recorder counts purchase attempts and accepted purchases per product in one-second buckets in
// Redis. ObserveProductPurchase only queues the event; Run aggregates the queue in memory and
// writes it with one pipeline per FlushEvery, so a stampede of N purchases a second costs a few
// Redis round trips a second, not N.
type Recorder struct {
	log     *slog.Logger
	rdb     redis.Cmdable
	ns      string
	in      chan event
	every   time.Duration
	ttl     time.Duration
	history int
	metrics Metrics
	now     func() time.Time

	// cacheLock is RatesOf's mutex over cache: a channel of one slot rather than a sync.Mutex,
	// because its holder waits on Redis and a caller queued behind it must be able to give up
	// when its own ctx ends.
	cacheLock chan struct{}
	cache     windows
}

var _ sale.Observer = (*Recorder)(nil)

// NewRecorder returns a Recorder writing to rdb. Call Run to start its flusher.
func NewRecorder(log *slog.Logger, rdb redis.Cmdable, o Options) (*Recorder, error) {
	if log == nil || rdb == nil {
		return nil, errors.New("livestats: a logger and a Redis client are required")
	}
	if o.Buffer <= 0 {
		o.Buffer = 8192
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = 250 * time.Millisecond
	}
	if o.TTL <= 0 {
		o.TTL = 2 * time.Minute
	}
	if o.History <= 0 {
		o.History = 30
	}
	if o.CachedProducts <= 0 {
		o.CachedProducts = 10_000
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Recorder{
		log:     log,
		rdb:     rdb,
		ns:      o.Namespace,
		in:      make(chan event, o.Buffer),
		every:   o.FlushEvery,
		ttl:     o.TTL,
		history: o.History,
		metrics: o.Metrics,
		now:     o.Now,

		cacheLock: make(chan struct{}, 1),
		cache:     windows{max: o.CachedProducts, byID: map[int64]*window{}},
	}, nil
}

// ObservePurchase implements sale.Observer: it queues the event and returns at once, dropping
// it (and counting the drop) when the queue is full. Attempts on no product (an unknown id) are
// not counted; a replayed receipt counts as an attempt, not as a sale.
func (r *Recorder) ObservePurchase(o sale.Observation) {
	if o.Strategy == "" {
		return
	}
	e := event{product: o.ProductID, sec: r.now().Unix(), accepted: o.Code == sale.CodeAccepted && !o.Replayed}
	select {
	case r.in <- e:
	default:
		r.metrics.LiveStatsDropped("buffer_full", 1)
	}
}

// Run flushes the queued events to Redis every FlushEvery until ctx ends, then flushes what is
// left once more and returns. It returns nil: a failed flush is logged and counted, not fatal.
func (r *Recorder) Run(ctx context.Context) error {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	t := tally{}
	failing := false
	flush := func(ctx context.Context) {
		if len(t) == 0 {
			return
		}
		fctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err := r.write(fctx, t)
		switch {
		case err != nil:
			r.metrics.LiveStatsDropped("redis_error", t.events())
			if !failing {
				r.log.Warn("live counters: could not write to Redis; rates read 0 until it is back", "err", err)
			}
		case failing:
			r.log.Info("live counters: Redis is back")
		}
		failing = err != nil
		t = tally{}
	}
	for {
		select {
		case e := <-r.in:
			t.add(e)
		case <-tick.C:
			flush(ctx)
		case <-ctx.Done():
			for drained := false; !drained; {
				select {
				case e := <-r.in:
					t.add(e)
				default:
					drained = true
				}
			}
			flush(context.WithoutCancel(ctx))
			return nil
		}
	}
}

// write sends one tally with one pipeline: an INCRBY and an EXPIRE per counter, then an SADD and
// an EXPIRE per second naming the products counted in it, which is what lets RatesOf read only the
// products that had purchases. The sets come after the counters so that, on one server, a reader
// that finds a product in a set finds its counters already added to; a cluster applies the two on
// different nodes in no set order, which RatesOf's re-read of the newest seconds makes up for.
func (r *Recorder) write(ctx context.Context, t tally) error {
	active := map[int64][]any{}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for b, c := range t {
			for _, kc := range []struct {
				kind string
				n    int64
			}{{kindRequests, c.requests}, {kindAccepted, c.accepted}} {
				if kc.n == 0 {
					continue
				}
				key := r.key(b.product, kc.kind, b.sec)
				p.IncrBy(ctx, key, kc.n)
				p.Expire(ctx, key, r.ttl)
			}
			active[b.sec] = append(active[b.sec], b.product)
		}
		for sec, ids := range active {
			key := r.activeKey(sec)
			p.SAdd(ctx, key, ids...)
			p.Expire(ctx, key, r.ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("livestats flush: %w", err)
	}
	return nil
}

// Rates returns the product's counts for each of the last History complete seconds. The second
// that is still running, and the flush period before it, are left out so that the last second
// counted holds every replica's events.
//
// It reads the product in full (one MGET) and leaves RatesOf's cache alone: it answers one
// product's page now and then, and must not queue behind, or reorder, the board's reads.
func (r *Recorder) Rates(ctx context.Context, productID int64) (Rates, error) {
	first, last := r.span()
	cmd := r.mgetAll(ctx, r.rdb, productID, first, last)
	if err := cmd.Err(); err != nil {
		return Rates{}, fmt.Errorf("livestats rates: %w", err)
	}
	rs := Rates{Start: time.Unix(first, 0).UTC(), Requests: make([]int64, r.history), Accepted: make([]int64, r.history)}
	if err := parseFull(rs.Requests, rs.Accepted, cmd.Val()); err != nil {
		return Rates{}, err
	}
	return rs, nil
}

// span returns the first and the last second that Rates and RatesOf report now: the last is the
// newest complete one, FlushEvery and a 50 ms margin after it ended.
func (r *Recorder) span() (first, last int64) {
	last = r.now().Add(-r.every-50*time.Millisecond).Unix() - 1
	return last - int64(r.history) + 1, last
}

// mgetAll sends on c (queues, when c is a pipeline) the MGET of every counter of product id from
// first to last: requests, then accepted, oldest first. They share a hash tag: one slot on a
// cluster.
func (r *Recorder) mgetAll(ctx context.Context, c redis.Cmdable, id, first, last int64) *redis.SliceCmd {
	keys := make([]string, 0, 2*(last-first+1))
	for _, kind := range []string{kindRequests, kindAccepted} {
		for s := first; s <= last; s++ {
			keys = append(keys, r.key(id, kind, s))
		}
	}
	return c.MGet(ctx, keys...)
}

// parseFull reads the answer of an mgetAll into requests and accepted (as long as each other).
func parseFull(requests, accepted []int64, vals []any) error {
	if len(vals) != len(requests)+len(accepted) {
		return fmt.Errorf("livestats: MGET answered %d values for %d keys", len(vals), len(requests)+len(accepted))
	}
	if err := parseCounts(requests, vals[:len(requests)]); err != nil {
		return err
	}
	return parseCounts(accepted, vals[len(requests):])
}

// parseCounts reads the answer of an MGET of counters into dst (as long as vals).
func parseCounts(dst []int64, vals []any) error {
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			dst[i] = 0 // missing key: nothing happened that second
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("livestats: counter holds %q, not an integer", s)
		}
		dst[i] = n
	}
	return nil
}

const (
	kindRequests = "req"
	kindAccepted = "acc"
)

// key names one per-second counter. The braces are a Redis Cluster hash tag: every counter of a
// product lives in one slot, so that one MGET reads them all.
func (r *Recorder) key(product int64, kind string, sec int64) string {
	return "seckill:live:{" + r.ns + ":" + strconv.FormatInt(product, 10) + "}:" + kind + ":" + strconv.FormatInt(sec, 10)
}

// activeKey names the set of the products counted in one second. The sets of a namespace share
// a hash tag of their own: one node answers all of a call's SMEMBERS.
func (r *Recorder) activeKey(sec int64) string {
	return "seckill:live:{" + r.ns + "}:active:" + strconv.FormatInt(sec, 10)
}

type nopMetrics struct{}

func (nopMetrics) LiveStatsDropped(string, int) {}
