package httpapi

import (
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// The public reads (the product list, one product, its viewer figures) are answered from the
// replica's board (internal/board): bytes rendered once per change, an ETag, and a Cache-Control
// that lets browsers and shared caches (nginx's micro-cache, a CDN) keep them for a second. No
// public read touches a database. Everything else is `no-store` (noStore, which secureHeaders
// sets on every answer): what depends on who asks is never kept by anyone.

// Board is the read side as the HTTP layer needs it; *board.Board implements it.
type Board interface {
	Snapshot() *board.Snapshot
}

// ReadLimiter is the per-client limit of public reads, in the replica's memory;
// *ratelimit.Local implements it (a nil one allows all).
type ReadLimiter interface {
	Allow(key string, now time.Time) (bool, time.Duration)
}

var (
	// publicCache lets any cache keep a public read for a second, and serve it a second longer
	// while it fetches a fresh one: thousands of viewers cost a cache one upstream request a
	// second per resource. The staleness this adds is in docs/read-path.md.
	publicCache = []string{"public, max-age=1, s-maxage=1, stale-while-revalidate=1"}
	// noStore is every other answer's: per buyer, per operator, or an error.
	noStore = []string{"no-store"}
	// revalidate is the storefront's files': kept, but checked (ETag) before each use, so a new
	// release is seen at once.
	revalidate = []string{"no-cache"}
)

// tagged is a body as served, with its ETag and length made once: an answer from memory sets
// headers it does not compute.
type tagged struct {
	body []byte
	tag  []string
	// length is the Content-Length field of a body over netHTTPBuffer, nil for a smaller one.
	length []string
}

// netHTTPBuffer is what net/http buffers of a body before it must choose between Content-Length
// and chunking: a handler that writes no more and returns lets it count the length itself. A
// header field the handler sets is one more entry in the response's header map, and past eight
// entries Go's map grows from a group to a table, twice per response (the handler's map and
// net/http's copy of it): on a read answered from memory that was a tenth of the replica's CPU.
const netHTTPBuffer = 2048

func newTagged(body []byte) tagged {
	t := tagged{body: body, tag: etagOf(body)}
	if len(body) > netHTTPBuffer {
		t.length = []string{strconv.Itoa(len(body))}
	}
	return t
}

// rendered is an item as served: its product and viewer figures, and its event for the streams.
type rendered struct {
	product, stats tagged
	// data is the event's data, {"product":…,"stats":…}; event the whole event but its id line.
	data, event []byte
}

// Renderer renders the board's items and snapshots once per change (board.Renderer).
type Renderer struct{}

var _ board.Renderer = Renderer{}

// RenderItem implements board.Renderer.
func (Renderer) RenderItem(it *board.Item) any {
	p, st := viewProductJSON(it), viewerStatsOf(it)
	r := &rendered{product: newTagged(mustJSON(publicProductJSON{p, st})), stats: newTagged(mustJSON(st))}
	r.data = mustJSON(eventItemJSON{Product: p, Stats: st})
	r.event = append(append(append([]byte("event: "+string(it.Event)+"\ndata: "), r.data...), '\n'), '\n')
	return r
}

// RenderSnapshot implements board.Renderer.
func (Renderer) RenderSnapshot(s *board.Snapshot) any {
	var out struct {
		Products []publicProductJSON `json:"products"`
	}
	out.Products = make([]publicProductJSON, 0, len(s.Listed()))
	for _, it := range s.Listed() {
		out.Products = append(out.Products, publicProductJSON{viewProductJSON(it), viewerStatsOf(it)})
	}
	list := newTagged(mustJSON(out))
	return &list
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("httpapi: rendering the board: " + err.Error()) // plain structs of numbers and strings
	}
	return b
}

// etagOf is a strong ETag of body: 64 bits of FNV-1a, enough to tell two versions of one
// resource apart.
func etagOf(body []byte) []string {
	h := fnv.New64a()
	_, _ = h.Write(body)
	return []string{`"` + strconv.FormatUint(h.Sum64(), 36) + `"`}
}

