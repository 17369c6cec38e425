package store_test

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestTallyEventsCountsEachEventOnce: an event counts once however often, and by however many
// consumers at once, it is tallied; an id with no event counts nothing, and after a product reset
// neither do its old events.
func TestTallyEventsCountsEachEventOnce(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p, q := product(t, st, 100, sale.StrategyMySQL), product(t, st, 100, sale.StrategyMySQL)
	first := append(addEvents(t, st.DB(), p.ID, store.EventPaid, 3, 2), addEvents(t, st.DB(), p.ID, store.EventExpired, 2, 1)...)
	first = append(first, addEvents(t, st.DB(), p.ID, store.EventCancelled, 1, 4)...)
	other := addEvents(t, st.DB(), q.ID, store.EventPaid, 2, 1)

	// Duplicates in one batch, an id that names no event, and two products at once.
	batch := append(append(append([]int64{}, first...), other...), first[0], first[1], 1<<40)
	if n, err := st.TallyEvents(ctx, batch); err != nil || n != int64(len(first)+len(other)) {
		t.Fatalf("TallyEvents = %d, %v; want %d", n, err, len(first)+len(other))
	}
	if n, err := st.TallyEvents(ctx, batch); err != nil || n != 0 {
		t.Fatalf("TallyEvents again = %d, %v; want 0", n, err)
	}

	// Eight consumers tally overlapping batches of the same new events at once.
	more := addEvents(t, st.DB(), p.ID, store.EventPaid, 200, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var counted int64
	for c := range 8 {
		r := rand.New(rand.NewPCG(uint64(c), 14))
		wg.Go(func() {
			ids := append([]int64{}, more...)
			r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			for len(ids) > 0 {
				k := min(len(ids), 1+r.IntN(40))
				n, err := st.TallyEvents(ctx, ids[:k])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counted += n
				mu.Unlock()
				ids = ids[k:]
			}
		})
	}
	wg.Wait()
	if counted != int64(len(more)) {
		t.Fatalf("8 consumers counted %d events, want %d", counted, len(more))
	}

	want := map[int64]store.EventTally{
		p.ID: {ProductID: p.ID, PaidUnits: 3*2 + 200, ExpiredUnits: 2, CancelledUnits: 4, Events: 6 + 200},
		q.ID: {ProductID: q.ID, PaidUnits: 2, Events: 2},
	}
	assertTallies(t, st, want)

	// A reset deletes the product's events and tallies: its old events count nothing afterwards.
	if _, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 10}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if n, err := st.TallyEvents(ctx, append(first, more...)); err != nil || n != 0 {
		t.Fatalf("TallyEvents after reset = %d, %v; want 0", n, err)
	}
	want[p.ID] = store.EventTally{ProductID: p.ID}
	assertTallies(t, st, want)
}

// TestClaimEvents: the event outbox is claimed like the reservations': oldest first, disjoint
// claims, released claims back at once, published events gone from the backlog.
func TestClaimEvents(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	ids := addEvents(t, st.DB(), p.ID, store.EventExpired, 5, 1)

	a, err := st.ClaimEvents(ctx, "a", time.Minute, 3, 0)
	if err != nil || len(a) != 3 || a[0].ID != ids[0] || a[0].Kind != store.EventExpired || a[0].ProductID != p.ID || a[0].At.IsZero() {
		t.Fatalf("first claim = %+v, %v; want the 3 oldest", a, err)
	}
	b, err := st.ClaimEvents(ctx, "b", time.Minute, 10, 0)
	if err != nil || len(b) != 2 || b[0].ID != ids[3] {
		t.Fatalf("second claim = %+v, %v; want the 2 others", b, err)
	}
	if err := st.MarkEventsPublished(ctx, []int64{a[0].ID, a[1].ID, a[2].ID}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseEventClaims(ctx, "b", []int64{b[1].ID}); err != nil {
		t.Fatal(err)
	}
	c, err := st.ClaimEvents(ctx, "c", time.Minute, 10, 0)
	if err != nil || len(c) != 1 || c[0].ID != b[1].ID {
		t.Fatalf("claim after release = %+v, %v; want the released one", c, err)
	}
	if n, err := st.EventBacklog(ctx); err != nil || n != 2 {
		t.Fatalf("backlog = %d, %v; want 2", n, err)
	}
}

// addEvents inserts n order events of kind and quantity for productID into the outbox, as the
// lifecycle does, and returns their ids in ascending order.
func addEvents(t *testing.T, db *sql.DB, productID int64, kind string, n, quantity int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		res, err := db.Exec(`INSERT INTO order_events (order_id, product_id, user_id, kind, quantity, created_at)
			VALUES (?, ?, 'u', ?, ?, NOW(6))`, "o-"+itest.Suffix(16), productID, kind, quantity)
		if err != nil {
			t.Fatal(err)
		}
		if ids[i], err = res.LastInsertId(); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func assertTallies(t *testing.T, st *store.Store, want map[int64]store.EventTally) {
	t.Helper()
	got := map[int64]store.EventTally{}
	for id := range want {
		tally, err := st.EventTallies(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		got[id] = tally
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tallies (-want +got):\n%s", diff)
	}
}
