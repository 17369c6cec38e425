package tracing_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// on returns tracing on at sample 1, recording into rec.
func on(t *testing.T, rec *tracetest.SpanRecorder) *tracing.Tracing {
	t.Helper()
	tr, err := tracing.New(t.Context(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTraceParentRoundTrip: a sampled span's traceparent is the W3C header of version 00 (55
// characters, the column's size) and names that span; a context without a span, or with an
// unsampled one, has none, so that the outbox stores nothing for it; what TraceParent wrote,
// ContextWithRemoteParent reads back as a remote parent, and what is no traceparent leaves the
// context as it was.
func TestTraceParentRoundTrip(t *testing.T) {
	tr := on(t, tracetest.NewSpanRecorder())
	ctx, span := tr.Provider().Tracer("test").Start(t.Context(), "request", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	tp := tr.TraceParent(ctx)
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if diff := cmp.Diff(want, tp); diff != "" || len(tp) != tracing.TraceParentLen {
		t.Fatalf("traceparent (-want +got):\n%s", diff)
	}
	back := trace.SpanContextFromContext(tr.ContextWithRemoteParent(t.Context(), tp))
	if !back.IsRemote() || back.SpanID() != span.SpanContext().SpanID() || back.TraceID() != span.SpanContext().TraceID() || !back.IsSampled() {
		t.Errorf("read back %+v, want the span's context, remote", back)
	}

	unsampled := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}}))
	for name, ctx := range map[string]context.Context{"no span": t.Context(), "unsampled": unsampled} {
		if got := tr.TraceParent(ctx); got != "" {
			t.Errorf("%s: traceparent %q, want none", name, got)
		}
	}
	for _, bad := range []string{"", "00-zz", "garbage"} {
		if sc := tr.SpanContextOf(bad); sc.IsValid() {
			t.Errorf("%q read as %+v", bad, sc)
		}
	}
}

// TestPersistingContinuesTheFirstSampledPurchase: the persister's span of a batch is the child
// of its first sampled purchase and links the other sampled ones; a batch of which none was
// sampled starts no span.
func TestPersistingContinuesTheFirstSampledPurchase(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := on(t, rec)
	const (
		tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		tpB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	ctx, end := tr.Persisting(t.Context(), []sale.Reservation{{}, {TraceParent: tpA}, {}, {TraceParent: tpB}})
	inside := trace.SpanContextFromContext(ctx)
	end(nil)
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	a, b := tr.SpanContextOf(tpA), tr.SpanContextOf(tpB)
	if s.Name() != tracing.PersistSpan || s.Parent().SpanID() != a.SpanID() || s.SpanContext().TraceID() != a.TraceID() || inside.SpanID() != s.SpanContext().SpanID() {
		t.Errorf("span %s, parent %s of trace %s; want %s, the child of %s", s.Name(), s.Parent().SpanID(), s.SpanContext().TraceID(), tracing.PersistSpan, tpA)
	}
	if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != b.SpanID() {
		t.Errorf("links %v, want one to %s", l, tpB)
	}

	ctx, end = tr.Persisting(t.Context(), []sale.Reservation{{}, {}})
	end(nil)
	if ctx != t.Context() || len(rec.Ended()) != 1 {
		t.Errorf("an unsampled batch: context changed %v, %d spans in all (want the 1 before)", ctx != t.Context(), len(rec.Ended()))
	}
}

// acceptAll is a sale.BatchDeductor that accepts every purchase.
type acceptAll struct{}

func (acceptAll) DeductBatch(_ context.Context, batch []sale.Reservation) ([]error, error) {
	return make([]error, len(batch)), nil
}

// TestBatchDeductionLinksItsBuyers: a combined batch runs in its first buyer's trace, and its
// deduction span links every other sampled buyer's request span, so that from the batch each
// buyer it decided can be found; an unsampled buyer (no traceparent) has no link.
func TestBatchDeductionLinksItsBuyers(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := on(t, rec)
	const (
		tpFirst = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		tpB     = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	ctx := tr.ContextWithRemoteParent(t.Context(), tpFirst)
	d := tr.BatchDeductor(sale.Strategy("mysql"), acceptAll{})
	if _, err := d.DeductBatch(ctx, []sale.Reservation{{TraceParent: tpFirst}, {}, {TraceParent: tpB}}); err != nil {
		t.Fatal(err)
	}
	var got []trace.SpanID
	for _, l := range rec.Ended()[0].Links() {
		got = append(got, l.SpanContext.SpanID())
	}
	if diff := cmp.Diff([]trace.SpanID{tr.SpanContextOf(tpB).SpanID()}, got); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}
}

// TestLifecycleSpans: an order's lifecycle change made by a request is the child of the
// request's span, linking the purchases; made in the background, it continues the first
// purchase's trace and links the others; in the background with no sampled purchase it starts
// nothing and its events carry no traceparent.
func TestLifecycleSpans(t *testing.T) {
	const (
		tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		tpB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	)
	rec := tracetest.NewSpanRecorder()
	tr := on(t, rec)
	request, span := tr.Provider().Tracer("test").Start(t.Context(), "pay", trace.WithSpanKind(trace.SpanKindServer))
	span.End()
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		purchases []string
		parent    trace.SpanContext // the zero one: no span wanted
		links     []trace.SpanID
	}{
		{"a request's", request, []string{tpA, tpB}, span.SpanContext(), []trace.SpanID{tr.SpanContextOf(tpA).SpanID(), tr.SpanContextOf(tpB).SpanID()}},
		{"the background's", t.Context(), []string{tpA, tpB}, tr.SpanContextOf(tpA), []trace.SpanID{tr.SpanContextOf(tpB).SpanID()}},
		{"the background's, untraced", t.Context(), nil, trace.SpanContext{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.Ended())
			ctx, tp, end := tr.Lifecycle(tc.ctx, "order.paid", tc.purchases)
			end(nil)
			ended := rec.Ended()[before:]
			if !tc.parent.IsValid() {
				if len(ended) != 0 || tp != "" || ctx != tc.ctx {
					t.Errorf("%d spans, traceparent %q; want none", len(ended), tp)
				}
				return
			}
			if len(ended) != 1 {
				t.Fatalf("%d spans, want 1", len(ended))
			}
			s := ended[0]
			if s.Name() != tracing.EventSpan || s.Parent().SpanID() != tc.parent.SpanID() || s.SpanContext().TraceID() != tc.parent.TraceID() {
				t.Errorf("%s under %s of trace %s; want %s under %s", s.Name(), s.Parent().SpanID(), s.SpanContext().TraceID(), tracing.EventSpan, tc.parent.SpanID())
			}
			if tr.SpanContextOf(tp).SpanID() != s.SpanContext().SpanID() {
				t.Errorf("the events carry %q, not the change's span %s", tp, s.SpanContext().SpanID())
			}
			var links []trace.SpanID
			for _, l := range s.Links() {
				links = append(links, l.SpanContext.SpanID())
			}
			if diff := cmp.Diff(tc.links, links); diff != "" {
				t.Errorf("links (-want +got):\n%s", diff)
			}
		})
	}
}
