package sale

import (
	"errors"
	"strings"
	"time"
)

// Product is an item on flash sale.
type Product struct {
	ID           int64
	Name         string
	PriceCents   int64
	Stock        int
	InitialStock int
	Strategy     Strategy
	SaleStartsAt time.Time
	SaleEndsAt   time.Time
	PerUserLimit int
	// Listed says whether the storefront shows the product (the load test's are not listed).
	Listed bool
	// Epoch numbers the product's sales: it starts at 1 and every admin reset (which clears the
	// purchases and may change the rules) adds one. A purchase is admitted under the rules of one
	// epoch and its deduction applies only while the product is still in that epoch, so rules
	// cached in memory can be stale without a purchase ever committing under rules that are gone.
	Epoch uint64
	// Admission says whether buyers queue in a waiting room before they buy (issue #32).
	Admission AdmissionRule
}

// CatalogDigest sums up every product in one value: when two digests taken with the same
// products left out of the stock are equal, no product was created, reset or deleted meanwhile,
// and the stock of none but those left out moved (but for a collision of a 32-bit checksum).
// The board compares them once a second instead of reading every product.
type CatalogDigest struct {
	Products int64
	Checksum uint32
}

// StockAt is a product's stock in one of its sale epochs.
type StockAt struct {
	Stock int
	Epoch uint64
}

// CheckWindow returns ErrSaleNotStarted or ErrSaleEnded when now is outside [start, end).
func (p Product) CheckWindow(now time.Time) error {
	switch {
	case now.Before(p.SaleStartsAt):
		return ErrSaleNotStarted
	case !now.Before(p.SaleEndsAt):
		return ErrSaleEnded
	}
	return nil
}

// Limits on product fields, generous but finite so that arithmetic and columns never overflow:
// the largest amount anything computes, a whole sale's units at its price (MaxStock ×
// MaxPriceCents = 10^18 cents), fits an int64 (and MySQL's BIGINT) with room to spare; a stock
// fits the INT columns. A price of up to ten million in the currency's units is beyond any flash
// sale's.
const (
	MaxNameLen    = 200
	MaxStock      = 1_000_000_000
	MaxPriceCents = 1_000_000_000
	// MinSaleYear and MaxSaleYear bound a sale time's year in UTC: the range of a SQL DATETIME.
	// A time beyond it cannot be stored (the MySQL driver refuses years past 9999), and one in
	// another zone can cross it once in UTC.
	MinSaleYear = 1000
	MaxSaleYear = 9999
)

// ValidateSaleTime checks that t, the value of field, falls in the years MinSaleYear to
// MaxSaleYear in UTC.
func ValidateSaleTime(field string, t time.Time) error {
	if y := t.UTC().Year(); y < MinSaleYear || y > MaxSaleYear {
		return invalid(field, "must be in the years %d to %d (UTC)", MinSaleYear, MaxSaleYear)
	}
	return nil
}

// NewProduct is what an admin supplies to put a product on sale.
type NewProduct struct {
	Name         string
	PriceCents   int64
	Stock        int
	Strategy     Strategy
	SaleStartsAt time.Time
	SaleEndsAt   time.Time
	PerUserLimit int
	Listed       bool
	// Admission is the sale's admission rule; the zero value is an open sale.
	Admission AdmissionRule
}

