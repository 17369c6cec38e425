package zklock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
)

// The herd waits differently and only that: it must keep every promise of the contract.
func TestHerdContract(t *testing.T) {
	itest.Integration(t)
	locktest.Run(t, contractSuite(t, func(c *Client) lock.Locker {
		return c.Mutex(MutexOptions{Herd: true}).Locker()
	}))
}

// contention is what one run of n contenders, each on its own Client (its own session, as
// separate processes would be), measured.
type contention struct {
	grants        int
	wakes         int // OnWake calls
	leaseWakes    int // the sum of the grants' own counts
	notifications int // watch events the server sent to the Clients
	took          time.Duration
}

// contend has n contenders on n Clients take the lock name rounds times each, holding it for
// hold, with every waiter waiting the herd's way or the predecessor's. All start at once, so
// that each release finds up to n−1 waiters.
func contend(tb testing.TB, root string, n, rounds int, herd bool, hold time.Duration) contention {
	tb.Helper()
	name := fmt.Sprintf("contend-%s", itest.Suffix(10))
	var wakes, looks atomic.Int64
	mutexes := make([]*Mutex, n)
	nets := make([]*netem, n)
	for i := range n {
		c, e := newClient(tb, Options{Root: root})
		mutexes[i] = c.Mutex(MutexOptions{Herd: herd, OnWake: func() { wakes.Add(1) }, OnLook: func(bool) { looks.Add(1) }})
		nets[i] = e
	}
	notified := func() (sum int) {
		for _, e := range nets {
			_, n := e.counts()
			sum += n
		}
		return sum
	}
	before := notified()
	var leaseWakes, grants atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range mutexes {
		wg.Go(func() {
			<-start
			for range rounds {
				ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
				l, err := m.Acquire(ctx, name)
				cancel()
				if err != nil {
					tb.Error(err)
					return
				}
				grants.Add(1)
				leaseWakes.Add(int64(l.wakeups))
				time.Sleep(hold)
				if err := l.Release(tb.Context()); err != nil {
					tb.Error(err)
					return
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return contention{
		grants:        int(grants.Load()),
		wakes:         int(wakes.Load()),
		leaseWakes:    int(leaseWakes.Load()),
		notifications: notified() - before,
		took:          time.Since(began),
	}
}

func (c contention) perGrant(n int) float64 { return float64(n) / float64(max(c.grants, 1)) }

// TestHerdWakesEveryWaiter measures the herd effect: N contenders on N sessions, each taking the
// lock a few times. With the predecessor watch a release wakes the one waiter behind it, about
// one wake-up per grant whatever N; with the herd every change of the queue (a release, and a
// contender queueing again) wakes every waiter, so wake-ups per grant grow with N. The margin
// asserted is loose (a third of N); the numbers are logged.
func TestHerdWakesEveryWaiter(t *testing.T) {
	itest.Integration(t)
	root := testRoot(t)
	const rounds = 4
	for _, n := range []int{5, 10, 20} {
		t.Run(fmt.Sprintf("waiters=%d", n), func(t *testing.T) {
			pred := contend(t, root, n, rounds, false, time.Millisecond)
			herd := contend(t, root, n, rounds, true, time.Millisecond)
			for _, r := range []struct {
				mode string
				c    contention
			}{{"predecessor", pred}, {"herd", herd}} {
				t.Logf("%-11s %2d waiters: %3d grants, %5.2f wake-ups/grant, %5.2f notifications/grant, %5.0f grants/s",
					r.mode, n, r.c.grants, r.c.perGrant(r.c.wakes), r.c.perGrant(r.c.notifications), float64(r.c.grants)/r.c.took.Seconds())
				if r.c.grants != n*rounds {
					t.Fatalf("%s: %d grants, want %d", r.mode, r.c.grants, n*rounds)
				}
				// OnWake and the grants' own counts see the same wake-ups, and every one of them
				// was a watch event the server sent.
				if r.c.wakes != r.c.leaseWakes || r.c.wakes > r.c.notifications {
					t.Errorf("%s: %d OnWake calls, %d counted by the grants, %d notifications", r.mode, r.c.wakes, r.c.leaseWakes, r.c.notifications)
				}
			}
			if p := pred.perGrant(pred.wakes); p > 1.5 {
				t.Errorf("predecessor watch: %.2f wake-ups per grant, want about one", p)
			}
			if h, p := herd.perGrant(herd.wakes), pred.perGrant(pred.wakes); h < float64(n)/3 || h < 3*p {
				t.Errorf("herd: %.2f wake-ups per grant against the predecessor watch's %.2f; want at least N/3 = %.1f and three times as many", h, p, float64(n)/3)
			}
		})
	}
}

// BenchmarkHerdVsPredecessor measures what the herd costs as waiters grow: waiters goroutines on
// as many Clients take one lock in turn (acquire, release) until b.N grants; grants/s and
// wake-ups per grant for each way of waiting. On a shared two-core machine compare within a run:
//
//	go test -run='^$' -bench=HerdVsPredecessor -benchtime=200x ./internal/lock/zklock/
func BenchmarkHerdVsPredecessor(b *testing.B) {
	root := testRoot(b)
	for _, n := range []int{1, 5, 10, 20, 50} {
		for _, herd := range []bool{false, true} {
			mode := "predecessor"
			if herd {
				mode = "herd"
			}
			b.Run(fmt.Sprintf("waiters=%d/%s", n, mode), func(b *testing.B) {
				name := "bench-" + itest.Suffix(10)
				var wakes atomic.Int64
				mutexes := make([]*Mutex, n)
				for i := range n {
					c, _ := newClient(b, Options{Root: root})
					mutexes[i] = c.Mutex(MutexOptions{Herd: herd, OnWake: func() { wakes.Add(1) }})
				}
				var left atomic.Int64
				left.Store(int64(b.N))
				b.ResetTimer()
				var wg sync.WaitGroup
				for _, m := range mutexes {
					wg.Go(func() {
						for left.Add(-1) >= 0 {
							l, err := m.Acquire(b.Context(), name)
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
				}
				wg.Wait()
				b.StopTimer()
				reportOps(b)
				b.ReportMetric(float64(wakes.Load())/float64(b.N), "wakeups/grant")
			})
		}
	}
}
