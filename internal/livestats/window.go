package livestats

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// rereadSeconds is how many of the newest seconds that a call of RatesOf has already read it reads
// again, so that a flush that lands up to that long after its second is complete is still
// counted. Two leave room for a flush that takes most of the flusher's 1 s timeout and for a
// replica whose clock runs some hundreds of milliseconds behind (its events carry its own
// clock's second), and make up for a cluster applying a flush's set and its counters on two
// nodes, not at once. Each costs a call one SMEMBERS, and two keys more in the MGET of each
// product active in it.
const rereadSeconds = 2

// windows is RatesOf's cache: the window of each product it was asked about, every one holding
// the same seconds, up to last. A call moves them all forward at once from the sets of the products
// active in the new seconds, so that an idle product costs it no Redis command.
type windows struct {
	max  int // the bound on len(byID)
	last int64
	byID map[int64]*window
}

// window is one product's counts of the History seconds up to windows.last.
type window struct {
	// counts holds the requests of second s at s mod History, and its accepted purchases History
	// further: a ring, so that moving forward a second rewrites two values.
	counts []int64
	// asked is the last second (windows.last) of the newest call that asked for the product: one
	// not asked for in History seconds is dropped.
	asked int64
}

// reset drops every window: the next call reads each product in full.
func (c *windows) reset() {
	clear(c.byID)
	c.last = 0
}

// RatesOf returns the rates of each product of ids: what Rates returns for each.
//
// The board calls it once a second for every product it shows, most of them idle, so it costs
// what changed since its last call rather than what it is asked about. The flusher records, per
// second, the set of the products it counted (activeKey); RatesOf keeps the window of each
// product it was asked about (Options.CachedProducts of them), and a call reads the sets of the
// seconds it has not read yet and then, in one MGET each, the counters of the cached products
// active in them: two round trips, one SMEMBERS per second and one MGET per active product.
// A product it holds no window of is read in full (one MGET of its 2×History counters, which
// share a hash tag): a new one, one not asked for in History seconds, and every one after a
// call failed, the clock went back, or no call came for History seconds. So the first call costs
// what a full read of every product does, the next ones almost nothing when the sales are idle.
//
// Lateness: each call also reads again the rereadSeconds newest seconds that the last one read.
// A second s is complete FlushEvery+50ms after it ends (as for Rates); a flush of s that lands
// less than rereadSeconds after that (2.3 s after s ends, by default) is counted by every call
// that starts after it lands, however the calls are spaced. A later one is counted only by a full
// read (a product's first, or after a reset), as its second is no longer read: reading every
// product in full at each call, as RatesOf did before, would count it for as long as its second
// is shown, for a cost that grew with the products asked about (issue #34). Staleness is as
// Rates': the newest second reported ended between FlushEvery+50ms and a second more before the
// call.
// During a rolling upgrade, the flushes of replicas that do not write the sets yet are missed by
// the incremental reads, not by the full ones.
func (r *Recorder) RatesOf(ctx context.Context, ids []int64) (map[int64]Rates, error) {
	if len(ids) == 0 {
		return map[int64]Rates{}, nil
	}
	select {
	case r.cacheLock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("livestats rates: %w", ctx.Err())
	}
	defer func() { <-r.cacheLock }()
	first, last := r.span() // once locked: a call queued behind another must not go back in time
	out, err := r.ratesOf(ctx, ids, first, last)
	if err != nil {
		// A window that missed a second would be wrong until that second left it: read them all
		// in full next time.
		r.cache.reset()
		return nil, fmt.Errorf("livestats rates: %w", err)
	}
	return out, nil
}

