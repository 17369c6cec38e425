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
