package orderqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestRelayParksPoisonRows plants two reservations the relay can never publish among good ones,
// against MySQL and the broker: one whose product id is beyond an event's range (a claim that
// reached it failed whole, for ever), and one whose event is larger than the topic takes (the
// topic's max.message.bytes lets one ordinary event through at a time, and not this one). Every
// other reservation becomes its order; the two are parked, counted and logged once each, however
// many claims follow; and the operator's replay of one (fix the row, clear parked_at) makes its
// order. With claims of one entry (the poison one alone) and of a hundred (found by halving).
func TestRelayParksPoisonRows(t *testing.T) {
	for _, batch := range []int{1, 100} {
		t.Run(fmt.Sprintf("batch %d", batch), func(t *testing.T) { testRelayParksPoisonRows(t, batch) })
	}
}

func testRelayParksPoisonRows(t *testing.T, batch int) {
	st, _ := itest.Store(t)
	kcfg := topicWithConfig(t, 1, map[string]string{"max.message.bytes": "300"})
	p := newProduct(t, st, 100)
	buy(t, st, p, 0, 10)
	beyond := plantReservation(t, st, "18446744073709551615", "o-beyond-"+itest.Suffix(6), "u-beyond", "mysql")
	large := plantReservation(t, st, strconv.FormatInt(p.ID, 10), "o-"+strings.Repeat("l", 30)+itest.Suffix(8),
		strings.Repeat("u", 64), strings.Repeat("s", 32))
	buy(t, st, p, 10, 10)

	m, logs := metrics.New(), &recordingLog{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	w := orderqueue.NewWriter(itest.Logger(), kcfg)
	relay, err := orderqueue.NewRelay(slog.New(logs), st, w, m, orderqueue.RelayConfig{Owner: "r", Poll: 20 * time.Millisecond, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := orderqueue.NewConsumer(itest.Logger(), kcfg, st, m)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = relay.Run(ctx); w.Close() })
	wg.Go(func() { _ = consumer.Run(ctx) })

	itest.Eventually(t, time.Minute, func() (bool, string) {
		n := count(t, st, "SELECT COUNT(*) FROM orders WHERE product_id = ?", p.ID)
		return n == 20, fmt.Sprintf("%d orders of the 20 good reservations", n)
	})
	// Full looks at the outbox come every second: let a few pass over the parked rows.
	time.Sleep(2500 * time.Millisecond)
	for id, want := range map[int64]string{beyond: "beyond an event's range", large: "Message Size Too Large"} {
		var parked bool
		var reason string
		if err := st.DB().QueryRow("SELECT parked_at IS NOT NULL, COALESCE(park_error, '') FROM reservations WHERE id = ? AND published_at IS NULL", id).
			Scan(&parked, &reason); err != nil || !parked || !strings.Contains(reason, want) {
			t.Errorf("reservation %d: parked %v, reason %q, %v; want parked for %q", id, parked, reason, err, want)
		}
	}
	if got := poisonRows(t, m, "relay"); got != 2 {
		t.Errorf("seckill_poison_rows_total{loop=relay} = %v, want 2", got)
	}
	for _, id := range []int64{beyond, large} {
		if n := logs.count("parked", "id="+strconv.FormatInt(id, 10)); n != 1 {
			t.Errorf("reservation %d logged %d times as parked, want once:\n%s", id, n, strings.Join(logs.lines(), "\n"))
		}
	}

	// The replay: the row fixed, parked_at cleared; the next full look publishes it.
	if _, err := st.DB().Exec("UPDATE reservations SET product_id = ?, parked_at = NULL, park_error = NULL WHERE id = ?", p.ID, beyond); err != nil {
		t.Fatal(err)
	}
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		n := count(t, st, "SELECT COUNT(*) FROM orders WHERE reservation_id = ?", beyond)
		return n == 1, "no order for the replayed reservation"
	})
	if got := poisonRows(t, m, "relay"); got != 2 {
		t.Errorf("seckill_poison_rows_total{loop=relay} = %v after the replay, want still 2", got)
	}
}

