// Package board is the read side of the sale: what every viewer may see of the products (their
// live stock, their state, the cluster-wide purchase rates), kept in each replica's memory and
// refreshed from the sources of truth a few times a second, so that a public read costs no I/O
// however many people watch.
//
// A Board publishes immutable snapshots: readers load the current one without a lock, and each
// snapshot is closed over (Changed) when a newer one replaces it, which is how the event streams
// learn that something moved. Each item remembers the snapshot sequence at which it last changed
// and why, so that a stream can send what changed since any earlier sequence of the same board.
//
// It must never decide a purchase: a purchase decides with its strategy, from the authoritative
// stock. The board is for eyes only, and a figure it shows may be a refresh late.
package board

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// State is where a product's sale is, as a viewer sees it.
type State string

// The states of a sale.
const (
	Upcoming State = "upcoming"
	OnSale   State = "on_sale"
	SoldOut  State = "sold_out"
	Ended    State = "ended"
)

// StateOf is the state of p's sale at now.
func StateOf(p sale.Product, now time.Time) State {
	switch {
	case now.Before(p.SaleStartsAt):
		return Upcoming
	case !now.Before(p.SaleEndsAt):
		return Ended
	case p.Stock <= 0:
		return SoldOut
	}
	return OnSale
}

// Event says why an item changed last.
type Event string

// The events, in the words of the event stream.
const (
	// EventReset: the product is new to the board, or has a new sale epoch (created, reset).
	EventReset Event = "reset"
	// EventOpen: the sale window opened. Not "open": an EventSource fires its own "open" when it
	// connects, and a listener of one would take the other.
	EventOpen Event = "opened"
	// EventStock: the stock moved, the state did not.
	EventStock Event = "stock"
	// EventSoldOut: the stock reached zero during the sale.
	EventSoldOut Event = "sold_out"
	// EventOnSale: back on sale in the same epoch: units came back (expired or cancelled orders).
	EventOnSale Event = "on_sale"
	// EventEnded: the sale window closed.
	EventEnded Event = "ended"
	// EventStats: only the purchase rates moved.
	EventStats Event = "stats"
)

// Rates counts the purchase attempts and accepted purchases of one product in each of the last
// seconds, over every replica: Requests[i] and Accepted[i] count the second that starts at
// Start + i seconds.
type Rates struct {
	Start    time.Time
	Requests []int64
	Accepted []int64
}

// PerSecond returns the mean attempts and accepted purchases per second over the last window
// seconds of r (all of r when it holds fewer).
func (r Rates) PerSecond(window int) (requests, accepted float64) {
	return meanOfLast(r.Requests, window), meanOfLast(r.Accepted, window)
}

func meanOfLast(xs []int64, n int) float64 {
	if n <= 0 || len(xs) == 0 {
		return 0
	}
	n = min(n, len(xs))
	var sum int64
	for _, x := range xs[len(xs)-n:] {
		sum += x
	}
	return float64(sum) / float64(n)
}

// recent reports whether r counted an attempt or a purchase in its last n seconds.
func (r *Rates) recent(n int) bool {
	tail := func(xs []int64) []int64 { return xs[max(0, len(xs)-n):] }
	return slices.ContainsFunc(tail(r.Requests), nonZero) || slices.ContainsFunc(tail(r.Accepted), nonZero)
}

func (r *Rates) idle() bool {
	return !slices.ContainsFunc(r.Requests, nonZero) && !slices.ContainsFunc(r.Accepted, nonZero)
}

func nonZero(n int64) bool { return n != 0 }

// equalRates reports whether a viewer would see the same rates: the same counts of the same
// seconds, or nothing at all in both (the window slides every second; an idle product's does not
// change what is shown).
func equalRates(a, b *Rates) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.idle() && b.idle():
		return true
	}
	return a.Start.Equal(b.Start) && slices.Equal(a.Requests, b.Requests) && slices.Equal(a.Accepted, b.Accepted)
}

