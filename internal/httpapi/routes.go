// Package httpapi is the HTTP face of seckill-go: the gin router, its handlers and middleware.
// Handlers decode and validate, call the sale domain, and encode; every error leaves as
// {"error":{"code":…,"message":…}} with the status of errorTable. Nothing gin-shaped leaves this
// package, and no handler touches a database, a lock or a broker directly.
package httpapi

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// Config is what the router needs besides the domain.
type Config struct {
	// AdminToken guards /api/v1/admin; required.
	AdminToken string
	// MaxBodyBytes caps request bodies [16 KiB].
	MaxBodyBytes int64
	// MaxInflightPurchases sheds purchases beyond this many at once per replica with 429; 0 means
	// no limit.
	MaxInflightPurchases int
	// Ready names the dependency checks of /readyz.
	Ready map[string]Check
	// Topology says, in /readyz's answer, where each dependency is (Redis: single, cluster or
	// sentinel; the ZooKeeper servers): the load test's report names what it ran on from it.
	Topology map[string]string
	// Metrics is served at /metrics.
	Metrics http.Handler
	// Web is the storefront, served at / (index.html) and /static/.
	Web fs.FS
	// OpsOnly serves /healthz, /readyz and /metrics and nothing else (the worker).
	OpsOnly bool
	// TrustedProxies are the addresses or CIDRs (the load balancer's) whose X-Forwarded-For and
	// X-Real-IP name the client that the per-client limit and the admin throttle count; from any
	// other peer the headers are ignored. Empty: the peer's own address is the client.
	TrustedProxies []string
	// RateExempt are the client addresses the per-client limits (purchases, reads, streams) let
	// through.
	RateExempt []netip.Prefix
	// Streams limits the event streams.
	Streams StreamConfig
	// Tracing, if on, opens a server span per API request (/api/…), continuing the caller's
	// traceparent; nil: no span, and no tracing middleware at all.
	Tracing *tracing.Tracing
}

// Deps are the router's collaborators.
type Deps struct {
	Log   *slog.Logger
	Sales Sales
	// Orders pays and cancels orders; optional (nil: those two routes are not served).
	Orders      Orders
	HTTPMetrics HTTPMetrics
	// Stampedes runs the admin's demo load bursts; required with Sales.
	Stampedes Stampedes
	// Live reads the per-second purchase rates shown in the stats; optional (rates then read 0,
	// with rates_available false).
	Live LiveRates
	// Buyers verifies buyer tokens; optional (nil: a purchase's user_id is the client's claim).
	Buyers *buyer.Verifier
	// ClientLimit is the per-client limit of purchases, keyed by the client's address (an IPv6
	// /64); optional (no limit).
	ClientLimit Limiter
	// Board answers the public reads and feeds the event streams; required with Sales.
	Board Board
	// ReadLimit is the per-client limit of public reads, in memory; optional (no limit).
	ReadLimit ReadLimiter
	// Closing is closed when the process begins to shut down: the event streams end, so that
	// their viewers reconnect to another replica. Optional.
	Closing <-chan struct{}
	// StreamMetrics is optional.
	StreamMetrics StreamMetrics
	// AdminThrottle counts wrong admin tokens per client; optional (the default keeps them in
	// this replica's memory, NewMemoryThrottle with its defaults).
	AdminThrottle AdminThrottle
	// Strategies are the strategies this server serves, listed as served by GET
	// /api/v1/strategies; each must be in sale.Catalog. Optional (nil: none is served).
	Strategies []sale.Strategy
	// Queue serves the sales' waiting rooms (join and poll); optional (nil: not served).
	Queue Queue
	// JoinChallenge is the bot challenge a join must pass (challenge.go); optional (nil: joins
	// need none, the default).
	JoinChallenge ChallengeVerifier
	// Challenges issues the proof-of-work challenges at GET /api/v1/waitroom/challenge; optional
	// (nil: not served; a hosted captcha has none to issue).
	Challenges ChallengeIssuer
	// JWKS is the JSON Web Key Set of the keys that verify the waiting rooms' admission passes,
	// served at /.well-known/jwks.json for whatever else checks them (an edge, another service);
	// optional (nil: not served).
	JWKS []byte
	// Now defaults to time.Now.
	Now func() time.Time
}

var setGinMode sync.Once

