// Package httpapi is the HTTP face of seckill-go: the gin router, its handlers and middleware.
// Handlers decode and validate, call the sale domain, and encode; every error leaves as
// {"error":{"code":…,"message":…}} with the status of errorTable. Nothing gin-shaped leaves this
// package, and no handler touches a database, a lock or a broker directly.
package httpapi

import (
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// Config is what the router needs besides the domain.
type Config struct {
	// AdminToken guards /api/v1/admin; required.
	AdminToken string
	// MaxBodyBytes caps request bodies [16 KiB].
	MaxBodyBytes int64
	// PerUserRate and PerUserBurst bound each user's purchase attempts per second on one replica;
	// PerUserRate 0 disables the limit.
	PerUserRate  float64
	PerUserBurst int
	// MaxInflightPurchases sheds purchases beyond this many at once per replica with 429; 0 means
	// no limit.
	MaxInflightPurchases int
	// Ready names the dependency checks of /readyz.
	Ready map[string]Check
	// Metrics is served at /metrics.
	Metrics http.Handler
	// Web is the storefront, served at / (index.html) and /static/.
	Web fs.FS
	// OpsOnly serves /healthz, /readyz and /metrics and nothing else (the worker).
	OpsOnly bool
}

// Deps are the router's collaborators.
type Deps struct {
	Log         *slog.Logger
	Sales       Sales
	HTTPMetrics HTTPMetrics
	// Stampedes runs the admin's demo load bursts; required with Sales.
	Stampedes Stampedes
	// Live reads the per-second purchase rates shown in the stats; optional (rates then read 0,
	// with rates_available false).
	Live LiveRates
	// Now defaults to time.Now.
	Now func() time.Time
}

var setGinMode sync.Once

// New returns the whole HTTP API as one handler. This function is the map of every route.
func New(d Deps, cfg Config) (http.Handler, error) {
	switch {
	case d.Log == nil || d.HTTPMetrics == nil || cfg.Metrics == nil:
		return nil, errors.New("httpapi: Log, HTTPMetrics and Metrics are required")
	case !cfg.OpsOnly && (d.Sales == nil || d.Stampedes == nil || cfg.Web == nil):
		return nil, errors.New("httpapi: Sales, Stampedes and Web are required")
	case !cfg.OpsOnly && cfg.AdminToken == "":
		return nil, errors.New("httpapi: an admin token is required")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 16 << 10
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	setGinMode.Do(func() { gin.SetMode(gin.ReleaseMode) })

	h := &handlers{
		log:       d.Log,
		sales:     d.Sales,
		stampedes: d.Stampedes,
		live:      d.Live,
		limiter:   newUserLimiter(cfg.PerUserRate, cfg.PerUserBurst),
		ready:     cfg.Ready,
		now:       d.Now,
	}
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	// recovery runs inside observe, so that a recovered panic is counted and logged as the 500
	// it answers; requestID and observe themselves are too simple to panic.
	r.Use(requestID(), observe(d.Log, d.HTTPMetrics), recovery(d.Log), h.limitBody(cfg.MaxBodyBytes))
	r.NoRoute(func(c *gin.Context) { abortJSON(c, http.StatusNotFound, codeNotFound, "no such endpoint") })
	r.NoMethod(func(c *gin.Context) {
		abortJSON(c, http.StatusMethodNotAllowed, codeMethodNotAllowed, "method not allowed on this endpoint")
	})

	r.GET("/healthz", healthz)
	r.GET("/readyz", h.readyz)
	r.GET("/metrics", gin.WrapH(cfg.Metrics))
	if cfg.OpsOnly {
		return r, nil
	}

	v1 := r.Group("/api/v1")
	v1.GET("/products", h.listProducts)
	v1.GET("/products/:id", h.getProduct)
	v1.GET("/products/:id/stats", h.getStats)
	v1.POST("/products/:id/purchase", h.inflightLimit(cfg.MaxInflightPurchases), h.purchase)
	v1.GET("/orders/:order_id", h.getOrder)

	admin := v1.Group("/admin", adminOnly(cfg.AdminToken))
	admin.GET("/products", h.listAllProducts)
	admin.POST("/products", h.createProduct)
	admin.POST("/products/:id/reset", h.resetProduct)
	admin.POST("/products/:id/stampede", h.startStampede)
	admin.GET("/stampedes/:stampede_id", h.getStampede)

	web := http.FS(cfg.Web)
	r.GET("/", func(c *gin.Context) { c.FileFromFS("/", web) })
	r.GET("/static/*filepath", func(c *gin.Context) {
		if strings.HasSuffix(c.Param("filepath"), "/") { // files only, no directory listings
			abortJSON(c, http.StatusNotFound, codeNotFound, "no such file")
			return
		}
		c.FileFromFS(c.Param("filepath"), web)
	})
	return r, nil
}
