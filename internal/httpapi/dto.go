package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"

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
	}
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

type productsJSON struct {
	Products []productJSON `json:"products"`
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
	OrderID   string `json:"order_id"`
	Status    string `json:"status"`
	ProductID int64  `json:"product_id"`
	UserID    string `json:"user_id"`
	Quantity  int    `json:"quantity"`
}

type statsJSON struct {
	InitialStock    int `json:"initial_stock"`
	Stock           int `json:"stock"`
	Reserved        int `json:"reserved"`
	OrdersConfirmed int `json:"orders_confirmed"`
	// Beyond the contract's four: units in confirmed orders (equal to orders_confirmed when every
	// purchase is of one unit) and units sold beyond the initial stock (0 for a safe strategy).
	ConfirmedUnits int `json:"confirmed_units"`
	Oversold       int `json:"oversold"`
	// The live rates, cluster-wide: mean purchase attempts and accepted purchases per second over
	// the last rate_window_sec complete seconds, and the counts of each of the last seconds
	// (per_second, oldest first). rates_available is false, the rates 0 and per_second null when
	// they cannot be read (Redis down): the stats still answer.
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

func (s *statsJSON) withRates(r sale.Rates) {
	req, acc := r.PerSecond(s.RateWindowSec)
	s.RequestsPerSec = math.Round(req*10) / 10
	s.AcceptedPerSec = math.Round(acc*10) / 10
	s.RatesAvailable = true
	s.PerSecond = &perSecondJSON{Start: r.Start.Unix(), Requests: r.Requests, Accepted: r.Accepted}
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
}

// defaultSaleLength is the window of a product created without sale_ends_at.
const defaultSaleLength = 24 * time.Hour

// domain converts the admin's request, filling documented defaults: the sale opens now, lasts
// 24 h, and allows one unit per user.
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
	return sale.NewProduct{
		Name:         in.Name,
		PriceCents:   *in.PriceCents,
		Stock:        *in.Stock,
		Strategy:     sale.Strategy(in.Strategy),
		SaleStartsAt: start,
		SaleEndsAt:   end,
		PerUserLimit: limit,
	}, nil
}

type resetJSON struct {
	Stock        *int    `json:"stock"`
	Strategy     string  `json:"strategy"`
	SaleStartsAt *string `json:"sale_starts_at"`
	SaleEndsAt   *string `json:"sale_ends_at"`
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
	return sale.Reset{Stock: *in.Stock, Strategy: sale.Strategy(in.Strategy), SaleStartsAt: start, SaleEndsAt: end}, nil
}

func parseOptionalTime(field string, s *string, def time.Time) (time.Time, error) {
	if s == nil {
		return def, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}, &sale.ValidationError{Field: field, Reason: "must be an RFC 3339 time such as 2026-11-21T20:00:00Z"}
	}
	return t.UTC(), nil
}

// errBodyTooLarge is matched by the handlers to answer 413.
var errBodyTooLarge = errors.New("request body too large")

// decodeJSON reads exactly one JSON object into dst, rejecting unknown fields and trailing data,
// and explains what is wrong in terms a caller can act on.
func decodeJSON(body io.Reader, dst any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, tooLarge.Limit)
		}
		return &sale.ValidationError{Reason: "could not read the request body"}
	}
	return unmarshalStrict(data, dst)
}

func unmarshalStrict(data []byte, dst any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	// First as a bare object, to name unknown fields without matching error text, then into dst.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return describeJSONError(err)
	}
	if fields == nil {
		return &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	known := jsonFields(dst)
	for name := range fields {
		if !known[name] {
			return &sale.ValidationError{Field: name, Reason: "unknown field"}
		}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return describeJSONError(err)
	}
	return nil
}

// jsonFields returns the JSON names of the fields of the struct dst points to.
func jsonFields(dst any) map[string]bool {
	t := reflect.TypeOf(dst).Elem()
	out := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
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
	}
	return "value of the documented type"
}
