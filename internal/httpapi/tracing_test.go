package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/tracing"
)

// TestTraceRequests: an /api/ request is a server span named by its route, with its status, the
// child of the caller's traceparent when it sent one; a 5xx marks it failed; a path outside /api/
// starts none; at a sample of 0 a request without a traceparent records nothing.
func TestTraceRequests(t *testing.T) {
	serve := func(t *testing.T, sample float64, req *http.Request) []attribute.KeyValue {
		t.Helper()
		rec := tracetest.NewSpanRecorder()
		tr, err := tracing.New(context.Background(), tracing.Options{Exporter: tracing.OTLP, Sample: sample, Processor: rec})
		if err != nil {
			t.Fatal(err)
		}
		r := gin.New()
		r.Use(traceRequests(tr))
		var inHandler trace.SpanContext
		r.GET("/api/v1/products/:id", func(c *gin.Context) {
			inHandler = trace.SpanContextFromContext(c.Request.Context())
			c.Status(http.StatusOK)
		})
		r.GET("/api/v1/fail", func(c *gin.Context) { c.Status(http.StatusServiceUnavailable) })
		r.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
		r.ServeHTTP(httptest.NewRecorder(), req)
		spans := rec.Ended()
		switch {
		case len(spans) == 0:
			return nil
		case len(spans) > 1:
			t.Fatalf("%d spans, want 1", len(spans))
		}
		s := spans[0]
		if s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span kind %v, want server", s.SpanKind())
		}
		if inHandler.IsValid() && inHandler.SpanID() != s.SpanContext().SpanID() {
			t.Errorf("the handler's context holds span %s, not the server span %s", inHandler.SpanID(), s.SpanContext().SpanID())
		}
		attrs := append([]attribute.KeyValue{attribute.String("name", s.Name()), attribute.String("parent", s.Parent().TraceID().String()),
			attribute.Bool("error", s.Status().Code == codes.Error)}, s.Attributes()...)
		return attrs
	}
	get := func(k string, attrs []attribute.KeyValue) string {
		for _, a := range attrs {
			if string(a.Key) == k {
				return a.Value.String()
			}
		}
		return ""
	}

	attrs := serve(t, 1, httptest.NewRequest(http.MethodGet, "/api/v1/products/7", nil))
	if get("name", attrs) != "GET /api/v1/products/:id" || get("http.route", attrs) != "/api/v1/products/:id" ||
		get("http.response.status_code", attrs) != "200" || get("error", attrs) != "false" {
		t.Errorf("a read: %v", attrs)
	}

	const parent = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := httptest.NewRequest(http.MethodGet, "/api/v1/products/7", nil)
	req.Header.Set("traceparent", "00-"+parent+"-00f067aa0ba902b7-01")
	if attrs := serve(t, 0, req); get("parent", attrs) != parent {
		t.Errorf("with a sampled traceparent at a sample of 0: %v, want a child of trace %s", attrs, parent)
	}

	if attrs := serve(t, 1, httptest.NewRequest(http.MethodGet, "/api/v1/fail", nil)); get("error", attrs) != "true" || get("http.response.status_code", attrs) != "503" {
		t.Errorf("a 503: %v, want an error status", attrs)
	}
	if attrs := serve(t, 1, httptest.NewRequest(http.MethodGet, "/healthz", nil)); attrs != nil {
		t.Errorf("/healthz started a span: %v", attrs)
	}
	if attrs := serve(t, 0, httptest.NewRequest(http.MethodGet, "/api/v1/products/7", nil)); attrs != nil {
		t.Errorf("at a sample of 0, a request without a traceparent recorded a span: %v", attrs)
	}
}
