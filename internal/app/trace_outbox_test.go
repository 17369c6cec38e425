package app_test

import (
	"database/sql"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// TestTracingFollowsAPurchaseToItsOrder: with tracing on at sample 1, one purchase is one trace
// from its HTTP request to the INSERT of its order, across the outbox and Kafka: the deduction,
// the outbox row's INSERT (by the purchase's transaction, or for redis-lua by the persister),
// the relay's publish, the consumer's handling of the message and the order's INSERT under it,
// each hop the child of the one before. One strategy of each shape: a database transaction
// (mysql), a lock (redis), a decision in Redis copied to MySQL later (redis-lua).
func TestTracingFollowsAPurchaseToItsOrder(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	for _, strategy := range []string{"mysql", "redis", "redis-lua"} {
		t.Run(strategy, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			a := stack.StartWith(t, map[string]string{"SECKILL_TRACING": "otlp", "SECKILL_TRACING_SAMPLE": "1"}, app.Options{Spans: rec})
			buyConfirmed(t, a, strategy)
			a.Stop() // every span has ended once the program has stopped
			spans := rec.Ended()
			server := serverSpan(t, spans, "/api/v1/products/:id/purchase")
			hops, missing := followPurchase(spans, server)
			if len(missing) > 0 {
				t.Fatalf("the purchase's trace misses %v; its spans:\n%s", missing, describe(inTrace(spans, server.SpanContext().TraceID())))
			}
			t.Logf("the purchase's hops:\n%s", describe(hops))

			// The check sees a hop gone: the trace of a relay that dropped the header (the
			// consumer's span would then start a trace of its own) misses the publish, and the
			// consumer's span is no longer the child of anything in the trace.
			var noPublish []sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.Name() != orderqueue.PublishSpan {
					noPublish = append(noPublish, s)
				}
			}
			if _, missing := followPurchase(noPublish, server); !cmp.Equal(missing, []string{"relay publish", "consume", "order insert"}) {
				t.Errorf("without the publish span, the check reports %v missing", missing)
			}
		})
	}
}

// TestTracingOffCarriesNoTrace: with tracing off, a purchase's reservation stores no
// traceparent, for each strategy's way into the outbox, and no span is started anywhere on the
// way to its order.
func TestTracingOffCarriesNoTrace(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	rec := tracetest.NewSpanRecorder()
	a := stack.StartWith(t, nil, app.Options{Spans: rec})
	for _, strategy := range []string{"mysql", "redis-lua"} {
		buyConfirmed(t, a, strategy)
	}
	a.Stop()
	if n := len(rec.Started()); n != 0 {
		t.Errorf("tracing off: %d spans started:\n%s", n, describe(rec.Ended()))
	}
	db, err := sql.Open("mysql", stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, traced int
	if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*), COUNT(trace_parent) FROM reservations").Scan(&rows, &traced); err != nil {
		t.Fatal(err)
	}
	if rows != 2 || traced != 0 {
		t.Errorf("%d reservations, %d with a traceparent; want 2 and none", rows, traced)
	}
}

// buyConfirmed creates a product of strategy on a, buys one unit, waits for its order and returns
// the order's id.
func buyConfirmed(t *testing.T, a *apptest.App, strategy string) string {
	t.Helper()
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "traced " + strategy, "price_cents": 100, "stock": 5, "per_user_limit": 1, "strategy": strategy})
	buyer := apptest.Client{URL: a.URL}
	r := buyer.MustDo(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(product, 10)+"/purchase", map[string]any{"user_id": "u-traced"}, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", r.Status, r.Raw)
	}
	id := r.Str("order_id")
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		r = buyer.MustDo(t, http.MethodGet, "/api/v1/orders/"+id+"?user_id=u-traced", nil, nil)
		// With a payment window of a second, a slow look may find it expired already.
		return r.Status == http.StatusOK && (r.Str("status") == "confirmed" || r.Str("status") == "expired"), r.Raw
	})
	return id
}

// followPurchase follows the trace of server, a purchase's request span, hop by hop to its
// order's INSERT, and returns the spans of the hops it found and the names of those it did not.
// Each hop must be in the purchase's trace and the child of the hop before (the outbox INSERT
// of the deduction, for the strategies that write it in their transaction, or of the
// persister's span; the rest strictly in line), so that a hop that started a trace of its own,
// or hangs off the wrong span, counts as missing, and so does every hop after it.
func followPurchase(spans []sdktrace.ReadOnlySpan, server sdktrace.ReadOnlySpan) (hops []sdktrace.ReadOnlySpan, missing []string) {
	id := server.SpanContext().TraceID()
	ours := inTrace(spans, id)
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range ours {
		byID[s.SpanContext().SpanID()] = s
	}
	// under reports whether s descends from ancestor within the trace.
	under := func(s, ancestor sdktrace.ReadOnlySpan) bool {
		for p, ok := byID[s.Parent().SpanID()]; ok; p, ok = byID[p.Parent().SpanID()] {
			if p.SpanContext().SpanID() == ancestor.SpanContext().SpanID() {
				return true
			}
		}
		return false
	}
	find := func(match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
		for _, s := range ours {
			if match(s) {
				return s
			}
		}
		return nil
	}
	sql := func(s sdktrace.ReadOnlySpan, insert string) bool {
		return s.InstrumentationScope().Name == scopeSQL && strings.Contains(attr(s, "db.statement"), insert)
	}
	prev := server
	for _, hop := range []struct {
		name  string
		match func(sdktrace.ReadOnlySpan) bool
	}{
		{"deduct", func(s sdktrace.ReadOnlySpan) bool { return s.Name() == tracing.DeductSpan && under(s, server) }},
		{"outbox insert", func(s sdktrace.ReadOnlySpan) bool {
			return sql(s, "INSERT INTO reservations") && (under(s, prev) || s.Parent().SpanID() == persistSpanOf(ours))
		}},
		// The relay publishes again what failed (a broker not ready yet, under load): the publish
		// to follow is the one whose message was consumed.
		{"relay publish", func(s sdktrace.ReadOnlySpan) bool {
			return publishOf(s, byID) != nil && under(s, server)
		}},
		{"consume", func(s sdktrace.ReadOnlySpan) bool {
			return publishOf(s, byID) != nil && s.Parent().SpanID() == prev.SpanContext().SpanID()
		}},
		{"order insert", func(s sdktrace.ReadOnlySpan) bool { return sql(s, "INTO orders") && under(s, prev) }},
	} {
		s := find(hop.match)
		if s == nil {
			missing = append(missing, hop.name)
			continue
		}
		if hop.name == "relay publish" {
			s = publishOf(s, byID)
		}
		hops, prev = append(hops, s), s
	}
	return hops, missing
}

