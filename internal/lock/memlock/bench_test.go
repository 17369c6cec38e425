package memlock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/memlock"
)

// BenchmarkMemcachedLock measures acquire+release cycles of one lock name on a throwaway
// memcached, with the fencing token from the main Redis as the app takes it: by one goroutine,
// and by 8×GOMAXPROCS goroutines contending, with an empty critical section and with one of 1 ms
// (about a MySQL read and write). Besides grants/s it reports the adds per grant (a grant needs
// one; the rest were refused and slept their back-off).
func BenchmarkMemcachedLock(b *testing.B) {
	modes := []struct {
		name       string
		contenders int // per GOMAXPROCS
		hold       time.Duration
	}{
		{"uncontended", 0, 0},
		{"contended", 8, 0},
		{"contended-hold1ms", 8, time.Millisecond},
	}
	srv := itest.Memcached(b)
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			var attempts atomic.Int64
			l := newLock(b, srv.Addr(), memlock.Options{TTL: 10 * time.Second, OnAttempt: func(bool) { attempts.Add(1) }})
			name := "bench-" + itest.Suffix(8)
			ctx := b.Context()
			cycle := func() error {
				lease, err := l.Acquire(ctx, name)
				if err != nil {
					return err
				}
				if mode.hold > 0 {
					time.Sleep(mode.hold)
				}
				return lease.Release(ctx)
			}
			if err := cycle(); err != nil { // warm: connections dialled
				b.Fatal(err)
			}
			attempts.Store(0)
			var grants atomic.Int64
			b.ResetTimer()
			if mode.contenders == 0 {
				for b.Loop() {
					if err := cycle(); err != nil {
						b.Fatal(err)
					}
					grants.Add(1)
				}
			} else {
				b.SetParallelism(mode.contenders)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := cycle(); err != nil {
							b.Error(err)
							return
						}
						grants.Add(1)
					}
				})
			}
			b.StopTimer()
			n := float64(grants.Load())
			b.ReportMetric(n/b.Elapsed().Seconds(), "grants/s")
			b.ReportMetric(float64(attempts.Load())/n, "adds/grant")
		})
	}
}
