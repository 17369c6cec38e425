package httpapi

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/fstest"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// BenchmarkPurchaseSoldOutTraced is BenchmarkPurchaseSoldOut's recorder/no-key case with tracing
// on, at the default sample and at every request, its spans dropped by a no-op exporter: what
// the server span costs the cheapest purchase (compare with tracing off, BenchmarkPurchaseSoldOut).
func BenchmarkPurchaseSoldOutTraced(b *testing.B) {
	for _, sample := range []struct {
		name     string
		fraction float64
	}{{"sample-0.01", 0.01}, {"sample-1", 1}} {
		b.Run(sample.name, func(b *testing.B) {
			tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.OTLP, Sample: sample.fraction,
				Instance: "bench", Processor: sdktrace.NewSimpleSpanProcessor(tracetest.NewNoopExporter())})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Shutdown(context.Background())
			m := metrics.New()
			log := slog.New(tracing.LogHandler(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: benchLogLevel})))
			h, err := New(Deps{Log: log, Sales: soldOutSales{}, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m}, Config{
				AdminToken:           "bench",
				MaxInflightPurchases: 2000,
				Metrics:              m.Handler(),
				Web:                  fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}},
				Tracing:              tr,
			})
			if err != nil {
				b.Fatal(err)
			}
			benchRecorder(b, h, false)
		})
	}
}
