package ratelimit

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// BenchmarkSharedAllow is what one Allow costs a purchase, at the defaults of the per-user limit
// (5/s, burst 10): a key never seen (a new buyer: a Redis round trip, the common case of a flash
// sale, where each buyer tries once or twice), a key with a lease left (a busy client: no round
// trip), a key refused (a greedy client: no round trip until its wait ends), and the local
// limiter alone (Redis unreachable). Run in parallel, as purchases are; new keys at 64 at once.
func BenchmarkSharedAllow(b *testing.B) {
	ctx := context.Background()
	newShared := func(b *testing.B, l Limit) *Shared {
		s, err := NewShared(itest.Redis(b), l, Options{Name: "bench:" + itest.Suffix(8)})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("new-key", func(b *testing.B) {
		s := newShared(b, Limit{5, 10})
		var n atomic.Int64
		b.SetParallelism(32) // 64 purchases in flight: the bench's 256 workers over 3 replicas and 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := s.Allow(ctx, "u"+strconv.FormatInt(n.Add(1), 10)); !ok {
					b.Error("a new key was refused")
				}
			}
		})
	})
	b.Run("leased-key", func(b *testing.B) {
		s := newShared(b, Limit{1e9, 40})
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s.Allow(ctx, "busy")
			}
		})
	})
	b.Run("refused-key", func(b *testing.B) {
		s := newShared(b, Limit{0.001, 1})
		s.Allow(ctx, "greedy")
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := s.Allow(ctx, "greedy"); ok {
					b.Error("a key over its limit was let through")
				}
			}
		})
	})
	b.Run("local-only", func(b *testing.B) {
		l := NewLocal(Limit{5, 10})
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow("u"+strconv.FormatInt(n.Add(1), 10), time.Now())
			}
		})
	})
}
