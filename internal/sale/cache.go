package sale

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// saleCache is what one replica keeps in memory about the products on sale, so that a purchase
// that cannot succeed (sale closed, over the limit, sold out, strategy not served) is refused
// without a database round trip.
//
// What it may be wrong about, and why that is safe:
//   - Every cached state belongs to one sale epoch, and a deduction applies only while the product
//     is still in that epoch (the store checks it in the same statement that takes the stock). So
//     stale rules can refuse a purchase, never admit one into a sale whose rules are gone.
//   - Product.Stock is an upper bound of the stock left in that epoch: stock only goes down
//     within an epoch, so a bound read a moment ago, or lowered by a deduction that found too few
//     units, stays true. A purchase is refused as sold out only when the bound says so.
//   - A reset (a new epoch) is broadcast to every replica at once; if the broadcast is missed,
//     the periodic refresh (Options.Refresh) replaces the stale state. That is the staleness bound:
//     a reset reopens the sale on every replica within it, and a unit is never refused as sold
//     out for longer than it after it became available again.
//
// Reads are lock-free (sync.Map of immutable states); every write happens under mu.
type saleCache struct {
	store   Store
	feed    ChangeFeed
	log     *slog.Logger
	refresh time.Duration
	now     func() time.Time

	states sync.Map // int64 → *saleState

	mu       sync.Mutex
	gens     map[int64]uint64    // bumped by every invalidation: a load that started before one is not cached
	flights  map[int64]*flight   // loads under way, one per product
	missing  map[int64]time.Time // products that did not exist, until then
	receipts map[int64]uint64    // receipt loads under way: product → epoch
	wake     chan struct{}       // asks the refresher for a refresh now
	bg       sync.WaitGroup      // receipt loads
	stop     chan struct{}       // closed by close: background loads give up
	stopOnce sync.Once
}

// saleState is one product as a replica knows it. It is never modified once published: changes
// make a new one.
type saleState struct {
	p Product // p.Stock is an upper bound of the units left in p.Epoch
	// receipts, when p.Stock is 0, are the accepted purchases of the epoch that carried an
	// Idempotency-Key: a retry of one is answered from memory after the sale sold out. nil until
	// loaded (or when there are too many to keep): such a retry then asks the store.
	receipts map[receiptKey]Receipt
}

type receiptKey struct{ user, key string }

type flight struct {
	done chan struct{}
	st   *saleState
	err  error
}

const (
	// maxCachedReceipts bounds the receipts kept per sold-out product. A sale of more units than
	// this answers the retries of its buyers from the store instead.
	maxCachedReceipts = 200_000
	// maxMissing bounds the remembered unknown product ids, so that a client spraying ids cannot
	// grow the map without end (beyond it, unknown ids simply ask the store).
	maxMissing = 4096
	// loadTimeout bounds a product or receipts read made for the cache.
	loadTimeout = 5 * time.Second
)

