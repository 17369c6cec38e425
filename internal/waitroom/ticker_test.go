package waitroom_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// TestTickersAdmitAtTheRate: three replicas' tickers, each with a Redis client of its own, on one
// sale's room admit no more than its rate (plus the one second's worth a room may give at once)
// over a few seconds, and not far below it: the room counts, not the tickers.
func TestTickersAdmitAtTheRate(t *testing.T) {
	p := queuedProduct(21)
	p.Admission.AdmitRate, p.Admission.MaxActive = 20, 100_000
	q, _, _ := queueFixture(t, p.SaleID())
	ctx := context.Background()
	const joined = 400
	for i := range joined {
		if _, err := q.Join(ctx, p, fmt.Sprint("buyer-", i)); err != nil {
			t.Fatal(err)
		}
	}
	ns := roomNamespace(t, q, p)
	var rooms []*redisroom.Room
	for range 3 {
		r, err := redisroom.New(itest.Redis(t), ns)
		if err != nil {
			t.Fatal(err)
		}
		rooms = append(rooms, r)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := time.Now()
	for _, r := range rooms {
		tk, err := waitroom.NewTicker(nil, r, func() []sale.Product { return []sale.Product{p} }, 20*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = tk.Run(runCtx) })
	}
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	elapsed := time.Since(start)
	admitted, err := itest.Redis(t).ZCard(ctx, rooms[0].Keys(p.SaleID()).Active).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The most: a second's worth at the first call (the room opened before), then the rate; one
	// more for the room's whole milliseconds against this elapsed time.
	most := int64(p.Admission.AdmitRate*(elapsed.Seconds()+1)) + 1
	least := int64(p.Admission.AdmitRate * (elapsed.Seconds() - 1))
	t.Logf("%d admitted in %v by three tickers at %v/s (bounds %d..%d)", admitted, elapsed, p.Admission.AdmitRate, least, most)
	if admitted > most || admitted < least {
		t.Errorf("%d admitted in %v at %v/s: want between %d and %d", admitted, elapsed, p.Admission.AdmitRate, least, most)
	}
}

