package orderqueue_test

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestConsumerDiesBetweenCommits: a consumer that dies after its orders are committed in the
// database and before its offsets are leaves its batch to the group, which delivers it again to
// the next consumer; that one confirms the same orders once more and creates none twice. (The
// chaos run, make chaos, does the same to a real replica with SIGKILL: SECKILL_TEST_FAILPOINT.)
func TestConsumerDiesBetweenCommits(t *testing.T) {
	st, _ := itest.Store(t)
	kcfg := itest.Topic(t, 1) // one partition: whoever takes it over gets the batch again
	p := newProduct(t, st, 50)
	buy(t, st, p, 0, 20)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	w := orderqueue.NewWriter(itest.Logger(), kcfg)
	relay, err := orderqueue.NewRelay(itest.Logger(), st, w, metrics.New(), orderqueue.RelayConfig{Owner: "relay"})
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		_ = relay.Run(ctx)
		w.Close()
	})

	first := &recordingStore{Store: st}
	dying, err := orderqueue.NewConsumer(itest.Logger(), kcfg, first, metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	died := make(chan struct{})
	// In-process, "dying" is ending the consumer's goroutine on the spot: its deferred close of
	// the reader leaves the group, but nothing commits the batch's offsets.
	dying.SetAfterConfirm(func() {
		close(died)
		runtime.Goexit()
	})
	wg.Go(func() { _ = dying.Run(ctx) })
	<-died
	confirmed := first.ids()
	if f := mustAudit(t, st, p.ID); f.Orders != len(confirmed) || len(confirmed) == 0 {
		t.Fatalf("orders %d after the first batch of %d", f.Orders, len(confirmed))
	}

	second := &recordingStore{Store: st}
	next, err := orderqueue.NewConsumer(itest.Logger(), kcfg, second, metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { _ = next.Run(ctx) })
	itest.Eventually(t, time.Minute, func() (bool, string) {
		got := second.ids()
		for _, id := range confirmed {
			if !slices.Contains(got, id) {
				return false, "order " + id + ", committed by the consumer that died, was not delivered again"
			}
		}
		return true, ""
	})
	waitDrained(t, st, p.ID)
	assertSound(t, st, p.ID, 20)
	t.Logf("%d orders committed before the crash, all delivered again and none created twice", len(confirmed))
}

// recordingStore is the store as a consumer sees it, remembering the order ids it was given.
type recordingStore struct {
	*store.Store
	mu  sync.Mutex
	got []string
}

func (r *recordingStore) ConfirmOrders(ctx context.Context, ids []string) (int64, error) {
	r.mu.Lock()
	r.got = append(r.got, ids...)
	r.mu.Unlock()
	return r.Store.ConfirmOrders(ctx, ids)
}

func (r *recordingStore) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}