// publishOf returns, for a consumer span whose parent is one of byID's publish spans, that
// publish span; nil for any other span.
func publishOf(consume sdktrace.ReadOnlySpan, byID map[trace.SpanID]sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	if consume.Name() != orderqueue.ConsumeSpan || consume.SpanKind() != trace.SpanKindConsumer {
		return nil
	}
	p, ok := byID[consume.Parent().SpanID()]
	if !ok || p.Name() != orderqueue.PublishSpan || p.SpanKind() != trace.SpanKindProducer {
		return nil
	}
	return p
}

// persistSpanOf returns the id of the persister's span in trace, if it has one.
func persistSpanOf(spans []sdktrace.ReadOnlySpan) trace.SpanID {
	for _, s := range spans {
		if s.Name() == tracing.PersistSpan {
			return s.SpanContext().SpanID()
		}
	}
	return trace.SpanID{}
}

// inTrace returns the spans of trace id.
func inTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// TestTracingFollowsAnOrdersLifecycle: a lifecycle change is traced through the order events'
// outbox and Kafka as a purchase is. A cancel is a request traced on its own: its change's span
// (tracing.EventSpan) is under the cancel's request span and links the purchase, and the event's
// publish and consumption follow it. An expiry is background work: its change's span continues
// the purchase's trace, where the publish and the consumption follow it.
func TestTracingFollowsAnOrdersLifecycle(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	for _, tc := range []struct {
		name   string
		window string
		route  string // the route of the request that makes the change; "" for an expiry
	}{
		{"cancel", "10m", "/api/v1/orders/:order_id/cancel"},
		{"expire", "1s", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			a := stack.StartWith(t, map[string]string{"SECKILL_TRACING": "otlp", "SECKILL_TRACING_SAMPLE": "1",
				"SECKILL_PAYMENT_WINDOW": tc.window, "SECKILL_EXPIRE_EVERY": "200ms"}, app.Options{Spans: rec})
			order := buyConfirmed(t, a, "mysql")
			if tc.route != "" {
				r := apptest.Client{URL: a.URL}.MustDo(t, http.MethodPost, "/api/v1/orders/"+order+"/cancel", map[string]any{"user_id": "u-traced"}, nil)
				if r.Status != http.StatusOK {
					t.Fatalf("cancel: %d %s", r.Status, r.Raw)
				}
			}
			// The event's consumption ends last: wait for it.
			itest.Eventually(t, 30*time.Second, func() (bool, string) {
				for _, s := range rec.Ended() {
					if s.Name() == orderqueue.ConsumeSpan && strings.Contains(attr(s, "messaging.destination.name"), ".lifecycle") {
						return true, ""
					}
				}
				return false, "no lifecycle message consumed in a trace"
			})
			a.Stop()
			spans := rec.Ended()
			purchase := serverSpan(t, spans, "/api/v1/products/:id/purchase")
			root := purchase // where the change's trace starts
			if tc.route != "" {
				root = serverSpan(t, spans, tc.route)
			}
			ours := inTrace(spans, root.SpanContext().TraceID())
			event := only(t, ours, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == tracing.EventSpan })
			if event.Parent().SpanID() != root.SpanContext().SpanID() {
				t.Errorf("the change's span hangs off %s, want %s", event.Parent().SpanID(), root.SpanContext().SpanID())
			}
			if tc.route != "" {
				if l := event.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != purchase.SpanContext().SpanID() {
					t.Errorf("the change's links %v, want the purchase's span %s", l, purchase.SpanContext().SpanID())
				}
			}
			// The relay publishes again what failed (the lifecycle topic not ready yet, under
			// load): the event's consumption is the child of one of its publishes.
			byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
			for _, s := range ours {
				byID[s.SpanContext().SpanID()] = s
			}
			only(t, ours, func(s sdktrace.ReadOnlySpan) bool {
				p := publishOf(s, byID)
				return p != nil && p.Parent().SpanID() == event.SpanContext().SpanID()
			})
			t.Logf("the change's trace:\n%s", describe(ours))
		})
	}
}

// only returns the one span of spans that match accepts, failing the test unless there is one.
func only(t *testing.T, spans []sdktrace.ReadOnlySpan, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d matching spans, want 1; the trace:\n%s", len(found), describe(spans))
	}
	return found[0]
}