// roomNamespace finds the namespace of q's rooms: the one whose keys hold p's room.
func roomNamespace(t *testing.T, q *waitroom.Queue, p sale.Product) string {
	t.Helper()
	keys, err := itest.Redis(t).Keys(context.Background(), "*"+p.SaleID()+"}*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the room's keys: %v, %v", keys, err)
	}
	// {ns:saleID}...: the hash tag names both.
	k := keys[0]
	open, colon := indexByte(k, '{'), lastIndex(k, ":"+p.SaleID()+"}")
	if open < 0 || colon < 0 {
		t.Fatalf("unexpected key %q", k)
	}
	return k[open+1 : colon]
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func lastIndex(s, sub string) int {
	for i := len(s) - len(sub); i >= 0; i-- {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestTickerSoldOut: a sale that sells out is told to its room, at once from the change feed,
// at the next tick from the products (a broadcast missed); its visitors learn it at their poll.
func TestTickerSoldOut(t *testing.T) {
	for _, how := range []string{"feed", "tick"} {
		t.Run(how, func(t *testing.T) {
			p := queuedProduct(30)
			if how == "tick" {
				p.ID = 31
			}
			p.Admission.AdmitRate, p.Admission.MaxActive = 1, 1
			q, _, _ := queueFixture(t, p.SaleID())
			ctx := context.Background()
			for _, b := range []string{"first", "second"} {
				if _, err := q.Join(ctx, p, b); err != nil {
					t.Fatal(err)
				}
			}
			rooms, err := redisroom.New(itest.Redis(t), roomNamespace(t, q, p))
			if err != nil {
				t.Fatal(err)
			}
			shown := p
			period := time.Hour // only the feed's wake-up can tell the room
			if how == "tick" {
				shown.Stock, period = 0, 20*time.Millisecond
			}
			tk, err := waitroom.NewTicker(nil, rooms, func() []sale.Product { return []sale.Product{shown} }, period, nil)
			if err != nil {
				t.Fatal(err)
			}
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = tk.Run(runCtx); close(done) }()
			defer func() { stop(); <-done }()
			if how == "feed" {
				tk.Apply(sale.Change{Kind: sale.ChangeSoldOut, ProductID: p.ID, Epoch: p.Epoch})
			}
			itest.Eventually(t, 2*time.Second, func() (bool, string) {
				tk, err := q.Status(ctx, p, "second")
				return err == nil && tk.State == waitroom.SoldOut, fmt.Sprintf("%+v %v", tk, err)
			})
		})
	}
}

// TestTickerDeletesPastEpochs: a reset's sale before it has its room deleted, whether the ticker
// learns of the reset from the feed or from its products; a room that a stale replica recreates
// meanwhile is deleted again RetireAgain later; after a jump over several resets, the epochs
// jumped over go too; a replica that first sees a product deletes the room of the epoch before.
func TestTickerDeletesPastEpochs(t *testing.T) {
	for _, how := range []string{"feed", "tick"} {
		t.Run(how, func(t *testing.T) {
			p1 := queuedProduct(40)
			if how == "tick" {
				p1.ID = 41
			}
			p2, p5 := p1, p1
			p2.Epoch, p5.Epoch = 2, 5
			ids := []string{p1.SaleID(), p2.SaleID(), p5.SaleID()}
			for e := uint64(3); e <= 4; e++ {
				ids = append(ids, sale.Product{ID: p1.ID, Epoch: e}.SaleID())
			}
			q, rooms, _ := queueFixture(t, ids...)
			ctx := context.Background()
			rdb := itest.Redis(t)
			exists := func(id string) int64 {
				t.Helper()
				n, err := rdb.Exists(ctx, rooms.Keys(id).All()...).Result()
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			var (
				mu    sync.Mutex
				shown = p1
				now   = time.Now()
			)
			tk, err := waitroom.NewTicker(nil, rooms, func() []sale.Product { mu.Lock(); defer mu.Unlock(); return []sale.Product{shown} },
				time.Hour, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
			if err != nil {
				t.Fatal(err)
			}
			show := func(p sale.Product, after time.Duration) {
				mu.Lock()
				shown, now = p, now.Add(after)
				mu.Unlock()
			}
			for _, b := range []string{"first", "second"} {
				if _, err := q.Join(ctx, p1, b); err != nil {
					t.Fatal(err)
				}
			}
			tk.Tick(ctx)
			if exists(p1.SaleID()) == 0 {
				t.Fatal("the first sale's room is missing before the reset")
			}

			show(p2, time.Second)
			if how == "feed" {
				tk.Apply(sale.Change{Kind: sale.ChangeReset, ProductID: p1.ID, Epoch: 2})
			}
			tk.Tick(ctx)
			if n := exists(p1.SaleID()); n != 0 {
				t.Fatalf("the first sale's room after the reset: %d keys, want none", n)
			}
			if exists(p2.SaleID()) == 0 {
				t.Error("the new sale's room was not configured")
			}
			// A replica whose board still shows the first sale recreates its room.
			if _, err := q.Join(ctx, p1, "late"); err != nil {
				t.Fatal(err)
			}
			show(p2, waitroom.RetireAgain-time.Second)
			tk.Tick(ctx)
			if exists(p1.SaleID()) == 0 {
				t.Fatal("the recreated room is gone before RetireAgain: the test does not test the second deletion")
			}
			show(p2, time.Second)
			tk.Tick(ctx)
			if n := exists(p1.SaleID()); n != 0 {
				t.Fatalf("the recreated room RetireAgain after the reset: %d keys, want none", n)
			}

			// Three resets at once: the epochs jumped over go too.
			for e := uint64(3); e <= 4; e++ {
				if _, err := q.Join(ctx, sale.Product{ID: p1.ID, Epoch: e, SaleStartsAt: p1.SaleStartsAt, SaleEndsAt: p1.SaleEndsAt,
					Admission: p1.Admission}, "old"); err != nil {
					t.Fatal(err)
				}
			}
			show(p5, time.Second)
			tk.Tick(ctx)
			for _, id := range ids[:len(ids)-1] {
				if id == p5.SaleID() {
					continue
				}
				if n := exists(id); n != 0 {
					t.Errorf("sale %s's room after the jump to epoch 5: %d keys, want none", id, n)
				}
			}
			if exists(p5.SaleID()) == 0 {
				t.Error("the newest sale's room was not configured")
			}
		})
	}
}

// TestTickerFirstSightDeletesTheEpochBefore: a replica that starts after a reset (it saw neither
// the sale before nor the broadcast) deletes the room of the epoch before the product's, and no
// older one: those were deleted when their successors started.
func TestTickerFirstSightDeletesTheEpochBefore(t *testing.T) {
	p := queuedProduct(42)
	p.Epoch = 3
	before, older := p, p
	before.Epoch, older.Epoch = 2, 1
	q, rooms, _ := queueFixture(t, p.SaleID(), before.SaleID(), older.SaleID())
	ctx := context.Background()
	for _, old := range []sale.Product{before, older} {
		if _, err := q.Join(ctx, old, "someone"); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := waitroom.NewTicker(nil, rooms, func() []sale.Product { return []sale.Product{p} }, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	tk.Tick(ctx)
	rdb := itest.Redis(t)
	if n, err := rdb.Exists(ctx, rooms.Keys(before.SaleID()).All()...).Result(); err != nil || n != 0 {
		t.Errorf("the room of the epoch before: %d keys (%v), want none", n, err)
	}
	if n, err := rdb.Exists(ctx, rooms.Keys(older.SaleID()).All()...).Result(); err != nil || n == 0 {
		t.Errorf("the room of an older epoch: %d keys (%v), want it left (bounded to the epoch before)", n, err)
	}
}

// TestTickerKeepsTheWaitingRoomsItWasToldOf: the ticker is told of a product when it changes, not
// at every tick (the board's changes, not its every product): a waiting room it was told of once
// is admitted in at every tick after, and stops being admitted in once the product is told again
// without its waiting room (a reset to direct admission).
func TestTickerKeepsTheWaitingRoomsItWasToldOf(t *testing.T) {
	p := queuedProduct(44)
	p.Admission.AdmitRate, p.Admission.MaxActive = 20, 100_000
	q, rooms, _ := queueFixture(t, p.SaleID())
	ctx := context.Background()
	for i := range 200 {
		if _, err := q.Join(ctx, p, fmt.Sprint("buyer-", i)); err != nil {
			t.Fatal(err)
		}
	}
	var told []sale.Product
	tell := func(ps ...sale.Product) { told = ps }
	tk, err := waitroom.NewTicker(nil, rooms, func() []sale.Product { ps := told; told = nil; return ps }, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	admitted := func() int64 {
		n, err := itest.Redis(t).ZCard(ctx, rooms.Keys(p.SaleID()).Active).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tell(p)
	tk.Tick(ctx)
	first := admitted()
	time.Sleep(300 * time.Millisecond)
	tk.Tick(ctx) // told nothing new
	second := admitted()
	if first == 0 || second <= first {
		t.Fatalf("admitted %d at the first tick, %d after the second (told nothing new): want some, then more", first, second)
	}
	direct := p
	direct.Admission = sale.AdmissionRule{}
	tell(direct)
	tk.Tick(ctx)
	time.Sleep(300 * time.Millisecond)
	tk.Tick(ctx)
	if third := admitted(); third != second {
		t.Errorf("admitted %d after the product was told without its waiting room, %d before: want no more", third, second)
	}
}
