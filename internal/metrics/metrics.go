// Package metrics defines every Prometheus metric seckill-go exports, on a registry of its own
// (never the global one), and implements the small observer interfaces the other packages
// declare. Metric names are a public contract: the Grafana dashboard and the load test read them.
package metrics

import (
	"database/sql"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Metrics holds the collectors. The zero value is not usable; call New.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	purchases        *prometheus.CounterVec
	purchaseDuration *prometheus.HistogramVec
	lockWait         *prometheus.HistogramVec
	locksLost        *prometheus.CounterVec
	zoo              *zooMetrics
	batchSize        *prometheus.HistogramVec
	batchDuration    *prometheus.HistogramVec

	outboxBacklog  prometheus.Gauge
	relayPublished prometheus.Counter
	relayFailures  prometheus.Counter
	relayRequeued  prometheus.Counter
	ordersCreated  prometheus.Counter
	consumerBatch  prometheus.Histogram
	consumerBad    prometheus.Counter
	consumerLag    prometheus.Gauge
	poison         *prometheus.CounterVec

	httpSeries     seriesCache[httpLabels, httpObservers]
	purchaseSeries seriesCache[purchaseLabels, purchaseObservers]
}

type httpLabels struct {
	route, method string
	code          int
}

type httpObservers struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

type purchaseLabels struct {
	strategy, outcome string
}

type purchaseObservers struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// lockStrategies, the registry's strategies with a lease of their own (the ones that report lost
// locks), get their lost-lock series at 0 from the start, so that a dashboard shows 0 rather than
// "no data" and increase() counts the first loss.
var lockStrategies = sale.StrategiesWhere(func(c sale.StrategyInfo) bool { return c.Lock == sale.LockLease })

// latencyBuckets spans 0.5 ms to 10 s: a conditional UPDATE is a millisecond, a lock wait under a
// stampede can be seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New registers every metric on a fresh registry, with the Go runtime and process collectors.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f := factory{reg}
	m := &Metrics{
		reg: reg,
		httpRequests: f.counterVec("seckill_http_requests_total",
			"HTTP requests by route, method and status code.", "route", "method", "code"),
		httpDuration: f.histogramVec("seckill_http_request_duration_seconds",
			"HTTP request latency by route and method.", "route", "method"),
		purchases: f.counterVec("seckill_purchases_total",
			"Purchase attempts by strategy and outcome: accepted, or the API's error code (sold_out, limit_reached, rate_limited, ...).", "strategy", "outcome"),
		purchaseDuration: f.histogramVec("seckill_purchase_duration_seconds",
			"Time to decide a purchase (rules, lock wait and deduction), by strategy and outcome.", "strategy", "outcome"),
		lockWait: f.histogramVec("seckill_lock_wait_seconds",
			"Time spent waiting for a product's distributed lock, by strategy.", "strategy"),
		locksLost: f.counterVec("seckill_locks_lost_total",
			"Leases that could no longer be trusted while held (renewal failed, session expired), by strategy.", "strategy"),
		batchSize: f.histogramVecBuckets("seckill_batch_size",
			"Purchases of one product combined into one deduction (one lock acquisition, one transaction), by strategy.",
			prometheus.ExponentialBuckets(1, 2, 11), "strategy"),
		batchDuration: f.histogramVec("seckill_batch_duration_seconds",
			"Time one combined deduction took, lock wait included, by strategy.", "strategy"),
		outboxBacklog: f.gauge("seckill_outbox_backlog",
			"Reservations committed but not yet published to Kafka, as last seen by this relay."),
		relayPublished: f.counter("seckill_relay_published_total",
			"Reservations published to Kafka and acknowledged by the broker."),
		relayFailures: f.counter("seckill_relay_failures_total",
			"Relay batches that failed (broker or database unavailable) and were retried."),
		relayRequeued: f.counter("seckill_relay_requeued_total",
			"Published reservations without an order after the requeue delay, published again."),
		ordersCreated: f.counter("seckill_orders_created_total",
			"Orders created by the consumer (redeliveries create none)."),
		consumerBatch: f.histogram("seckill_consumer_batch_size",
			"Order events handled per consumer batch.", prometheus.ExponentialBuckets(1, 4, 6)),
		consumerBad: f.counter("seckill_consumer_malformed_total",
			"Order events the consumer could not decode and skipped."),
		consumerLag: f.gauge("seckill_consumer_lag",
			"Order events in the assigned partitions not yet consumed, as last reported by the reader."),
	}
	for _, st := range lockStrategies {
		m.locksLost.WithLabelValues(string(st))
	}
	m.registerZoo()
	m.registerPoison()
	return m
}

