package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// zooMetrics are what the lock zoo's comparison matrix (make zoo) reads from every replica, per
// strategy: how many tries a grant (or an optimistic write) took, and how many waiters a release
// woke.
type zooMetrics struct {
	attempts *prometheus.CounterVec
	wakeups  *prometheus.CounterVec
}

// registerZoo makes the lock zoo's counters, at 0 for every strategy from the start (a rate over
// a series born at its first event misses that event).
func (m *Metrics) registerZoo() {
	f := factory{m.reg}
	m.zoo = &zooMetrics{
		attempts: f.counterVec("seckill_lock_attempts_total",
			"Tries to take a product's lock or to write its stock optimistically, by strategy and result: won, or lost (a wasted try that must wait or run again).",
			"strategy", "result"),
		wakeups: f.counterVec("seckill_lock_wakeups_total",
			"Waiters woken by a change of the lock (a release, a new waiter), by strategy: about one per grant with a predecessor watch, about every waiter with the herd.",
			"strategy"),
	}
	for _, st := range sale.Strategies {
		m.zoo.attempts.WithLabelValues(string(st), "won")
		m.zoo.attempts.WithLabelValues(string(st), "lost")
		m.zoo.wakeups.WithLabelValues(string(st))
	}
}

// LockAttempt counts one try of st's lock or optimistic write: won, or lost and wasted.
func (m *Metrics) LockAttempt(st sale.Strategy, won bool) {
	if m.zoo == nil {
		return
	}
	result := "lost"
	if won {
		result = "won"
	}
	m.zoo.attempts.WithLabelValues(string(st), result).Inc()
}

// LockWakeups counts n waiters of st's lock woken by one change.
func (m *Metrics) LockWakeups(st sale.Strategy, n int) {
	if m.zoo == nil {
		return
	}
	m.zoo.wakeups.WithLabelValues(string(st)).Add(float64(n))
}