// TestConsumerParksPoisonMessages plants two messages among good order events, against MySQL and
// the broker: one nothing can decode (it used to be skipped, with no trace but a log line), and
// one whose order id MySQL cannot compare with its ASCII column (error 1271: the whole batch's
// INSERT failed, for ever, and no order of the batch was created). Every good event becomes its
// order; the two are parked in parked_messages, counted and logged once; a second consumer group
// reading the whole topic again parks nothing twice and creates nothing twice.
func TestConsumerParksPoisonMessages(t *testing.T) {
	st, _ := itest.Store(t)
	kcfg := itest.Topic(t, 2)
	p := newProduct(t, st, 100)
	buy(t, st, p, 0, 30)
	ids := orderIDs(t, st, p.ID)
	var msgs []kafka.Message
	for i, id := range ids {
		msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, `{"v":1,"order_id":%q,"product_id":%d}`, id, p.ID)})
		switch i {
		case 10:
			msgs = append(msgs, kafka.Message{Value: []byte("\x00not an event")})
		case 20:
			msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, `{"v":1,"order_id":"ordé-%d","product_id":%d}`, p.ID, p.ID)})
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(kcfg.Brokers...), Topic: kcfg.Topic, Balancer: &kafka.RoundRobin{}, BatchTimeout: time.Millisecond}
	itest.Eventually(t, 10*time.Second, func() (bool, string) { // the new topic's metadata may lag
		err := w.WriteMessages(context.Background(), msgs...)
		return err == nil, fmt.Sprint(err)
	})
	w.Close()

	m, logs := metrics.New(), &recordingLog{}
	consume := func(group string) {
		t.Helper()
		cfg := kcfg
		cfg.GroupID = group
		c, err := orderqueue.NewConsumer(slog.New(logs), cfg, st, m)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = c.Run(ctx) })
		defer wg.Wait()
		defer cancel()
		itest.Eventually(t, time.Minute, func() (bool, string) {
			orders := count(t, st, "SELECT COUNT(*) FROM orders WHERE product_id = ?", p.ID)
			parked := count(t, st, "SELECT COUNT(*) FROM parked_messages WHERE loop_name = 'consumer' AND source = ?", kcfg.Topic)
			done := committed(t, cfg)
			return orders == 30 && parked == 2 && done == int64(len(msgs)),
				fmt.Sprintf("group %s: %d orders of the 30 good events, %d parked, %d of %d messages committed", group, orders, parked, done, len(msgs))
		})
	}
	consume(kcfg.GroupID)
	consume(kcfg.GroupID + ".again")

	var decodable, undecodable int
	rows, err := st.DB().Query("SELECT COALESCE(order_id, ''), product_id IS NOT NULL, error FROM parked_messages WHERE source = ?", kcfg.Topic)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var orderID, reason string
		var hasProduct bool
		if err := rows.Scan(&orderID, &hasProduct, &reason); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.Contains(reason, "Illegal mix of collations") && hasProduct:
			decodable++
		case strings.Contains(reason, "order event"):
			undecodable++
		default:
			t.Errorf("parked for %q", reason)
		}
	}
	rows.Close()
	if decodable != 1 || undecodable != 1 {
		t.Errorf("parked %d refused by MySQL and %d undecodable, want 1 and 1", decodable, undecodable)
	}
	if got := poisonRows(t, m, "consumer"); got != 2 {
		t.Errorf("seckill_poison_rows_total{loop=consumer} = %v, want 2", got)
	}
	if n := logs.count("parked"); n != 2 {
		t.Errorf("%d parked messages logged, want 2 (once each, not again on the second reading):\n%s", n, strings.Join(logs.lines(), "\n"))
	}
	assertSound(t, st, p.ID, 30)
}

// topicWithConfig creates a topic of its own for the test with the given topic configs.
func topicWithConfig(t *testing.T, partitions int, configs map[string]string) orderqueue.KafkaConfig {
	t.Helper()
	itest.Integration(t)
	name := "seckill.test." + itest.Suffix(10)
	kcfg := orderqueue.KafkaConfig{Brokers: itest.KafkaBrokers, Topic: name, GroupID: name + ".orders", Partitions: partitions}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var d kafka.Dialer
	conn, err := d.DialContext(ctx, "tcp", kcfg.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	controller, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	tc := kafka.TopicConfig{Topic: kcfg.Topic, NumPartitions: partitions, ReplicationFactor: 1}
	for k, v := range configs {
		tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
	}
	if err := cc.CreateTopics(tc); err != nil {
		t.Fatal(err)
	}
	return kcfg
}

// committed returns how many messages of cfg's topic its group has committed: the sum of its
// partitions' committed offsets (each partition's first offset is 0).
func committed(t *testing.T, cfg orderqueue.KafkaConfig) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", cfg.Brokers[0])
	if err != nil {
		return -1
	}
	defer conn.Close()
	ps, err := conn.ReadPartitions(cfg.Topic) // as many as the broker made, whatever was asked
	if err != nil {
		return -1
	}
	parts := make([]int, len(ps))
	for i, p := range ps {
		parts[i] = p.ID
	}
	c := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...)}
	res, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: cfg.GroupID, Topics: map[string][]int{cfg.Topic: parts}})
	if err != nil {
		return -1
	}
	var n int64
	for _, p := range res.Topics[cfg.Topic] {
		n += max(p.CommittedOffset, 0)
	}
	return n
}

