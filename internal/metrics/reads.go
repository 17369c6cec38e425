package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Reads are the metrics of the read side (docs/read-path.md): the board's refreshes and the event
// streams.
type Reads struct {
	refresh      prometheus.Histogram
	refreshFails prometheus.Counter
	open         prometheus.Gauge
	refused      *prometheus.CounterVec
	writes       prometheus.Counter
	events       prometheus.Counter
}

// RegisterReads registers the read side's metrics on m's registry; call it once per Metrics.
func (m *Metrics) RegisterReads() *Reads {
	f := factory{m.reg}
	r := &Reads{
		refresh: f.histogram("seckill_board_refresh_seconds",
			"Time of one refresh of the board that public reads are answered from (all products, the live stocks, the rates).",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}),
		refreshFails: f.counter("seckill_board_refresh_failures_total",
			"Board refreshes that could not read the products: viewers see the figures read last until one succeeds."),
		open: f.gauge("seckill_event_streams_open", "Event streams (GET /api/v1/events) open on this replica."),
		refused: f.counterVec("seckill_event_streams_refused_total",
			"Event streams refused by a limit: replica (SECKILL_STREAMS_MAX) or client (SECKILL_STREAMS_PER_CLIENT).", "limit"),
		writes: f.counter("seckill_event_stream_writes_total", "Writes to event streams (each one or more events, or a heartbeat)."),
		events: f.counter("seckill_event_stream_events_total", "Events written to event streams."),
	}
	for _, l := range []string{"replica", "client"} {
		r.refused.WithLabelValues(l)
	}
	return r
}

// BoardRefreshed implements board.Metrics.
func (r *Reads) BoardRefreshed(took time.Duration, err error) {
	r.refresh.Observe(took.Seconds())
	if err != nil {
		r.refreshFails.Inc()
	}
}

// StreamOpened implements httpapi.StreamMetrics.
func (r *Reads) StreamOpened() { r.open.Inc() }

// StreamClosed implements httpapi.StreamMetrics.
func (r *Reads) StreamClosed() { r.open.Dec() }

// StreamRefused implements httpapi.StreamMetrics.
func (r *Reads) StreamRefused(limit string) { r.refused.WithLabelValues(limit).Inc() }

// StreamWritten implements httpapi.StreamMetrics.
func (r *Reads) StreamWritten(events int) {
	r.writes.Inc()
	r.events.Add(float64(events))
}
