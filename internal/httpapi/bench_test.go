package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// The sold-out benchmarks compare the purchase route of the real router (its whole middleware
// chain, a real metrics.New, the production limits) with the smallest gin handler that does the
// same visible work: parse :id, decode the body strictly, answer 409 sold_out. The domain answers
// at once, so what is left is the cost of the HTTP layer. Two drivers:
//
//   - recorder: one goroutine calls ServeHTTP with an httptest.ResponseRecorder. No network, no
//     client: the most sensitive measure of the layer's own CPU and allocations. Every request
//     pays the same harness cost (BenchmarkHarness measures it alone).
//   - loopback: an httptest.Server on 127.0.0.1 driven by keep-alive net/http clients from
//     b.RunParallel; closer to the acceptance bar (end to end over the network), and noisier,
//     because client and server share the machine's cores.
//
// Every request is from a new user id, as in a flash sale where most buyers arrive once after the
// last unit is gone: the per-user limiter sees a new bucket each time.
//
// Besides ns/op (wall time), each reports cpu-ns/op: the CPU time of the whole process (GC and,
// for loopback, the clients included) per request. On a shared two-core machine it moves much
// less than wall time when other work competes for the cores.

const benchLogLevel = slog.LevelInfo // the production default (SECKILL_LOG_LEVEL=info)

// soldOutSales is a domain that has nothing left to sell.
type soldOutSales struct{ Sales }

func (soldOutSales) Purchase(context.Context, sale.PurchaseRequest) (sale.Receipt, error) {
	return sale.Receipt{}, sale.ErrSoldOut
}

type noStampedes struct{ Stampedes }

// benchRouter is the real router with the production defaults of the replica's own limit
// (config.go: SECKILL_MAX_INFLIGHT 2000); the shared ones are measured by `make bench`.
func benchRouter(tb testing.TB, sales Sales, logTo io.Writer) http.Handler {
	tb.Helper()
	m := metrics.New()
	log := slog.New(slog.NewJSONHandler(logTo, &slog.HandlerOptions{Level: benchLogLevel}))
	h, err := New(Deps{Log: log, Sales: sales, Stampedes: noStampedes{}, Board: boardOf(), HTTPMetrics: m}, Config{
		AdminToken:           "bench",
		MaxInflightPurchases: 2000,
		Metrics:              m.Handler(),
		Web:                  fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// bareGin is the yardstick: gin.New() and one handler that parses :id, decodes the body with
// encoding/json and DisallowUnknownFields, and answers 409 with the API's sold_out body.
// structBody chooses how that answer is built: a struct, or a gin.H as a quick handler would.
func bareGin(structBody bool) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.POST("/api/v1/products/:id/purchase", func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			c.JSON(http.StatusBadRequest, gin.H{"error": gin.H{"code": "invalid_request", "message": "id"}})
			return
		}
		var body struct {
			UserID   string `json:"user_id"`
			Quantity *int   `json:"quantity"`
		}
		dec := json.NewDecoder(c.Request.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&body); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": gin.H{"code": "invalid_request", "message": err.Error()}})
			return
		}
		if structBody {
			c.JSON(http.StatusConflict, errorBody{Error: errorDetail{Code: string(sale.CodeSoldOut), Message: "sold out"}})
			return
		}
		c.JSON(http.StatusConflict, gin.H{"error": gin.H{"code": "sold_out", "message": "sold out"}})
	})
	return r
}

const (
	benchPath   = "/api/v1/products/42/purchase"
	soldOutBody = `{"error":{"code":"sold_out","message":"sold out"}}`
)

// purchaseRequests builds request after request, each with a new user id (and, with withKey, a
// new Idempotency-Key), reusing one body buffer: a request must be served before the next is made.
type purchaseRequests struct {
	withKey bool
	n       int
	buf     []byte
	rd      bytes.Reader
	u       *url.URL
}

func newPurchaseRequests(withKey bool) *purchaseRequests {
	u, _ := url.Parse(benchPath)
	return &purchaseRequests{withKey: withKey, u: u, buf: make([]byte, 0, 64)}
}

func (p *purchaseRequests) next() *http.Request {
	p.n++
	p.buf = append(strconv.AppendInt(append(p.buf[:0], `{"user_id":"u`...), int64(p.n), 10), `"}`...)
	p.rd.Reset(p.buf)
	hdr := http.Header{"Content-Type": {"application/json"}}
	if p.withKey {
		hdr["Idempotency-Key"] = []string{"k-" + strconv.Itoa(p.n)}
	}
	return &http.Request{
		Method: http.MethodPost, URL: p.u, RequestURI: benchPath, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: hdr, Body: io.NopCloser(&p.rd), ContentLength: int64(len(p.buf)), Host: "bench", RemoteAddr: "192.0.2.1:1234",
	}
}

// checkSoldOut fails unless h answers the purchase with the API's 409 sold_out.
func checkSoldOut(tb testing.TB, h http.Handler, withKey bool) {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, newPurchaseRequests(withKey).next())
	if rec.Code != http.StatusConflict || rec.Body.String() != soldOutBody {
		tb.Fatalf("purchase = %d %s, want 409 %s", rec.Code, rec.Body, soldOutBody)
	}
}

// cpuTime is the CPU time the process has used, all threads.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