func newSaleCache(store Store, feed ChangeFeed, log *slog.Logger, refresh time.Duration, now func() time.Time) *saleCache {
	return &saleCache{
		store: store, feed: feed, log: log, refresh: refresh, now: now,
		gens: map[int64]uint64{}, flights: map[int64]*flight{}, missing: map[int64]time.Time{},
		receipts: map[int64]uint64{}, wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
}

// get returns the product's cached state, loading it (once, however many buyers ask at the same
// moment) when it is not cached.
func (c *saleCache) get(ctx context.Context, id int64) (*saleState, error) {
	if v, ok := c.states.Load(id); ok {
		return v.(*saleState), nil
	}
	c.mu.Lock()
	if v, ok := c.states.Load(id); ok { // loaded while we took the lock
		c.mu.Unlock()
		return v.(*saleState), nil
	}
	if until, ok := c.missing[id]; ok {
		if c.now().Before(until) {
			c.mu.Unlock()
			return nil, ErrNotFound
		}
		delete(c.missing, id)
	}
	f, ok := c.flights[id]
	if !ok {
		f = &flight{done: make(chan struct{})}
		c.flights[id] = f
		go c.load(id, f, c.gens[id])
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.st, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load reads the product for the flight f. Its read is not tied to any one buyer's request, so a
// buyer who gives up does not fail the others waiting for the same product; it is bounded by
// loadTimeout, and its result is handed to the flight's waiters, who own it.
func (c *saleCache) load(id int64, f *flight, gen uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	p, err := c.store.Product(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.flights, id)
	f.err = err
	switch {
	case err == nil:
		f.st = &saleState{p: p}
		if c.gens[id] == gen { // no invalidation since the read began
			c.states.Store(id, f.st)
			c.soldOutLocked(f.st)
		}
	case errors.Is(err, ErrNotFound) && c.gens[id] == gen && len(c.missing) < maxMissing:
		c.missing[id] = c.now().Add(c.refresh)
	}
	close(f.done)
}

// invalidate forgets the product's state if it belongs to an epoch older than epoch (0: any),
// so that the next purchase reads it afresh.
func (c *saleCache) invalidate(id int64, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.missing, id)
	if v, ok := c.states.Load(id); ok && epoch != 0 && v.(*saleState).p.Epoch >= epoch {
		return
	}
	c.gens[id]++
	c.states.Delete(id)
}

// lower records that fewer than bound+1 units are left in the epoch: a deduction asked for
// bound+1 and found too few. It reports whether this made the product sold out here.
func (c *saleCache) lower(id int64, epoch uint64, bound int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.states.Load(id)
	if !ok {
		return false
	}
	old := v.(*saleState)
	if old.p.Epoch != epoch || old.p.Stock <= bound {
		return false
	}
	st := &saleState{p: old.p}
	st.p.Stock = max(bound, 0)
	c.states.Store(id, st)
	return c.soldOutLocked(st)
}

// soldOutLocked starts loading the receipts of a state that says sold out and has none yet. It
// reports whether it started a load. c.mu is held.
func (c *saleCache) soldOutLocked(st *saleState) bool {
	if st.p.Stock > 0 || st.receipts != nil {
		return false
	}
	if e, ok := c.receipts[st.p.ID]; ok && e == st.p.Epoch {
		return false
	}
	select {
	case <-c.stop:
		return false
	default:
	}
	c.receipts[st.p.ID] = st.p.Epoch
	c.bg.Add(1)
	go c.loadReceipts(st.p.ID, st.p.Epoch)
	return true
}

// loadReceipts reads the keyed receipts of a sold-out epoch in one snapshot with the stock. A
// sold-out epoch gets no new receipts, so the set read is complete for as long as it stays
// sold out.
func (c *saleCache) loadReceipts(id int64, epoch uint64) {
	defer c.bg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	snap, err := c.store.KeyedReceipts(ctx, id, maxCachedReceipts)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.receipts, id)
	if err != nil {
		c.log.Warn("sale cache: could not load the receipts of a sold-out product; its retries ask the store",
			"product_id", id, "err", err)
		return
	}
	v, ok := c.states.Load(id)
	if !ok {
		return
	}
	old := v.(*saleState)
	switch {
	case old.p.Epoch != epoch || snap.Epoch != epoch || old.p.Stock > 0:
		return // the sale changed meanwhile
	case snap.Stock > 0:
		// Units came back in this epoch: the snapshot is fresher than the bound.
		st := &saleState{p: old.p}
		st.p.Stock = snap.Stock
		c.states.Store(id, st)
		return
	case snap.Truncated:
		return // too many to keep: retries ask the store
	}
	book := make(map[receiptKey]Receipt, len(snap.Receipts))
	for _, r := range snap.Receipts {
		book[receiptKey{r.UserID, r.Key}] = r.Receipt
	}
	c.states.Store(id, &saleState{p: old.p, receipts: book})
}

// apply takes in a change broadcast by a replica (this one included).
func (c *saleCache) apply(ch Change) {
	switch ch.Kind {
	case ChangeReset:
		c.invalidate(ch.ProductID, ch.Epoch)
	case ChangeSoldOut:
		if v, ok := c.states.Load(ch.ProductID); ok && v.(*saleState).p.Epoch < ch.Epoch {
			c.invalidate(ch.ProductID, ch.Epoch)
			return
		}
		c.lower(ch.ProductID, ch.Epoch, 0)
	case ChangeRestocked:
		c.invalidate(ch.ProductID, 0)
	case ChangeResync:
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// run refreshes every cached state from the store each c.refresh (or at once when a resync is
// asked for) until ctx ends, then waits for the background loads.
func (c *saleCache) run(ctx context.Context) {
	defer c.close()
	t := time.NewTicker(c.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
		if err := c.refreshAll(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("sale cache: refresh failed; cached sale state may stay stale until the next one", "err", err)
		}
	}
}

// close stops the background loads and waits for them.
func (c *saleCache) close() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.bg.Wait()
}

// refreshAll re-reads every cached product in one query and replaces what changed.
func (c *saleCache) refreshAll(ctx context.Context) error {
	type seen struct {
		st  *saleState
		gen uint64
	}
	c.mu.Lock()
	now := c.now()
	for id, until := range c.missing {
		if now.After(until) {
			delete(c.missing, id)
		}
	}
	before := map[int64]seen{}
	c.states.Range(func(k, v any) bool {
		id := k.(int64)
		before[id] = seen{v.(*saleState), c.gens[id]}
		return true
	})
	c.mu.Unlock()
	if len(before) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(before))
	for id := range before {
		ids = append(ids, id)
	}
	rctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	fresh, err := c.store.ProductsByID(rctx, ids)
	if err != nil {
		return err
	}
	found := make(map[int64]Product, len(fresh))
	for _, p := range fresh {
		found[p.ID] = p
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, b := range before {
		v, ok := c.states.Load(id)
		if !ok || c.gens[id] != b.gen {
			continue // invalidated meanwhile: the next purchase reads it afresh
		}
		cur := v.(*saleState)
		p, ok := found[id]
		switch {
		case !ok:
			c.gens[id]++
			c.states.Delete(id)
		case p.Epoch < cur.p.Epoch:
			// A read older than what we hold: keep ours.
		case p.Epoch > cur.p.Epoch:
			st := &saleState{p: p}
			c.states.Store(id, st)
			c.soldOutLocked(st)
		case p != cur.p:
			// Same epoch: the fresh stock is exact as of the read, so a valid bound (it is
			// higher than ours only if units came back, or ours was lowered after the read).
			st := &saleState{p: p}
			if p.Stock == 0 {
				st.receipts = cur.receipts
			}
			c.states.Store(id, st)
			c.soldOutLocked(st)
		}
	}
	return nil
}
