package metrics

import "github.com/prometheus/client_golang/prometheus"

// Lifecycle are the metrics of the order lifecycle's events on their way from their outbox
// (order_events) through the lifecycle topic into the tallies: the event relay's and the event
// consumer's, apart from the order pipeline's, whose backlog and lag they would otherwise blur.
type Lifecycle struct {
	backlog   prometheus.Gauge
	published prometheus.Counter
	failures  prometheus.Counter
	tallied   prometheus.Counter
	batch     prometheus.Histogram
	malformed prometheus.Counter
	lag       prometheus.Gauge
	// poison counts what the event relay and consumer park (Metrics.PoisonRows).
	poison func(loop string, n int)
}

// RegisterLifecycle registers the lifecycle event metrics on m's registry. Call it once per
// Metrics (a second call panics on the duplicate registration).
func (m *Metrics) RegisterLifecycle() *Lifecycle {
	f := factory{m.reg}
	return &Lifecycle{
		poison: m.PoisonRows,
		backlog: f.gauge("seckill_lifecycle_outbox_backlog",
			"Order events (paid, expired, cancelled) committed but not yet published to Kafka, as last seen by this relay."),
		published: f.counter("seckill_lifecycle_relay_published_total",
			"Order events published to the lifecycle topic and acknowledged by the broker."),
		failures: f.counter("seckill_lifecycle_relay_failures_total",
			"Event relay batches that failed (broker or database unavailable) and were retried."),
		tallied: f.counter("seckill_lifecycle_events_tallied_total",
			"Order events counted into the per-product tallies (redeliveries count none)."),
		batch: f.histogram("seckill_lifecycle_consumer_batch_size",
			"Order events handled per event consumer batch.", prometheus.ExponentialBuckets(1, 4, 6)),
		malformed: f.counter("seckill_lifecycle_consumer_malformed_total",
			"Messages of the lifecycle topic the event consumer could not decode and skipped."),
		lag: f.gauge("seckill_lifecycle_consumer_lag",
			"Order events in the assigned partitions not yet consumed, as last reported by the reader."),
	}
}

// RelayPublished implements order.OutboxMetrics.
func (l *Lifecycle) RelayPublished(n int) { l.published.Add(float64(n)) }

// RelayFailed implements order.OutboxMetrics.
func (l *Lifecycle) RelayFailed() { l.failures.Inc() }

// SetOutboxBacklog implements order.OutboxMetrics.
func (l *Lifecycle) SetOutboxBacklog(n int64) { l.backlog.Set(float64(n)) }

// EventsTallied implements order.EventConsumerMetrics.
func (l *Lifecycle) EventsTallied(n int64) { l.tallied.Add(float64(n)) }

// ConsumerBatch implements order.GroupMetrics.
func (l *Lifecycle) ConsumerBatch(size int) { l.batch.Observe(float64(size)) }

// ConsumerMalformed implements order.GroupMetrics.
func (l *Lifecycle) ConsumerMalformed() { l.malformed.Inc() }

// SetConsumerLag implements order.GroupMetrics.
func (l *Lifecycle) SetConsumerLag(n int64) { l.lag.Set(float64(n)) }
