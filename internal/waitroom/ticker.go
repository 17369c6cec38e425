package waitroom

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
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
	// Delete removes the room and everyone in it; a room that does not exist is not an error.
	Delete(ctx context.Context, saleID string) error
}

// Past epochs' rooms: a reset starts a new sale (sale.Product.SaleID), with a new room, and the
// room of the sale before it is deleted by every replica's ticker, twice: as soon as the ticker
// learns of the reset (the change feed's ChangeReset, or its products showing a newer epoch), and
// again RetireAgain later, in case a replica whose board still showed the old sale recreated the
// room meanwhile (a join or its own ticker configures a room it finds gone). MaxRetires bounds the
// deletions of one tick (a replica that starts learns of every product at once); the rest wait
// for the next ticks. MaxEpochsBack bounds the epochs one jump retires: a ticker that missed more
// resets than that (it was down) leaves the older rooms to the operators.
const (
	RetireAgain   = 10 * time.Second
	MaxRetires    = 64
	MaxEpochsBack = 8
)

// MaxRounds bounds the AdmitNext calls of one sale in one tick: a backlog of abandoned tickets
// longer than that is walked over the next ticks, and no sale holds the others up.
const MaxRounds = 16

// Ticker admits the visitors of every waiting-room sale this replica knows of, at each room's
// rate: every replica runs one, on the same rooms, so that admission goes on whichever replicas
// are up, and the rooms (not the tickers) count the rate. It also tells a room when its sale
// sells out: at once on the change feed's ChangeSoldOut (Apply), and at the next tick when the
// products show no stock left (a broadcast missed). It deletes the rooms of past epochs (see
// RetireAgain). It never tells a room of returned units: the process whose return gave them back
// does, once (checkout's Queues, over Returns).
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
	// retire are the sale ids of past epochs whose rooms are to be deleted, and when.
	retire map[string]retirement
	// configured are the sale ids whose room this ticker configured; epochs the newest epoch it
	// saw of each product; waiting the waiting-room products as last seen. Owned by Run.
	configured map[string]bool
	epochs     map[int64]uint64
	waiting    map[int64]sale.Product
}

// retirement is a past sale's room to delete at at; again says it was deleted once already.
type retirement struct {
	at    time.Time
	again bool
}

// NewTicker returns a ticker that every period admits in the rooms of the waiting-room sales
// among the products, and deletes the rooms of the past epochs of all of them. products() says
// which products changed since its last call (every product at the first; the replica's products
// in memory: it must not block, and it is called from one goroutine at a time): all of them, not
// only the waiting rooms, since a reset may have ended a waiting room. A product said again
// unchanged costs nothing but its walk; one never said again stays as it was last said. So a
// tick walks what changed and the waiting rooms, not every product the replica knows.
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
		soldOut: map[string]bool{}, pending: map[string]bool{}, wake: make(chan struct{}, 1),
		retire: map[string]retirement{}, configured: map[string]bool{}, epochs: map[int64]uint64{}, waiting: map[int64]sale.Product{}}, nil
}

// Apply takes in a change of the feed: a sale that sold out is told to its room at once, and a
// reset's sale before it has its room deleted. It does not block.
func (t *Ticker) Apply(c sale.Change) {
	switch c.Kind {
	case sale.ChangeSoldOut:
		t.markSoldOut(sale.Product{ID: c.ProductID, Epoch: c.Epoch}.SaleID())
	case sale.ChangeReset:
		if c.Epoch > 1 {
			t.markRetired(sale.Product{ID: c.ProductID, Epoch: c.Epoch - 1}.SaleID())
		}
	}
}

// markRetired schedules the deletion of sale id's room, now, unless it is scheduled already.
func (t *Ticker) markRetired(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.retire[id]; ok {
		return
	}
	t.retire[id] = retirement{at: t.now()}
	select {
	case t.wake <- struct{}{}:
	default:
	}
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
			t.deleteRetired(ctx)
		case <-tick.C:
			t.Tick(ctx)
		}
	}
}

// Tick makes one round: the sold-out sales told, then each open waiting-room sale's admissions,
// then the past epochs' rooms deleted. Run calls it; it is exported for tests that drive the clock.
func (t *Ticker) Tick(ctx context.Context) {
	now := t.now()
	for _, p := range t.products() {
		t.learnEpoch(p)
		if p.Admission.WaitingRoom() {
			t.waiting[p.ID] = p
		} else {
			delete(t.waiting, p.ID)
		}
	}
	var open []sale.Product
	for _, p := range t.waiting {
		if now.Before(p.SaleStartsAt) || !now.Before(p.SaleEndsAt) {
			continue
		}
		if p.Stock <= 0 {
			t.markSoldOut(p.SaleID())
		}
		open = append(open, p)
	}
	slices.SortFunc(open, func(a, b sale.Product) int { return cmp.Compare(a.ID, b.ID) })
	t.tellSoldOut(ctx)
	for _, p := range open {
		if err := t.admit(ctx, p.SaleID(), SettingsOf(p)); err != nil {
			t.log.Warn("waiting room: admission failed; retrying at the next tick", "sale", p.SaleID(), "err", err)
		}
	}
	t.deleteRetired(ctx)
}

// learnEpoch notes p's epoch and retires the rooms of the epochs before it that this ticker has
// not retired yet: on first sight the one before, after a jump those it jumped over (the last
// MaxEpochsBack of them).
func (t *Ticker) learnEpoch(p sale.Product) {
	seen, ok := t.epochs[p.ID]
	if ok && seen >= p.Epoch {
		return
	}
	t.epochs[p.ID] = p.Epoch
	if p.Epoch <= 1 {
		return
	}
	from := p.Epoch - 1
	if ok {
		from = max(seen, p.Epoch-min(p.Epoch, MaxEpochsBack))
	}
	for e := max(from, 1); e < p.Epoch; e++ {
		t.markRetired(sale.Product{ID: p.ID, Epoch: e}.SaleID())
	}
}

// deleteRetired deletes the rooms of past sales whose time has come, MaxRetires at most; a
// failure is retried at the next tick.
func (t *Ticker) deleteRetired(ctx context.Context) {
	now := t.now()
	t.mu.Lock()
	var due []string
	for id, r := range t.retire {
		if len(due) == MaxRetires {
			break
		}
		if !r.at.After(now) {
			due = append(due, id)
		}
	}
	t.mu.Unlock()
	for _, id := range due {
		if err := t.rooms.Delete(ctx, id); err != nil {
			t.log.Warn("waiting room: deleting a past sale's room failed; retrying", "sale", id, "err", err)
			continue
		}
		delete(t.configured, id)
		t.mu.Lock()
		delete(t.soldOut, id)
		delete(t.pending, id)
		if r := t.retire[id]; r.again {
			delete(t.retire, id)
		} else {
			t.retire[id] = retirement{at: now.Add(RetireAgain), again: true}
		}
		t.mu.Unlock()
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