// plantReservation inserts a reservation as the purchase path never would, and returns its id.
func plantReservation(t *testing.T, st *store.Store, productID, orderID, userID, strategy string) int64 {
	t.Helper()
	res, err := st.DB().Exec(`INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at)
		VALUES (?, `+productID+`, ?, 1, ?, NOW(6))`, orderID, userID, strategy)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

func orderIDs(t *testing.T, st *store.Store, productID int64) []string {
	t.Helper()
	rows, err := st.DB().Query("SELECT order_id FROM reservations WHERE product_id = ? ORDER BY id", productID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func count(t *testing.T, st *store.Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// poisonRows reads seckill_poison_rows_total{loop} from m's registry.
func poisonRows(t *testing.T, m *metrics.Metrics, loop string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "seckill_poison_rows_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "loop" && l.GetValue() == loop {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no seckill_poison_rows_total{loop=%q}", loop)
	return 0
}

// recordingLog keeps every record, at every level, as its message and attributes.
type recordingLog struct {
	mu   sync.Mutex
	recs []string
}

func (*recordingLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordingLog) WithAttrs([]slog.Attr) slog.Handler     { return l }
func (l *recordingLog) WithGroup(string) slog.Handler          { return l }

func (l *recordingLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}

func (l *recordingLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recs...)
}

// count returns how many records contain every one of parts.
func (l *recordingLog) count(parts ...string) int {
	n := 0
	for _, r := range l.lines() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(r, p)
		}
		if all {
			n++
		}
	}
	return n
}

// TestLifecyclePoisonParked: the order events' relay and consumer park as the order pipeline's do.
// An outbox event whose product id is beyond an event's range, and a message of the lifecycle
// topic nothing can decode, are parked, counted under their own loops and logged once; every
// other event is tallied once.
func TestLifecyclePoisonParked(t *testing.T) {
	st, _ := itest.Store(t)
	kcfg := itest.Topic(t, 1).Lifecycle()
	if err := orderqueue.EnsureTopic(context.Background(), kcfg); err != nil {
		t.Fatal(err)
	}
	p := newProduct(t, st, 50)
	want := closeOrders(t, st, p, 9)
	res, err := st.DB().Exec(`INSERT INTO order_events (order_id, product_id, user_id, kind, quantity, created_at)
		VALUES ('o-beyond', 18446744073709551615, 'u-beyond', 'order.paid', 1, NOW(6))`)
	if err != nil {
		t.Fatal(err)
	}
	beyond, _ := res.LastInsertId()
	w := &kafka.Writer{Addr: kafka.TCP(kcfg.Brokers...), Topic: kcfg.Topic, BatchTimeout: time.Millisecond}
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte(`{"event_id":"not a number"}`)})
		return err == nil, fmt.Sprint(err)
	})
	w.Close()

	m, logs := metrics.New(), &recordingLog{}
	lm := m.RegisterLifecycle()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ew := orderqueue.NewWriter(itest.Logger(), kcfg)
	relay, err := orderqueue.NewEventRelay(slog.New(logs), st, ew, lm, orderqueue.RelayConfig{Owner: "r", Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := orderqueue.NewEventConsumer(slog.New(logs), kcfg, st, lm)
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = relay.Run(ctx); ew.Close() })
	wg.Go(func() { _ = consumer.Run(ctx) })
	itest.Eventually(t, time.Minute, func() (bool, string) {
		got := mustTally(t, st, p.ID)
		parked := count(t, st, "SELECT COUNT(*) FROM parked_messages WHERE loop_name = 'event_consumer' AND source = ?", kcfg.Topic)
		return got == want && parked == 1, fmt.Sprintf("tally %+v of %+v, %d parked messages", got, want, parked)
	})
	time.Sleep(1500 * time.Millisecond) // a full look of the outbox over the parked event
	if n := count(t, st, "SELECT COUNT(*) FROM order_events WHERE id = ? AND parked_at IS NOT NULL AND published_at IS NULL", beyond); n != 1 {
		t.Errorf("the event beyond the range is not parked")
	}
	for _, loop := range []string{"event_relay", "event_consumer"} {
		if got := poisonRows(t, m, loop); got != 1 {
			t.Errorf("seckill_poison_rows_total{loop=%s} = %v, want 1", loop, got)
		}
	}
	if n := logs.count("parked"); n != 2 {
		t.Errorf("%d parked logged, want 2:\n%s", n, strings.Join(logs.lines(), "\n"))
	}
}