// ratesOf is RatesOf with the cache locked. It may leave the cache half moved forward when it
// fails: RatesOf resets it then.
func (r *Recorder) ratesOf(ctx context.Context, ids []int64, first, last int64) (map[int64]Rates, error) {
	c := &r.cache
	h := int64(r.history)
	if len(c.byID) > 0 && (last < c.last || last-c.last >= h) {
		c.reset() // the clock went back, or no second in common
	}
	// The products asked for, each once: cached ones (asked now) and the others, read in full.
	out := make(map[int64]Rates, len(ids))
	var cold []int64
	for _, id := range ids {
		if _, dup := out[id]; dup {
			continue
		}
		out[id] = Rates{}
		if w, ok := c.byID[id]; ok {
			w.asked = last
		} else {
			cold = append(cold, id)
		}
	}
	for id, w := range c.byID {
		if w.asked <= last-h {
			delete(c.byID, id)
		}
	}

	// First round trip: the sets of the seconds to read, and the products read in full.
	from := max(first, c.last-rereadSeconds+1)
	var sets []*redis.StringSliceCmd
	full := make([]*redis.SliceCmd, len(cold))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(c.byID) > 0 {
			for s := from; s <= last; s++ {
				sets = append(sets, p.SMembers(ctx, r.activeKey(s)))
			}
		}
		for i, id := range cold {
			full[i] = r.mgetAll(ctx, p, id, first, last)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// Move every window forward: the seconds after c.last are new (zero until read).
	if len(c.byID) > 0 {
		for s := max(c.last+1, first); s <= last; s++ {
			i := slot(s, h)
			for _, w := range c.byID {
				w.counts[i], w.counts[h+i] = 0, 0
			}
		}
		if err := r.readActive(ctx, sets, from); err != nil {
			return nil, err
		}
	}
	c.last = last

	// The products read in full: cached while there is room, else only returned.
	var fresh map[int64][]int64
	for i, id := range cold {
		linear := make([]int64, 2*h)
		if err := parseFull(linear[:h], linear[h:], full[i].Val()); err != nil {
			return nil, err
		}
		if len(c.byID) >= c.max {
			if fresh == nil {
				fresh = map[int64][]int64{}
			}
			fresh[id] = linear
			continue
		}
		w := &window{counts: make([]int64, 2*h), asked: last}
		for s := first; s <= last; s++ {
			w.counts[slot(s, h)], w.counts[h+slot(s, h)] = linear[s-first], linear[h+s-first]
		}
		c.byID[id] = w
	}

	// One array behind every answer: 1,000 products cost one allocation, not 2,000. Each slice is
	// capped so that an append by the caller cannot run into the next one.
	buf := make([]int64, 2*h*int64(len(out)))
	start := time.Unix(first, 0).UTC()
	for id := range out {
		req, acc := buf[:h:h], buf[h:2*h:2*h]
		buf = buf[2*h:]
		if linear, ok := fresh[id]; ok {
			copy(req, linear[:h])
			copy(acc, linear[h:])
		} else {
			// The ring from the slot of first on, then from its start.
			w, i := c.byID[id], slot(first, h)
			copy(req[copy(req, w.counts[i:h]):], w.counts[:i])
			copy(acc[copy(acc, w.counts[h+i:]):], w.counts[h:h+i])
		}
		out[id] = Rates{Start: start, Requests: req, Accepted: acc}
	}
	return out, nil
}

// readActive reads, in one round trip, the counters of the cached products that the sets (those
// of the seconds from, from+1…) name, and writes them into their windows.
func (r *Recorder) readActive(ctx context.Context, sets []*redis.StringSliceCmd, from int64) error {
	c := &r.cache
	secs := map[int64][]int64{} // product → its active seconds
	for i, set := range sets {
		for _, m := range set.Val() {
			id, err := strconv.ParseInt(m, 10, 64)
			if err != nil {
				return fmt.Errorf("livestats: active set %s holds %q, not a product id", r.activeKey(from+int64(i)), m)
			}
			if _, ok := c.byID[id]; ok {
				secs[id] = append(secs[id], from+int64(i))
			}
		}
	}
	if len(secs) == 0 {
		return nil
	}
	type read struct {
		id   int64
		secs []int64
		cmd  *redis.SliceCmd
	}
	reads := make([]read, 0, len(secs))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for id, ss := range secs {
			keys := make([]string, 0, 2*len(ss))
			for _, kind := range []string{kindRequests, kindAccepted} {
				for _, s := range ss {
					keys = append(keys, r.key(id, kind, s))
				}
			}
			reads = append(reads, read{id: id, secs: ss, cmd: p.MGet(ctx, keys...)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	h := int64(r.history)
	for _, rd := range reads {
		n := len(rd.secs)
		vals := make([]int64, 2*n)
		if err := parseFull(vals[:n], vals[n:], rd.cmd.Val()); err != nil {
			return err
		}
		w := c.byID[rd.id]
		for j, s := range rd.secs {
			w.counts[slot(s, h)], w.counts[h+slot(s, h)] = vals[j], vals[n+j]
		}
	}
	return nil
}

// slot is the index of second s in a ring of h.
func slot(s, h int64) int64 { return (s%h + h) % h }