// Item is one product as viewers see it. It never changes once published.
type Item struct {
	// Product is the product with its live stock.
	Product sale.Product
	State   State
	// Rates are nil when they cannot be read (Redis away) or are not kept for the product (see
	// Options.RatesWindow).
	Rates *Rates
	// Seq is the sequence of the snapshot in which the item last changed, Event why.
	Seq   uint64
	Event Event
	// Rendered is what Options.Render made of the item, once.
	Rendered any

	// busyUntil is until when the board reads the stock of the item's sale every refresh
	// (Options.Busy; Board.busyUntil).
	busyUntil time.Time
}

// Snapshot is the board at one moment. It never changes once published.
type Snapshot struct {
	// Board identifies the board that made it (a new one per process): sequences of different
	// boards are not comparable.
	Board string
	// Seq numbers the snapshots of the board, from 1; 0 is the empty board before the first read.
	Seq uint64
	// At is when its figures were last read from the sources.
	At time.Time
	// Rendered is what Options.Render made of the snapshot (the list), once.
	Rendered any

	items   map[int64]*Item
	listed  []*Item // the listed items, by product id
	bySeq   []*Item // every item, by Seq
	changed chan struct{}
}

// Loaded reports whether the board has read its sources at least once.
func (s *Snapshot) Loaded() bool { return s.Seq > 0 }

// Item returns the product's item.
func (s *Snapshot) Item(id int64) (*Item, bool) {
	it, ok := s.items[id]
	return it, ok
}

// Listed returns the items of the listed products, by product id. The slice is shared: do not
// modify it.
func (s *Snapshot) Listed() []*Item { return s.listed }

// Since returns the items that changed after sequence seq, oldest change first.
func (s *Snapshot) Since(seq uint64) []*Item {
	i, _ := slices.BinarySearchFunc(s.bySeq, seq+1, func(it *Item, seq uint64) int { return cmp.Compare(it.Seq, seq) })
	return s.bySeq[i:]
}

// Changed is closed once a newer snapshot has replaced this one.
func (s *Snapshot) Changed() <-chan struct{} { return s.changed }

// Store is where products live.
type Store interface {
	// Products returns every product, by id.
	Products(ctx context.Context) ([]sale.Product, error)
	// ProductStocks returns the stock and epoch of those of the products ids that exist.
	ProductStocks(ctx context.Context, ids []int64) (map[int64]sale.StockAt, error)
}

// Digester is a Store that can sum up every product in one value (sale.CatalogDigest). A board
// over one reads every product only when the digest moved, so that a thousand idle sales cost one
// digest a second rather than a thousand rows, and reads the stock of the sales on now only for
// those whose stock is moving; without it, it reads every product every FullEvery and the stock
// of every sale on now every refresh.
type Digester interface {
	// CatalogDigest returns the digest of every product, with the stock of those of skipStock
	// left out.
	CatalogDigest(ctx context.Context, skipStock []int64) (sale.CatalogDigest, error)
}

// LiveStock reads the stock of products whose stock is decided away from their MySQL row
// (redis-lua's lives in Redis until its persister writes it).
type LiveStock interface {
	// Stocks returns the stock of those of ps it holds a state of in their epoch; the others are
	// left out.
	Stocks(ctx context.Context, ps []sale.Product) (map[int64]int, error)
}

// RateSource reads the cluster-wide purchase rates.
type RateSource interface {
	RatesOf(ctx context.Context, ids []int64) (map[int64]Rates, error)
}

// Renderer makes, once per change, what is served of an item and of a snapshot (the HTTP
// layer's JSON, ETags and events), so that a read costs no encoding.
type Renderer interface {
	RenderItem(it *Item) any
	RenderSnapshot(s *Snapshot) any
}

// Metrics observes the board's refreshes.
type Metrics interface {
	BoardRefreshed(took time.Duration, err error)
}

