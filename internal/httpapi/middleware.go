package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

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
		id := headerValue(c.Request.Header, canonicalReqID)
		if !saneRequestID(id) {
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
	return log.With("request_id", headerValue(c.Writer.Header(), canonicalReqID))
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
		m.ObserveHTTP(route, methodLabel(c.Request.Method), status, took)
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

// methodLabel is the method as a metric label: one of HTTP's, or "other". A client chooses the
// method, and any token is one to net/http: as a label as it is, each new one would be a new
// series kept for ever (and bytes that are not UTF-8, a panic of the metrics library).
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "other"
}

// limitBody caps the request body; reading past the cap fails with *http.MaxBytesError, which
// the decoder turns into errBodyTooLarge. A body announced too large is refused at once.
func (h *handlers) limitBody(n int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > n {
			h.respondError(c, fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, n))
			return
		}
		c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		c.Next()
	}
}

// MaxHeaderBytes is the API's limit on the size of a request's head: its request line and header
// fields. A longer head is answered by limitHeader with the API's JSON 431. It is far above
// anything a client of the API sends (a buyer token is under 2 KiB), and above what nginx in
// front lets through by default (large_client_header_buffers 4 8k: 8 KiB a line, 32 KiB in all).
const MaxHeaderBytes = 64 << 10

// ServerMaxHeaderBytes is the http.Server's MaxHeaderBytes for New's handler (net/http's default,
// stated): it must be larger than MaxHeaderBytes, so that a head between the two reaches
// limitHeader. net/http refuses a head beyond it (in fact beyond it plus 4 KiB) itself, before any
// handler runs, with its own plain-text 431 and no security headers; making the server read more
// to answer in JSON would let every connection make it buffer more.
const ServerMaxHeaderBytes = 1 << 20

// errHeaderTooLarge is the refusal of a request whose head is over MaxHeaderBytes.
var errHeaderTooLarge = fmt.Errorf("the request line and headers must not exceed %d bytes", MaxHeaderBytes)

// limitHeader answers a request whose head is over MaxHeaderBytes with the API's JSON 431 (and
// closes the connection, as net/http does with its own): net/http would answer only past
// ServerMaxHeaderBytes, in plain text.
func (h *handlers) limitHeader(c *gin.Context) {
	if headSize(c.Request) > MaxHeaderBytes {
		c.Writer.Header()["Connection"] = connectionClose
		h.respondError(c, errHeaderTooLarge)
		return
	}
	c.Next()
}

var connectionClose = []string{"close"}

// headSize is the size of r's head as a client sent it: the request line, the Host field and
// every other field line with its separators. net/http keeps field names canonical, which does
// not change their length.
func headSize(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2 + len("Host: ") + len(r.Host) + 2 + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

// adminOnly requires `Authorization: Bearer <token>` (bearerToken: the scheme in any case, never
// a bare token), the token compared in constant time, from a client the throttle is not making
// wait. A client that is made to wait gets 429 with the wait in Retry-After, whatever token it
// sends: it cannot go on guessing during the wait.
func (h *handlers) adminOnly(token string, throttle AdminThrottle) gin.HandlerFunc {
	want := []byte(token)
	return func(c *gin.Context) {
		ctx, client := c.Request.Context(), throttleKey(c.ClientIP())
		wait, err := throttle.Wait(ctx, client)
		if err != nil {
			h.respondError(c, err)
			return
		}
		if wait > 0 {
			c.Writer.Header()["Retry-After"] = []string{retryAfterSeconds(wait)}
			abortJSON(c, http.StatusTooManyRequests, string(sale.CodeRateLimited), "too many wrong admin tokens from this address; wait "+retryAfterSeconds(wait)+" s")
			return
		}
		got, ok := bearerToken(c.Request.Header)
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			wait, err := throttle.Failed(ctx, client)
			if err != nil {
				h.respondError(c, err)
				return
			}
			if wait > 0 {
				h.logFor(c).Warn("wrong admin tokens: client made to wait", "client", client, "wait", wait)
			}
			c.Header("WWW-Authenticate", `Bearer realm="seckill admin"`)
			abortJSON(c, http.StatusUnauthorized, codeUnauthorized, "admin endpoints need Authorization: Bearer <SECKILL_ADMIN_TOKEN>")
			return
		}
		if err := throttle.Succeeded(ctx, client); err != nil {
			h.respondError(c, err)
			return
		}
		c.Next()
	}
}

