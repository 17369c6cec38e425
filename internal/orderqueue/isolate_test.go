package orderqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// refusingWriter refuses, as kafka-go's writer does for a message beyond its BatchBytes, every
// write that holds a message containing "poison" (nothing of it written), and counts writes.
type refusingWriter struct {
	mu     sync.Mutex
	calls  int
	wrote  []string
	always bool // refuse every message, as a topic whose limit is below every message would
}

func (w *refusingWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	for i, m := range msgs {
		if w.always || bytes.Contains(m.Value, []byte("poison")) {
			return kafka.MessageTooLargeError{Message: m, Remaining: append(slices.Clone(msgs[:i]), msgs[i+1:]...)}
		}
	}
	for _, m := range msgs {
		w.wrote = append(w.wrote, string(m.Value))
	}
	return nil
}

func batchOf(n int, poison ...int) ([]int64, []kafka.Message) {
	ids, msgs := make([]int64, n), make([]kafka.Message, n)
	for i := range n {
		v := fmt.Sprintf("m%d", i)
		if slices.Contains(poison, i) {
			v += "-poison"
		}
		ids[i], msgs[i] = int64(i+1), kafka.Message{Value: []byte(v)}
	}
	return ids, msgs
}

// TestRelayPublishIsolatesARefusedMessage: a batch without a refused message costs one write; with
// one, the halves that hold it are written again until it is alone, about two writes per halving,
// and everything else is written once.
func TestRelayPublishIsolatesARefusedMessage(t *testing.T) {
	for _, c := range []struct {
		name      string
		n         int
		poison    []int
		maxWrites int
	}{
		{"none", 64, nil, 1},
		{"one", 64, []int{37}, 1 + 2*6},
		{"the first", 1000, []int{0}, 1 + 2*10},
		{"two", 64, []int{3, 60}, 1 + 2*2*6},
		{"alone", 1, []int{0}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := &refusingWriter{}
			r := &Relay{writer: w}
			ids, msgs := batchOf(c.n, c.poison...)
			got := r.publish(context.Background(), ids, msgs)
			var refused []int64
			for _, p := range got.refused {
				refused = append(refused, p.ID)
				if !strings.Contains(p.Reason, "Message Size Too Large") {
					t.Errorf("reason %q", p.Reason)
				}
			}
			var want []int64
			for _, i := range c.poison {
				want = append(want, int64(i+1))
			}
			if !slices.Equal(refused, want) || len(got.done) != c.n-len(c.poison) || len(got.failed) != 0 || len(w.wrote) != len(got.done) {
				t.Fatalf("refused %v (want %v), %d done, %d failed, %d written", refused, want, len(got.done), len(got.failed), len(w.wrote))
			}
			if w.calls > c.maxWrites {
				t.Fatalf("%d writes, want at most %d", w.calls, c.maxWrites)
			}
			t.Logf("%d writes", w.calls)
		})
	}
}

// isolatingOutbox is an outbox of n entries, claimed once, that records what becomes of them.
type isolatingOutbox struct {
	n int

	mu                      sync.Mutex
	claimed                 bool
	marked, released, parks []int64
}

func (o *isolatingOutbox) ClaimOutboxFrom(context.Context, string, time.Duration, int, int64) ([]order.OutboxEntry, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.claimed {
		return nil, nil
	}
	o.claimed = true
	out := make([]order.OutboxEntry, o.n)
	for i := range out {
		out[i] = order.OutboxEntry{ID: int64(i + 1), OrderID: fmt.Sprintf("o-%d", i+1), ProductID: 1, UserID: "u", Quantity: 1}
	}
	return out, nil
}

func (o *isolatingOutbox) MarkPublished(_ context.Context, ids []int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.marked = append(o.marked, ids...)
	return nil
}

func (o *isolatingOutbox) ReleaseClaims(_ context.Context, _ string, ids []int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, ids...)
	return nil
}

func (o *isolatingOutbox) ParkOutbox(_ context.Context, entries []order.ParkedEntry) ([]int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := idsOf(entries)
	o.parks = append(o.parks, ids...)
	return ids, nil
}

func (*isolatingOutbox) OutboxBacklog(context.Context) (int64, error) { return 0, nil }
func (*isolatingOutbox) RequeueUnconfirmed(context.Context, time.Time, time.Duration, time.Duration, int) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

