package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// BenchmarkAcceptTracing is what tracing costs a purchase that is accepted, all the way to its
// order: the whole program in this process (the HTTP server, the strategy, the outbox relay, the
// Kafka consumer), with tracing off and on at the default sample of 1 % (the spans go through
// the batch processor to an exporter that drops them). Each op is one purchase of a distinct
// buyer, 32 in flight over loopback, and the timer runs until every one of them is an order.
// cpu-ns/op is the process's CPU time per purchase (user + system: the buyers' side is in it too,
// the same with tracing on or off); it moves far less with the machine's weather than ns/op.
//
//	go test -run '^$' -bench AcceptTracing -benchtime 20000x -count 5 ./internal/app
func BenchmarkAcceptTracing(b *testing.B) {
	itest.Integration(b)
	stack := apptest.NewStack(b)
	db, err := sql.Open("mysql", stack.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, strategy := range []string{"mysql", "redis-lua"} {
		for _, tr := range []struct {
			name string
			env  map[string]string
		}{
			{"off", nil},
			{"sample-0.01", map[string]string{"SECKILL_TRACING": "otlp", "SECKILL_TRACING_SAMPLE": "0.01"}},
		} {
			b.Run(strategy+"/"+tr.name, func(b *testing.B) {
				env := map[string]string{"SECKILL_RATE_PER_USER": "0", "SECKILL_LOG_LEVEL": "warn", "SECKILL_PAYMENT_WINDOW": "24h"}
				for k, v := range tr.env {
					env[k] = v
				}
				spans := &countingProcessor{SpanProcessor: sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter())}
				a := stack.StartWith(b, env, app.Options{Spans: spans})
				defer a.Stop()
				admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
				product := admin.CreateProduct(b, map[string]any{"name": "bench " + strategy, "price_cents": 100, "stock": 100_000_000, "per_user_limit": 1, "strategy": strategy})
				url, err := client.PurchaseURL(a.URL, product)
				if err != nil {
					b.Fatal(err)
				}
				run := fmt.Sprintf("%d", time.Now().UnixNano())
				buy(b, url, run, 100) // a warm-up: connections, prepared statements, the consumer's partitions
				if _, err := audit.WaitDrained(b.Context(), db, product, 100, 50*time.Millisecond); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				spans.ended.Store(0)
				start := processCPU()
				buy(b, url, run+"m", b.N)
				ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
				defer cancel()
				if _, err := audit.WaitDrained(ctx, db, product, 100+b.N, 20*time.Millisecond); err != nil {
					b.Fatalf("the orders of %d purchases: %v", b.N, err)
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(spans.ended.Load())/float64(b.N), "spans/op")
			})
		}
	}
}

// buy sends n purchases of distinct buyers to url, 32 in flight, and wants each accepted.
func buy(b *testing.B, url, run string, n int) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer hc.CloseIdleConnections()
	one := 1
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				user := fmt.Sprintf("b%s-%d", run, i)
				req, err := client.NewLeanPurchase(b.Context(), url, client.PurchaseParams{}, client.PurchaseRequest{UserID: &user, Quantity: &one})
				if err != nil {
					failed.Store(err)
					return
				}
				rsp, err := hc.Do(req)
				if err != nil {
					failed.Store(err)
					return
				}
				if _, err := client.ReadPurchaseAnswer(rsp); err != nil || rsp.StatusCode != http.StatusAccepted {
					failed.Store(fmt.Errorf("purchase: %d %v", rsp.StatusCode, err))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time, user and system, this process has used so far, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// countingProcessor counts the spans that end.
type countingProcessor struct {
	sdktrace.SpanProcessor
	ended atomic.Int64
}

func (c *countingProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	c.ended.Add(1)
	c.SpanProcessor.OnEnd(s)
}
