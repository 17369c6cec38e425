package httpapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// The JSON shapes of the API. Domain types never go on the wire directly.

type productJSON struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	PriceCents   int64  `json:"price_cents"`
	Stock        int    `json:"stock"`
	InitialStock int    `json:"initial_stock"`
	Strategy     string `json:"strategy"`
	SaleStartsAt string `json:"sale_starts_at"`
	SaleEndsAt   string `json:"sale_ends_at"`
	PerUserLimit int    `json:"per_user_limit"`
	Listed       bool   `json:"listed"`
	// State is upcoming, on_sale, sold_out or ended (board.State), as of the answer.
	State     string        `json:"state"`
	Admission admissionJSON `json:"admission"`
}

func toProductJSON(p sale.Product) productJSON {
	return productJSON{
		ID:           p.ID,
		Name:         p.Name,
		PriceCents:   p.PriceCents,
		Stock:        p.Stock,
		InitialStock: p.InitialStock,
		Strategy:     string(p.Strategy),
		SaleStartsAt: formatTime(p.SaleStartsAt),
		SaleEndsAt:   formatTime(p.SaleEndsAt),
		PerUserLimit: p.PerUserLimit,
		Listed:       p.Listed,
		Admission:    toAdmissionJSON(p),
	}
}

// admissionJSON is a product's admission rule (sale.AdmissionRule) on the wire, in the admin's
// requests and in every answer. An open sale's is {"mode":"open"}: the settings are a waiting
// room's. The public reads show of them only what a buyer plans by (public).
type admissionJSON struct {
	Mode           string   `json:"mode"`
	AdmitRate      *float64 `json:"admit_rate,omitempty"`
	MaxActive      *int     `json:"max_active,omitempty"`
	SessionSeconds *int64   `json:"session_seconds,omitempty"`
	// QueueOpensAt is in answers always the queue's opening (the sale's start when the admin
	// gave none); in a request it is optional.
	QueueOpensAt   *string `json:"queue_opens_at,omitempty"`
	Shuffle        *bool   `json:"shuffle,omitempty"`
	AbandonSeconds *int64  `json:"abandon_seconds,omitempty"`
}

func toAdmissionJSON(p sale.Product) admissionJSON {
	a := p.Admission.Normalized()
	if !a.WaitingRoom() {
		return admissionJSON{Mode: string(a.Mode)}
	}
	session, abandon := int64(a.Session/time.Second), int64(a.AbandonAfter/time.Second)
	opens := formatTime(a.QueueOpening(p.SaleStartsAt))
	return admissionJSON{Mode: string(a.Mode), AdmitRate: &a.AdmitRate, MaxActive: &a.MaxActive, SessionSeconds: &session,
		QueueOpensAt: &opens, Shuffle: &a.Shuffle, AbandonSeconds: &abandon}
}

// public is what a buyer sees of the rule: whether it queues, from when, and how fast the line
// moves. The rest (how many may buy at once, for how long, when an absent one is skipped) is the
// admin's tuning, and would only invite gaming.
func (a admissionJSON) public() admissionJSON {
	return admissionJSON{Mode: a.Mode, AdmitRate: a.AdmitRate, QueueOpensAt: a.QueueOpensAt}
}

