package orderqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
)

// TestRelayGathersABurstOfWakes: purchases wake the relay one by one; a burst of wakes must make
// a few claims, not one per purchase.
func TestRelayGathersABurstOfWakes(t *testing.T) {
	t.Parallel()
	ob := &fakeOutbox{perClaim: func(int) int { return 3 }} // never a full batch
	relay := startRelay(t, ob, &fakeWriter{}, orderqueue.RelayConfig{Owner: "r", Batch: 100, ClaimInterval: 100 * time.Millisecond, Poll: time.Hour})

	const burst = time.Second
	start := time.Now()
	wakes := 0
	for time.Since(start) < burst {
		relay.Wake()
		wakes++
		time.Sleep(200 * time.Microsecond)
	}
	claims := len(ob.claimTimes())
	// One claim at the start and about one per interval after it; slack for a slow machine.
	if claims > 13 || claims < 2 {
		t.Fatalf("%d wakes in %s made %d claims, want about %d", wakes, burst, claims, int(burst/(100*time.Millisecond))+1)
	}
	t.Logf("%d wakes, %d claims", wakes, claims)
}

// TestRelayClaimsALoneWakeAtOnce: the interval only gathers wakes that follow a claim closely; a
// purchase after a quiet spell is published without waiting for it.
func TestRelayClaimsALoneWakeAtOnce(t *testing.T) {
	t.Parallel()
	ob := &fakeOutbox{perClaim: func(int) int { return 1 }}
	relay := startRelay(t, ob, &fakeWriter{}, orderqueue.RelayConfig{Owner: "r", ClaimInterval: 300 * time.Millisecond, Poll: time.Hour})
	itest.Eventually(t, 5*time.Second, func() (bool, string) { return len(ob.claimTimes()) == 1, "first claim" })
	time.Sleep(400 * time.Millisecond) // quiet for longer than the interval

	woken := time.Now()
	relay.Wake()
	itest.Eventually(t, 5*time.Second, func() (bool, string) { return len(ob.claimTimes()) == 2, "claim after the wake" })
	if d := ob.claimTimes()[1].Sub(woken); d > 150*time.Millisecond {
		t.Fatalf("claimed %s after a lone wake, want at once", d)
	}
}

// TestRelayDrainsFullBatchesBackToBack: while claims come back full the relay claims again at
// once, however long the interval.
func TestRelayDrainsFullBatchesBackToBack(t *testing.T) {
	t.Parallel()
	const batch = 50
	ob := &fakeOutbox{perClaim: func(i int) int {
		if i < 5 {
			return batch
		}
		return 7
	}}
	w := &fakeWriter{}
	startRelay(t, ob, w, orderqueue.RelayConfig{Owner: "r", Batch: batch, ClaimInterval: time.Hour, Poll: time.Hour})
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return len(ob.claimTimes()) == 6 && len(ob.markedIDs()) == 5*batch+7, "6 claims and every entry marked"
	})
	if n := w.written(); n != 5*batch+7 {
		t.Fatalf("wrote %d messages, want %d", n, 5*batch+7)
	}
}

// TestRelayClaimsFromNearThePreviousClaim: a claim starts a margin of ids below the first entry
// of the previous one, and looks at the whole outbox once a second.
func TestRelayClaimsFromNearThePreviousClaim(t *testing.T) {
	t.Parallel()
	ob := &fakeOutbox{nextID: 50000, perClaim: func(int) int { return 10 }}
	relay := startRelay(t, ob, &fakeWriter{}, orderqueue.RelayConfig{Owner: "r", Batch: 100, ClaimInterval: 10 * time.Millisecond, Poll: time.Hour})
	start := time.Now()
	for time.Since(start) < 1500*time.Millisecond {
		relay.Wake()
		time.Sleep(time.Millisecond)
	}
	froms, claims := ob.claimFroms(), ob.claimTimes()
	if len(froms) < 20 {
		t.Fatalf("only %d claims", len(froms))
	}
	var full []time.Time
	for i, from := range froms {
		switch {
		case from == 0:
			full = append(full, claims[i])
		case from != 50000+10*int64(i-1)+1-1024:
			t.Fatalf("claim %d from %d, want %d (the previous claim's first id, less the margin)", i, from, 50000+10*int64(i-1)+1-1024)
		}
	}
	if len(full) != 2 || froms[0] != 0 || full[1].Sub(full[0]) < time.Second {
		t.Fatalf("full looks at %v (start %v), want the first claim and one a second later", full, start)
	}
}

