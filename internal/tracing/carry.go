package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderTraceParent is the W3C header, and the Kafka message header, that carries a span
// context from one process to the next.
const HeaderTraceParent = "traceparent"

// TraceParentLen is the length of a traceparent of version 00, the only one TraceParent writes:
// the size of the outbox column that keeps it.
const TraceParentLen = 55

// TraceParent returns the traceparent of the span in ctx when that span is sampled, and "" when
// it is not (or ctx carries none): what a purchase stores with its reservation
// (sale.Options.TraceParent), so that the relay and the consumer continue its trace. An
// unsampled purchase stores nothing, and nothing after it is traced either, as a sampled
// parent's children would not be.
func (t *Tracing) TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	var c oneHeader
	t.propagator.Inject(ctx, &c)
	return c.traceparent
}

// ContextWithRemoteParent returns ctx carrying the span context that traceparent names, as a
// remote parent: a span started under it continues that trace. A traceparent that is empty or
// malformed leaves ctx as it is.
func (t *Tracing) ContextWithRemoteParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return t.propagator.Extract(ctx, &oneHeader{traceparent: traceparent})
}

// SpanContextOf returns the span context that traceparent names; it is not valid when
// traceparent is empty or malformed. A link to another purchase's span is made of it.
func (t *Tracing) SpanContextOf(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.ContextWithRemoteParent(context.Background(), traceparent))
}

// Tracer is the tracer of the program's own spans, for the packages that start spans of their
// own kind (the outbox relay's and the order consumer's, internal/orderqueue).
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// oneHeader is a TextMapCarrier of the traceparent alone: tracestate is not carried, since the
// program sets none and the outbox keeps one fixed-size column.
type oneHeader struct{ traceparent string }

var _ propagation.TextMapCarrier = (*oneHeader)(nil)

func (c oneHeader) Get(key string) string {
	if key == HeaderTraceParent {
		return c.traceparent
	}
	return ""
}

func (c *oneHeader) Set(key, value string) {
	if key == HeaderTraceParent {
		c.traceparent = value
	}
}

func (c oneHeader) Keys() []string { return []string{HeaderTraceParent} }
