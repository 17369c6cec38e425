package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/tracing"
)

// TestTracingOffIsNil: off (or unset) is a nil Tracing, which reports itself off and has nothing
// to flush; an unknown exporter or a sample outside [0, 1] is refused.
func TestTracingOffIsNil(t *testing.T) {
	for _, exp := range []string{"", tracing.Off} {
		tr, err := tracing.New(context.Background(), tracing.Options{Exporter: exp, Processor: tracetest.NewSpanRecorder()})
		if err != nil || tr != nil || tr.Enabled() {
			t.Errorf("exporter %q: New = %v, %v; want nil, nil", exp, tr, err)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Errorf("nil Shutdown: %v", err)
		}
	}
	for _, o := range []tracing.Options{{Exporter: "jaeger"}, {Exporter: tracing.OTLP, Sample: 1.5}, {Exporter: tracing.OTLP, Sample: -0.1}} {
		if _, err := tracing.New(context.Background(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestTracingSampler: a request (a server or consumer span) starts a trace at the sampled
// fraction; a background task's root span never does; a child follows its parent, a remote
// one's too.
func TestTracingSampler(t *testing.T) {
	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{2}, SpanID: trace.SpanID{2}, Remote: true})
	for _, tc := range []struct {
		name     string
		fraction float64
		parent   trace.SpanContext
		kind     trace.SpanKind
		want     sdktrace.SamplingDecision
	}{
		{"request root at 1", 1, trace.SpanContext{}, trace.SpanKindServer, sdktrace.RecordAndSample},
		{"consumer root at 1", 1, trace.SpanContext{}, trace.SpanKindConsumer, sdktrace.RecordAndSample},
		{"request root at 0", 0, trace.SpanContext{}, trace.SpanKindServer, sdktrace.Drop},
		{"background query root at 1", 1, trace.SpanContext{}, trace.SpanKindClient, sdktrace.Drop},
		{"internal root at 1", 1, trace.SpanContext{}, trace.SpanKindInternal, sdktrace.Drop},
		{"request with a sampled traceparent at 0", 0, sampled, trace.SpanKindServer, sdktrace.RecordAndSample},
		{"query under a sampled parent at 0", 0, sampled, trace.SpanKindClient, sdktrace.RecordAndSample},
		{"request with an unsampled traceparent at 1", 1, unsampled, trace.SpanKindServer, sdktrace.Drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := trace.ContextWithRemoteSpanContext(context.Background(), tc.parent)
			got := tracing.Sampler(tc.fraction).ShouldSample(sdktrace.SamplingParameters{
				ParentContext: ctx, TraceID: trace.TraceID{9}, Name: "x", Kind: tc.kind}).Decision
			if got != tc.want {
				t.Errorf("decision %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTracingLogHandler: a record logged with a context of a valid span carries its trace_id and
// span_id; without one, the record is as it was.
func TestTracingLogHandler(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Instance: "test-1", Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ctx, span := tr.Provider().Tracer("test").Start(context.Background(), "request", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()

	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("instance", "test-1")
	line := func(f func()) map[string]any {
		t.Helper()
		buf.Reset()
		f()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, buf.String())
		}
		delete(m, "time")
		return m
	}
	sc := span.SpanContext()
	if diff := cmp.Diff(map[string]any{"level": "INFO", "msg": "traced", "instance": "test-1", "k": "v",
		"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()},
		line(func() { log.InfoContext(ctx, "traced", "k", "v") })); diff != "" {
		t.Errorf("with a span (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"level": "INFO", "msg": "plain", "instance": "test-1"},
		line(func() { log.InfoContext(context.Background(), "plain") })); diff != "" {
		t.Errorf("without a span (-want +got):\n%s", diff)
	}
}

// TestTracingResource: the spans name the service and this instance.
func TestTracingResource(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Instance: "replica-7", Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider().Tracer("test").Start(context.Background(), "request", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	got := map[string]string{}
	for _, kv := range spans[0].Resource().Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["service.name"] != tracing.ServiceName || got["service.instance.id"] != "replica-7" {
		t.Errorf("resource %v: want service.name %s and service.instance.id replica-7", got, tracing.ServiceName)
	}
}

// TestTracingExportsOTLP: on with no recorder, the spans go to the endpoint's /v1/traces over
// OTLP/HTTP, at the latest when the provider shuts down.
func TestTracingExportsOTLP(t *testing.T) {
	var mu sync.Mutex
	var got []string
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Endpoint: collector.URL + "/", Instance: "otlp-1"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider().Tracer("test").Start(context.Background(), "request", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"POST /v1/traces application/x-protobuf"}, got); diff != "" {
		t.Errorf("requests to the collector (-want +got):\n%s", diff)
	}
}