// parseAdmission reads the optional "admission" object of a create or a reset: nil when absent
// (or null). Its fields are checked as strictly as the body's, and every error names its field
// under "admission.".
func parseAdmission(raw json.RawMessage) (*sale.AdmissionRule, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var in admissionJSON
	if err := unmarshalStrict(raw, &in); err != nil {
		var ve *sale.ValidationError
		if errors.As(err, &ve) && ve.Field != "" {
			return nil, &sale.ValidationError{Field: "admission." + ve.Field, Reason: ve.Reason}
		}
		return nil, &sale.ValidationError{Field: "admission", Reason: "must be a JSON object"}
	}
	a, err := in.domain()
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// domain converts the admission object. Its mode is required; an open sale's settings are
// ignored, a waiting room's are required but for shuffle (false) and queue_opens_at (the sale's
// start). The bounds are the domain's (sale.AdmissionRule.Validate).
func (in admissionJSON) domain() (sale.AdmissionRule, error) {
	if in.Mode == "" {
		return sale.AdmissionRule{}, &sale.ValidationError{Field: "admission.mode", Reason: "is required: open or waiting_room"}
	}
	mode, err := sale.ParseAdmissionMode(in.Mode)
	if err != nil || mode == sale.AdmissionOpen {
		return sale.AdmissionRule{Mode: mode}, err
	}
	for _, f := range []struct {
		name  string
		given bool
	}{
		{"admit_rate", in.AdmitRate != nil}, {"max_active", in.MaxActive != nil},
		{"session_seconds", in.SessionSeconds != nil}, {"abandon_seconds", in.AbandonSeconds != nil},
	} {
		if !f.given {
			return sale.AdmissionRule{}, &sale.ValidationError{Field: "admission." + f.name, Reason: "is required for a waiting room"}
		}
	}
	opens, err := parseOptionalTime("admission.queue_opens_at", in.QueueOpensAt, time.Time{})
	if err != nil {
		return sale.AdmissionRule{}, err
	}
	return sale.AdmissionRule{Mode: mode, AdmitRate: *in.AdmitRate, MaxActive: *in.MaxActive,
		Session: seconds(*in.SessionSeconds), QueueOpensAt: opens, Shuffle: in.Shuffle != nil && *in.Shuffle,
		AbandonAfter: seconds(*in.AbandonSeconds)}, nil
}

// seconds is n seconds, saturated at the ends of time.Duration: a count too large to convert is
// still far out of the domain's bounds, and refused there with its field.
func seconds(n int64) time.Duration {
	const most = math.MaxInt64 / int64(time.Second)
	return time.Duration(max(-most, min(n, most))) * time.Second
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

type productsJSON struct {
	Products []productJSON `json:"products"`
}

// strategyJSON is one strategy of sale.Catalog as GET /api/v1/strategies lists it.
type strategyJSON struct {
	Name    string `json:"name"`
	Family  string `json:"family"`
	Safe    bool   `json:"safe"`
	Served  bool   `json:"served"`
	Summary string `json:"summary"`
}

type strategiesJSON struct {
	Strategies []strategyJSON `json:"strategies"`
}

// toStrategiesJSON lists every strategy of sale.Catalog, in its order, marking the served ones.
// A served strategy that the catalog does not know is an error: no client could describe it.
func toStrategiesJSON(served []sale.Strategy) (strategiesJSON, error) {
	for _, s := range served {
		if _, ok := s.Info(); !ok {
			return strategiesJSON{}, fmt.Errorf("httpapi: the served strategy %q is not in the catalog", s)
		}
	}
	out := strategiesJSON{Strategies: make([]strategyJSON, len(sale.Catalog))}
	for i, c := range sale.Catalog {
		out.Strategies[i] = strategyJSON{
			Name:    string(c.Strategy),
			Family:  c.Family,
			Safe:    c.Safe,
			Served:  slices.Contains(served, c.Strategy),
			Summary: c.Summary,
		}
	}
	return out, nil
}

type purchaseJSON struct {
	UserID   string `json:"user_id"`
	Quantity *int   `json:"quantity"`
}

type receiptJSON struct {
	OrderID   string `json:"order_id"`
	Status    string `json:"status"`
	ProductID int64  `json:"product_id"`
	UserID    string `json:"user_id"`
	Quantity  int    `json:"quantity"`
	Strategy  string `json:"strategy"`
}

func toReceiptJSON(r sale.Receipt) receiptJSON {
	return receiptJSON{
		OrderID:   r.OrderID,
		Status:    string(r.Status),
		ProductID: r.ProductID,
		UserID:    r.UserID,
		Quantity:  r.Quantity,
		Strategy:  string(r.Strategy),
	}
}

type orderJSON struct {
	OrderID     string `json:"order_id"`
	Status      string `json:"status"`
	ProductID   int64  `json:"product_id"`
	UserID      string `json:"user_id"`
	Quantity    int    `json:"quantity"`
	AmountCents int64  `json:"amount_cents"`
	// The lifecycle: the end of the payment window once the order exists (absent while queued),
	// when it was paid or closed (expired, cancelled), the provider's id of its charge, and
	// whether its units are back on sale.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	PaidAt    *time.Time `json:"paid_at,omitempty"`
	ClosedAt  *time.Time `json:"closed_at,omitempty"`
	PaymentID string     `json:"payment_id,omitempty"`
	Returned  bool       `json:"returned"`
	// A refused order's why, as an error code (sold_out, limit_reached), and what it means for
	// its buyer, in words.
	Refusal string `json:"refusal,omitempty"`
	Message string `json:"message,omitempty"`
}

// refusalMessages say to the buyer what a refused order's refusal means; refusedMessage is said
// for a refusal not listed.
var refusalMessages = map[sale.Code]string{
	sale.CodeSoldOut: "This purchase was accepted, then refused when it was recorded: " +
		"the last units had already gone to other buyers. The order is void and nothing will be charged.",
	sale.CodeLimitReached: "This purchase was accepted, then refused when it was recorded: " +
		"this buyer already holds this product's per-user limit. The order is void and nothing will be charged.",
}

const refusedMessage = "This purchase was accepted, then refused when it was recorded. The order is void and nothing will be charged."

func toOrderJSON(o sale.Order) orderJSON {
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	out := orderJSON{OrderID: o.OrderID, Status: string(o.Status), ProductID: o.ProductID, UserID: o.UserID,
		Quantity: o.Quantity, AmountCents: o.AmountCents, ExpiresAt: at(o.ExpiresAt), PaidAt: at(o.PaidAt),
		ClosedAt: at(o.ClosedAt), PaymentID: o.PaymentID, Returned: o.Returned}
	if o.Status == sale.StatusRefused {
		out.Refusal, out.Message = string(o.Refusal), cmp.Or(refusalMessages[o.Refusal], refusedMessage)
	}
	return out
}

// orderBuyerJSON is the body of a payment or a cancel: who asks.
type orderBuyerJSON struct {
	UserID string `json:"user_id"`
}

// statsJSON is the exact audit of a product's sale (the admin API): store.Stats, a scan of the
// sale's reservations and orders, with the live rates.
type statsJSON struct {
	InitialStock    int `json:"initial_stock"`
	Stock           int `json:"stock"`
	Reserved        int `json:"reserved"`
	OrdersConfirmed int `json:"orders_confirmed"`
	// Beyond the contract's four: units in confirmed orders (equal to orders_confirmed when every
	// purchase is of one unit) and units sold beyond the initial stock (0 for a safe strategy).
	ConfirmedUnits int `json:"confirmed_units"`
	Oversold       int `json:"oversold"`
	// Where the orders' units are: awaiting payment, paid, expired, cancelled, and
	// returned to the stock (the expired and cancelled ones back on sale).
	AwaitingUnits  int `json:"awaiting_payment_units"`
	PaidUnits      int `json:"paid_units"`
	ExpiredUnits   int `json:"expired_units"`
	CancelledUnits int `json:"cancelled_units"`
	ReturnedUnits  int `json:"returned_units"`
	// Orders accepted (202) and then refused when they were recorded: no unit, no charge.
	RefusedOrders int `json:"refused_orders"`
	ratesJSON
}

// viewerStatsJSON is what any viewer sees of a product's sale (the board's figures): the live
// stock, the units taken and not returned, and the live rates.
type viewerStatsJSON struct {
	InitialStock int `json:"initial_stock"`
	Stock        int `json:"stock"`
	SoldUnits    int `json:"sold_units"`
	ratesJSON
}

// ratesJSON are the live rates, cluster-wide: mean purchase attempts and accepted purchases per
// second over the last rate_window_sec complete seconds, and the counts of each of the last
// seconds (per_second, oldest first). rates_available is false, the rates 0 and per_second null
// when they cannot be read (Redis down) or are not kept (a sale long over): the figures still
// answer.
type ratesJSON struct {
	RequestsPerSec float64        `json:"requests_per_sec"`
	AcceptedPerSec float64        `json:"accepted_per_sec"`
	RateWindowSec  int            `json:"rate_window_sec"`
	RatesAvailable bool           `json:"rates_available"`
	PerSecond      *perSecondJSON `json:"per_second"`
}

type perSecondJSON struct {
	// Start is the Unix second counted by requests[0] and accepted[0].
	Start    int64   `json:"start"`
	Requests []int64 `json:"requests"`
	Accepted []int64 `json:"accepted"`
}

// rateWindowSec is the window of requests_per_sec and accepted_per_sec.
const rateWindowSec = 5

// ratesOf renders r (nil: unavailable).
func ratesOf(r *board.Rates) ratesJSON {
	out := ratesJSON{RateWindowSec: rateWindowSec}
	if r == nil {
		return out
	}
	req, acc := r.PerSecond(rateWindowSec)
	out.RequestsPerSec = math.Round(req*10) / 10
	out.AcceptedPerSec = math.Round(acc*10) / 10
	out.RatesAvailable = true
	out.PerSecond = &perSecondJSON{Start: r.Start.Unix(), Requests: r.Requests, Accepted: r.Accepted}
	return out
}

// publicProductJSON is a product as the public reads answer it: with its viewer figures, so that
// one request a second follows a sale (a storefront polling the list follows every card).
type publicProductJSON struct {
	productJSON
	Stats viewerStatsJSON `json:"stats"`
}

// eventItemJSON is a product in the event stream: the product and its viewer figures.
type eventItemJSON struct {
	Product productJSON     `json:"product"`
	Stats   viewerStatsJSON `json:"stats"`
}

// stampedeRequestJSON starts a stampede; strategy and stock, when either is given, reset the
// product first.
type stampedeRequestJSON struct {
	Buyers   *int   `json:"buyers"`
	Strategy string `json:"strategy"`
	Stock    *int   `json:"stock"`
}

type stampedeJSON struct {
	StampedeID    string   `json:"stampede_id"`
	ProductID     int64    `json:"product_id"`
	Buyers        int      `json:"buyers"`
	Targets       []string `json:"targets"`
	Sent          int      `json:"sent"`
	Retries       int      `json:"retries"`
	Accepted      int      `json:"accepted"`
	SoldOut       int      `json:"sold_out"`
	LimitReached  int      `json:"limit_reached"`
	RejectedOther int      `json:"rejected_other"`
	Errors        int      `json:"errors"`
	Running       bool     `json:"running"`
	StartedAt     string   `json:"started_at"`
	// FinishedAt is null while the stampede runs.
	FinishedAt *string `json:"finished_at"`
}

func toStampedeJSON(p stampede.Progress) stampedeJSON {
	out := stampedeJSON{
		StampedeID:    p.ID,
		ProductID:     p.ProductID,
		Buyers:        p.Buyers,
		Targets:       p.Targets,
		Sent:          p.Sent,
		Retries:       p.Retries,
		Accepted:      p.Accepted,
		SoldOut:       p.SoldOut,
		LimitReached:  p.LimitReached,
		RejectedOther: p.RejectedOther,
		Errors:        p.Errors,
		Running:       p.Running,
		StartedAt:     formatTimeMilli(p.StartedAt),
	}
	if out.Targets == nil {
		out.Targets = []string{}
	}
	if !p.FinishedAt.IsZero() {
		f := formatTimeMilli(p.FinishedAt)
		out.FinishedAt = &f
	}
	return out
}

// formatTimeMilli is formatTime with milliseconds: a stampede lasts a second or two.
func formatTimeMilli(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

type newProductJSON struct {
	Name         string  `json:"name"`
	PriceCents   *int64  `json:"price_cents"`
	Stock        *int    `json:"stock"`
	Strategy     string  `json:"strategy"`
	SaleStartsAt *string `json:"sale_starts_at"`
	SaleEndsAt   *string `json:"sale_ends_at"`
	PerUserLimit *int    `json:"per_user_limit"`
	Listed       *bool   `json:"listed"`
	// Admission is an admissionJSON, decoded by parseAdmission so that its errors name the
	// field within it.
	Admission json.RawMessage `json:"admission"`
}

// defaultSaleLength is the window of a product created without sale_ends_at.
const defaultSaleLength = 24 * time.Hour

// domain converts the admin's request, filling documented defaults: the sale opens now, lasts
// 24 h, allows one unit per user, is listed on the storefront, and is open (no waiting room).
func (in newProductJSON) domain(now time.Time) (sale.NewProduct, error) {
	if in.PriceCents == nil {
		return sale.NewProduct{}, &sale.ValidationError{Field: "price_cents", Reason: "is required"}
	}
	if in.Stock == nil {
		return sale.NewProduct{}, &sale.ValidationError{Field: "stock", Reason: "is required"}
	}
	start, err := parseOptionalTime("sale_starts_at", in.SaleStartsAt, now)
	if err != nil {
		return sale.NewProduct{}, err
	}
	end, err := parseOptionalTime("sale_ends_at", in.SaleEndsAt, start.Add(defaultSaleLength))
	if err != nil {
		return sale.NewProduct{}, err
	}
	limit := 1
	if in.PerUserLimit != nil {
		limit = *in.PerUserLimit
	}
	listed := in.Listed == nil || *in.Listed
	admission, err := parseAdmission(in.Admission)
	if err != nil {
		return sale.NewProduct{}, err
	}
	np := sale.NewProduct{
		Name:         in.Name,
		PriceCents:   *in.PriceCents,
		Stock:        *in.Stock,
		Strategy:     sale.Strategy(in.Strategy),
		SaleStartsAt: start,
		SaleEndsAt:   end,
		PerUserLimit: limit,
		Listed:       listed,
	}
	if admission != nil {
		np.Admission = *admission
	}
	return np, nil
}

type resetJSON struct {
	Stock        *int    `json:"stock"`
	Strategy     string  `json:"strategy"`
	SaleStartsAt *string `json:"sale_starts_at"`
	SaleEndsAt   *string `json:"sale_ends_at"`
	// Admission, when given, replaces the product's admission rule (parseAdmission).
	Admission json.RawMessage `json:"admission"`
}

func (in resetJSON) domain() (sale.Reset, error) {
	if in.Stock == nil {
		return sale.Reset{}, &sale.ValidationError{Field: "stock", Reason: "is required"}
	}
	start, err := parseOptionalTime("sale_starts_at", in.SaleStartsAt, time.Time{})
	if err != nil {
		return sale.Reset{}, err
	}
	end, err := parseOptionalTime("sale_ends_at", in.SaleEndsAt, time.Time{})
	if err != nil {
		return sale.Reset{}, err
	}
	admission, err := parseAdmission(in.Admission)
	if err != nil {
		return sale.Reset{}, err
	}
	return sale.Reset{Stock: *in.Stock, Strategy: sale.Strategy(in.Strategy), SaleStartsAt: start, SaleEndsAt: end,
		Admission: admission}, nil
}

func parseOptionalTime(field string, s *string, def time.Time) (time.Time, error) {
	if s == nil {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, &sale.ValidationError{Field: field, Reason: "must be an RFC 3339 time such as 2026-11-21T20:00:00Z"}
	}
	// Checked here too, not only by the domain: a reset reads the zero time as "not given".
	if err := sale.ValidateSaleTime(field, t); err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// errBodyTooLarge is matched by the handlers to answer 413.
var errBodyTooLarge = errors.New("request body too large")

// decodeJSON reads exactly one JSON object into dst, rejecting unknown fields and trailing data,
// and explains what is wrong in terms a caller can act on.
func decodeJSON(body io.Reader, dst any) error {
	buf := bodyBuffers.Get().(*[]byte)
	data, err := readAll(body, (*buf)[:0])
	defer func() {
		if cap(data) <= maxPooledBody {
			*buf = data[:0]
			bodyBuffers.Put(buf)
		}
	}()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, tooLarge.Limit)
		}
		return &sale.ValidationError{Reason: "could not read the request body"}
	}
	return unmarshalStrict(data, dst)
}

// bodyBuffers recycles the buffers request bodies are read into: nothing decoded keeps a
// reference to them (encoding/json copies every string out). maxPooledBody keeps an odd large
// body's buffer out of the pool.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

const maxPooledBody = 64 << 10

// readAll is io.ReadAll into buf.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// unmarshalStrict decodes the JSON object data into the struct dst points to, in one pass of
// encoding/json, which checks the syntax of the whole of data before it decodes anything. That
// pass matches names case-insensitively and skips unknown ones, so the object's keys are then
// checked against dst's JSON names exactly; an unknown field is reported before a value of the
// wrong type.
func unmarshalStrict(data []byte, dst any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	err := json.Unmarshal(data, dst)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return describeJSONError(err)
	}
	if ferr := checkFields(data, jsonFields(dst)); ferr != nil {
		return ferr
	}
	if err != nil {
		return describeJSONError(err)
	}
	return nil
}