// Options configures a Board. Store is required.
type Options struct {
	Store Store
	// Live reads the live stock of the products of a strategy; optional.
	Live map[sale.Strategy]LiveStock
	// Rates reads the purchase rates; optional (items then carry none).
	Rates RateSource
	// Render is optional.
	Render Renderer
	// Metrics is optional.
	Metrics Metrics
	// Refresh is how often the stock of the sales on now is read [500 ms]: the staleness bound
	// of what moves during a sale.
	Refresh time.Duration
	// FullEvery is how often every product is read [1 s] (with a Digester Store, how often the
	// digest is compared, and every product read only when it moved), and at once on a reset or
	// resync broadcast (Apply; a sold-out or restocked one has its product's stock read): the
	// staleness bound of everything else (a product created or reset on another replica whose
	// broadcast was missed, the stock of an ended sale, the first purchase of an idle sale). In
	// between, a refresh reads only the stock of the busy sales on now (see Busy), so that an
	// ended, upcoming or idle sale costs no read per refresh, and a busy one a primary-key lookup.
	FullEvery time.Duration
	// Busy is how long a sale on now counts as busy after the rates showed a purchase attempt
	// in it, the board saw its stock move or it opened [5 s]; a busy sale's stock is read every
	// refresh. Without a Digester Store or a rate source every sale on now is busy.
	Busy time.Duration
	// RatesEvery is how often the rates are read [1 s]: they count whole seconds. They are read
	// with every product, so at most once per FullEvery too.
	RatesEvery time.Duration
	// RatesWindow: rates are kept for the listed products and for the others whose sale window
	// is within this of now [1 min]; a long-ended load-test sale costs no read.
	RatesWindow time.Duration
	// Timeout bounds one read of the sources [2 s].
	Timeout time.Duration
	Log     *slog.Logger
	Now     func() time.Time
}

// Board keeps the snapshots. Run refreshes it.
type Board struct {
	o    Options
	id   string
	cur  atomic.Pointer[Snapshot]
	kick chan struct{}

	// applied are the changes taken in since the refresher last looked: the products whose stock
	// moved (sold out, restocked), and whether one needs every product read (a reset, a resync).
	appliedMu  sync.Mutex
	stockMoved map[int64]bool
	wantFull   bool

	mu        sync.Mutex // serialises publishing
	lastRates time.Time  // when the rates were last read (by the refresher only)
	lastFull  time.Time  // when every product was last read or the digest found nothing new (by the refresher only)
	needFull  bool       // the last stock read found a sale reset or gone (by the refresher only)
	failing   bool       // the last refresh failed (by the refresher only)
	// The digest taken before the last read of every product, and the products whose stock
	// it left out (by the refresher only; digested false: none yet, or it failed).
	digest   sale.CatalogDigest
	digestOf []int64
	digested bool
}

// New returns a board holding nothing until its first refresh (Run).
func New(o Options) (*Board, error) {
	if o.Store == nil {
		return nil, errors.New("board: a Store is required")
	}
	if o.Refresh <= 0 {
		o.Refresh = 500 * time.Millisecond
	}
	if o.RatesEvery <= 0 {
		o.RatesEvery = time.Second
	}
	if o.FullEvery <= 0 {
		o.FullEvery = time.Second
	}
	if o.RatesWindow <= 0 {
		o.RatesWindow = time.Minute
	}
	if o.Busy <= 0 {
		o.Busy = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	b := &Board{o: o, id: hex.EncodeToString(raw[:]), kick: make(chan struct{}, 1), stockMoved: map[int64]bool{}}
	empty := &Snapshot{Board: b.id, items: map[int64]*Item{}, changed: make(chan struct{})}
	if o.Render != nil {
		empty.Rendered = o.Render.RenderSnapshot(empty)
	}
	b.cur.Store(empty)
	return b, nil
}

// Snapshot returns the current snapshot.
func (b *Board) Snapshot() *Snapshot { return b.cur.Load() }

// Apply takes in a sale change broadcast by a replica: the board reads its sources at once
// rather than at the next refresh. A sale sold out or restocked has its stock read again, like
// the sales on now (a primary-key lookup each); a reset or a resync has every product read. It
// never blocks.
func (b *Board) Apply(c sale.Change) {
	b.appliedMu.Lock()
	switch c.Kind {
	case sale.ChangeSoldOut, sale.ChangeRestocked:
		b.stockMoved[c.ProductID] = true
	default:
		b.wantFull = true
	}
	b.appliedMu.Unlock()
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// Learn takes in a product this replica has just created or reset, so that its creator reads it
// back at once; the other replicas learn it from the change feed or their next refresh.
func (b *Board) Learn(p sale.Product) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.cur.Load()
	old := cur.items[p.ID]
	if old != nil && old.Product.Epoch > p.Epoch {
		return
	}
	now := b.o.Now()
	it := &Item{Product: p, State: StateOf(p, now), Event: EventReset}
	if old != nil {
		it.Rates = old.Rates
	}
	it.busyUntil = b.busyUntil(old, it, now)
	b.publishLocked(cur, cur.At, []*Item{it})
}

// Run refreshes the board every Options.Refresh, and at once when a change is applied, until
// ctx ends. It returns nil: a source that fails is logged and the board keeps what it had.
func (b *Board) Run(ctx context.Context) error {
	t := time.NewTicker(b.o.Refresh)
	defer t.Stop()
	b.refresh(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-b.kick:
		}
		b.refresh(ctx, false)
	}
}

