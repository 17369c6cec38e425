package httpapi

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// Sales is the domain as the HTTP layer needs it; *sale.Service implements it.
type Sales interface {
	AllProducts(ctx context.Context) ([]sale.Product, error)
	Purchase(ctx context.Context, req sale.PurchaseRequest) (sale.Receipt, error)
	BuyerOrder(ctx context.Context, orderID, userID string) (sale.Order, error)
	Stats(ctx context.Context, id int64) (sale.Stats, error)
	CreateProduct(ctx context.Context, np sale.NewProduct) (sale.Product, error)
	ResetProduct(ctx context.Context, id int64, r sale.Reset) (sale.Product, error)
}

// Orders is what happens to an order after its purchase (*checkout.Service).
type Orders interface {
	Pay(ctx context.Context, orderID, userID, key string) (sale.Order, error)
	Cancel(ctx context.Context, orderID, userID string) (sale.Order, error)
}

// Check reports whether a dependency is reachable.
type Check func(ctx context.Context) error

type handlers struct {
	// log is the process's logger; a request logs through logFor, which adds its id.
	log       *slog.Logger
	sales     Sales
	orders    Orders
	buyers    *buyer.Verifier
	queue     Queue
	stampedes Stampedes
	live      LiveRates
	board     Board
	streams   *streams
	ready     map[string]Check
	topology  map[string]string
	now       func() time.Time
	// strategies is the answer of GET /api/v1/strategies, made once (with its encoding and ETag):
	// it changes only with a restart.
	strategies     strategiesJSON
	strategiesBody tagged
}

// productID parses the :id path parameter; a malformed id is a 400, a well-formed unknown one
// will be a 404.
func productID(c *gin.Context) (int64, error) {
	id, ok := parseID(c.Param("id"))
	if !ok {
		return 0, errProductID("id")
	}
	return id, nil
}

func errProductID(field string) error {
	return &sale.ValidationError{Field: field, Reason: "must be a positive integer in decimal digits, without sign or leading zeros"}
}

// parseID parses a positive id in its one spelling: decimal digits, no sign, no leading zero, at
// most an int64. strconv.ParseInt alone also reads "+1" and "01" as 1, which gave one product
// many URLs: many entries in every cache keyed by URL, and paths that a filter on "/products/1"
// does not see.
func parseID(s string) (int64, bool) {
	if s == "" || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// orderID reads the :order_id path parameter: what cannot be an order id (sale.ValidateOrderID)
// is a 400, so that a 404 says only that the buyer has no order with this id.
func orderID(c *gin.Context) (string, error) {
	id := c.Param("order_id")
	return id, sale.ValidateOrderID(id)
}

// listAllProducts answers the admin's list: every product, listed or not, read from the store.
func (h *handlers) listAllProducts(c *gin.Context) {
	ps, err := h.sales.AllProducts(c.Request.Context())
	if err != nil {
		h.respondError(c, err)
		return
	}
	out := productsJSON{Products: make([]productJSON, len(ps))}
	for i, p := range ps {
		out.Products[i] = h.adminProductJSON(p)
	}
	c.JSON(http.StatusOK, out)
}

// adminProductJSON is p as the admin API answers it: as read from the store, its state now.
func (h *handlers) adminProductJSON(p sale.Product) productJSON {
	out := toProductJSON(p)
	out.State = string(board.StateOf(p, h.now()))
	return out
}

// strategiesCacheControl lets a browser or a proxy keep the list of strategies for a minute: it
// changes only when the servers restart with another configuration.
var strategiesCacheControl = []string{"public, max-age=60"}

// listStrategies answers the catalog of stock strategies, with which of them this server serves.
func (h *handlers) listStrategies(c *gin.Context) {
	c.Writer.Header()["Cache-Control"] = strategiesCacheControl
	serveTagged(c, &h.strategiesBody, jsonContentType)
}

func (h *handlers) purchase(c *gin.Context) {
	id, err := productID(c)
	if err != nil {
		h.respondError(c, err)
		return
	}
	var body purchaseJSON
	if err := decodeJSON(c.Request.Body, &body); err != nil {
		h.respondError(c, err)
		return
	}
	if body.UserID, err = h.buyerID(c, body.UserID); err != nil {
		h.respondError(c, err)
		return
	}
	key, err := onlyHeader(c.Request.Header, "Idempotency-Key")
	if err != nil {
		h.respondError(c, err)
		return
	}
	pass, err := onlyHeader(c.Request.Header, passHeader)
	if err != nil {
		h.respondError(c, err)
		return
	}
	req := parsePurchase(id, body, key)
	req.Pass = pass
	if err := req.Validate(); err != nil {
		h.respondError(c, err)
		return
	}
	receipt, err := h.sales.Purchase(c.Request.Context(), req)
	if err != nil {
		h.respondError(c, err)
		return
	}
	if receipt.Replayed {
		c.Header("Idempotent-Replayed", "true")
	}
	c.Header("Location", "/api/v1/orders/"+receipt.OrderID)
	c.JSON(http.StatusAccepted, toReceiptJSON(receipt))
}

// passHeader carries a purchase's admission pass in a waiting-room sale (the queue's answer gives
// it once the buyer is admitted). A header, not a body field: the pass is a credential, like the
// Authorization header's buyer token, and is kept out of whatever logs or replays bodies.
const passHeader = "Admission-Pass"

// parsePurchase builds the domain request; quantity defaults to 1.
func parsePurchase(productID int64, body purchaseJSON, idemKey string) sale.PurchaseRequest {
	qty := 1
	if body.Quantity != nil {
		qty = *body.Quantity
	}
	return sale.PurchaseRequest{ProductID: productID, UserID: body.UserID, Quantity: qty, IdempotencyKey: idemKey}
}

// getOrder answers the buyer's own order. A GET has no body, so the buyer a client claims (no
// buyer tokens) is the query's user_id; with tokens it is the token's subject, and a user_id that
// names someone else is refused as on a purchase. Anyone else's order is not found, in the very
// words of an absent one.
func (h *handlers) getOrder(c *gin.Context) {
	id, err := orderID(c)
	var claimed string
	if err == nil {
		claimed, err = onlyQuery(c, "user_id")
	}
	var userID string
	if err == nil {
		userID, err = h.buyerID(c, claimed)
	}
	if err == nil && userID == "" {
		err = &sale.ValidationError{Field: "user_id", Reason: "is required: an order is read by its buyer (?user_id=…)"}
	}
	if err == nil {
		err = sale.ValidateUserID(userID)
	}
	if err != nil {
		h.respondError(c, err)
		return
	}
	o, err := h.sales.BuyerOrder(c.Request.Context(), id, userID)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderJSON(o))
}

