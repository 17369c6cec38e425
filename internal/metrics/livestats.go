package metrics

import "github.com/prometheus/client_golang/prometheus"

// LiveStats are the metrics of the storefront's live per-second counters (internal/livestats).
type LiveStats struct {
	dropped *prometheus.CounterVec
}

// dropReasons are the reasons LiveStatsDropped is given; each series starts at 0.
var dropReasons = []string{"buffer_full", "redis_error"}

// RegisterLiveStats registers the live-counter metrics on m's registry. Call it once per Metrics
// (a second call panics on the duplicate registration, as any metric registered twice does).
func (m *Metrics) RegisterLiveStats() *LiveStats {
	f := factory{m.reg}
	l := &LiveStats{dropped: f.counterVec("seckill_livestats_dropped_total",
		"Purchase events the storefront's live per-second counters lost, by reason (buffer_full, redis_error). "+
			"Purchases themselves are never affected.", "reason")}
	for _, r := range dropReasons {
		l.dropped.WithLabelValues(r)
	}
	return l
}

// LiveStatsDropped implements livestats.Metrics.
func (l *LiveStats) LiveStatsDropped(reason string, n int) {
	l.dropped.WithLabelValues(reason).Add(float64(n))
}
