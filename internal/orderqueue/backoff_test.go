package orderqueue

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestOutageBackoff: 100 ms, doubling, at most 5 s, no jitter, for as long as it is asked.
func TestOutageBackoff(t *testing.T) {
	b := outageBackoff()
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	for i, w := range want {
		if d, stop := b.Next(); stop || d != w*time.Millisecond {
			t.Fatalf("wait %d: %v (stop %v), want %v", i+1, d, stop, w*time.Millisecond)
		}
	}
}

// TestRelayBacksOffAfterFailures: the relay claims again 100, 200, 400, 800 ms after successive
// failures, and a claim that went through starts the waits over.
func TestRelayBacksOffAfterFailures(t *testing.T) {
	ob := &failingOutbox{fail: []bool{true, true, true, true, false, true, true}}
	r, err := NewRelay(slog.New(slog.NewTextHandler(io.Discard, nil)), ob, nopWriter{}, nopMetrics{},
		RelayConfig{Owner: "test", Poll: 10 * time.Millisecond, ClaimInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	// The gaps before claims 2..8: after four failures, a success (then one poll), two failures.
	want := []time.Duration{100, 200, 400, 800, 10, 100, 200}
	claims := ob.waitClaims(t, len(want)+1)
	for i, w := range want {
		w *= time.Millisecond
		if gap := claims[i+1].Sub(claims[i]); gap < w*9/10 || gap > w*3/2+100*time.Millisecond {
			t.Errorf("claim %d came %v after claim %d, want about %v", i+2, gap, i+1, w)
		}
	}
}

// TestConsumerConfirmRetries: the consumer confirms a batch again after 100, then 200 ms while
// the store fails, logging each wait, until it goes through; a ctx that ends stops it.
func TestConsumerConfirmRetries(t *testing.T) {
	var logged logRecorder
	st := &failingStore{failures: 2}
	c := &Consumer{log: slog.New(&logged), metrics: nopMetrics{}}
	confirm := c.createOrders(st, nopMetrics{})
	batch := []kafka.Message{{Value: []byte(`{"v":1,"order_id":"o-1"}`)}}
	if !confirm(context.Background(), batch) {
		t.Fatal("confirm = false, want true once the store recovers")
	}
	if len(st.calls) != 3 {
		t.Fatalf("%d calls of ConfirmOrders, want 3", len(st.calls))
	}
	for i, w := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if gap := st.calls[i+1].Sub(st.calls[i]); gap < w*9/10 || gap > w*3/2+100*time.Millisecond {
			t.Errorf("call %d came %v after call %d, want about %v", i+2, gap, i+1, w)
		}
	}
	if got := logged.backoffs(); len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != 200*time.Millisecond {
		t.Errorf("logged waits %v, want [100ms 200ms]", got)
	}

	st = &failingStore{failures: 1 << 30}
	confirm = c.createOrders(st, nopMetrics{})
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	if confirm(ctx, batch) {
		t.Fatal("confirm = true with a store that always fails")
	}
	if took := time.Since(start); took > time.Second || len(st.calls) != 2 {
		t.Errorf("confirm gave up after %v and %d calls, want at the end of ctx (250 ms) after 2 (at 0 and 100 ms)", took, len(st.calls))
	}
}

// failingOutbox fails the claims for which fail says so and records when each claim came; the
// claims after the script go through, empty.
type failingOutbox struct {
	fail []bool

	mu     sync.Mutex
	claims []time.Time
}

func (f *failingOutbox) ClaimOutboxFrom(context.Context, string, time.Duration, int, int64) ([]order.OutboxEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, time.Now())
	if i := len(f.claims) - 1; i < len(f.fail) && f.fail[i] {
		return nil, errors.New("database away")
	}
	return nil, nil
}

func (f *failingOutbox) waitClaims(t *testing.T, n int) []time.Time {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		claims := append([]time.Time(nil), f.claims...)
		f.mu.Unlock()
		if len(claims) >= n {
			return claims[:n]
		}
	}
	t.Fatalf("fewer than %d claims in 10 s", n)
	return nil
}

func (*failingOutbox) MarkPublished(context.Context, []int64) error         { return nil }
func (*failingOutbox) ReleaseClaims(context.Context, string, []int64) error { return nil }
func (*failingOutbox) OutboxBacklog(context.Context) (int64, error)         { return 0, nil }
func (*failingOutbox) ParkOutbox(_ context.Context, e []order.ParkedEntry) ([]int64, error) {
	return nil, nil
}
func (*failingOutbox) RequeueUnconfirmed(context.Context, time.Time, time.Duration, time.Duration, int) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

// failingStore fails the first failures calls of ConfirmOrders and records when each came.
type failingStore struct {
	failures int
	calls    []time.Time
}

func (s *failingStore) ConfirmOrders(ctx context.Context, ids []string) (int64, error) {
	s.calls = append(s.calls, time.Now())
	if len(s.calls) <= s.failures {
		return 0, errors.New("database away")
	}
	return int64(len(ids)), nil
}

func (*failingStore) ParkMessages(_ context.Context, ms []sale.Parked) ([]sale.Parked, error) {
	return ms, nil
}

// logRecorder keeps the "backoff" attribute of every record.
type logRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (*logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler     { return l }
func (l *logRecorder) WithGroup(string) slog.Handler          { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "backoff" {
			l.mu.Lock()
			l.waits = append(l.waits, a.Value.Duration())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *logRecorder) backoffs() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Duration(nil), l.waits...)
}

type nopWriter struct{}

func (nopWriter) WriteMessages(context.Context, ...kafka.Message) error { return nil }

type nopMetrics struct{}

func (nopMetrics) RelayPublished(int)     {}
func (nopMetrics) RelayFailed()           {}
func (nopMetrics) RelayRequeued(int64)    {}
func (nopMetrics) SetOutboxBacklog(int64) {}
func (nopMetrics) OrdersCreated(int64)    {}
func (nopMetrics) ConsumerBatch(int)      {}
func (nopMetrics) ConsumerMalformed()     {}
func (nopMetrics) ConsumerParked(int)     {}
func (nopMetrics) RelayParked(int)        {}
func (nopMetrics) SetConsumerLag(int64)   {}