// CollectDB exports the connection pool's figures of db as go_sql_* (open, in use, idle, waits),
// labelled db_name=name: a soak follows them for leaks, an operator for a saturated pool.
func (m *Metrics) CollectDB(db *sql.DB, name string) {
	m.reg.MustRegister(collectors.NewDBStatsCollector(db, name))
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ObserveHTTP records one HTTP request. route is the route pattern, never the raw path.
func (m *Metrics) ObserveHTTP(route, method string, code int, took time.Duration) {
	o := m.httpSeries.get(httpLabels{route, method, code}, func() httpObservers {
		return httpObservers{
			requests: m.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)),
			duration: m.httpDuration.WithLabelValues(route, method),
		}
	})
	o.requests.Inc()
	o.duration.Observe(took.Seconds())
}

// ObservePurchase implements sale.Observer.
func (m *Metrics) ObservePurchase(o sale.Observation) {
	label, outcome := string(o.Strategy), string(o.Code)
	if label == "" {
		label = "unknown"
	}
	series := m.purchaseSeries.get(purchaseLabels{label, outcome}, func() purchaseObservers {
		return purchaseObservers{
			count:    m.purchases.WithLabelValues(label, outcome),
			duration: m.purchaseDuration.WithLabelValues(label, outcome),
		}
	})
	series.count.Inc()
	series.duration.Observe(o.Took.Seconds())
}

// ObserveLockWait records the time a purchase waited for its product's lock.
func (m *Metrics) ObserveLockWait(st sale.Strategy, took time.Duration) {
	m.lockWait.WithLabelValues(string(st)).Observe(took.Seconds())
}

// BatchObserver returns the function the strategy's Combiner reports each batch to.
func (m *Metrics) BatchObserver(st sale.Strategy) func(size int, took time.Duration) {
	size, duration := m.batchSize.WithLabelValues(string(st)), m.batchDuration.WithLabelValues(string(st))
	return func(n int, took time.Duration) {
		size.Observe(float64(n))
		duration.Observe(took.Seconds())
	}
}

// LockLost counts a lease lost while held.
func (m *Metrics) LockLost(st sale.Strategy) { m.locksLost.WithLabelValues(string(st)).Inc() }

// RelayPublished implements order.RelayMetrics.
func (m *Metrics) RelayPublished(n int) { m.relayPublished.Add(float64(n)) }

// RelayFailed implements order.RelayMetrics.
func (m *Metrics) RelayFailed() { m.relayFailures.Inc() }

// RelayRequeued implements order.RelayMetrics.
func (m *Metrics) RelayRequeued(n int64) { m.relayRequeued.Add(float64(n)) }

// SetOutboxBacklog implements order.RelayMetrics.
func (m *Metrics) SetOutboxBacklog(n int64) { m.outboxBacklog.Set(float64(n)) }

// OrdersCreated implements order.ConsumerMetrics.
func (m *Metrics) OrdersCreated(n int64) { m.ordersCreated.Add(float64(n)) }

// ConsumerBatch implements order.ConsumerMetrics.
func (m *Metrics) ConsumerBatch(size int) { m.consumerBatch.Observe(float64(size)) }

// ConsumerMalformed implements order.ConsumerMetrics.
func (m *Metrics) ConsumerMalformed() { m.consumerBad.Inc() }

// SetConsumerLag implements order.ConsumerMetrics.
func (m *Metrics) SetConsumerLag(n int64) { m.consumerLag.Set(float64(n)) }

// factory registers each metric as it is made.
type factory struct{ reg prometheus.Registerer }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogramVec(name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) histogramVecBuckets(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(g)
	return g
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}
