package tracing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// TestInstrumentRedis: under a sampled request a command is a client span named by it, a
// pipeline one span named by its distinct commands, both children of the request, redis.Nil no
// error and a failed command an error; under an unsampled request, or none, nothing is started.
func TestInstrumentRedis(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr, err := tracing.New(t.Context(), tracing.Options{Exporter: tracing.OTLP, Sample: 1, Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	// One connection for commands, made by itest's ping, and one for pipelines, made here: no
	// connection's handshake (HELLO, CLIENT SETINFO) runs under the request.
	rdb := itest.RedisWith(t, redis.UniversalOptions{PoolSize: 1, PipelinePoolSize: 1})
	if _, err := rdb.Pipelined(t.Context(), func(p redis.Pipeliner) error { p.Ping(t.Context()); return nil }); err != nil {
		t.Fatal(err)
	}
	tr.InstrumentRedis(rdb)
	key := "tracing-test:" + t.Name()

	ctx, request := tr.Provider().Tracer("test").Start(t.Context(), "request", trace.WithSpanKind(trace.SpanKindServer))
	if err := rdb.Set(ctx, key, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Get(ctx, key+":none").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("get of no key: %v", err)
	}
	if err := rdb.HGet(ctx, key, "f").Err(); err == nil {
		t.Fatal("HGET of a string: no error")
	}
	pipe := rdb.Pipeline()
	pipe.Incr(ctx, key)
	pipe.Incr(ctx, key)
	pipe.Del(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	request.End()

	var got []string
	for _, s := range rec.Ended() {
		if s.Name() == "request" {
			continue
		}
		got = append(got, s.Name()+" "+s.Status().Code.String())
		if s.Parent().SpanID() != request.SpanContext().SpanID() || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: parent %v, kind %v; want the request's child, a client span", s.Name(), s.Parent().SpanID(), s.SpanKind())
		}
	}
	want := []string{"set Unset", "get Unset", "hget " + codes.Error.String(), "redis.pipeline incr del Unset"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}

	before := len(rec.Started())
	tr0, err := tracing.New(t.Context(), tracing.Options{Exporter: tracing.OTLP, Sample: 0, Processor: rec})
	if err != nil {
		t.Fatal(err)
	}
	unsampled, span := tr0.Provider().Tracer("test").Start(t.Context(), "request", trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	for _, c := range []context.Context{unsampled, context.Background()} {
		if err := rdb.Get(c, key).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
		if _, err := rdb.Pipelined(c, func(p redis.Pipeliner) error { p.Get(c, key); return nil }); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	if n := len(rec.Started()) - before; n != 0 {
		t.Errorf("unsampled: %d spans started", n)
	}
}