func viewProductJSON(it *board.Item) productJSON {
	p := toProductJSON(it.Product)
	p.State = string(it.State)
	p.Admission = p.Admission.public()
	return p
}

func viewerStatsOf(it *board.Item) viewerStatsJSON {
	p := it.Product
	out := viewerStatsJSON{InitialStock: p.InitialStock, Stock: p.Stock, SoldUnits: p.InitialStock - p.Stock}
	out.ratesJSON = ratesOf(it.Rates)
	return out
}

// snapshot is the board's current snapshot, or false (and a 503) before its first read.
func (h *handlers) snapshot(c *gin.Context) (*board.Snapshot, bool) {
	s := h.board.Snapshot()
	if !s.Loaded() {
		c.Writer.Header()["Retry-After"] = retryAfter
		abortJSONBody(c, http.StatusServiceUnavailable, mapError(sale.ErrUnavailable).body)
		return nil, false
	}
	return s, true
}

func (h *handlers) listProducts(c *gin.Context) {
	s, ok := h.snapshot(c)
	if !ok {
		return
	}
	servePublic(c, s.Rendered.(*tagged))
}

// item returns the rendered item of the path's product, or answers 400, 404 or 503.
func (h *handlers) item(c *gin.Context) (*rendered, bool) {
	id, err := productID(c)
	if err != nil {
		h.respondError(c, err)
		return nil, false
	}
	s, ok := h.snapshot(c)
	if !ok {
		return nil, false
	}
	it, ok := s.Item(id)
	if !ok {
		h.respondError(c, sale.ErrNotFound)
		return nil, false
	}
	return it.Rendered.(*rendered), true
}

func (h *handlers) getProduct(c *gin.Context) {
	if r, ok := h.item(c); ok {
		servePublic(c, &r.product)
	}
}

// getStats answers the viewer figures of a product: its live stock and the purchase rates.
// The exact audit is the operators' (getAudit).
func (h *handlers) getStats(c *gin.Context) {
	if r, ok := h.item(c); ok {
		servePublic(c, &r.stats)
	}
}

// servePublic answers a public read: 304 when the client holds its version already, else the
// body.
func servePublic(c *gin.Context, t *tagged) {
	c.Writer.Header()["Cache-Control"] = publicCache
	serveTagged(c, t, jsonContentType)
}

// serveTagged answers t under its ETag, or 304 Not Modified (headers only) when the request's
// If-None-Match names it.
func serveTagged(c *gin.Context, t *tagged, contentType []string) {
	hd := c.Writer.Header()
	hd["Etag"] = t.tag
	if inm := c.Request.Header["If-None-Match"]; len(inm) > 0 && etagMatches(inm, t.tag[0]) {
		c.Status(http.StatusNotModified)
		return
	}
	hd["Content-Type"] = contentType
	if t.length != nil {
		hd["Content-Length"] = t.length
	}
	c.Status(http.StatusOK)
	_, _ = c.Writer.Write(t.body)
}

// etagMatches reports whether the If-None-Match values name tag, by the weak comparison RFC 9110
// prescribes for it (W/"x" matches "x"); "*" matches any.
func etagMatches(values []string, tag string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			part = strings.TrimSpace(part)
			if part == "*" || strings.TrimPrefix(part, "W/") == tag {
				return true
			}
		}
	}
	return false
}

// readLimit refuses a public read from a client over its rate with 429 and Retry-After, from
// the replica's memory: a greedy client costs a map lookup. Clients in exempt pass.
func (h *handlers) readLimit(l ReadLimiter, exempt []netip.Prefix) gin.HandlerFunc {
	if l == nil {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		ip := c.ClientIP()
		if isExempt(ip, exempt) {
			c.Next()
			return
		}
		if ok, wait := l.Allow(throttleKey(ip), h.now()); !ok {
			h.respondError(c, &sale.RateLimitedError{Wait: wait})
			return
		}
		c.Next()
	}
}

// isExempt reports whether the client address ip is in exempt.
func isExempt(ip string, exempt []netip.Prefix) bool {
	if len(exempt) == 0 {
		return false
	}
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