// fieldNames caches jsonFields by type.
var fieldNames sync.Map // reflect.Type -> []string

// jsonFields returns the JSON names of the fields of the struct dst points to.
func jsonFields(dst any) []string {
	t := reflect.TypeOf(dst).Elem()
	if names, ok := fieldNames.Load(t); ok {
		return names.([]string)
	}
	names := make([]string, t.NumField())
	for i := range t.NumField() {
		names[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	fieldNames.Store(t, names)
	return names
}

// checkFields reports, as a *sale.ValidationError, that data is not a JSON object or the first
// of its keys that is not one of known. data must be valid JSON (json.Unmarshal said so).
func checkFields(data []byte, known []string) error {
	i := skipSpace(data, 0)
	if data[i] != '{' {
		return &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	i = skipSpace(data, i+1)
	if data[i] == '}' {
		return nil
	}
	for {
		end := endOfString(data, i)
		if !isKnown(data[i+1:end-1], known) {
			if err := unknownField(data[i:end], known); err != nil {
				return err
			}
		}
		i = skipSpace(data, end)                                   // at ':'
		i = skipSpace(data, skipValue(data, skipSpace(data, i+1))) // at ',' or '}'
		if data[i] == '}' {
			return nil
		}
		i = skipSpace(data, i+1)
	}
}

func isKnown(key []byte, known []string) bool {
	for _, k := range known {
		if string(key) == k {
			return true
		}
	}
	return false
}

// unknownField is the error for the key quoted (with its quotes, maybe escaped), unless the key
// unescaped is one of known after all.
func unknownField(quoted []byte, known []string) error {
	var name string
	if err := json.Unmarshal(quoted, &name); err != nil || !slices.Contains(known, name) {
		return &sale.ValidationError{Field: name, Reason: "unknown field"}
	}
	return nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// endOfString returns the index after the string that starts (with its quote) at i.
func endOfString(data []byte, i int) int {
	for i++; data[i] != '"'; i++ {
		if data[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// skipValue returns the index after the value that starts at i.
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return endOfString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = endOfString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(data) {
		switch data[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

func describeJSONError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return &sale.ValidationError{Reason: fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)}
	case errors.As(err, &typ) && typ.Field != "":
		return &sale.ValidationError{Field: typ.Field, Reason: "must be a JSON " + jsonKind(typ.Type.Kind())}
	case errors.As(err, &typ):
		return &sale.ValidationError{Reason: "the request body must be a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &sale.ValidationError{Reason: "malformed JSON: unexpected end of input"}
	}
	return &sale.ValidationError{Reason: "malformed JSON"}
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer in range"
	case reflect.String:
		return "string"
	case reflect.Float64:
		return "number in range"
	}
	return "value of the documented type"
}
