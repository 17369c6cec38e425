package waitroom

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// AdmitRooms is what the admission ticker asks of the rooms (internal/waitroom/redisroom's Room).
type AdmitRooms interface {
	Configure(ctx context.Context, saleID string, s Settings) error
	// AdmitNext admits what the room's rate, sessions and returned units allow now, and reports
	// whether it stopped short (call again at once). Any number of callers may call it at once:
	// the room counts in its own store, so more callers admit no more.
	AdmitNext(ctx context.Context, saleID string) (more bool, err error)
	// SoldOut tells the room its sale has sold out; idempotent.
	SoldOut(ctx context.Context, saleID string) error
}

// MaxRounds bounds the AdmitNext calls of one sale in one tick: a backlog of abandoned tickets
// longer than that is walked over the next ticks, and no sale holds the others up.
const MaxRounds = 16

// Ticker admits the visitors of every waiting-room sale this replica knows of, at each room's
// rate: every replica runs one, on the same rooms, so that admission goes on whichever replicas
// are up, and the rooms (not the tickers) count the rate. It also tells a room when its sale
// sells out: at once on the change feed's ChangeSoldOut (Apply), and at the next tick when the
// products show no stock left (a broadcast missed). It never tells a room of returned units: the
// replica whose return gave them back must, once (docs/api.md, "The queue").
type Ticker struct {
	rooms    AdmitRooms
	products func() []sale.Product
	every    time.Duration
	log      *slog.Logger
	now      func() time.Time

	mu sync.Mutex
	// soldOut are the sale ids sold out, told to their rooms or to be told (pending).
	soldOut map[string]bool
	pending map[string]bool
	wake    chan struct{}
	// configured are the sale ids whose room this ticker configured; owned by Run.
	configured map[string]bool
}

// NewTicker returns a ticker that every period admits in the rooms of the waiting-room sales
// among products() (the replica's products in memory; it must not block).
func NewTicker(log *slog.Logger, rooms AdmitRooms, products func() []sale.Product, every time.Duration, now func() time.Time) (*Ticker, error) {
	switch {
	case rooms == nil || products == nil:
		return nil, errors.New("waitroom: NewTicker needs AdmitRooms and products")
	case every <= 0:
		return nil, errors.New("waitroom: the admission period must be positive")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	return &Ticker{rooms: rooms, products: products, every: every, log: log, now: now,
		soldOut: map[string]bool{}, pending: map[string]bool{}, wake: make(chan struct{}, 1), configured: map[string]bool{}}, nil
}

// Apply takes in a change of the feed: a sale that sold out is told to its room at once. It does
// not block.
func (t *Ticker) Apply(c sale.Change) {
	if c.Kind != sale.ChangeSoldOut {
		return
	}
	t.markSoldOut(sale.Product{ID: c.ProductID, Epoch: c.Epoch}.SaleID())
}

func (t *Ticker) markSoldOut(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.soldOut[id] {
		return
	}
	t.soldOut[id], t.pending[id] = true, true
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// Run admits every period until ctx ends; it returns nil. A room's failure is logged and retried
// at the next tick: admission pauses while the rooms' store is away, and resumes with it.
func (t *Ticker) Run(ctx context.Context) error {
	tick := time.NewTicker(t.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.wake:
			t.tellSoldOut(ctx)
		case <-tick.C:
			t.Tick(ctx)
		}
	}
}

// Tick makes one round: the sold-out sales told, then each open waiting-room sale's admissions.
// Run calls it; it is exported for tests that drive the clock.
func (t *Ticker) Tick(ctx context.Context) {
	now := t.now()
	var open []sale.Product
	for _, p := range t.products() {
		if !p.Admission.WaitingRoom() || now.Before(p.SaleStartsAt) || !now.Before(p.SaleEndsAt) {
			continue
		}
		if p.Stock <= 0 {
			t.markSoldOut(p.SaleID())
		}
		open = append(open, p)
	}
	t.tellSoldOut(ctx)
	for _, p := range open {
		if err := t.admit(ctx, p.SaleID(), SettingsOf(p)); err != nil {
			t.log.Warn("waiting room: admission failed; retrying at the next tick", "sale", p.SaleID(), "err", err)
		}
	}
}

// admit configures sale id's room on first sight, then admits until the room has nothing more
// to give now, MaxRounds calls at most.
func (t *Ticker) admit(ctx context.Context, id string, st Settings) error {
	if !t.configured[id] {
		if err := t.rooms.Configure(ctx, id, st); err != nil {
			return err
		}
		t.configured[id] = true
		t.mu.Lock()
		if t.soldOut[id] {
			t.pending[id] = true // told before the room existed: tell it now
		}
		t.mu.Unlock()
		t.tellSoldOut(ctx)
	}
	for range MaxRounds {
		more, err := t.rooms.AdmitNext(ctx, id)
		if errors.Is(err, ErrNoRoom) {
			delete(t.configured, id) // lost: configured again at the next tick
		}
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// tellSoldOut tells the rooms of the sales marked sold out; a failure is retried later.
func (t *Ticker) tellSoldOut(ctx context.Context) {
	t.mu.Lock()
	ids := make([]string, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	for _, id := range ids {
		err := t.rooms.SoldOut(ctx, id)
		if err != nil && !errors.Is(err, ErrNoRoom) { // no room: nobody queued, nothing to tell
			t.log.Warn("waiting room: telling the room its sale sold out failed; retrying", "sale", id, "err", err)
			continue
		}
		t.mu.Lock()
		delete(t.pending, id)
		t.mu.Unlock()
	}
}
