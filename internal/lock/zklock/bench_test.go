package zklock

import (
	"runtime"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// contenders is the number of goroutines of the contended benchmarks.
const contenders = 8

// BenchmarkAcquireRelease measures one acquire+release cycle of this package and of
// go-zookeeper's built-in zk.Lock, on one ZooKeeper connection each, alone and with contenders
// goroutines on one lock name. zk.Lock is per connection and not re-entrant, so each goroutine
// gets its own *zk.Lock on the shared connection; it cannot be given a timeout.
//
//	go test -run='^$' -bench=. -benchtime=3s -count=3 ./internal/lock/zklock/
func BenchmarkAcquireRelease(b *testing.B) {
	root := testRoot(b)
	c, _ := newClient(b, Options{Root: root})
	raw := rawConn(b)
	parallelism := max(1, (contenders+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0))

	b.Run("zklock/uncontended", func(b *testing.B) {
		name := "bench-" + itest.Suffix(10)
		for b.Loop() {
			l, err := c.Acquire(b.Context(), name)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		reportOps(b)
	})
	b.Run("zklock/contended", func(b *testing.B) {
		name := "bench-" + itest.Suffix(10)
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l, err := c.Acquire(b.Context(), name)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Release(b.Context()); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportOps(b)
	})
	b.Run("zk.Lock/uncontended", func(b *testing.B) {
		l := zk.NewLock(raw, root+"/builtin-"+itest.Suffix(10), zk.WorldACL(zk.PermAll))
		for b.Loop() {
			if err := l.Lock(); err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(); err != nil {
				b.Fatal(err)
			}
		}
		reportOps(b)
	})
	b.Run("zk.Lock/contended", func(b *testing.B) {
		p := root + "/builtin-" + itest.Suffix(10)
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			l := zk.NewLock(raw, p, zk.WorldACL(zk.PermAll))
			for pb.Next() {
				if err := l.Lock(); err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportOps(b)
	})
}

func reportOps(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
}
