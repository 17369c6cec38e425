package tracing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// The names and attributes of the program's own spans.
const (
	// DeductSpan is one deduction of a strategy: a batch of combined purchases, or one purchase.
	DeductSpan = "seckill.deduct"
	// LockWaitSpan is the wait for a product's lock, from the request to the grant (or the
	// give-up).
	LockWaitSpan = "seckill.lock.wait"
	// LockReleaseSpan is the release of a grant: a call to the lock's service (ZooKeeper's
	// delete, Redis's script) that the buyer waits for.
	LockReleaseSpan = "seckill.lock.release"

	attrStrategy = attribute.Key("seckill.strategy")
	attrProduct  = attribute.Key("seckill.product_id")
	attrBatch    = attribute.Key("seckill.batch_size")
	attrLock     = attribute.Key("seckill.lock")
	attrOutcome  = attribute.Key("seckill.outcome")
)

// BatchDeductor returns d with a DeductSpan around each of its batches. The batch runs under its
// first buyer's trace (sale.Combiner): the other buyers' traces show the wait, and the batch's
// span links each of them (the sampled ones: those whose reservation carries a traceparent), so
// that from the batch Jaeger leads to every buyer it decided.
func (t *Tracing) BatchDeductor(st sale.Strategy, d sale.BatchDeductor) sale.BatchDeductor {
	return &batchDeductor{BatchDeductor: d, t: t, st: st}
}

// Deductor returns d with a DeductSpan around each of its deductions.
func (t *Tracing) Deductor(st sale.Strategy, d sale.Deductor) sale.Deductor {
	return &deductor{Deductor: d, t: t, st: st}
}

// Locker returns l with a LockWaitSpan around each wait for a lock of strategy st, and a
// LockReleaseSpan around each release of what it granted.
func (t *Tracing) Locker(st sale.Strategy, l lock.Locker) lock.Locker {
	return &locker{Locker: l, t: t, st: st}
}

type batchDeductor struct {
	sale.BatchDeductor
	t  *Tracing
	st sale.Strategy
}

func (d *batchDeductor) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if !sampled(ctx) {
		return d.BatchDeductor.DeductBatch(ctx, batch)
	}
	var product int64
	if len(batch) > 0 {
		product = batch[0].ProductID
	}
	ctx, span := d.t.tracer.Start(ctx, DeductSpan, trace.WithAttributes(
		attrStrategy.String(string(d.st)), attrProduct.Int64(product), attrBatch.Int(len(batch))),
		trace.WithLinks(d.t.buyers(batch)...))
	defer span.End()
	errs, err := d.BatchDeductor.DeductBatch(ctx, batch)
	if err != nil {
		end(span, err)
		return errs, err
	}
	accepted := 0
	for _, e := range errs {
		if e == nil {
			accepted++
		}
	}
	span.SetAttributes(attribute.Int("seckill.accepted", accepted))
	return errs, nil
}

// buyers returns links to the request spans of a batch's buyers but the first (the batch runs in
// its trace), those that were sampled.
func (t *Tracing) buyers(batch []sale.Reservation) []trace.Link {
	var links []trace.Link
	for _, r := range batch[min(1, len(batch)):] {
		if sc := t.SpanContextOf(r.TraceParent); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	return links
}

type deductor struct {
	sale.Deductor
	t  *Tracing
	st sale.Strategy
}

func (d *deductor) Deduct(ctx context.Context, r sale.Reservation) error {
	if !sampled(ctx) {
		return d.Deductor.Deduct(ctx, r)
	}
	ctx, span := d.t.tracer.Start(ctx, DeductSpan, trace.WithAttributes(
		attrStrategy.String(string(d.st)), attrProduct.Int64(r.ProductID), attrBatch.Int(1)))
	defer span.End()
	err := d.Deductor.Deduct(ctx, r)
	end(span, err)
	return err
}

type locker struct {
	lock.Locker
	t  *Tracing
	st sale.Strategy
}

func (l *locker) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	if !sampled(ctx) {
		return l.Locker.Acquire(ctx, name)
	}
	ctx, span := l.t.tracer.Start(ctx, LockWaitSpan, trace.WithAttributes(
		attrStrategy.String(string(l.st)), attrLock.String(name)))
	defer span.End()
	lease, err := l.Locker.Acquire(ctx, name)
	end(span, err)
	if err != nil {
		return lease, err
	}
	traced := tracedLease{Lease: lease, l: l, name: name}
	if issued, ok := lease.(lock.Issued); ok {
		return tracedIssued{traced, issued}, nil // the fence needs the token's issuer
	}
	return traced, nil
}

