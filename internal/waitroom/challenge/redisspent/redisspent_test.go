package redisspent_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/redisspent"
)

func newSpent(tb testing.TB) *redisspent.Spent {
	tb.Helper()
	itest.Integration(tb)
	rdb := itest.Redis(tb)
	ns := "test-" + itest.Suffix(8)
	s, err := redisspent.New(rdb, ns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = itest.DeleteKeys(context.Background(), rdb, "challenge:"+ns+":*") })
	return s
}

// TestSpendOnceAcrossReplicas: two replicas' caches on one Redis: an id spends once among all
// the concurrent callers, and again once its time is over.
func TestSpendOnceAcrossReplicas(t *testing.T) {
	a := newSpent(t)
	rdb := itest.Redis(t)
	if _, err := redisspent.New(rdb, ""); err == nil {
		t.Fatal("a cache without a namespace was made")
	}
	ctx := context.Background()
	until := time.Now().Add(300 * time.Millisecond)
	var first atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ok, err := a.Spend(ctx, "x", until)
			if err != nil {
				t.Error(err)
			}
			if ok {
				first.Add(1)
			}
		})
	}
	wg.Wait()
	if first.Load() != 1 {
		t.Fatalf("%d of 16 concurrent spends were first, want 1", first.Load())
	}
	ttl, err := rdb.PTTL(ctx, a.Key("x")).Result()
	if err != nil || ttl <= 0 || ttl > 300*time.Millisecond {
		t.Errorf("the key's TTL: %v %v, want at most 300ms", ttl, err)
	}
	itest.Eventually(t, 2*time.Second, func() (bool, string) {
		ok, err := a.Spend(ctx, "x", time.Now().Add(time.Minute))
		return ok && err == nil, "still spent"
	})
}

// TestSpendUnreachable: a Redis that does not answer is an error, never a pass.
func TestSpendUnreachable(t *testing.T) {
	itest.Integration(t)
	rdb := itest.Redis(t)
	s, err := redisspent.New(rdb, "test-"+itest.Suffix(8))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := s.Spend(ctx, "x", time.Now().Add(time.Minute)); ok || err == nil {
		t.Errorf("Spend on a dead context: %v %v, want an error", ok, err)
	}
}

// BenchmarkSpend: the replay cache's cost per genuine join: one round trip to the test Redis.
func BenchmarkSpend(b *testing.B) {
	s := newSpent(b)
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	var i atomic.Int64
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := s.Spend(ctx, "b"+strconv.FormatInt(i.Add(1), 10), until); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

var _ challenge.Spent = (*redisspent.Spent)(nil)
