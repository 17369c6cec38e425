package httpapi

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/seckill-go/seckill-go/internal/sale"
)

const (
	// canonicalReqID is X-Request-ID as net/http keys its header maps: indexing them with it
	// skips a canonicalization (and its allocation) per request.
	canonicalReqID = "X-Request-Id"
	maxReqIDLength = 64
)

// requestID takes a sane X-Request-ID from the caller (the load balancer sets one) or makes one,
// and echoes it in the response. The response header is where the id lives for the rest of the
// request: requestLog reads it back from there when something is logged, so that a request that
// logs nothing (most of them) builds no logger and stores nothing in the gin context.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		var id string
		if v := c.Request.Header[canonicalReqID]; len(v) > 0 && saneRequestID(v[0]) {
			id = v[0]
		} else {
			var b [8]byte
			_, _ = rand.Read(b[:])
			var hx [16]byte
			hex.Encode(hx[:], b[:])
			id = string(hx[:])
		}
		c.Writer.Header()[canonicalReqID] = []string{id}
		c.Next()
	}
}

// requestLog returns log with the id of c's request, the logger of everything c logs.
func requestLog(log *slog.Logger, c *gin.Context) *slog.Logger {
	var id string
	if v := c.Writer.Header()[canonicalReqID]; len(v) > 0 {
		id = v[0]
	}
	return log.With("request_id", id)
}

func saneRequestID(id string) bool {
	if id == "" || len(id) > maxReqIDLength {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// recovery turns a panic into a logged 500 with the API's error body; it never crashes the
// process and never shows the panic to the caller.
func recovery(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v) // the client went away; let net/http handle it
				}
				requestLog(log, c).Error("panic in handler", "panic", v, "stack", string(debug.Stack()))
				abortJSONBody(c, http.StatusInternalServerError, internalBody)
			}
		}()
		c.Next()
	}
}

// HTTPMetrics records one request.
type HTTPMetrics interface {
	ObserveHTTP(route, method string, code int, took time.Duration)
}

// observe logs every request at debug level (5xx at warn) and records RED metrics per route.
// The log line is built only when its level is enabled: at the default info level a refused
// purchase costs no log call at all.
func observe(log *slog.Logger, m HTTPMetrics) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		took := time.Since(start)
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		status := c.Writer.Status()
		m.ObserveHTTP(route, c.Request.Method, status, took)
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelWarn
		}
		if ctx := c.Request.Context(); log.Enabled(ctx, level) {
			requestLog(log, c).Log(ctx, level, "http request",
				"method", c.Request.Method, "route", route, "status", status, "took", took)
		}
	}
}

// limitBody caps the request body; reading past the cap fails with *http.MaxBytesError.
func limitBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > n {
			abortJSON(c, http.StatusRequestEntityTooLarge, codePayloadTooLarge,
				"request body too large: the limit is "+itoa(n)+" bytes")
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		c.Next()
	}
}

// adminOnly requires `Authorization: Bearer <token>`, compared in constant time.
func adminOnly(token string) gin.HandlerFunc {
	want := []byte(token)
	return func(c *gin.Context) {
		got, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			c.Header("WWW-Authenticate", `Bearer realm="seckill admin"`)
			abortJSON(c, http.StatusUnauthorized, codeUnauthorized, "admin endpoints need Authorization: Bearer <SECKILL_ADMIN_TOKEN>")
			return
		}
		c.Next()
	}
}

// inflightLimit sheds purchases beyond max running at once on this replica with 429, so that a
// stampede queues in the clients and not in this process's memory.
func (h *handlers) inflightLimit(max int) gin.HandlerFunc {
	if max <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	slots := make(chan struct{}, max)
	return func(c *gin.Context) {
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			c.Next()
		default:
			h.respondError(c, sale.ErrRateLimited)
		}
	}
}

// userLimiter is a token bucket per user id, per replica. Idle buckets are swept so that memory
// stays bounded by the users active in the last sweep interval.
type userLimiter struct {
	rate  rate.Limit
	burst int

	mu        sync.Mutex
	users     map[string]*userBucket
	lastSweep time.Time
}

type userBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const limiterSweepEvery = time.Minute

func newUserLimiter(perSecond float64, burst int) *userLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &userLimiter{rate: rate.Limit(perSecond), burst: max(burst, 1), users: map[string]*userBucket{}}
}

// Allow reports whether user may make a request now. A nil limiter allows everything.
func (l *userLimiter) Allow(user string, now time.Time) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > limiterSweepEvery {
		for id, b := range l.users {
			if now.Sub(b.seen) > limiterSweepEvery {
				delete(l.users, id)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.users[user]
	if !ok {
		b = &userBucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.users[user] = b
	}
	b.seen = now
	return b.lim.AllowN(now, 1)
}