// takeApplied returns what the changes applied since the last call ask of the next refresh.
func (b *Board) takeApplied() (full bool, moved map[int64]bool) {
	b.appliedMu.Lock()
	defer b.appliedMu.Unlock()
	full, b.wantFull = b.wantFull, false
	if len(b.stockMoved) == 0 {
		return full, nil // not the map itself: Apply goes on writing into it
	}
	moved, b.stockMoved = b.stockMoved, map[int64]bool{}
	return full, moved
}

// Refresh reads every product now and publishes what changed (Run calls it; tests may). When the
// store cannot be read, the products kept are re-examined all the same: a sale opens and ends on
// time. It must not be called concurrently with itself.
func (b *Board) Refresh(ctx context.Context) { b.refresh(ctx, true) }

// refresh reads every product when full is set, when the last stock read asked for one, or when
// Options.FullEvery has passed since the last such read and the catalogue's digest moved (every
// FullEvery with a Store that has none); else only the stock of the busy sales on now and of
// those a change moved. The rates are read every RatesEvery. Then it publishes what changed:
// every product held is looked at again, so that a sale opens and ends on time unread.
func (b *Board) refresh(ctx context.Context, full bool) {
	wantFull, moved := b.takeApplied()
	full = full || wantFull || b.needFull || !b.cur.Load().Loaded()
	start := b.o.Now()
	rctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	cur := b.cur.Load()
	busy := b.busy(cur, start)
	digester, _ := b.o.Store.(Digester)
	var digest sale.CatalogDigest
	var digestErr error
	if digester != nil && (full || start.Sub(b.lastFull) >= b.o.FullEvery) {
		digest, digestErr = digester.CatalogDigest(rctx, busy)
		if !full && (digestErr != nil || !b.digested || digest != b.digest || !slices.Equal(busy, b.digestOf)) {
			full = true
		}
		if !full {
			b.lastFull = start // nothing moved but the busy sales' stock, which is read below
		}
	}
	full = full || digester == nil && start.Sub(b.lastFull) >= b.o.FullEvery
	var ps []sale.Product
	var err error
	if full {
		if ps, err = b.o.Store.Products(rctx); err == nil {
			b.lastFull, b.needFull = start, false
			b.digest, b.digestOf, b.digested = digest, busy, digester != nil && digestErr == nil
			b.live(rctx, ps)
		}
	} else {
		ps, err = b.readStocks(rctx, cur, busy, moved)
	}
	rates, ratesRead := b.rates(rctx, cur, ps, start)
	if b.o.Metrics != nil {
		b.o.Metrics.BoardRefreshed(b.o.Now().Sub(start), err)
	}
	switch {
	case err != nil && ctx.Err() == nil && !b.failing:
		b.o.Log.Warn("board: cannot read the products; viewers see what was read last", "err", err)
	case err == nil && b.failing:
		b.o.Log.Info("board: products read again")
	}
	b.failing = err != nil && ctx.Err() == nil
	if err != nil {
		ps, full = nil, false // the products kept are looked at again all the same
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	cur = b.cur.Load()
	at := cur.At
	if err == nil {
		at = start
	}
	now := b.o.Now()
	var changed []*Item
	look := func(p sale.Product, old *Item) {
		if old != nil && old.Product.Epoch > p.Epoch {
			return // read before a reset this replica learnt of
		}
		it := &Item{Product: p, State: StateOf(p, now)}
		switch r, ok := rates[p.ID]; {
		case ratesRead && ok:
			it.Rates = r
		case !ratesRead && old != nil:
			it.Rates = old.Rates
		}
		if it.Event = eventOf(old, it); it.Event != "" {
			it.busyUntil = b.busyUntil(old, it, now)
			changed = append(changed, it)
		}
	}
	read := make(map[int64]bool, len(ps))
	for _, p := range ps {
		read[p.ID] = true
		look(p, cur.items[p.ID])
	}
	for _, old := range cur.bySeq {
		if full || read[old.Product.ID] { // a product a full read no longer finds stays as it was
			continue
		}
		if !ratesRead && StateOf(old.Product, now) == old.State {
			continue // nothing read, nothing due: the common case, a few nanoseconds
		}
		look(old.Product, old)
	}
	if len(changed) > 0 || !cur.Loaded() {
		b.publishLocked(cur, at, changed)
	}
}

// busy returns, in id order, the sales on now (open, opening within a refresh, or ended within
// FullEvery, for their last stock to be seen on time) that are busy (Item.busyUntil). With no
// Digester Store every sale on now is busy.
func (b *Board) busy(cur *Snapshot, now time.Time) []int64 {
	_, digester := b.o.Store.(Digester)
	var ids []int64
	for _, it := range cur.bySeq {
		p := &it.Product
		if now.Add(b.o.Refresh).Before(p.SaleStartsAt) || !now.Before(p.SaleEndsAt.Add(b.o.FullEvery)) {
			continue
		}
		if !digester || now.Before(it.busyUntil) {
			ids = append(ids, p.ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// busyUntil says until when the sale of it, about to replace old, is busy: Options.Busy after it
// opened, after the board last saw its stock move, and after the rates last showed an attempt or a
// purchase in it, or could not tell (none read). An item that changes not is not looked at
// again, so its sale turns idle Busy after the last sign of life.
func (b *Board) busyUntil(old, it *Item, now time.Time) time.Time {
	until := it.Product.SaleStartsAt.Add(b.o.Busy)
	if old != nil && old.Product.Epoch == it.Product.Epoch && old.busyUntil.After(until) {
		until = old.busyUntil
	}
	moved := old != nil && old.Product.Stock != it.Product.Stock
	if moved || it.Rates == nil || it.Rates.recent(int(b.o.Busy/time.Second)+1) {
		if next := now.Add(b.o.Busy); next.After(until) {
			until = next
		}
	}
	return until
}

// readStocks returns the products of busy (see Board.busy) and of moved (a change said their
// stock moved), by id, with their stock read again: from MySQL, then from their live source. The
// board's other products are left as they are. A sale whose epoch has moved, or that is gone, is
// left out too, and the next refresh reads every product; so does one of moved the board does
// not hold (its creation's broadcast was missed).
func (b *Board) readStocks(ctx context.Context, cur *Snapshot, busy []int64, moved map[int64]bool) ([]sale.Product, error) {
	ids := slices.Clone(busy)
	for id := range moved {
		if cur.items[id] == nil {
			b.needFull = true
		} else if _, found := slices.BinarySearch(busy, id); !found {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	stocks, err := b.o.Store.ProductStocks(ctx, ids)
	if err != nil {
		return nil, err
	}
	ps := make([]sale.Product, 0, len(ids))
	for _, id := range ids {
		p := cur.items[id].Product
		s, ok := stocks[id]
		if !ok || s.Epoch != p.Epoch {
			b.needFull = true
			continue
		}
		p.Stock = s.Stock
		ps = append(ps, p)
	}
	b.live(ctx, ps)
	return ps, nil
}

// live replaces the MySQL stock of the products whose stock lives elsewhere by the live one.
// A product whose live stock cannot be read keeps MySQL's, which is never below it (the live
// store is ahead of the database, not behind).
func (b *Board) live(ctx context.Context, ps []sale.Product) {
	for st, src := range b.o.Live {
		var of []sale.Product
		for _, p := range ps {
			if p.Strategy == st {
				of = append(of, p)
			}
		}
		if len(of) == 0 {
			continue
		}
		stocks, err := src.Stocks(ctx, of)
		if err != nil {
			b.o.Log.Debug("board: live stock unavailable; showing MySQL's", "strategy", st, "err", err)
			continue
		}
		for i := range ps {
			if s, ok := stocks[ps[i].ID]; ok && ps[i].Strategy == st {
				ps[i].Stock = s
			}
		}
	}
}

// rates reads the rates of the products that have them, once per Options.RatesEvery: those held
// and those just read. read is false when they were not read this time (keep the old ones).
func (b *Board) rates(ctx context.Context, cur *Snapshot, ps []sale.Product, now time.Time) (map[int64]*Rates, bool) {
	if b.o.Rates == nil || now.Sub(b.lastRates) < b.o.RatesEvery {
		return nil, false
	}
	b.lastRates = now
	keep := func(p sale.Product) bool {
		return p.Listed || (now.Add(b.o.RatesWindow).After(p.SaleStartsAt) && now.Add(-b.o.RatesWindow).Before(p.SaleEndsAt))
	}
	var ids []int64
	seen := make(map[int64]bool, len(ps))
	for _, p := range ps {
		seen[p.ID] = true
		if keep(p) {
			ids = append(ids, p.ID)
		}
	}
	for id, it := range cur.items {
		if !seen[id] && keep(it.Product) {
			ids = append(ids, id)
		}
	}
	out := make(map[int64]*Rates, len(ids))
	if len(ids) == 0 {
		return out, true
	}
	slices.Sort(ids)
	rs, err := b.o.Rates.RatesOf(ctx, ids)
	if err != nil {
		b.o.Log.Debug("board: rates unavailable", "err", err)
		return out, true // shown as unavailable
	}
	for id, r := range rs {
		out[id] = &r
	}
	return out, true
}

// eventOf says why it differs from old, or "" when a viewer would see no difference.
func eventOf(old, it *Item) Event {
	switch {
	case old == nil || old.Product.Epoch != it.Product.Epoch:
		return EventReset
	case old.State != it.State:
		switch {
		case it.State == Ended:
			return EventEnded
		case old.State == Upcoming:
			return EventOpen
		case it.State == SoldOut:
			return EventSoldOut
		case old.State == SoldOut && it.State == OnSale:
			return EventOnSale
		}
		return EventReset
	case old.Product.Stock != it.Product.Stock:
		return EventStock
	case old.Product != it.Product:
		return EventReset
	case !equalRates(old.Rates, it.Rates):
		return EventStats
	}
	return ""
}

// publishLocked publishes a snapshot made of cur with the changed items, read at at. b.mu is
// held.
func (b *Board) publishLocked(cur *Snapshot, at time.Time, changed []*Item) {
	next := &Snapshot{
		Board:   b.id,
		Seq:     cur.Seq + 1,
		At:      at,
		items:   make(map[int64]*Item, len(cur.items)+len(changed)),
		changed: make(chan struct{}),
	}
	for id, it := range cur.items {
		next.items[id] = it
	}
	for _, it := range changed {
		it.Seq = next.Seq
		if b.o.Render != nil {
			it.Rendered = b.o.Render.RenderItem(it)
		}
		next.items[it.Product.ID] = it
	}
	next.bySeq = make([]*Item, 0, len(next.items))
	for _, it := range next.items {
		next.bySeq = append(next.bySeq, it)
		if it.Product.Listed {
			next.listed = append(next.listed, it)
		}
	}
	slices.SortFunc(next.bySeq, func(a, b *Item) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Product.ID, b.Product.ID))
	})
	slices.SortFunc(next.listed, func(a, b *Item) int { return cmp.Compare(a.Product.ID, b.Product.ID) })
	if b.o.Render != nil {
		next.Rendered = b.o.Render.RenderSnapshot(next)
	}
	b.cur.Store(next)
	close(cur.changed)
}
