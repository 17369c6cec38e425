package mysqllock_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
)

// BenchmarkAcquireRelease measures acquire+release cycles of one lock name: by one goroutine,
// and by 8×GOMAXPROCS goroutines contending, with an empty critical section and with one of 1 ms
// (about a MySQL read and write). Besides ops/s it reports the inserts per cycle (a cycle needs
// one; the rest are tries lost to the holder, each followed by a reaper's DELETE) and, contended,
// the mean wait for the lock.
func BenchmarkAcquireRelease(b *testing.B) {
	modes := []struct {
		name       string
		contenders int // per GOMAXPROCS
		hold       time.Duration
	}{
		{"uncontended", 0, 0},
		{"contended", 8, 0},
		{"contended-hold1ms", 8, time.Millisecond},
	}
	db, _ := newDB(b, "")
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			a := &attempts{}
			c := newClient(b, db, mysqllock.Options{TTL: 10 * time.Second, OnAttempt: a.observe})
			name := "bench-" + mode.name
			ctx := b.Context()
			var ops, waited atomic.Int64
			cycle := func() error {
				start := time.Now()
				l, err := c.Acquire(ctx, name)
				if err != nil {
					return err
				}
				waited.Add(int64(time.Since(start)))
				if mode.hold > 0 {
					time.Sleep(mode.hold)
				}
				ops.Add(1)
				return l.Release(ctx)
			}
			if err := cycle(); err != nil { // warm: connections dialled
				b.Fatal(err)
			}
			ops.Store(0)
			waited.Store(0)
			a.won.Store(0)
			a.lost.Store(0)
			b.ResetTimer()
			if mode.contenders == 0 {
				for b.Loop() {
					if err := cycle(); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(mode.contenders)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := cycle(); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.StopTimer()
			n := float64(ops.Load())
			b.ReportMetric(n/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64(a.won.Load()+a.lost.Load())/n, "attempts/op")
			b.ReportMetric(time.Duration(float64(waited.Load())/n).Seconds()*1000, "ms-acquire/op")
		})
	}
}