// New returns the whole HTTP API as one handler. This function is the map of every route.
func New(d Deps, cfg Config) (http.Handler, error) {
	switch {
	case d.Log == nil || d.HTTPMetrics == nil || cfg.Metrics == nil:
		return nil, errors.New("httpapi: Log, HTTPMetrics and Metrics are required")
	case !cfg.OpsOnly && (d.Sales == nil || d.Stampedes == nil || d.Board == nil || cfg.Web == nil):
		return nil, errors.New("httpapi: Sales, Stampedes, Board and Web are required")
	case !cfg.OpsOnly && cfg.AdminToken == "":
		return nil, errors.New("httpapi: an admin token is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 10
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.AdminThrottle == nil {
		d.AdminThrottle = NewMemoryThrottle(ThrottleConfig{}, d.Now)
	}
	if d.StreamMetrics == nil {
		d.StreamMetrics = nopStreamMetrics{}
	}
	cfg.Streams.defaults()
	h, err := newHandlers(d, cfg)
	if err != nil {
		return nil, err
	}
	setGinMode.Do(func() { gin.SetMode(gin.ReleaseMode) })
	r, err := newRouter(d, cfg, h)
	if err != nil {
		return nil, err
	}

	// get serves HEAD wherever it serves GET: net/http drops the body of a HEAD answer.
	get := func(g gin.IRoutes, path string, hs ...gin.HandlerFunc) {
		g.GET(path, hs...)
		g.HEAD(path, hs...)
	}
	get(r, "/healthz", healthz)
	get(r, "/readyz", h.readyz)
	get(r, "/metrics", gin.WrapH(cfg.Metrics))
	if cfg.OpsOnly {
		return r, nil
	}

	v1 := r.Group("/api/v1")
	// The public reads, from the board's memory (reads.go), and its event stream (stream.go).
	reads := h.readLimit(d.ReadLimit, cfg.RateExempt)
	get(v1, "/products", reads, h.listProducts)
	get(v1, "/products/:id", reads, h.getProduct)
	get(v1, "/products/:id/stats", reads, h.getStats)
	get(v1, "/strategies", reads, h.listStrategies)
	get(v1, "/events", reads, h.events)
	if d.JWKS != nil {
		keys := newTagged(d.JWKS)
		get(r, "/.well-known/jwks.json", reads, func(c *gin.Context) {
			c.Writer.Header()["Cache-Control"] = jwksCacheControl
			serveTagged(c, &keys, jwksContentType)
		})
	}
	v1.POST("/products/:id/purchase", h.requireJSON, h.clientLimit(d.ClientLimit, cfg.RateExempt), h.inflightLimit(cfg.MaxInflightPurchases), h.purchase)
	if d.Queue != nil {
		// A join and a poll cost a Redis script each: the per-client limit counts them as it
		// counts purchases.
		join := []gin.HandlerFunc{h.requireJSON, h.clientLimit(d.ClientLimit, cfg.RateExempt)}
		if d.JoinChallenge != nil {
			join = append(join, h.requireChallenge(d.JoinChallenge)) // a join only, never a poll
		}
		v1.POST("/products/:id/queue", append(join, h.joinQueue)...)
		get(v1, "/products/:id/queue", h.clientLimit(d.ClientLimit, cfg.RateExempt), h.queueStatus)
		if d.Challenges != nil {
			get(v1, "/waitroom/challenge", reads, h.issueChallenge(d.Challenges))
		}
	}
	get(v1, "/orders/:order_id", h.getOrder)
	if d.Orders != nil {
		v1.POST("/orders/:order_id/pay", h.requireJSON, h.payOrder)
		v1.POST("/orders/:order_id/cancel", h.requireJSON, h.cancelOrder)
	}

	admin := v1.Group("/admin", h.adminOnly(cfg.AdminToken, d.AdminThrottle))
	get(admin, "/products", h.listAllProducts)
	get(admin, "/products/:id/stats", h.getAudit)
	admin.POST("/products", h.requireJSON, h.createProduct)
	admin.POST("/products/:id/reset", h.requireJSON, h.resetProduct)
	admin.POST("/products/:id/stampede", h.requireJSON, h.startStampede)
	get(admin, "/stampedes/:stampede_id", h.getStampede)

	files, err := loadWeb(cfg.Web)
	if err != nil {
		return nil, err
	}
	get(r, "/", files.serve(func(*gin.Context) string { return "index.html" }))
	get(r, "/static/*filepath", files.serve(func(c *gin.Context) string { return strings.TrimPrefix(c.Param("filepath"), "/") }))

	// The contract, for machines and for people (apidocs.go); outside the contract itself.
	docs, err := contractDocs()
	if err != nil {
		return nil, err
	}
	get(r, "/api/openapi.yaml", docs.serveSpec)
	get(r, "/api/docs", docs.servePage)
	return r, nil
}

// The key set's answer. It changes only with a restart on another key; a verifier that meets an
// unknown key id fetches it anew anyway (RFC 7517 §4.5), so an hour of caching costs nothing.
var (
	jwksCacheControl = []string{"public, max-age=3600"}
	jwksContentType  = []string{"application/jwk-set+json"}
)

// newHandlers makes the handlers over d's collaborators, with the strategies' listing encoded
// once: every request of it is answered with the same bytes.
func newHandlers(d Deps, cfg Config) (*handlers, error) {
	strategies, err := toStrategiesJSON(d.Strategies)
	if err != nil {
		return nil, err
	}
	return &handlers{
		log:       d.Log,
		sales:     d.Sales,
		orders:    d.Orders,
		stampedes: d.Stampedes,
		live:      d.Live,
		board:     d.Board,
		streams: &streams{
			cfg: cfg.Streams, exempt: cfg.RateExempt, closing: d.Closing, metrics: d.StreamMetrics,
			byClient: map[string]int{},
		},
		buyers:         d.Buyers,
		queue:          d.Queue,
		ready:          cfg.Ready,
		topology:       cfg.Topology,
		now:            d.Now,
		strategies:     strategies,
		strategiesBody: newTagged(mustJSON(strategies)),
	}, nil
}

// newRouter makes the gin engine without its routes: the middleware every request passes
// through, and the API's JSON answers for a path or a method it does not serve.
func newRouter(d Deps, cfg Config, h *handlers) (*gin.Engine, error) {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	// One spelling per path: gin's redirect of /path/ to /path answered before any middleware,
	// in HTML, without the request id or the security headers.
	r.RedirectTrailingSlash = false
	// gin trusts every peer's X-Forwarded-For by default; only the configured proxies' count.
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("httpapi: trusted proxies: %w", err)
	}
	if cfg.Tracing.Enabled() {
		// First, so that the request's log line (observe) carries its trace id, and a recovered
		// panic is the span's 500. The ops endpoints and the storefront's files start no trace.
		r.Use(traceRequests(cfg.Tracing))
	}
	// recovery runs inside observe, so that a recovered panic is counted and logged as the 500
	// it answers; requestID, secureHeaders and observe themselves are too simple to panic.
	r.Use(requestID(), secureHeaders, observe(d.Log, d.HTTPMetrics), recovery(d.Log), h.limitHeader, h.limitBody(cfg.MaxBodyBytes))
	r.NoRoute(func(c *gin.Context) { abortJSON(c, http.StatusNotFound, codeNotFound, "no such endpoint") })
	r.NoMethod(func(c *gin.Context) {
		abortJSON(c, http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed on this endpoint")
	})
	return r, nil
}

// webFiles are the storefront's files, read once: a few small files that every visitor loads.
type webFiles map[string]webFile

type webFile struct {
	contentType []string
	tagged
}

// loadWeb reads every file of files.
func loadWeb(files fs.FS) (webFiles, error) {
	out := webFiles{}
	err := fs.WalkDir(files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return err
		}
		out[name] = webFile{
			contentType: []string{contentTypeOf(name)},
			tagged:      newTagged(data),
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("httpapi: reading the storefront: %w", err)
	}
	return out, nil
}

// serve answers with the file name gives, under the page's security policy, revalidated by its
// ETag before each use. Anything but one of the files (a directory, a path with "." or ".."
// elements) is the API's JSON 404: no listing, no redirect, no range request to refuse in
// another format.
func (w webFiles) serve(name func(*gin.Context) string) gin.HandlerFunc {
	return func(c *gin.Context) {
		f, ok := w[name(c)]
		if !ok {
			abortJSON(c, http.StatusNotFound, codeNotFound, "no such file")
			return
		}
		h := c.Writer.Header()
		h["Content-Security-Policy"] = pageCSP
		h["X-Frame-Options"] = frameDeny
		h["Cache-Control"] = revalidate
		serveTagged(c, &f.tagged, f.contentType)
	}
}

// contentTypeOf is the media type of the storefront's file name, by its extension. A fixed table,
// not mime.TypeByExtension, which also reads the host's /etc/mime.types: with nosniff, a module
// script served under another type would not run.
func contentTypeOf(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json":
		return "application/json"
	case ".txt":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
