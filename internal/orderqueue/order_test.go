package orderqueue_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestEveryReservationBecomesOneOrder runs three relays and three consumers against one
// database and one topic, as three replicas would, while purchases keep coming, then publishes
// everything a second time: each reservation must end as exactly one order.
func TestEveryReservationBecomesOneOrder(t *testing.T) {
	st, _ := itest.Store(t)
	kcfg := itest.Topic(t, 6)
	p := newProduct(t, st, 400)

	stop, _ := startPipeline(t, st, kcfg, 3)
	defer stop()
	buy(t, st, p, 0, 300)
	f := waitDrained(t, st, p.ID)
	if f.Orders != 300 {
		t.Fatalf("orders = %d, want 300", f.Orders)
	}

	// A broker that lost messages, or a relay that died before marking: publish everything again.
	if _, err := st.DB().Exec("UPDATE reservations SET published_at = NULL WHERE product_id = ?", p.ID); err != nil {
		t.Fatal(err)
	}
	buy(t, st, p, 300, 100)
	itest.Eventually(t, time.Minute, func() (bool, string) {
		f, err := audit.Load(context.Background(), st.DB(), p.ID)
		return err == nil && f.Unpublished == 0 && f.Drained(), fmt.Sprintf("%+v %v", f, err)
	})
	assertSound(t, st, p.ID, 400)
}

// TestBrokerAwayForAWhile stops the broker while purchases go on, then starts it again from its
// data directory: the relay retries, nothing is lost, nothing is doubled.
func TestBrokerAwayForAWhile(t *testing.T) {
	st, _ := itest.Store(t)
	port := itest.FreePort(t)
	dir := t.TempDir()
	kcfg := orderqueue.KafkaConfig{
		Brokers: []string{"127.0.0.1:" + strconv.Itoa(port)},
		Topic:   "orders", GroupID: "orders-group", Partitions: 3,
	}
	broker := startBroker(t, port, dir, kcfg.Topic)
	p := newProduct(t, st, 200)

	stop, relayFailures := startPipeline(t, st, kcfg, 2)
	defer stop()
	buy(t, st, p, 0, 50)
	waitDrained(t, st, p.ID)

	failed := relayFailures.Load()
	broker.Close()
	buy(t, st, p, 50, 100) // accepted while the broker is away
	// A relay tried to publish them and failed: the retry below is a retry.
	itest.Eventually(t, time.Minute, func() (bool, string) {
		return relayFailures.Load() > failed, "no relay has failed to publish since the broker went away"
	})
	if f := mustAudit(t, st, p.ID); f.Orders != 50 {
		t.Fatalf("orders = %d while the broker was down, want still 50", f.Orders)
	}
	broker = startBroker(t, port, dir, kcfg.Topic)
	defer broker.Close()
	waitDrained(t, st, p.ID)
	assertSound(t, st, p.ID, 150)
}

// TestConsumerSkipsEventsOfDeletedReservations: an event whose reservation an admin reset
// deleted creates no order (the order is built from the reservation row, not from the event).
func TestConsumerSkipsEventsOfDeletedReservations(t *testing.T) {
	st, _ := itest.Store(t)
	p := newProduct(t, st, 10)
	buy(t, st, p, 0, 3)
	var ids []string
	rows, err := st.DB().Query("SELECT order_id FROM reservations WHERE product_id = ?", p.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if _, err := st.ResetProduct(context.Background(), p.ID, sale.Reset{Stock: 10}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	created, err := st.ConfirmOrders(context.Background(), append(ids, "no-such-order"))
	if err != nil || created != 0 {
		t.Fatalf("ConfirmOrders after reset = %d, %v; want 0, nil", created, err)
	}
}

// startPipeline runs n relays and n consumers, as n replicas would, until the returned stop.
// relayFailures counts the relays' failed batches.
func startPipeline(t *testing.T, st *store.Store, kcfg orderqueue.KafkaConfig, n int) (stop func(), relayFailures *atomic.Int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	relayFailures = new(atomic.Int64)
	for i := range n {
		m := metrics.New()
		w := orderqueue.NewWriter(itest.Logger(), kcfg)
		relay, err := orderqueue.NewRelay(itest.Logger(), st, w, countFailures{m, relayFailures}, orderqueue.RelayConfig{
			Owner: fmt.Sprintf("relay-%d", i), Poll: 20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		consumer, err := orderqueue.NewConsumer(itest.Logger(), kcfg, st, m)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = relay.Run(ctx)
			w.Close()
		})
		wg.Go(func() { _ = consumer.Run(ctx) })
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop, relayFailures
}

// countFailures is a relay's metrics that also count its failed batches.
type countFailures struct {
	*metrics.Metrics
	n *atomic.Int64
}

func (c countFailures) RelayFailed() { c.n.Add(1); c.Metrics.RelayFailed() }

func startBroker(t *testing.T, port int, dir, topic string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.Ports(port), kfake.DataDir(dir), kfake.SyncWrites(),
		kfake.SeedTopics(3, topic), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatalf("start in-process broker: %v", err)
	}
	return c
}

func newProduct(t testing.TB, st *store.Store, stockN int) sale.Product {
	t.Helper()
	now := time.Now().UTC()
	p, err := st.CreateProduct(context.Background(), sale.NewProduct{
		Name: "order test", PriceCents: 100, Stock: stockN, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buy makes n purchases of one unit by users first..first+n-1 through the mysql strategy.
func buy(t *testing.T, st *store.Store, p sale.Product, first, n int) {
	t.Helper()
	d, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i < first+n; i++ {
		err := d.Deduct(context.Background(), sale.Reservation{
			Receipt: sale.Receipt{
				OrderID: fmt.Sprintf("order-%d-%d-%s", p.ID, i, itest.Suffix(6)), Status: sale.StatusQueued,
				ProductID: p.ID, UserID: fmt.Sprintf("user-%d", i), Quantity: 1, Strategy: p.Strategy,
			},
			Epoch:     p.Epoch,
			CreatedAt: time.Now().UTC(),
		})
		if err != nil {
			t.Fatalf("purchase %d: %v", i, err)
		}
	}
}

func waitDrained(t *testing.T, st *store.Store, id int64) audit.Facts {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f, err := audit.WaitDrained(ctx, st.DB(), id, 0, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("queue did not drain: %+v: %v", f, err)
	}
	return f
}

func mustAudit(t *testing.T, st *store.Store, id int64) audit.Facts {
	t.Helper()
	f, err := audit.Load(context.Background(), st.DB(), id)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func assertSound(t *testing.T, st *store.Store, id int64, wantOrders int) {
	t.Helper()
	f := mustAudit(t, st, id)
	if v := f.Violations(true); len(v) > 0 {
		t.Fatalf("invariants broken: %q (%+v)", v, f)
	}
	if f.Orders != wantOrders {
		t.Fatalf("orders = %d, want %d", f.Orders, wantOrders)
	}
}
