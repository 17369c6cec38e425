package tracing

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// RedisScope is the instrumentation scope of the Redis command spans (InstrumentRedis).
const RedisScope = "github.com/seckill-go/seckill-go/internal/tracing/redis"

// InstrumentRedis traces the commands and pipelines that rdb sends on behalf of a sampled span:
// a span per command, named by it ("evalsha", "set"), and one per pipeline ("redis.pipeline"
// and its commands' names), with no arguments (they are buyers' and orders' ids). A command sent
// under no sampled span costs one context lookup.
//
// It stands in for redisotel, which does the same for the commands of sampled requests, but
// prices every command before the sampler decides: it builds each command's attributes and, for
// a pipeline, writes out every command with its arguments to name the span, sampled or not
// (redis-lua's persister and the live figures pipeline per batch; 1–3 % of the CPU of a purchase
// at the default sample of 1 %, BenchmarkAcceptTracing).
func (t *Tracing) InstrumentRedis(rdb redis.UniversalClient) {
	rdb.AddHook(redisHook{tracer: t.provider.Tracer(RedisScope)})
}

type redisHook struct{ tracer trace.Tracer }

var redisAttrs = trace.WithAttributes(semconv.DBSystemNameRedis)

func (redisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h redisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !sampled(ctx) {
			return next(ctx, cmd)
		}
		ctx, span := h.tracer.Start(ctx, cmd.FullName(), trace.WithSpanKind(trace.SpanKindClient), redisAttrs)
		defer span.End()
		err := next(ctx, cmd)
		redisEnd(span, err)
		return err
	}
}

func (h redisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !sampled(ctx) {
			return next(ctx, cmds)
		}
		ctx, span := h.tracer.Start(ctx, "redis.pipeline "+pipelineSummary(cmds), trace.WithSpanKind(trace.SpanKindClient), redisAttrs,
			trace.WithAttributes(semconv.DBOperationBatchSize(len(cmds))))
		defer span.End()
		err := next(ctx, cmds)
		redisEnd(span, err)
		return err
	}
}

// pipelineSummary names a pipeline's distinct commands, at most 10, in their first order.
func pipelineSummary(cmds []redis.Cmder) string {
	var names []string
	for _, c := range cmds {
		if len(names) == 10 {
			break
		}
		if n := c.FullName(); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, " ")
}

// redisEnd marks span as failed by err, unless err is an answer (redis.Nil: no such key).
func redisEnd(span trace.Span, err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
