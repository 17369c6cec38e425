package app_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// The instrumentation scopes of the Redis and SQL spans.
const (
	scopeRedis = tracing.RedisScope
	scopeSQL   = "gorm.io/plugin/opentelemetry"
)

// TestTracingFollowsAPurchase: with SECKILL_TRACING on at sample 1, one purchase through the
// real app is one trace: the HTTP server span, the strategy's deduction span, the SQL spans
// under it, and, for the lock strategies, the lock's wait and release (and, for redis, its Redis
// commands) — all of one trace id. (The mysql strategy's purchase sends Redis nothing; ZooKeeper
// has no instrumentation of its own: the wait and the release are its calls' spans.)
func TestTracingFollowsAPurchase(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	for _, tc := range []struct {
		strategy string
		lock     bool
		redis    bool
	}{
		{"mysql", false, false},
		{"redis", true, true},
		{"zk", true, false},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			a := stack.StartWith(t, map[string]string{"SECKILL_TRACING": "otlp", "SECKILL_TRACING_SAMPLE": "1"}, app.Options{Spans: rec})
			purchase(t, a, tc.strategy)
			a.Stop() // the server spans end once their answers are written: wait for them

			spans := rec.Ended()
			server := serverSpan(t, spans, "/api/v1/products/:id/purchase")
			id := server.SpanContext().TraceID()
			var deduct, lockWait, lockRelease, sql, redis int
			var inTrace []sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.SpanContext().TraceID() != id {
					continue
				}
				inTrace = append(inTrace, s)
				switch {
				case s.Name() == tracing.DeductSpan:
					deduct++
					if got := attr(s, "seckill.strategy"); got != tc.strategy {
						t.Errorf("the deduction span's strategy is %q, want %q", got, tc.strategy)
					}
					// The combined batch runs in a goroutine of its own, under the buyer's span.
					if s.Parent().SpanID() != server.SpanContext().SpanID() {
						t.Errorf("the deduction span's parent is %s, want the server span %s", s.Parent().SpanID(), server.SpanContext().SpanID())
					}
				case s.Name() == tracing.LockWaitSpan:
					lockWait++
				case s.Name() == tracing.LockReleaseSpan:
					lockRelease++
				case s.InstrumentationScope().Name == scopeSQL:
					sql++
				case s.InstrumentationScope().Name == scopeRedis:
					redis++
				}
			}
			if deduct != 1 || sql == 0 {
				t.Errorf("trace %s has %d deduction spans (want 1) and %d SQL spans (want some); spans:\n%s", id, deduct, sql, describe(spans))
			}
			if tc.lock && (lockWait != 1 || lockRelease != 1) {
				t.Errorf("trace %s has %d lock wait and %d lock release spans, want 1 of each; spans:\n%s", id, lockWait, lockRelease, describe(spans))
			}
			if tc.redis && redis == 0 {
				t.Errorf("trace %s has no Redis span; spans:\n%s", id, describe(spans))
			}
			if !tc.lock && lockWait+lockRelease != 0 {
				t.Errorf("trace %s has %d lock wait and %d release spans, want none", id, lockWait, lockRelease)
			}
			t.Logf("the purchase's trace:\n%s", describe(inTrace))
		})
	}
}

// TestTracingOffRecordsNothing: with SECKILL_TRACING unset, a purchase starts no span, even with
// a recorder offered: nothing is instrumented.
func TestTracingOffRecordsNothing(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	rec := tracetest.NewSpanRecorder()
	a := stack.StartWith(t, nil, app.Options{Spans: rec})
	purchase(t, a, "mysql")
	a.Stop()
	if n := len(rec.Started()); n != 0 {
		t.Errorf("tracing off: %d spans started:\n%s", n, describe(rec.Ended()))
	}
}

// purchase creates a product of strategy on a and buys one unit of it.
func purchase(t *testing.T, a *apptest.App, strategy string) {
	t.Helper()
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "traced " + strategy, "price_cents": 100, "stock": 5, "per_user_limit": 1, "strategy": strategy})
	r := apptest.Client{URL: a.URL}.MustDo(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(product, 10)+"/purchase", map[string]any{"user_id": "u-traced"}, nil)
	if r.Status != http.StatusAccepted {
		t.Fatalf("purchase: %d %s", r.Status, r.Raw)
	}
}

// serverSpan returns the one server span of route.
func serverSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, route string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == trace.SpanKindServer && attr(s, "http.route") == route {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d server spans of %s, want 1; spans:\n%s", len(found), route, describe(spans))
	}
	return found[0]
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

func describe(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString("  " + s.SpanContext().TraceID().String() + " " + s.SpanKind().String() + " " + s.InstrumentationScope().Name + " " + s.Name() + "\n")
	}
	return b.String()
}
