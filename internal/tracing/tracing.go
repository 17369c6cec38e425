// Package tracing is the program's OpenTelemetry tracing: the TracerProvider the configuration
// asks for, and the few spans of the program's own (a deduction, a lock wait) that the libraries'
// instrumentations cannot see. Off, it is nothing at all: New returns nil, and every caller
// installs nothing on a nil *Tracing, so that the purchase path pays for no span, no exporter and
// no context lookup. It must never become a global provider (otel.SetTracerProvider): what is
// traced is what the program hands a provider to.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The exporters SECKILL_TRACING names.
const (
	// Off records nothing (the default).
	Off = "off"
	// OTLP sends the sampled spans over OTLP/HTTP.
	OTLP = "otlp"
)

// ServiceName is the service.name of every span the program sends.
const ServiceName = "seckill"

// scope is the instrumentation scope of the program's own spans.
const scope = "github.com/seckill-go/seckill-go"

// Options are the tracing settings (internal/config's Tracing).
type Options struct {
	// Exporter is Off or OTLP.
	Exporter string
	// Sample is the fraction of the requests that start a trace, 0 to 1.
	Sample float64
	// Endpoint is the OTLP/HTTP collector's base URL (OTEL_EXPORTER_OTLP_ENDPOINT); the traces
	// go to its /v1/traces.
	Endpoint string
	// Instance is this process's service.instance.id (SECKILL_INSTANCE_ID).
	Instance string
	// Processor, if set, receives the spans instead of the OTLP exporter: a test's recorder.
	Processor sdktrace.SpanProcessor
}

// Tracing is the process's tracing when it is on. A nil *Tracing is tracing off: Enabled
// reports false and the callers install nothing.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

// New returns the tracing o asks for: nil (and no error) when it is off.
func New(ctx context.Context, o Options) (*Tracing, error) {
	switch o.Exporter {
	case Off, "":
		return nil, nil
	case OTLP:
	default:
		return nil, fmt.Errorf("tracing: unknown exporter %q (want %s or %s)", o.Exporter, Off, OTLP)
	}
	if o.Sample < 0 || o.Sample > 1 {
		return nil, fmt.Errorf("tracing: sample %v is not between 0 and 1", o.Sample)
	}
	processor := o.Processor
	if processor == nil {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(strings.TrimRight(o.Endpoint, "/")+"/v1/traces"))
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
		}
		processor = sdktrace.NewBatchSpanProcessor(exp)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(ServiceName), semconv.ServiceInstanceID(o.Instance)))
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(processor),
		sdktrace.WithSampler(Sampler(o.Sample)),
	)
	return &Tracing{provider: tp, tracer: tp.Tracer(scope), propagator: propagation.TraceContext{}}, nil
}

// Sampler is the sampler of a process tracing a fraction of its requests: a span with a parent
// follows its parent's decision (a remote parent's too: the caller's traceparent decides); a
// root span is sampled at that fraction only if it is a request's (a server or a consumer span).
// A root that is a background task's query (the relay's poll, the reconcile's audit, a lease's
// renewal) starts no trace: at any rate they would bury the purchases.
func Sampler(fraction float64) sdktrace.Sampler {
	return sdktrace.ParentBased(requestRoots{sdktrace.TraceIDRatioBased(fraction)})
}

// requestRoots samples the root spans of requests with its ratio sampler, and drops the others.
type requestRoots struct{ ratio sdktrace.Sampler }

func (s requestRoots) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.Kind != trace.SpanKindServer && p.Kind != trace.SpanKindConsumer {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
	}
	return s.ratio.ShouldSample(p)
}

func (s requestRoots) Description() string { return "RequestRoots{" + s.ratio.Description() + "}" }

// Enabled reports whether tracing is on.
func (t *Tracing) Enabled() bool { return t != nil }

// Provider is the provider of the spans that may start a trace (a request's server span); the
// instrumentations of client calls get ClientProvider.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Propagator reads and writes the W3C traceparent (and tracestate) of a request or a message.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.propagator }

// Shutdown sends the spans still buffered and stops the exporter; ctx bounds the wait. A nil
// Tracing has nothing to flush.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
