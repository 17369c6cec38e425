package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
)

// ClientProvider is the provider handed to the instrumentations of the calls a request makes
// (gorm's plugin): its spans are never a trace's root (childrenOnly).
func (t *Tracing) ClientProvider() trace.TracerProvider { return childrenOnly{p: t.provider} }

// sampled reports whether a span started under ctx would be sampled, when it cannot be a root:
// whether ctx carries a sampled parent, local or remote.
func sampled(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsSampled() }

// childrenOnly is a TracerProvider of spans that are never a trace's root: a Redis command, an
// SQL statement, a deduction, a lock wait. Under a sampled parent its tracers start spans as the
// provider's do; under any other context they start nothing and return the context's own span
// (a non-recording one, or the no-op span), which costs one context lookup.
//
// It decides as Sampler would, earlier: a span with a parent follows its parent's decision, and
// a root that is not a request's is dropped. The SDK reaches the same "drop" only after it has
// read the span's options, drawn its ids and allocated a non-recording span, and the
// instrumentation before it (gorm's plugin) has built its options: per purchase,
// a handful of such spans that nobody would ever see, several per cent of a replica's CPU at the
// default sample of 1 % (make bench's tracing pair, pprof). The program's own spans of that kind
// (the deduction, the lock's wait and release) ask sampled before they build their options.
type childrenOnly struct {
	embedded.TracerProvider
	p trace.TracerProvider
}

func (c childrenOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{t: c.p.Tracer(name, opts...)}
}

type childTracer struct {
	embedded.Tracer
	t trace.Tracer
}

func (c childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !sampled(ctx) {
		return ctx, trace.SpanFromContext(ctx)
	}
	return c.t.Start(ctx, name, opts...)
}