// Limiter is a rate limit per key; *ratelimit.Shared implements it (a nil one allows all).
type Limiter interface {
	// Allow reports whether key may act now, and if not, how long it should wait.
	Allow(ctx context.Context, key string) (bool, time.Duration)
}

// clientLimit refuses a purchase from a client over its rate with 429 and the wait in
// Retry-After. The client is gin's ClientIP: the peer, or the address X-Forwarded-For names when
// the peer is a trusted proxy; an IPv6 client counts by its /64. Clients in exempt are let through.
func (h *handlers) clientLimit(l Limiter, exempt []netip.Prefix) gin.HandlerFunc {
	if l == nil {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		ip := c.ClientIP()
		if isExempt(ip, exempt) {
			c.Next()
			return
		}
		if ok, wait := l.Allow(c.Request.Context(), throttleKey(ip)); !ok {
			h.respondError(c, &sale.RateLimitedError{Wait: wait})
			return
		}
		c.Next()
	}
}

// retryAfterSeconds is d in whole seconds, rounded up: Retry-After's unit.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// errNotJSON is the refusal of a write whose body is not declared JSON.
var errNotJSON = errors.New("the request body must be sent as Content-Type: application/json")

// requireJSON refuses a write whose Content-Type is not application/json (parameters such as
// charset aside) with 415. A browser sends a cross-site form or text/plain body without asking
// first; application/json, it must ask (a CORS preflight, which this API never grants).
func (h *handlers) requireJSON(c *gin.Context) {
	if !isJSON(c.Request.Header["Content-Type"]) {
		h.respondError(c, errNotJSON)
		return
	}
	c.Next()
}

// isJSON reports whether a request's Content-Type values are exactly one, application/json.
func isJSON(v []string) bool {
	if len(v) != 1 {
		return false
	}
	mediaType, _, _ := strings.Cut(v[0], ";")
	return strings.EqualFold(strings.Trim(mediaType, " \t"), "application/json")
}

// The security headers of every answer, shared as gin shares its own and never modified. The
// API's answers are data that nothing may render or frame; the storefront's pages load their
// scripts, styles, images and API calls from this origin only (pageCSP).
var (
	apiCSP     = []string{"default-src 'none'; frame-ancestors 'none'"}
	pageCSP    = []string{"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}
	nosniff    = []string{"nosniff"}
	noReferrer = []string{"no-referrer"}
	frameDeny  = []string{"DENY"}
)

// secureHeaders sets the security headers of an API answer on every response; the storefront's
// routes replace the policy with pageCSP and add X-Frame-Options for browsers that predate CSP's
// frame-ancestors. An API answer does without it: no browser renders JSON in a frame as a page,
// frame-ancestors says the same to those that would, and each field is a header map entry on
// every answer (see netHTTPBuffer). The keys are in canonical form already.
func secureHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h["Content-Security-Policy"] = apiCSP
	h["X-Content-Type-Options"] = nosniff
	h["Referrer-Policy"] = noReferrer
	// No cache keeps an answer unless its handler declares it public (reads.go): what depends on
	// who asks is never kept by anyone.
	h["Cache-Control"] = noStore
	c.Next()
}

// inflightLimit sheds purchases beyond max running at once on this replica with 429, so that a
// stampede queues in the clients and not in this process's memory. A counter, not a channel of
// slots: two atomic operations per purchase instead of two channel operations, each taking
// the channel's lock. A shed purchase never holds a place, even for a moment, as with the
// channel.
func (h *handlers) inflightLimit(max int) gin.HandlerFunc {
	if max <= 0 {
		return func(c *gin.Context) { c.Next() }
	}
	var inflight atomic.Int64
	return func(c *gin.Context) {
		for {
			n := inflight.Load()
			if n >= int64(max) {
				h.respondError(c, sale.ErrRateLimited)
				return
			}
			if inflight.CompareAndSwap(n, n+1) {
				break
			}
		}
		defer inflight.Add(-1)
		c.Next()
	}
}