// payOrder pays the buyer's order. The Idempotency-Key is required: a payment retried after a
// lost answer must not charge twice, and the key is what the provider dedupes on.
func (h *handlers) payOrder(c *gin.Context) {
	orderID, userID, ok := h.orderBuyer(c)
	if !ok {
		return
	}
	key, err := onlyHeader(c.Request.Header, "Idempotency-Key")
	if err == nil {
		err = sale.ValidateIdempotencyKey(key)
	}
	if err == nil && key == "" {
		err = &sale.ValidationError{Field: "Idempotency-Key", Reason: "is required to pay"}
	}
	if err != nil {
		h.respondError(c, err)
		return
	}
	o, err := h.orders.Pay(c.Request.Context(), orderID, userID, key)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderJSON(o))
}

// cancelOrder cancels the buyer's order before it is paid; cancelling it again answers the same.
func (h *handlers) cancelOrder(c *gin.Context) {
	orderID, userID, ok := h.orderBuyer(c)
	if !ok {
		return
	}
	o, err := h.orders.Cancel(c.Request.Context(), orderID, userID)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toOrderJSON(o))
}

// orderBuyer reads the order id of the path and the buyer of the body ({"user_id": …}, or the
// buyer's token): only the buyer may pay or cancel an order, and another's is not found.
func (h *handlers) orderBuyer(c *gin.Context) (id, userID string, ok bool) {
	var body orderBuyerJSON
	id, err := orderID(c)
	if err == nil {
		err = decodeJSON(c.Request.Body, &body)
	}
	if err == nil {
		body.UserID, err = h.buyerID(c, body.UserID)
	}
	if err == nil {
		err = sale.ValidateUserID(body.UserID)
	}
	if err != nil {
		h.respondError(c, err)
		return "", "", false
	}
	return id, body.UserID, true
}

