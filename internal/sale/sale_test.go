package sale_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

func TestPurchaseRequestValidate(t *testing.T) {
	ok := sale.PurchaseRequest{ProductID: 1, UserID: "u_1-A", Quantity: 1}
	for _, tc := range []struct {
		name      string
		edit      func(*sale.PurchaseRequest)
		wantField string // "" means valid
	}{
		{"valid", func(*sale.PurchaseRequest) {}, ""},
		{"valid with key", func(r *sale.PurchaseRequest) { r.IdempotencyKey = "a~!$" }, ""},
		{"64-char user", func(r *sale.PurchaseRequest) { r.UserID = strings.Repeat("u", 64) }, ""},
		{"zero product", func(r *sale.PurchaseRequest) { r.ProductID = 0 }, "product_id"},
		{"empty user", func(r *sale.PurchaseRequest) { r.UserID = "" }, "user_id"},
		{"65-char user", func(r *sale.PurchaseRequest) { r.UserID = strings.Repeat("u", 65) }, "user_id"},
		{"space in user", func(r *sale.PurchaseRequest) { r.UserID = "a b" }, "user_id"},
		{"unicode user", func(r *sale.PurchaseRequest) { r.UserID = "usér" }, "user_id"},
		{"zero quantity", func(r *sale.PurchaseRequest) { r.Quantity = 0 }, "quantity"},
		{"huge quantity", func(r *sale.PurchaseRequest) { r.Quantity = sale.MaxQuantity + 1 }, "quantity"},
		{"key with space", func(r *sale.PurchaseRequest) { r.IdempotencyKey = "a b" }, "Idempotency-Key"},
		{"key too long", func(r *sale.PurchaseRequest) { r.IdempotencyKey = strings.Repeat("k", 129) }, "Idempotency-Key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			err := r.Validate()
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *sale.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, sale.ErrInvalid) || ve.Field != tc.wantField {
				t.Fatalf("Validate() = %v, want a ValidationError on %s", err, tc.wantField)
			}
		})
	}
}

func TestCheckWindow(t *testing.T) {
	start := time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)
	p := sale.Product{SaleStartsAt: start, SaleEndsAt: start.Add(time.Hour)}
	for _, tc := range []struct {
		at   time.Time
		want error
	}{
		{start.Add(-time.Nanosecond), sale.ErrSaleNotStarted},
		{start, nil},
		{start.Add(59 * time.Minute), nil},
		{start.Add(time.Hour), sale.ErrSaleEnded},
	} {
		if got := p.CheckWindow(tc.at); !errors.Is(got, tc.want) || (tc.want == nil && got != nil) {
			t.Errorf("CheckWindow(%s) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

func TestResetWindow(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	open := sale.Product{SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour)}
	ended := sale.Product{SaleStartsAt: now.Add(-3 * time.Hour), SaleEndsAt: now.Add(-time.Hour)}
	given := sale.Reset{SaleStartsAt: now.Add(time.Minute), SaleEndsAt: now.Add(time.Hour)}
	for _, tc := range []struct {
		name               string
		r                  sale.Reset
		p                  sale.Product
		wantStart, wantEnd time.Time
	}{
		{"open sale keeps its window", sale.Reset{}, open, open.SaleStartsAt, open.SaleEndsAt},
		{"ended sale reopens for its length", sale.Reset{}, ended, now, now.Add(2 * time.Hour)},
		{"explicit window wins", given, ended, given.SaleStartsAt, given.SaleEndsAt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end := tc.r.Window(tc.p, now)
			if !start.Equal(tc.wantStart) || !end.Equal(tc.wantEnd) {
				t.Fatalf("Window = %s..%s, want %s..%s", start, end, tc.wantStart, tc.wantEnd)
			}
		})
	}
}

func TestNewProductValidate(t *testing.T) {
	now := time.Now()
	ok := sale.NewProduct{Name: "x", PriceCents: 1, Stock: 1, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now, SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid product: %v", err)
	}
	for field, edit := range map[string]func(*sale.NewProduct){
		"name":           func(p *sale.NewProduct) { p.Name = " " },
		"price_cents":    func(p *sale.NewProduct) { p.PriceCents = -1 },
		"stock":          func(p *sale.NewProduct) { p.Stock = -1 },
		"per_user_limit": func(p *sale.NewProduct) { p.PerUserLimit = 0 },
		"sale_ends_at":   func(p *sale.NewProduct) { p.SaleEndsAt = p.SaleStartsAt },
		"strategy":       func(p *sale.NewProduct) { p.Strategy = "magic" },
	} {
		p := ok
		edit(&p)
		var ve *sale.ValidationError
		if err := p.Validate(); !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("bad %s: Validate() = %v", field, err)
		}
	}
}

func TestCodeAndOversold(t *testing.T) {
	for err, want := range map[error]sale.Code{
		nil:                      sale.CodeAccepted,
		sale.ErrSoldOut:          sale.CodeSoldOut,
		sale.ErrAlreadyPurchased: sale.CodeLimitReached,
		sale.ErrLockTimeout:      sale.CodeRateLimited,
		sale.ErrBusy:             sale.CodeRateLimited,
		sale.ErrFenced:           sale.CodeUnavailable,
		sale.ErrStrategyChanged:  sale.CodeUnavailable,
		context.Canceled:         sale.CodeUnavailable,
		fmt.Errorf("wrapped: %w", sale.ErrInvalid): sale.CodeInvalid,
		errors.New("a bug"):                        sale.CodeInternal,
	} {
		if got := sale.CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %q, want %q", err, got, want)
		}
	}
	for _, tc := range []struct {
		s    sale.Stats
		want int
	}{
		{sale.Stats{InitialStock: 100, Stock: 0, ReservedUnits: 100}, 0},
		{sale.Stats{InitialStock: 100, Stock: 40, ReservedUnits: 130}, 30},
		{sale.Stats{InitialStock: 10, Stock: -2, ReservedUnits: 10}, 2},
	} {
		if got := tc.s.Oversold(); got != tc.want {
			t.Errorf("%+v.Oversold() = %d, want %d", tc.s, got, tc.want)
		}
	}
}