func benchRecorder(b *testing.B, h http.Handler, withKey bool) {
	checkSoldOut(b, h, withKey)
	reqs := newPurchaseRequests(withKey)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), reqs.next())
	}
	reportCPU(b, cpu)
}

func benchLoopback(b *testing.B, h http.Handler, withKey bool) {
	checkSoldOut(b, h, withKey)
	loopback(b, h, func(base string, n int64, buf []byte) (*http.Request, []byte) {
		buf = append(strconv.AppendInt(append(buf[:0], `{"user_id":"u`...), n, 10), `"}`...)
		req, _ := http.NewRequest(http.MethodPost, base+benchPath, bytes.NewReader(buf))
		req.Header.Set("Content-Type", "application/json")
		if withKey {
			req.Header.Set("Idempotency-Key", "k-"+strconv.FormatInt(n, 10))
		}
		return req, buf
	}, http.StatusConflict)
}

// loopback serves h on an httptest.Server and sends it the requests next makes (the n-th, from a
// buffer it may reuse) from 8 keep-alive clients at once, each answer one of want.
func loopback(b *testing.B, h http.Handler, next func(base string, n int64, buf []byte) (*http.Request, []byte), want ...int) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var n atomic.Int64
	b.SetParallelism(4) // 8 clients on 2 cores: enough to keep the server busy
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	defer reportCPU(b, cpu)
	b.RunParallel(func(pb *testing.PB) {
		var buf []byte
		for pb.Next() {
			var req *http.Request
			req, buf = next(srv.URL, n.Add(1), buf)
			res, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if !slices.Contains(want, res.StatusCode) {
				b.Errorf("status %d, want one of %v", res.StatusCode, want)
				return
			}
		}
	})
}

func BenchmarkPurchaseSoldOut(b *testing.B) {
	for _, drv := range []struct {
		name string
		run  func(*testing.B, http.Handler, bool)
	}{{"recorder", benchRecorder}, {"loopback", benchLoopback}} {
		for _, withKey := range []bool{false, true} {
			name := drv.name + "/no-key"
			if withKey {
				name = drv.name + "/idempotency-key"
			}
			b.Run(name, func(b *testing.B) {
				drv.run(b, benchRouter(b, soldOutSales{}, io.Discard), withKey)
			})
		}
	}
}

func BenchmarkBareGin(b *testing.B) {
	for _, drv := range []struct {
		name string
		run  func(*testing.B, http.Handler, bool)
	}{{"recorder", benchRecorder}, {"loopback", benchLoopback}} {
		b.Run(drv.name+"/gin.H", func(b *testing.B) { drv.run(b, bareGin(false), false) })
		b.Run(drv.name+"/struct", func(b *testing.B) { drv.run(b, bareGin(true), false) })
	}
}

// BenchmarkHarness is what the recorder driver costs by itself (a request, a recorder, a handler
// that answers nothing): subtract it from both sides to compare the layers alone.
func BenchmarkHarness(b *testing.B) {
	reqs := newPurchaseRequests(false)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), reqs.next())
	}
	reportCPU(b, cpu)
}

// The public read benchmarks: GET one product through the real router (its middleware chain, the
// board's pre-rendered answer) against the smallest gin handler that parses :id and answers a
// product's JSON, built per request as a quick handler would.
const productPath = "/api/v1/products/7"

func bareGinGet() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	p := toProductJSON(testProduct)
	r.GET("/api/v1/products/:id", func(c *gin.Context) {
		if _, err := strconv.ParseInt(c.Param("id"), 10, 64); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": gin.H{"code": "invalid_request", "message": "id"}})
			return
		}
		c.JSON(http.StatusOK, p)
	})
	return r
}

func BenchmarkGetProduct(b *testing.B) {
	read := readRouter(b, boardOf(testProduct), Deps{}, Config{})
	for _, tc := range []struct {
		name string
		h    http.Handler
		inm  string
	}{
		{"router", read, ""},
		{"router/if-none-match", read, serve(read, "GET", productPath, "", nil, "Etag").Headers["Etag"]},
		{"bare-gin", bareGinGet(), ""},
	} {
		b.Run("loopback/"+tc.name, func(b *testing.B) { benchGetLoopback(b, tc.h, tc.inm) })
		b.Run("recorder/"+tc.name, func(b *testing.B) {
			u, _ := url.Parse(productPath)
			hdr := http.Header{}
			if tc.inm != "" {
				hdr["If-None-Match"] = []string{tc.inm}
			}
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				req := &http.Request{Method: http.MethodGet, URL: u, RequestURI: productPath, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
					Header: hdr, Body: http.NoBody, Host: "bench", RemoteAddr: "192.0.2.1:1234"}
				tc.h.ServeHTTP(httptest.NewRecorder(), req)
			}
			reportCPU(b, cpu)
		})
	}
}

// benchGetLoopback GETs the product over the loopback (see loopback), with If-None-Match inm
// if not empty.
func benchGetLoopback(b *testing.B, h http.Handler, inm string) {
	loopback(b, h, func(base string, _ int64, buf []byte) (*http.Request, []byte) {
		req, _ := http.NewRequest(http.MethodGet, base+productPath, nil)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		return req, buf
	}, http.StatusOK, http.StatusNotModified)
}