// getAudit answers the exact figures of a product's sale (store.Stats: a scan of its reservations
// and orders) with its live rates: the operators' audit, never a public read.
func (h *handlers) getAudit(c *gin.Context) {
	id, err := productID(c)
	if err != nil {
		h.respondError(c, err)
		return
	}
	st, err := h.sales.Stats(c.Request.Context(), id)
	if err != nil {
		h.respondError(c, err)
		return
	}
	out := statsJSON{
		InitialStock:    st.InitialStock,
		Stock:           st.Stock,
		Reserved:        st.ReservedUnits,
		OrdersConfirmed: st.OrdersConfirmed,
		ConfirmedUnits:  st.ConfirmedUnits,
		Oversold:        st.Oversold(),
		AwaitingUnits:   st.AwaitingUnits,
		PaidUnits:       st.PaidUnits,
		ExpiredUnits:    st.ExpiredUnits,
		CancelledUnits:  st.CancelledUnits,
		ReturnedUnits:   st.ReturnedUnits,
		RefusedOrders:   st.RefusedOrders,
	}
	var rates *board.Rates
	if r, ok := h.rates(c, id); ok {
		rates = &r
	}
	out.ratesJSON = ratesOf(rates)
	c.JSON(http.StatusOK, out)
}

// rates reads the product's live rates, bounded by a short timeout: the stats answer without them
// (ok false) rather than wait on, or fail because of, a slow or absent Redis.
func (h *handlers) rates(c *gin.Context, id int64) (livestats.Rates, bool) {
	if h.live == nil {
		return livestats.Rates{}, false
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 300*time.Millisecond)
	defer cancel()
	r, err := h.live.Rates(ctx, id)
	if err != nil {
		h.logFor(c).Debug("live rates unavailable", "product_id", id, "err", err)
		return livestats.Rates{}, false
	}
	return r, true
}

func (h *handlers) createProduct(c *gin.Context) {
	var body newProductJSON
	if err := decodeJSON(c.Request.Body, &body); err != nil {
		h.respondError(c, err)
		return
	}
	np, err := body.domain(h.now())
	if err != nil {
		h.respondError(c, err)
		return
	}
	p, err := h.sales.CreateProduct(c.Request.Context(), np)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.Header("Location", "/api/v1/products/"+strconv.FormatInt(p.ID, 10))
	c.JSON(http.StatusCreated, h.adminProductJSON(p))
}

func (h *handlers) resetProduct(c *gin.Context) {
	id, err := productID(c)
	if err != nil {
		h.respondError(c, err)
		return
	}
	var body resetJSON
	if err := decodeJSON(c.Request.Body, &body); err != nil {
		h.respondError(c, err)
		return
	}
	r, err := body.domain()
	if err != nil {
		h.respondError(c, err)
		return
	}
	p, err := h.sales.ResetProduct(c.Request.Context(), id, r)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, h.adminProductJSON(p))
}

func healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz runs every dependency check at once, each bounded by two seconds. The answer names the
// dependencies that failed, not how: a driver's error can hold addresses and user names, so it
// goes to the log.
func (h *handlers) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	results := make(map[string]string, len(h.ready))
	errs := map[string]error{}
	for name, check := range h.ready {
		wg.Go(func() {
			err := check(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				results[name] = "unavailable"
				errs[name] = err
				return
			}
			results[name] = "ok"
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		failed := slices.Sorted(maps.Keys(errs))
		log := h.logFor(c)
		for _, name := range failed {
			log.Warn("not ready", "check", name, "err", errs[name])
		}
		c.JSON(http.StatusServiceUnavailable, gin.H{
			"error":    errorDetail{Code: string(sale.CodeUnavailable), Message: "not ready: " + strings.Join(failed, ", ") + " unavailable"},
			"checks":   results,
			"topology": h.topology,
		})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "checks": results, "topology": h.topology})
}

// headerValue is h.Get(key) for a key already in canonical form: a map read, without the check
// that the key is canonical which Get makes on every call.
func headerValue(h http.Header, canonicalKey string) string {
	if v := h[canonicalKey]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// onlyHeader is headerValue for a header the API acts on: sent twice, it is refused, not read as
// its first copy. Which copy counts would otherwise depend on who reads it (a proxy may keep the
// other), and a retry's Idempotency-Key must name one purchase or payment.
func onlyHeader(h http.Header, canonicalKey string) (string, error) {
	switch v := h[canonicalKey]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", &sale.ValidationError{Field: canonicalKey, Reason: "must be sent once"}
}

// onlyQuery returns the query parameter key, "" if absent; a query that does not parse, or that
// gives key twice, is refused for the reason of onlyHeader.
func onlyQuery(c *gin.Context, key string) (string, error) {
	q, err := url.ParseQuery(c.Request.URL.RawQuery)
	if err != nil {
		return "", &sale.ValidationError{Field: "query", Reason: "is malformed"}
	}
	switch v := q[key]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", &sale.ValidationError{Field: key, Reason: "must be given once"}
}
