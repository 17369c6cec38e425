package orderqueue

import (
	"context"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/tracing"
)

// The spans of the order pipeline: how a purchase's trace crosses Kafka (docs/order-pipeline.md).
const (
	// PublishSpan is the relay's publish of one outbox entry, from the write to the broker's
	// acknowledgement, in the trace of the purchase that made the entry.
	PublishSpan = "seckill.relay.publish"
	// ConsumeSpan is a consumer's handling of one message, in the trace of the purchase whose
	// entry the relay published: it holds the database write of the message's batch, or links
	// the span that does.
	ConsumeSpan = "seckill.consumer.process"
)

var (
	attrSystem = attribute.String("messaging.system", "kafka")
	attrBatch  = attribute.Key("messaging.batch.message_count")
	attrEntry  = attribute.Key("seckill.outbox_id")
)

// SetTracing makes the relay carry each entry's trace: a PublishSpan per message whose entry
// carries a traceparent, as its child, and the message's traceparent header naming that span,
// for the consumer to continue. A nil t (tracing off) traces nothing; the header of an entry
// that has a traceparent is carried all the same, at no cost to one that has none. Call it
// before Run.
func (r *Relay) SetTracing(t *tracing.Tracing) { r.tracing = t }

// SetTracing makes the consumer continue the trace of each message that carries a traceparent
// header (ConsumeSpan); nil (tracing off) traces nothing. Call it before Run.
func (c *Consumer) SetTracing(t *tracing.Tracing) { c.tracing = t }

// traceHeader returns the headers of a message whose entry carries traceparent tp: none when it
// carries none (tracing was off, or the purchase was not sampled).
func traceHeader(tp string) []kafka.Header {
	if tp == "" {
		return nil
	}
	return []kafka.Header{{Key: tracing.HeaderTraceParent, Value: []byte(tp)}}
}

// headerTraceParent returns the traceparent header of m, or "".
func headerTraceParent(m *kafka.Message) string {
	for _, h := range m.Headers {
		if h.Key == tracing.HeaderTraceParent {
			return string(h.Value)
		}
	}
	return ""
}

// startPublish starts the PublishSpan of each message of msgs (ids[i]'s is msgs[i]) that carries
// a traceparent, as a child of it, and makes the header name the new span instead. spans[i] is
// msgs[i]'s span, nil for an untraced message; spans is nil when no message is traced.
func startPublish(ctx context.Context, t *tracing.Tracing, ids []int64, msgs []kafka.Message) []trace.Span {
	var spans []trace.Span
	for i := range msgs {
		m := &msgs[i]
		tp := headerTraceParent(m)
		if tp == "" {
			continue
		}
		if spans == nil {
			spans = make([]trace.Span, len(msgs))
		}
		sctx, span := t.Tracer().Start(t.ContextWithRemoteParent(ctx, tp), PublishSpan,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(attrSystem, attribute.String("messaging.operation.type", "send"), attrEntry.Int64(ids[i])))
		spans[i] = span
		if own := t.TraceParent(sctx); own != "" {
			m.Headers = traceHeader(own)
		}
	}
	return spans
}

// endPublish ends the spans of startPublish (ids[i]'s message's is spans[i]) with what became of
// each message in w.
func endPublish(spans []trace.Span, ids []int64, w written) {
	if spans == nil {
		return
	}
	failed := make(map[int64]string, len(w.failed)+len(w.refused))
	for _, id := range w.failed {
		if w.err != nil {
			failed[id] = w.err.Error()
		} else {
			failed[id] = "not published"
		}
	}
	for _, e := range w.refused {
		failed[e.ID] = e.Reason
	}
	for i, span := range spans {
		if span == nil {
			continue
		}
		if why, ok := failed[ids[i]]; ok {
			span.SetStatus(codes.Error, why)
		}
		span.End()
	}
}

// startConsume starts the ConsumeSpan of each message of batch that carries a traceparent, as
// its child. A consumer writes a batch in one transaction: giving each message's trace a write
// of its own would cost the batching that makes the consumer fast. So the batch's write runs in
// the span of its first traced message, and every other traced message's span links that one:
// in Jaeger, each purchase's trace shows its message consumed, and its link leads to the trace
// that holds the INSERT of its order (the combiner's batch reads the same way). It returns the
// context to write the batch in (ctx when no message is traced: no span at all) and the end of
// the spans, with the write's outcome.
func startConsume(ctx context.Context, t *tracing.Tracing, batch []kafka.Message) (context.Context, func(ok bool)) {
	var spans []trace.Span
	var first trace.SpanContext
	wctx := ctx
	for i := range batch {
		tp := headerTraceParent(&batch[i])
		if tp == "" {
			continue
		}
		opts := []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attrSystem, attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", batch[i].Topic),
				attribute.Int("messaging.destination.partition.id", batch[i].Partition),
				attribute.Int64("messaging.kafka.offset", batch[i].Offset)),
		}
		if first.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: first}))
		} else {
			opts = append(opts, trace.WithAttributes(attrBatch.Int(len(batch))))
		}
		sctx, span := t.Tracer().Start(t.ContextWithRemoteParent(ctx, tp), ConsumeSpan, opts...)
		if !first.IsValid() && span.SpanContext().IsValid() {
			first, wctx = span.SpanContext(), sctx
		}
		spans = append(spans, span)
	}
	return wctx, func(ok bool) {
		for _, span := range spans {
			if !ok {
				span.SetStatus(codes.Error, "not applied: the batch comes again")
			}
			span.End()
		}
	}
}