// TestRelayReleasesClaimsWhenPublishFails: what the broker refused goes back at once.
func TestRelayReleasesClaimsWhenPublishFails(t *testing.T) {
	t.Parallel()
	ob := &fakeOutbox{perClaim: func(i int) int { return 4 }}
	w := &fakeWriter{err: errors.New("broker away")}
	startRelay(t, ob, w, orderqueue.RelayConfig{Owner: "r", Poll: time.Hour})
	itest.Eventually(t, 5*time.Second, func() (bool, string) { return len(ob.releasedIDs()) >= 4, "claims released" })
	if m := ob.markedIDs(); len(m) != 0 {
		t.Fatalf("marked %v published after a failed publish", m)
	}
}

func startRelay(t *testing.T, ob orderqueue.Outbox, w orderqueue.MessageWriter, cfg orderqueue.RelayConfig) *orderqueue.Relay {
	t.Helper()
	relay, err := orderqueue.NewRelay(itest.Logger(), ob, w, nopRelayMetrics{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = relay.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return relay
}

// fakeOutbox hands out perClaim(i) fresh entries on the i-th claim and records what the relay
// does with them.
type fakeOutbox struct {
	perClaim func(i int) int

	mu       sync.Mutex
	nextID   int64
	claims   []time.Time
	froms    []int64
	marked   []int64
	released []int64
	parked   []int64
}

func (f *fakeOutbox) ClaimOutboxFrom(_ context.Context, _ string, _ time.Duration, limit int, from int64) ([]order.OutboxEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(f.perClaim(len(f.claims)), limit)
	f.claims = append(f.claims, time.Now())
	f.froms = append(f.froms, from)
	out := make([]order.OutboxEntry, n)
	for i := range out {
		f.nextID++
		out[i] = order.OutboxEntry{ID: f.nextID, OrderID: "o", ProductID: 1, UserID: "u", Quantity: 1, Strategy: "mysql"}
	}
	return out, nil
}

func (f *fakeOutbox) MarkPublished(_ context.Context, ids []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marked = append(f.marked, ids...)
	return nil
}

func (f *fakeOutbox) ReleaseClaims(_ context.Context, _ string, ids []int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, ids...)
	return nil
}

func (f *fakeOutbox) ParkOutbox(_ context.Context, entries []order.ParkedEntry) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []int64
	for _, e := range entries {
		f.parked = append(f.parked, e.ID)
		ids = append(ids, e.ID)
	}
	return ids, nil
}

func (f *fakeOutbox) OutboxBacklog(context.Context) (int64, error) { return 0, nil }

func (f *fakeOutbox) RequeueUnconfirmed(context.Context, time.Time, time.Duration, time.Duration, int) (int64, time.Time, error) {
	return 0, time.Time{}, nil
}

func (f *fakeOutbox) claimTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.claims...)
}

func (f *fakeOutbox) claimFroms() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.froms...)
}

func (f *fakeOutbox) markedIDs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.marked...)
}

func (f *fakeOutbox) releasedIDs() []int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int64(nil), f.released...)
}

type fakeWriter struct {
	err error

	mu sync.Mutex
	n  int
}

func (w *fakeWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	if w.err != nil {
		return w.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += len(msgs)
	return nil
}

func (w *fakeWriter) written() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

type nopRelayMetrics struct{}

func (nopRelayMetrics) RelayPublished(int)     {}
func (nopRelayMetrics) RelayFailed()           {}
func (nopRelayMetrics) RelayParked(int)        {}
func (nopRelayMetrics) RelayRequeued(int64)    {}
func (nopRelayMetrics) SetOutboxBacklog(int64) {}
