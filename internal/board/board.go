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
	// Refresh is how often the sources are read [500 ms]: the staleness bound of the board.
	Refresh time.Duration
	// RatesEvery is how often the rates are read [1 s]: they count whole seconds.
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

	mu        sync.Mutex // serialises publishing
	lastRates time.Time  // when the rates were last read (by the refresher only)
	failing   bool       // the last refresh failed (by the refresher only)
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
	if o.RatesWindow <= 0 {
		o.RatesWindow = time.Minute
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
	b := &Board{o: o, id: hex.EncodeToString(raw[:]), kick: make(chan struct{}, 1)}
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
// rather than at the next refresh. It never blocks.
func (b *Board) Apply(sale.Change) {
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
	it := &Item{Product: p, State: StateOf(p, b.o.Now()), Event: EventReset}
	if old != nil {
		it.Rates = old.Rates
	}
	b.publishLocked(cur, cur.At, []*Item{it})
}

// Run refreshes the board every Options.Refresh, and at once when a change is applied, until ctx
// ends. It returns nil: a source that fails is logged and the board keeps what it had.
func (b *Board) Run(ctx context.Context) error {
	t := time.NewTicker(b.o.Refresh)
	defer t.Stop()
	for {
		b.Refresh(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-b.kick:
		}
	}
}

// Refresh reads the sources now and publishes what changed (Run calls it; tests may). When the
// store cannot be read, the products kept are re-examined all the same: a sale opens and ends on
// time. It must not be called concurrently with itself.
func (b *Board) Refresh(ctx context.Context) {
	start := b.o.Now()
	rctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	ps, err := b.o.Store.Products(rctx)
	if err == nil {
		b.live(rctx, ps)
	}
	rates, ratesRead := b.rates(rctx, ps, start)
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

	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.cur.Load()
	at := cur.At
	if err == nil {
		at = start
	} else {
		ps = ps[:0]
		for _, it := range cur.items {
			ps = append(ps, it.Product)
		}
	}
	now := b.o.Now()
	var changed []*Item
	for _, p := range ps {
		old := cur.items[p.ID]
		if old != nil && old.Product.Epoch > p.Epoch {
			continue // read before a reset this replica learnt of
		}
		it := &Item{Product: p, State: StateOf(p, now)}
		switch r, ok := rates[p.ID]; {
		case ratesRead && ok:
			it.Rates = r
		case !ratesRead && old != nil:
			it.Rates = old.Rates
		}
		if it.Event = eventOf(old, it); it.Event != "" {
			changed = append(changed, it)
		}
	}
	if len(changed) > 0 || !cur.Loaded() {
		b.publishLocked(cur, at, changed)
	}
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

// rates reads the rates of the products that have them, once per Options.RatesEvery. read is
// false when they were not read this time (keep the old ones).
func (b *Board) rates(ctx context.Context, ps []sale.Product, now time.Time) (map[int64]*Rates, bool) {
	if b.o.Rates == nil || len(ps) == 0 || now.Sub(b.lastRates) < b.o.RatesEvery {
		return nil, false
	}
	b.lastRates = now
	var ids []int64
	for _, p := range ps {
		if p.Listed || (now.Add(b.o.RatesWindow).After(p.SaleStartsAt) && now.Add(-b.o.RatesWindow).Before(p.SaleEndsAt)) {
			ids = append(ids, p.ID)
		}
	}
	out := make(map[int64]*Rates, len(ids))
	if len(ids) == 0 {
		return out, true
	}
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