// Validate checks every field and returns the first problem as a *ValidationError.
func (np NewProduct) Validate() error {
	switch {
	case strings.TrimSpace(np.Name) == "":
		return invalid("name", "must not be empty")
	case len(np.Name) > MaxNameLen:
		return invalid("name", "must be at most %d bytes", MaxNameLen)
	case np.PriceCents < 0 || np.PriceCents > MaxPriceCents:
		return invalid("price_cents", "must be between 0 and %d", int64(MaxPriceCents))
	case np.Stock < 0 || np.Stock > MaxStock:
		return invalid("stock", "must be between 0 and %d", MaxStock)
	case np.PerUserLimit < 1 || np.PerUserLimit > MaxStock:
		return invalid("per_user_limit", "must be between 1 and %d", MaxStock)
	case np.SaleStartsAt.IsZero() || np.SaleEndsAt.IsZero():
		return invalid("sale_starts_at", "sale_starts_at and sale_ends_at are required")
	case !np.SaleEndsAt.After(np.SaleStartsAt):
		return invalid("sale_ends_at", "must be after sale_starts_at")
	}
	if err := ValidateSaleTime("sale_starts_at", np.SaleStartsAt); err != nil {
		return err
	}
	if err := ValidateSaleTime("sale_ends_at", np.SaleEndsAt); err != nil {
		return err
	}
	if _, err := ParseStrategy(string(np.Strategy)); err != nil {
		return err
	}
	return np.Admission.Validate(np.SaleStartsAt)
}

// Reset puts a product back on sale with fresh stock: it clears the product's reservations, orders
// and idempotency keys. Empty Strategy keeps the current one. When the window is not given and the
// sale has already ended, the window reopens from now for its original length. A nil Admission
// keeps the current one (AdmissionFor).
type Reset struct {
	Stock        int
	Strategy     Strategy
	SaleStartsAt time.Time
	SaleEndsAt   time.Time
	Admission    *AdmissionRule
}

// Validate checks the reset request.
func (r Reset) Validate() error {
	if r.Stock < 0 || r.Stock > MaxStock {
		return invalid("stock", "must be between 0 and %d", MaxStock)
	}
	if r.Strategy != "" {
		if _, err := ParseStrategy(string(r.Strategy)); err != nil {
			return err
		}
	}
	if r.SaleStartsAt.IsZero() != r.SaleEndsAt.IsZero() {
		return invalid("sale_starts_at", "give both sale_starts_at and sale_ends_at, or neither")
	}
	if r.Admission != nil {
		// Without a window the queue's opening is checked against the kept one, in AdmissionFor.
		if err := r.Admission.Validate(r.SaleStartsAt); err != nil {
			return err
		}
	}
	if r.SaleStartsAt.IsZero() {
		return nil
	}
	if !r.SaleEndsAt.After(r.SaleStartsAt) {
		return invalid("sale_ends_at", "must be after sale_starts_at")
	}
	if err := ValidateSaleTime("sale_starts_at", r.SaleStartsAt); err != nil {
		return err
	}
	return ValidateSaleTime("sale_ends_at", r.SaleEndsAt)
}

// Window returns the sale window the reset product gets, given the current one.
func (r Reset) Window(p Product, now time.Time) (start, end time.Time) {
	if !r.SaleStartsAt.IsZero() {
		return r.SaleStartsAt, r.SaleEndsAt
	}
	if errors.Is(p.CheckWindow(now), ErrSaleEnded) {
		length := p.SaleEndsAt.Sub(p.SaleStartsAt)
		return now, now.Add(length)
	}
	return p.SaleStartsAt, p.SaleEndsAt
}

// Stats counts what happened to a product's stock. For a safe strategy, after the order queue
// drains: InitialStock-Stock == ReservedUnits == ConfirmedUnits.
type Stats struct {
	ProductID       int64
	InitialStock    int
	Stock           int
	ReservedUnits   int
	Reservations    int
	OrdersConfirmed int
	ConfirmedUnits  int
	// Where the orders' units are in their lifecycle: awaiting payment (confirmed or paying), paid,
	// expired, cancelled, and returned to the stock (expired or cancelled, and back on sale).
	AwaitingUnits, PaidUnits, ExpiredUnits, CancelledUnits, ReturnedUnits int
	// RefusedOrders counts the orders refused after they were accepted (StatusRefused): they
	// hold no unit and are counted in none of the figures above.
	RefusedOrders int
}

// Oversold returns how many units were handed out beyond the initial stock (0 when none).
func (s Stats) Oversold() int {
	return max(0, s.ReservedUnits-s.ReturnedUnits-s.InitialStock, -s.Stock)
}
