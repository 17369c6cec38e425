package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/tracing"
)

// traceScope is the instrumentation scope of the server spans.
const traceScope = "github.com/seckill-go/seckill-go/internal/httpapi"

// traceRequests starts the server span of every /api/ request, named by its route ("POST
// /api/v1/products/:id/purchase"), as a child of the caller's traceparent when it sent one. The
// ops endpoints and the storefront's files start none.
//
// It stands in for otelgin, which does the same and more for every request, sampled or not: it
// builds the span's attributes before the sampler decides, and records three histograms per
// request through the meter provider, whose attribute set it builds even for a no-op meter. At
// the default sample of 1 %, that work was for the requests nobody would see: 2–4 % of a
// replica's CPU on the redis-lua purchase path (pprof, make bench's tracing pair). Here the
// attributes are set only on a recording span, and the program's own RED metrics stay in
// observe.
func traceRequests(t *tracing.Tracing) gin.HandlerFunc {
	tracer := t.Provider().Tracer(traceScope)
	prop := t.Propagator()
	return func(c *gin.Context) {
		r := c.Request
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			c.Next()
			return
		}
		ctx := r.Context()
		remote := r.Header.Get(tracing.HeaderTraceParent) != ""
		if remote {
			ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		route := c.FullPath()
		name := r.Method
		if route != "" {
			name += " " + route
		}
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		// An unsampled request of our own starting keeps its context as it came: nothing under it
		// would be traced (tracing.ClientProvider), and its trace id names no trace. A caller's
		// unsampled traceparent is kept, for the logs to name the caller's trace.
		if span.SpanContext().IsSampled() || remote {
			c.Request = r.WithContext(ctx)
		}
		if span.IsRecording() {
			span.SetAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path),
				semconv.ClientAddress(c.ClientIP()), semconv.UserAgentOriginal(r.UserAgent()))
			if route != "" {
				span.SetAttributes(semconv.HTTPRoute(route))
			}
		}
		c.Next()
		if span.IsRecording() {
			status := c.Writer.Status()
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
		}
	}
}