// tracedLease is a grant whose release is a LockReleaseSpan.
type tracedLease struct {
	lock.Lease
	l    *locker
	name string
}

func (t tracedLease) Release(ctx context.Context) error {
	if !sampled(ctx) {
		return t.Lease.Release(ctx)
	}
	ctx, span := t.l.t.tracer.Start(ctx, LockReleaseSpan, trace.WithAttributes(
		attrStrategy.String(string(t.l.st)), attrLock.String(t.name)))
	defer span.End()
	err := t.Lease.Release(ctx)
	end(span, err)
	return err
}

// tracedIssued is a tracedLease of a lock.Issued grant, which stays one.
type tracedIssued struct {
	tracedLease
	issued lock.Issued
}

func (t tracedIssued) Issuer() string { return t.issued.Issuer() }

// end records err's outcome on span: a refusal of the sale's rules (sold out, a second purchase)
// is an answer, not a failure; anything else marks the span as an error.
func end(span trace.Span, err error) {
	if err == nil {
		return
	}
	code := sale.CodeOf(err)
	span.SetAttributes(attrOutcome.String(string(code)))
	if errors.Is(err, sale.ErrSoldOut) || errors.Is(err, sale.ErrAlreadyPurchased) || errors.Is(err, sale.ErrIdempotencyKeyInUse) {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// PersistSpan is the write of a batch of redis-lua reservations from their Redis stream into the
// outbox (redislua.Persister): the outbox insert of the purchases that strategy decided in Redis.
const PersistSpan = "seckill.persist"

// Persisting starts the PersistSpan of writing rs, for redislua.PersisterOptions.Trace. The
// persister runs in the background, so the span continues the trace of the first purchase of rs
// that was sampled and links the others' (as the combiner's batch does); a batch of which no
// purchase was sampled starts no span at all, and pays for nothing but the look at rs.
func (t *Tracing) Persisting(ctx context.Context, rs []sale.Reservation) (context.Context, func(error)) {
	first := -1
	for i := range rs {
		if rs[i].TraceParent != "" {
			first = i
			break
		}
	}
	if first < 0 {
		return ctx, func(error) {}
	}
	ctx, span := t.tracer.Start(t.ContextWithRemoteParent(ctx, rs[first].TraceParent), PersistSpan,
		trace.WithAttributes(attrStrategy.String(string(rs[first].Strategy)), attrProduct.Int64(rs[first].ProductID), attrBatch.Int(len(rs))),
		trace.WithLinks(t.buyers(rs[first:])...))
	return ctx, func(err error) {
		end(span, err)
		span.End()
	}
}

// EventSpan is an order's lifecycle change (paid, expired, cancelled) entering the order events'
// outbox, in the transaction that makes it.
const EventSpan = "seckill.order.event"

// Lifecycle starts the EventSpan of orders changing to kind, for store.Options.TraceEvents;
// purchases are the traceparents of their purchases (the sampled ones). A change that a request
// makes (a payment, a cancel: ctx carries its span) is a child of that request, in its own
// trace, and links the purchases; a change of the background (an expiry: ctx carries no span)
// continues the first purchase's trace, so that it shows in the purchase's trace, and links the
// others. It returns the context to write the events in, the traceparent they carry to the event
// relay ("" when the span is not sampled), and the span's end. A background change of which no
// purchase was sampled starts no span.
func (t *Tracing) Lifecycle(ctx context.Context, kind string, purchases []string) (context.Context, string, func(error)) {
	parent := ctx
	links := make([]trace.Link, 0, len(purchases))
	for _, tp := range purchases {
		sc := t.SpanContextOf(tp)
		switch {
		case !sc.IsValid():
		case !trace.SpanContextFromContext(parent).IsValid():
			parent = trace.ContextWithRemoteSpanContext(ctx, sc)
		default:
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	if !trace.SpanContextFromContext(parent).IsValid() {
		return ctx, "", func(error) {}
	}
	ctx, span := t.tracer.Start(parent, EventSpan, trace.WithAttributes(attribute.String("seckill.event", kind), attrBatch.Int(len(purchases))),
		trace.WithLinks(links...))
	return ctx, t.TraceParent(ctx), func(err error) {
		end(span, err)
		span.End()
	}
}