// TestSaleTimeRange: a sale time whose UTC year falls outside MinSaleYear..MaxSaleYear is an
// invalid request, whatever zone it was given in (it was a 500: the MySQL driver refuses to
// encode a year past 9999).
func TestSaleTimeRange(t *testing.T) {
	plus5 := time.FixedZone("+05:00", 5*3600)
	minus5 := time.FixedZone("-05:00", -5*3600)
	first := time.Date(sale.MinSaleYear, 1, 1, 0, 0, 0, 0, time.UTC)
	last := time.Date(sale.MaxSaleYear, 12, 31, 23, 59, 59, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		start, end time.Time
		wantField  string // "" means valid
	}{
		{"the first second", first, first.Add(time.Second), ""},
		{"the last second", last.Add(-time.Second), last, ""},
		{"a second before", first.Add(-time.Second), first.Add(time.Hour), "sale_starts_at"},
		{"a second after", last.Add(-time.Hour), last.Add(time.Second), "sale_ends_at"},
		{"in the range locally, before it in UTC", time.Date(sale.MinSaleYear, 1, 1, 1, 0, 0, 0, plus5), first.Add(time.Hour), "sale_starts_at"},
		{"in the range locally, past it in UTC", last.Add(-time.Hour), time.Date(sale.MaxSaleYear, 12, 31, 20, 0, 0, 0, minus5), "sale_ends_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := sale.NewProduct{Name: "x", Stock: 1, Strategy: sale.StrategyMySQL, PerUserLimit: 1,
				SaleStartsAt: tc.start, SaleEndsAt: tc.end}
			r := sale.Reset{Stock: 1, SaleStartsAt: tc.start, SaleEndsAt: tc.end}
			for what, err := range map[string]error{"NewProduct": np.Validate(), "Reset": r.Validate()} {
				var ve *sale.ValidationError
				switch {
				case tc.wantField == "" && err != nil:
					t.Errorf("%s.Validate() = %v, want nil", what, err)
				case tc.wantField != "" && (!errors.As(err, &ve) || ve.Field != tc.wantField):
					t.Errorf("%s.Validate() = %v, want a ValidationError on %s", what, err, tc.wantField)
				}
			}
		})
	}
}

// TestLimitsKeepAmountsComputable: every combination of the product and purchase limits' extremes
// validates and its amounts fit (an order's, a whole sale's); a step beyond a limit is refused;
// AmountCents refuses what does not fit.
func TestLimitsKeepAmountsComputable(t *testing.T) {
	now := time.Now()
	for _, price := range []int64{0, 1, sale.MaxPriceCents} {
		for _, stock := range []int{0, 1, sale.MaxStock} {
			for _, limit := range []int{1, sale.MaxStock} {
				np := sale.NewProduct{Name: "x", PriceCents: price, Stock: stock, Strategy: sale.StrategyMySQL,
					SaleStartsAt: now, SaleEndsAt: now.Add(time.Hour), PerUserLimit: limit}
				if err := np.Validate(); err != nil {
					t.Fatalf("%+v: %v", np, err)
				}
				for _, qty := range []int{1, min(limit, sale.MaxQuantity), stock} {
					if _, err := sale.AmountCents(qty, price); err != nil {
						t.Errorf("price %d × quantity %d: %v", price, qty, err)
					}
				}
			}
		}
	}
	beyond := []sale.NewProduct{
		{PriceCents: sale.MaxPriceCents + 1, Stock: 1, PerUserLimit: 1},
		{PriceCents: 1, Stock: sale.MaxStock + 1, PerUserLimit: 1},
		{PriceCents: 1, Stock: 1, PerUserLimit: sale.MaxStock + 1},
		{PriceCents: -1, Stock: 1, PerUserLimit: 1},
	}
	for _, np := range beyond {
		np.Name, np.Strategy, np.SaleStartsAt, np.SaleEndsAt = "x", sale.StrategyMySQL, now, now.Add(time.Hour)
		if err := np.Validate(); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", np, err)
		}
	}
	if err := (sale.PurchaseRequest{ProductID: 1, UserID: "u", Quantity: sale.MaxQuantity + 1}).Validate(); !errors.Is(err, sale.ErrInvalid) {
		t.Errorf("quantity beyond the limit: %v, want invalid", err)
	}
	for _, c := range []struct {
		qty   int
		price int64
	}{{100_000_000, 100_000_000_000}, {-1, 1}, {1, -1}, {2, math.MaxInt64}} {
		if _, err := sale.AmountCents(c.qty, c.price); !errors.Is(err, sale.ErrAmountOutOfRange) {
			t.Errorf("AmountCents(%d, %d) = %v, want out of range", c.qty, c.price, err)
		}
	}
	if got, err := sale.AmountCents(1, math.MaxInt64); err != nil || got != math.MaxInt64 {
		t.Errorf("AmountCents(1, max) = %d, %v", got, err)
	}
}
