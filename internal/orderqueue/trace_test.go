package orderqueue

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// Two purchases' traceparents, sampled, as the outbox keeps them.
const (
	tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tpB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// traced returns tracing on at sample 1 that records into a recorder of its own.
func traced(t *testing.T) (*tracing.Tracing, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tr, err := tracing.New(t.Context(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rec
}

// TestTraceHeader: an entry's traceparent becomes the message's one header, and is read back;
// an entry without one (tracing off, a purchase not sampled) gets no header at all.
func TestTraceHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		tp   string
		want []kafka.Header
	}{
		{"traced", tpA, []kafka.Header{{Key: "traceparent", Value: []byte(tpA)}}},
		{"not traced", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c claimed
			c.add(1, "7", []byte("{}"), tc.tp, "", nil)
			if diff := cmp.Diff(tc.want, c.msgs[0].Headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if got := headerTraceParent(&c.msgs[0]); got != tc.tp {
				t.Errorf("read back %q, want %q", got, tc.tp)
			}
		})
	}
}

// TestPublishSpans: the relay starts a producer span per traced message, as the child of the
// purchase's span, and the header then names that span (the consumer's parent); an untraced
// message gets none and keeps no header; a message that failed ends its span as an error. A
// batch without a traced message starts nothing.
func TestPublishSpans(t *testing.T) {
	tr, rec := traced(t)
	msgs := []kafka.Message{{Headers: traceHeader(tpA)}, {}, {Headers: traceHeader(tpB)}}
	spans := startPublish(t.Context(), tr, []int64{10, 11, 12}, msgs)
	endPublish(spans, []int64{10, 11, 12}, written{done: []int64{10, 11}, failed: []int64{12}, err: errors.New("broker away")})

	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want 2 (the traced messages')", len(ended))
	}
	for i, want := range []struct {
		parent string
		status codes.Code
		msg    int
	}{{tpA, codes.Unset, 0}, {tpB, codes.Error, 2}} {
		s := ended[i]
		parent := tr.SpanContextOf(want.parent)
		if s.Name() != PublishSpan || s.SpanKind() != trace.SpanKindProducer || s.Parent().SpanID() != parent.SpanID() || s.SpanContext().TraceID() != parent.TraceID() {
			t.Errorf("span %d: %s %s, parent %s of trace %s; want a producer span, child of %s", i, s.Name(), s.SpanKind(), s.Parent().SpanID(), s.SpanContext().TraceID(), want.parent)
		}
		if s.Status().Code != want.status {
			t.Errorf("span %d: status %v, want %v", i, s.Status(), want.status)
		}
		if got := headerTraceParent(&msgs[want.msg]); tr.SpanContextOf(got).SpanID() != s.SpanContext().SpanID() {
			t.Errorf("message %d's header %q does not name its publish span %s", want.msg, got, s.SpanContext().SpanID())
		}
	}
	if msgs[1].Headers != nil {
		t.Errorf("the untraced message got headers %v", msgs[1].Headers)
	}
	if spans := startPublish(t.Context(), tr, []int64{1}, []kafka.Message{{}}); spans != nil {
		t.Errorf("an untraced batch started spans %v", spans)
	}
}

// TestConsumeSpans: the consumer continues each traced message's trace with a consumer span;
// the batch's write runs in the first one's, which every other links, so that each purchase's
// trace shows its message consumed and leads to its order's INSERT. An untraced message starts
// nothing (its purchase was not sampled); a batch of them is written in the consumer's own
// context, with no span at all; the check sees it: no span, no trace.
func TestConsumeSpans(t *testing.T) {
	tr, rec := traced(t)
	batch := []kafka.Message{{Headers: traceHeader(tpA)}, {}, {Headers: traceHeader(tpB)}}
	ctx, end := startConsume(t.Context(), tr, batch)
	write := trace.SpanContextFromContext(ctx)
	end(false)

	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want 2 (the traced messages')", len(ended))
	}
	first, second := ended[0], ended[1]
	for i, tc := range []struct {
		s      sdktrace.ReadOnlySpan
		parent string
	}{{first, tpA}, {second, tpB}} {
		p := tr.SpanContextOf(tc.parent)
		if tc.s.Name() != ConsumeSpan || tc.s.SpanKind() != trace.SpanKindConsumer || tc.s.Parent().SpanID() != p.SpanID() || tc.s.SpanContext().TraceID() != p.TraceID() {
			t.Errorf("span %d: %s %s, parent %s; want a consumer span, child of %s", i, tc.s.Name(), tc.s.SpanKind(), tc.s.Parent().SpanID(), tc.parent)
		}
		if tc.s.Status().Code != codes.Error {
			t.Errorf("span %d: status %v, want an error (the batch was not applied)", i, tc.s.Status())
		}
	}
	if write.SpanID() != first.SpanContext().SpanID() {
		t.Errorf("the batch is written in span %s, want the first message's %s", write.SpanID(), first.SpanContext().SpanID())
	}
	links := second.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID() != first.SpanContext().SpanID() {
		t.Errorf("the second message's span links %v, want the first's span %s", links, first.SpanContext().SpanID())
	}

	untraced := context.WithValue(t.Context(), ctxKey{}, 1)
	ctx, end = startConsume(untraced, tr, []kafka.Message{{}, {Headers: []kafka.Header{{Key: "other", Value: []byte("x")}}}})
	end(true)
	if ctx != untraced || len(rec.Ended()) != 2 {
		t.Errorf("an untraced batch: context changed %v, %d spans in all (want 2, the earlier ones)", ctx != untraced, len(rec.Ended()))
	}
}

// ctxKey marks a context, to tell it from one derived from it.
type ctxKey struct{}

// TestEndPublishReasons: a refused message's span says why the broker refused it.
func TestEndPublishReasons(t *testing.T) {
	tr, rec := traced(t)
	msgs := []kafka.Message{{Headers: traceHeader(tpA)}}
	endPublish(startPublish(t.Context(), tr, []int64{5}, msgs), []int64{5}, written{refused: []order.ParkedEntry{{ID: 5, Reason: "too large"}}})
	if got := rec.Ended()[0].Status(); got.Code != codes.Error || got.Description != "too large" {
		t.Errorf("status %+v, want an error saying too large", got)
	}
}