// TestRelayDoesNotParkABatchTheBrokerRefusesWhole: when every message of a batch is refused, each
// alone, the fault is the topic's (a limit below every message), not a message's: the batch is
// released and retried as in an outage, and nothing is parked.
func TestRelayDoesNotParkABatchTheBrokerRefusesWhole(t *testing.T) {
	ob := &isolatingOutbox{n: 8}
	r, err := NewRelay(slog.New(slog.NewTextHandler(io.Discard, nil)), ob, &refusingWriter{always: true}, nopMetrics{}, RelayConfig{Owner: "r"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.publishBatch(context.Background())
	if n != 8 || err == nil || !errors.Is(err, kafka.MessageSizeTooLarge) {
		t.Fatalf("publishBatch = %d, %v; want 8 and the broker's refusal", n, err)
	}
	if len(ob.parks) != 0 || len(ob.released) != 8 || len(ob.marked) != 0 {
		t.Fatalf("parked %v, released %v, marked %v; want nothing parked, all released", ob.parks, ob.released, ob.marked)
	}
}

// refusingStore refuses, for its values, every batch of order ids that holds one with "bad" in
// it; it fails the first outages calls as an outage would.
type refusingStore struct {
	outages int

	calls     int
	confirmed []string
	parked    []sale.Parked
}

func (s *refusingStore) ConfirmOrders(_ context.Context, ids []string) (int64, error) {
	s.calls++
	if s.calls <= s.outages {
		return 0, errors.New("database away")
	}
	for _, id := range ids {
		if strings.Contains(id, "bad") {
			return 0, fmt.Errorf("confirm orders: %w: Error 1271: Illegal mix of collations", sale.ErrPoison)
		}
	}
	s.confirmed = append(s.confirmed, ids...)
	return int64(len(ids)), nil
}

func (s *refusingStore) ParkMessages(_ context.Context, ms []sale.Parked) ([]sale.Parked, error) {
	s.parked = append(s.parked, ms...)
	return ms, nil
}

// TestConsumerIsolatesARefusedEvent: a batch the database refuses for one event's values is
// written again in halves until that event is alone; it is parked with where it came from, and
// every other event of the batch is confirmed. A batch without one costs one write. An outage
// meanwhile is waited out, not taken for a refusal.
func TestConsumerIsolatesARefusedEvent(t *testing.T) {
	for _, c := range []struct {
		name      string
		bad       []int
		outages   int
		maxWrites int
	}{
		{"none", nil, 0, 1},
		{"one", []int{20}, 0, 1 + 2*6},
		{"one, after an outage", []int{63}, 1, 2 + 2*6},
		{"undecodable and refused", []int{5, -1}, 0, 1 + 2*6},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &refusingStore{outages: c.outages}
			cons := &Consumer{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: nopMetrics{}, loop: "consumer", parker: st}
			apply := cons.createOrders(st, nopMetrics{})
			var batch []kafka.Message
			var wantParked []string
			for i := range 64 {
				id := fmt.Sprintf("o-%d", i)
				value := fmt.Sprintf(`{"v":1,"order_id":%q}`, id)
				switch {
				case slices.Contains(c.bad, i):
					id += "-bad"
					value = fmt.Sprintf(`{"v":1,"order_id":%q}`, id)
					wantParked = append(wantParked, fmt.Sprintf("2:%d", 100+i))
				case slices.Contains(c.bad, -1) && i == 0:
					value = "not json"
					wantParked = append([]string{"2:100"}, wantParked...)
				}
				batch = append(batch, kafka.Message{Topic: "orders", Partition: 2, Offset: int64(100 + i), Value: []byte(value)})
			}
			if !apply(context.Background(), batch) {
				t.Fatal("apply = false")
			}
			var parked []string
			for _, p := range st.parked {
				parked = append(parked, p.Position)
				if p.Source != "orders" || p.Loop != "consumer" {
					t.Errorf("parked %+v", p)
				}
			}
			if !slices.Equal(parked, wantParked) || len(st.confirmed) != 64-len(wantParked) {
				t.Fatalf("parked %v (want %v), %d confirmed", parked, wantParked, len(st.confirmed))
			}
			if st.calls > c.maxWrites {
				t.Fatalf("%d writes, want at most %d", st.calls, c.maxWrites)
			}
		})
	}
}
