package orderqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestLifecycleEventsTalliedOnce: order events written in the transactions of real status
// changes (paid, cancelled, expired) are published once each to the lifecycle topic, keyed by
// order id, and tallied once each although the consumer that tallied them first dies between its
// database commit and its offset commit (the next one gets the batch again), and although the
// relay then publishes every event a second time (a relay that died before marking).
func TestLifecycleEventsTalliedOnce(t *testing.T) {
	st, _ := itest.Store(t)
	kcfg := itest.Topic(t, 1).Lifecycle()
	if err := orderqueue.EnsureTopic(context.Background(), kcfg); err != nil {
		t.Fatal(err)
	}
	p := newProduct(t, st, 50)
	want := closeOrders(t, st, p, 30)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	published := &countPublished{Lifecycle: metrics.New().RegisterLifecycle()}
	w := orderqueue.NewWriter(itest.Logger(), kcfg)
	relay, err := orderqueue.NewEventRelay(itest.Logger(), st, w, published, orderqueue.RelayConfig{Owner: "relay", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		_ = relay.Run(ctx)
		w.Close()
	})
	itest.Eventually(t, time.Minute, func() (bool, string) {
		n, err := st.EventBacklog(ctx)
		return err == nil && n == 0 && published.n.Load() == int64(want.Events), fmt.Sprintf("backlog %d (%v), %d published", n, err, published.n.Load())
	})
	checkMessage(t, st, kcfg)

	first := &recordingTallier{Store: st}
	dying, err := orderqueue.NewEventConsumer(itest.Logger(), kcfg, first, metrics.New().RegisterLifecycle())
	if err != nil {
		t.Fatal(err)
	}
	died := make(chan struct{})
	dying.SetAfterConfirm(func() {
		close(died)
		runtime.Goexit() // in-process "dying": nothing commits the batch's offsets
	})
	wg.Go(func() { _ = dying.Run(ctx) })
	<-died
	tallied := first.ids()
	if got := mustTally(t, st, p.ID); got.Events != int64(len(tallied)) || len(tallied) == 0 {
		t.Fatalf("%d events tallied after the first batch of %d", got.Events, len(tallied))
	}

	second := &recordingTallier{Store: st}
	next, err := orderqueue.NewEventConsumer(itest.Logger(), kcfg, second, metrics.New().RegisterLifecycle())
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = next.Run(ctx) })
	itest.Eventually(t, time.Minute, func() (bool, string) {
		got := second.ids()
		for _, id := range tallied {
			if !slices.Contains(got, id) {
				return false, fmt.Sprintf("event %d, tallied by the consumer that died, was not delivered again", id)
			}
		}
		return mustTally(t, st, p.ID) == want, fmt.Sprintf("tally %+v", mustTally(t, st, p.ID))
	})

	// Every event published again: delivered again, counted none.
	delivered := len(second.ids())
	if _, err := st.DB().Exec("UPDATE order_events SET published_at = NULL WHERE product_id = ?", p.ID); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, time.Minute, func() (bool, string) {
		got := len(second.ids())
		return int64(got-delivered) >= want.Events, fmt.Sprintf("%d events delivered again, want %d", got-delivered, want.Events)
	})
	if got := mustTally(t, st, p.ID); got != want {
		t.Fatalf("tally after redelivery (-want +got):\n%s", cmp.Diff(want, got))
	}
	t.Logf("%d events; %d tallied before the crash, all delivered again and with the republished ones counted once", want.Events, len(tallied))
}

// closeOrders buys n units of p, one per buyer, creates their orders and ends them in turn paid,
// cancelled and expired, each change writing its event, and returns the tally that makes.
func closeOrders(t *testing.T, st *store.Store, p sale.Product, n int) store.EventTally {
	t.Helper()
	ctx := context.Background()
	buy(t, st, p, 0, n)
	var ids, users, due []string
	rows, err := st.DB().Query("SELECT order_id, user_id FROM reservations WHERE product_id = ? ORDER BY id", p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, user string
		if err := rows.Scan(&id, &user); err != nil {
			t.Fatal(err)
		}
		ids, users = append(ids, id), append(users, user)
	}
	rows.Close()
	if _, err := st.ConfirmOrders(ctx, ids); err != nil {
		t.Fatal(err)
	}
	want := store.EventTally{ProductID: p.ID, Events: int64(n)}
	for i, id := range ids {
		switch i % 3 {
		case 0:
			key := "pay-" + id
			if _, _, err := st.ClaimPayment(ctx, id, users[i], key); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CompletePayment(ctx, id, key, "charge-"+id); err != nil {
				t.Fatal(err)
			}
			want.PaidUnits++
		case 1:
			if _, err := st.CancelOrder(ctx, id, users[i]); err != nil {
				t.Fatal(err)
			}
			want.CancelledUnits++
		default:
			due = append(due, id)
		}
	}
	for _, id := range due {
		if _, err := st.DB().Exec("UPDATE orders SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE order_id = ?", id); err != nil {
			t.Fatal(err)
		}
	}
	expired, err := st.ExpireDue(ctx, n)
	if err != nil || sale.OrdersIn(expired) != len(due) {
		t.Fatalf("expired %d, %v; want %d", sale.OrdersIn(expired), err, len(due))
	}
	want.ExpiredUnits = int64(len(due))
	return want
}

// checkMessage reads a message of the lifecycle topic: its order event as JSON, keyed by the
// order id.
func checkMessage(t *testing.T, st *store.Store, kcfg orderqueue.KafkaConfig) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: kcfg.Brokers, Topic: kcfg.Topic, GroupID: kcfg.GroupID + ".peek",
		StartOffset: kafka.FirstOffset})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(m.Value, &fields); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"at", "event_id", "kind", "order_id", "product_id", "quantity", "user_id"}, keys); diff != "" {
		t.Fatalf("message fields (-want +got):\n%s", diff)
	}
	var got, want order.LifecycleEvent
	if err := json.Unmarshal(m.Value, &got); err != nil {
		t.Fatal(err)
	}
	err = st.DB().QueryRow("SELECT id, kind, order_id, product_id, user_id, quantity, created_at FROM order_events WHERE id = ?", got.ID).
		Scan(&want.ID, &want.Kind, &want.OrderID, &want.ProductID, &want.UserID, &want.Quantity, &want.At)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" || string(m.Key) != want.OrderID {
		t.Fatalf("message with key %q (want the order id): event (-outbox +message):\n%s", m.Key, diff)
	}
}

func mustTally(t *testing.T, st *store.Store, productID int64) store.EventTally {
	t.Helper()
	got, err := st.EventTallies(context.Background(), productID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// recordingTallier is the store as an event consumer sees it, remembering the event ids it was
// given.
type recordingTallier struct {
	*store.Store
	mu  sync.Mutex
	got []int64
}

func (r *recordingTallier) TallyEvents(ctx context.Context, ids []int64) (int64, error) {
	r.mu.Lock()
	r.got = append(r.got, ids...)
	r.mu.Unlock()
	return r.Store.TallyEvents(ctx, ids)
}

func (r *recordingTallier) ids() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// countPublished is an event relay's metrics that also count the events it published.
type countPublished struct {
	*metrics.Lifecycle
	n atomic.Int64
}

func (c *countPublished) RelayPublished(n int) { c.n.Add(int64(n)); c.Lifecycle.RelayPublished(n) }
