package sale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Limits on purchase input.
const (
	MaxUserIDLen         = 64
	MaxIdempotencyKeyLen = 128
	MaxQuantity          = MaxStock
)

// PurchaseRequest is one buyer asking for Quantity units of a product.
type PurchaseRequest struct {
	ProductID int64
	UserID    string
	Quantity  int
	// IdempotencyKey is optional. Scoped per user: a retry with the same user and key returns the
	// first accepted answer and deducts nothing more.
	IdempotencyKey string
	// Pass is the admission pass of a waiting-room sale (the Admission-Pass header): a purchase
	// of such a sale without a valid one is refused before anything is deducted. An open sale
	// ignores it.
	Pass string
}

// MaxPassLen is the longest admission pass a purchase may carry: a genuine one is about 300
// bytes, and a longer one is not worth parsing.
const MaxPassLen = 2048

// Validate checks the request's shape (not the product's rules) and returns a *ValidationError.
func (r PurchaseRequest) Validate() error {
	if r.ProductID <= 0 {
		return invalid("product_id", "must be a positive integer")
	}
	if err := ValidateUserID(r.UserID); err != nil {
		return err
	}
	if r.Quantity < 1 || r.Quantity > MaxQuantity {
		return invalid("quantity", "must be an integer between 1 and %d", MaxQuantity)
	}
	if len(r.Pass) > MaxPassLen {
		return invalid("Admission-Pass", "must be at most %d characters", MaxPassLen)
	}
	return ValidateIdempotencyKey(r.IdempotencyKey)
}

// ValidateUserID accepts 1 to 64 characters of [A-Za-z0-9_-].
func ValidateUserID(id string) error {
	if id == "" || len(id) > MaxUserIDLen {
		return invalid("user_id", "must be 1 to %d characters", MaxUserIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return invalid("user_id", "may contain only letters, digits, '_' and '-'")
		}
	}
	return nil
}

// ValidateIdempotencyKey accepts an empty key (none given) or up to 128 printable ASCII characters.
func ValidateIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKeyLen {
		return invalid("Idempotency-Key", "must be at most %d characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return invalid("Idempotency-Key", "may contain only printable ASCII without spaces")
		}
	}
	return nil
}

// OrderStatus is where an accepted purchase is on its way to becoming an order.
type OrderStatus string

// The order statuses.
const (
	// StatusQueued: stock deducted and reservation committed; the order is on its way through Kafka.
	StatusQueued OrderStatus = "queued"
	// StatusConfirmed: the order consumer has created the order.
	StatusConfirmed OrderStatus = "confirmed"
)

// Receipt is the answer to an accepted purchase, and what a retry with the same key gets back.
type Receipt struct {
	OrderID   string
	Status    OrderStatus
	ProductID int64
	UserID    string
	Quantity  int
	Strategy  Strategy
	// Replayed is true when the receipt was stored by an earlier request with the same key.
	Replayed bool
}

// Reservation is what a Deductor commits atomically with the stock deduction: the outbox row (and
// the idempotency key, when the request had one).
type Reservation struct {
	Receipt
	IdempotencyKey string
	// Epoch is the sale epoch the purchase was admitted in; the deduction applies only while the
	// product is still in it (else ErrSaleChanged).
	Epoch     uint64
	CreatedAt time.Time
	// TraceParent is the W3C traceparent of the purchase's request when tracing is on and the
	// request is sampled, else empty. The reservation carries it into the outbox so that the
	// relay and the order consumer continue the purchase's trace (docs/order-pipeline.md).
	TraceParent string
}

// KeyedReceipt is an accepted purchase that carried an Idempotency-Key.
type KeyedReceipt struct {
	Key string
	Receipt
}

// ReceiptSnapshot is a product's stock and epoch with the receipts of its keyed purchases, all
// read at one instant.
type ReceiptSnapshot struct {
	Epoch    uint64
	Stock    int
	Receipts []KeyedReceipt
	// Truncated is true when the product had more receipts than asked for; Receipts is then
	// incomplete.
	Truncated bool
}

// Order is a purchase as a buyer sees it afterwards.
type Order struct {
	OrderID   string
	Status    OrderStatus
	ProductID int64
	UserID    string
	Quantity  int
	// AmountCents is what the order costs: Quantity at the product's price.
	AmountCents int64
	// Refusal is why a refused order (StatusRefused) was refused: CodeSoldOut (no unit was left
	// for it) or CodeLimitReached (its buyer held a unit of the product already). Empty otherwise.
	Refusal Code
	OrderTimes
}

// Deductor takes units of a product's stock. There is one per strategy, chosen by the product.
//
// Deduct must, atomically: take r.Quantity units of r.ProductID's stock if that many are left
// and the product is still in sale epoch r.Epoch with strategy r.Strategy, insert the reservation
// and, when r.IdempotencyKey is set, the idempotency key. It returns ErrSoldOut,
// ErrAlreadyPurchased (the user holds a reservation already), ErrIdempotencyKeyInUse,
// ErrNotFound, ErrSaleChanged (ErrStrategyChanged), ErrBusy or ErrLockTimeout (back-pressure),
// or an error wrapping ErrUnavailable; on any error nothing was written.
type Deductor interface {
	Deduct(ctx context.Context, r Reservation) error
}

// ReceiptKeeper is a Deductor that keeps the receipts of keyed purchases itself before the store
// has them (redis-lua keeps them in Redis until a persister writes them to MySQL). A replay asks
// it first, then the store.
type ReceiptKeeper interface {
	// Receipt returns the receipt of the user's purchase of the product with key, or ErrNotFound.
	Receipt(ctx context.Context, productID int64, userID, key string) (Receipt, error)
}

// Preparer is a Deductor that needs to know of a new sale epoch before its first purchase
// (redis-lua loads the sale's state into Redis). Prepare is called after a create or reset; a
// Preparer must also cope, on its own, with a purchase that arrives unprepared (a failed Prepare,
// or a state lost later).
type Preparer interface {
	Prepare(ctx context.Context, p Product) error
}

// Store is the persistence the sale domain needs.
type Store interface {
	Product(ctx context.Context, id int64) (Product, error)
	// Products returns every product, by id.
	Products(ctx context.Context) ([]Product, error)
	// ProductsByID returns those of the products ids that exist, in any order.
	ProductsByID(ctx context.Context, ids []int64) ([]Product, error)
	CreateProduct(ctx context.Context, np NewProduct, now time.Time) (Product, error)
	// ResetProduct applies reset to the product in one transaction (see Reset) and starts a new
	// sale epoch.
	ResetProduct(ctx context.Context, id int64, reset Reset, now time.Time) (Product, error)
	Stats(ctx context.Context, id int64) (Stats, error)
	// BuyerOrder returns userID's order orderID; another buyer's order is ErrNotFound, as an
	// absent one is.
	BuyerOrder(ctx context.Context, orderID, userID string) (Order, error)
	// StoredReceipt returns the receipt committed with (userID, key), or ErrNotFound.
	StoredReceipt(ctx context.Context, userID, key string) (Receipt, error)
	// KeyedReceipts returns the product's stock and epoch and up to limit receipts of its keyed
	// purchases, read in one snapshot.
	KeyedReceipts(ctx context.Context, productID int64, limit int) (ReceiptSnapshot, error)
}

// Observation is what the Service tells its Observer about one purchase attempt.
type Observation struct {
	ProductID int64
	// Strategy is the product's; empty when no product was found (unknown, or the request too
	// malformed to name one).
	Strategy Strategy
	Code     Code
	// Replayed: an accepted retry, answered with the receipt of an earlier purchase. It sold
	// nothing new.
	Replayed bool
	Took     time.Duration
}

// Observer is told of every purchase attempt (the metrics, the storefront's live rates). It is
// called on the purchase path, so it must return at once: buffer, never wait on I/O.
type Observer interface {
	ObservePurchase(o Observation)
}

// Admission decides whether a buyer may try a deduction now: the per-buyer rate limit, shared by
// the replicas. It returns nil, or an error wrapping ErrRateLimited (a *RateLimitedError when it
// knows how long to wait).
type Admission interface {
	Admit(ctx context.Context, userID string) error
}

// RateLimitedError is ErrRateLimited with the wait after which a retry may succeed.
type RateLimitedError struct{ Wait time.Duration }

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("%v: retry in %s", ErrRateLimited, e.Wait)
}

// Unwrap makes errors.Is(err, ErrRateLimited) hold.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// Service is the flash-sale use case: it applies the sale's rules and hands the deduction to the
// product's strategy. The rules come from the sale state it keeps in memory (see saleCache), so
// that a purchase that cannot succeed costs no database round trip.
type Service struct {
	store     Store
	deductors map[Strategy]Deductor
	observer  Observer
	feed      ChangeFeed
	admission Admission
	passes    PassVerifier
	cache     *saleCache
	now       func() time.Time
	newID     func() string
	onReserve func()
	onChanged func(Product)
	traceOf   func(context.Context) string
	defStrat  Strategy
	log       *slog.Logger
}

// Options configures a Service. Store, Deductors and NewOrderID are required.
type Options struct {
	Store     Store
	Deductors map[Strategy]Deductor
	// DefaultStrategy is given to products created without one.
	DefaultStrategy Strategy
	// NewOrderID returns a new globally unique order id: at most MaxOrderIDLen printable ASCII
	// characters, no space.
	NewOrderID func() string
	// Observer is optional.
	Observer Observer
	// Feed broadcasts sale changes to the other replicas; optional (a single replica needs none).
	// The replica's own feed subscription hands what it receives to ApplyChange.
	Feed ChangeFeed
	// Admission, if set, is asked before a purchase goes to the deduction. The refusals that cost
	// nothing (a closed sale, sold out, over the limit) come before it: it guards the database's
	// work, and a stampede on a sold-out product costs it nothing.
	Admission Admission
	// Passes checks the admission passes of waiting-room sales, with no I/O, before anything
	// else costs a round trip. Optional: without it every purchase of a waiting-room sale is
	// refused (ErrUnavailable when it carries a pass).
	Passes PassVerifier
	// Refresh is how often the sale state kept in memory is re-read from the store: the bound on
	// its staleness when a broadcast is missed [1s].
	Refresh time.Duration
	// Log is optional.
	Log *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// OnReserve is called after every accepted purchase (the outbox relay uses it to wake up).
	OnReserve func()
	// OnChanged is called with a product this replica has just created or reset, before the
	// answer (the read side learns it at once: its creator reads it back). Optional; it must not
	// block.
	OnChanged func(Product)
	// TraceParent, set only when tracing is on, returns the traceparent of the request's span
	// in ctx if it is sampled, else "" (internal/tracing's TraceParent): it becomes the
	// Reservation's, so that the purchase's trace goes on past the outbox. Nil (tracing off),
	// a purchase pays nothing for it.
	TraceParent func(ctx context.Context) string
}

// NewService returns a Service, or an error naming the missing dependency. Run it (Run) for its
// sale state to be refreshed.
func NewService(o Options) (*Service, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("sale: nil Store")
	case len(o.Deductors) == 0:
		return nil, errors.New("sale: no Deductors")
	case o.NewOrderID == nil:
		return nil, errors.New("sale: nil NewOrderID")
	case o.Refresh < 0:
		return nil, errors.New("sale: negative Refresh")
	}
	if _, ok := o.Deductors[o.DefaultStrategy]; !ok {
		return nil, fmt.Errorf("sale: default strategy %q has no Deductor", o.DefaultStrategy)
	}
	s := &Service{
		store:     o.Store,
		deductors: o.Deductors,
		observer:  o.Observer,
		feed:      o.Feed,
		admission: o.Admission,
		passes:    o.Passes,
		now:       o.Now,
		newID:     o.NewOrderID,
		onReserve: o.OnReserve,
		onChanged: o.OnChanged,
		traceOf:   o.TraceParent,
		defStrat:  o.DefaultStrategy,
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.observer == nil {
		s.observer = nopObserver{}
	}
	if s.feed == nil {
		s.feed = nopFeed{}
	}
	if s.onReserve == nil {
		s.onReserve = func() {}
	}
	if s.onChanged == nil {
		s.onChanged = func(Product) {}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	refresh := o.Refresh
	if refresh == 0 {
		refresh = time.Second
	}
	s.log = log
	s.cache = newSaleCache(o.Store, s.feed, log, refresh, s.now)
	return s, nil
}

// Run refreshes the sale state kept in memory until ctx ends, then waits for its background
// reads. It returns nil.
func (s *Service) Run(ctx context.Context) error {
	s.cache.run(ctx)
	return nil
}

// ApplyChange takes in a sale change broadcast by a replica (this one included).
func (s *Service) ApplyChange(c Change) { s.cache.apply(c) }

// Enabled reports whether purchases with strategy st are served here.
func (s *Service) Enabled(st Strategy) bool {
	_, ok := s.deductors[st]
	return ok
}

// Purchase applies the sale's rules to req and, if they allow it, deducts the stock through the
// product's strategy. A retry with the same user and Idempotency-Key returns the first receipt.
func (s *Service) Purchase(ctx context.Context, req PurchaseRequest) (Receipt, error) {
	start := s.now()
	receipt, strategy, err := s.purchase(ctx, req)
	s.observer.ObservePurchase(Observation{
		ProductID: req.ProductID,
		Strategy:  strategy,
		Code:      CodeOf(err),
		Replayed:  receipt.Replayed,
		Took:      s.now().Sub(start),
	})
	return receipt, err
}

func (s *Service) purchase(ctx context.Context, req PurchaseRequest) (Receipt, Strategy, error) {
	if err := req.Validate(); err != nil {
		return Receipt{}, "", err
	}
	for attempt := 0; ; attempt++ {
		st, err := s.cache.get(ctx, req.ProductID)
		if err != nil {
			return Receipt{}, "", err
		}
		p := st.p
		if r, err := s.refuse(ctx, st, req); r.OrderID != "" || err != nil {
			return r, p.Strategy, err
		}
		if s.admission != nil && attempt == 0 {
			if err := s.admission.Admit(ctx, req.UserID); err != nil {
				return Receipt{}, p.Strategy, err
			}
		}
		r := Reservation{
			Receipt: Receipt{
				OrderID:   s.newID(),
				Status:    StatusQueued,
				ProductID: p.ID,
				UserID:    req.UserID,
				Quantity:  req.Quantity,
				Strategy:  p.Strategy,
			},
			IdempotencyKey: req.IdempotencyKey,
			Epoch:          p.Epoch,
			CreatedAt:      s.now().UTC(),
		}
		if s.traceOf != nil {
			r.TraceParent = s.traceOf(ctx)
		}
		err = s.deductors[p.Strategy].Deduct(ctx, r)
		switch {
		case err == nil:
			s.onReserve()
			return r.Receipt, p.Strategy, nil
		case errors.Is(err, ErrSaleChanged) && attempt == 0:
			// Admitted under the rules of an epoch that is gone: read the new sale, decide again.
			s.cache.invalidate(p.ID, p.Epoch+1)
			continue
		case errors.Is(err, ErrSoldOut):
			// Fewer than Quantity units are left in this epoch, and stock only goes down in it.
			if s.cache.lower(p.ID, p.Epoch, req.Quantity-1) {
				s.feed.Publish(context.WithoutCancel(ctx), Change{Kind: ChangeSoldOut, ProductID: p.ID, Epoch: p.Epoch})
			}
		}
		if req.IdempotencyKey != "" && !keyChecked(err) && (errors.Is(err, ErrSoldOut) || errors.Is(err, ErrIdempotencyKeyInUse) || errors.Is(err, ErrAlreadyPurchased)) {
			// A purchase with the same key may have committed first (a lock strategy decides
			// "sold out" before it looks at keys): answer as it did. A refusal the deduction made
			// knowing the key unused needs no second look, and one that brought the key's
			// receipt is answered with it.
			if r, ok := InUseReceipt(err); ok {
				replayed, rerr := replayOf(r, req)
				return replayed, p.Strategy, rerr
			}
			if replayed, rerr := s.replay(ctx, p.Strategy, req); !errors.Is(rerr, ErrNotFound) {
				return replayed, p.Strategy, rerr
			}
		}
		if errors.Is(err, ErrIdempotencyKeyInUse) {
			// The key's row vanished between the conflict and the re-read (an admin reset).
			err = fmt.Errorf("%w: retry", ErrUnavailable)
		}
		return Receipt{}, p.Strategy, err
	}
}

// refuse applies the sale's rules to req from the state kept in memory. It returns an error
// when the purchase cannot succeed, or the stored receipt when req is the retry of a purchase
// that did; a zero Receipt and nil when the purchase should go to the deduction.
func (s *Service) refuse(ctx context.Context, st *saleState, req PurchaseRequest) (Receipt, error) {
	p := st.p
	if err := s.rules(p, req); err != nil {
		// The retry of an accepted purchase still gets its first answer (after the sale ended,
		// say), and a key reused for a different purchase is told so. A sale that has not
		// started has no purchases to replay, and a refused pass gets none: the waiting room
		// holds the crowd off the store, so what it refuses costs no read (a buyer whose pass
		// expired after its purchase rejoins and replays with the new pass).
		if req.IdempotencyKey != "" && !errors.Is(err, ErrSaleNotStarted) && !isPassRefusal(err) {
			if r, rerr := s.replay(ctx, p.Strategy, req); !errors.Is(rerr, ErrNotFound) {
				return r, rerr
			}
		}
		return Receipt{}, err
	}
	if p.Stock >= req.Quantity {
		return Receipt{}, nil
	}
	// Sold out (p.Stock is an upper bound). A retry of an accepted purchase still gets its 202.
	switch {
	case req.IdempotencyKey == "":
	case st.receipts != nil:
		if r, ok := st.receipts[receiptKey{req.UserID, req.IdempotencyKey}]; ok {
			return replayOf(r, req)
		}
	default:
		if r, err := s.replay(ctx, p.Strategy, req); !errors.Is(err, ErrNotFound) {
			return r, err
		}
	}
	return Receipt{}, ErrSoldOut
}

// rules checks the sale window, the per-user limit, whether the strategy is served here and,
// in a waiting-room sale, the buyer's admission pass: all from memory and the request, no I/O.
func (s *Service) rules(p Product, req PurchaseRequest) error {
	now := s.now()
	if err := p.CheckWindow(now); err != nil {
		return err
	}
	if req.Quantity > p.PerUserLimit {
		return fmt.Errorf("%w: at most %d per user", ErrLimitReached, p.PerUserLimit)
	}
	if _, ok := s.deductors[p.Strategy]; !ok {
		return fmt.Errorf("%w: %s", ErrStrategyDisabled, p.Strategy)
	}
	return s.checkPass(p, req, now)
}

// isPassRefusal reports whether err is a waiting room's refusal of a purchase's pass.
func isPassRefusal(err error) bool {
	return errors.Is(err, ErrPassMissing) || errors.Is(err, ErrPassInvalid) || errors.Is(err, ErrPassExpired)
}

// replay returns the stored receipt for the request's key, ErrNotFound when there is none, or
// ErrInvalid when the key was used for a different purchase. The deductor of the product's
// strategy st is asked first when it keeps receipts itself.
func (s *Service) replay(ctx context.Context, st Strategy, req PurchaseRequest) (Receipt, error) {
	if k, ok := s.deductors[st].(ReceiptKeeper); ok {
		r, err := k.Receipt(ctx, req.ProductID, req.UserID, req.IdempotencyKey)
		if !errors.Is(err, ErrNotFound) {
			if err != nil {
				return Receipt{}, err
			}
			return replayOf(r, req)
		}
	}
	r, err := s.store.StoredReceipt(ctx, req.UserID, req.IdempotencyKey)
	if err != nil {
		return Receipt{}, err
	}
	return replayOf(r, req)
}

// replayOf answers req, a retry with the key of the accepted purchase r.
func replayOf(r Receipt, req PurchaseRequest) (Receipt, error) {
	if r.ProductID != req.ProductID || r.Quantity != req.Quantity {
		return Receipt{}, invalid("Idempotency-Key", "already used by this user for a different purchase")
	}
	r.Status = StatusQueued // the first answer, whatever the order's state now
	r.Replayed = true
	return r, nil
}

// Product returns one product.
func (s *Service) Product(ctx context.Context, id int64) (Product, error) {
	if id <= 0 {
		return Product{}, ErrNotFound
	}
	return s.store.Product(ctx, id)
}

// AllProducts returns every product, listed or not, by id.
func (s *Service) AllProducts(ctx context.Context) ([]Product, error) {
	return s.store.Products(ctx)
}

// Stats returns the stock counters of one product.
func (s *Service) Stats(ctx context.Context, id int64) (Stats, error) {
	if id <= 0 {
		return Stats{}, ErrNotFound
	}
	return s.store.Stats(ctx, id)
}

// BuyerOrder returns userID's accepted purchase by its order id. Another buyer's order is
// ErrNotFound, exactly as an absent one: an order id travels in URLs and logs, so having it proves
// nothing. An id no order can have (see Options.NewOrderID) is not found without asking the
// store, whose column would refuse it.
func (s *Service) BuyerOrder(ctx context.Context, orderID, userID string) (Order, error) {
	if err := ValidateUserID(userID); err != nil {
		return Order{}, err
	}
	if !plausibleOrderID(orderID) {
		return Order{}, ErrNotFound
	}
	return s.store.BuyerOrder(ctx, orderID, userID)
}

// MaxOrderIDLen is the longest order id.
const MaxOrderIDLen = 40

// plausibleOrderID reports whether id could be an order id: 1 to MaxOrderIDLen printable ASCII
// characters, no space.
func plausibleOrderID(id string) bool {
	if id == "" || len(id) > MaxOrderIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// CreateProduct puts a new product on sale. An empty strategy means the server's default.
func (s *Service) CreateProduct(ctx context.Context, np NewProduct) (Product, error) {
	if np.Strategy == "" {
		np.Strategy = s.defStrat
	}
	if err := np.Validate(); err != nil {
		return Product{}, err
	}
	if !s.Enabled(np.Strategy) {
		return Product{}, invalid("strategy", "%q is not enabled on this server", np.Strategy)
	}
	// The API speaks whole seconds (RFC 3339); a stored fraction would open the sale up to a
	// second after the time every client was shown.
	np.SaleStartsAt, np.SaleEndsAt = np.SaleStartsAt.Truncate(time.Second), np.SaleEndsAt.Truncate(time.Second)
	np.Admission = np.Admission.Normalized().truncated()
	p, err := s.store.CreateProduct(ctx, np, s.now().UTC())
	if err != nil {
		return Product{}, err
	}
	s.changed(ctx, p)
	return p, nil
}

// changed tells the strategies that need to know (Preparer: the product's new one, and one it may
// have left), then this replica's cache and every replica, that p has a new sale epoch. A failed
// Prepare is only logged: the strategy copes with an unprepared sale at its first purchase.
func (s *Service) changed(ctx context.Context, p Product) {
	for st, d := range s.deductors {
		if pr, ok := d.(Preparer); ok {
			if err := pr.Prepare(context.WithoutCancel(ctx), p); err != nil {
				s.log.Warn("could not prepare a strategy for the new sale", "product_id", p.ID, "strategy", st, "err", err)
			}
		}
	}
	c := Change{Kind: ChangeReset, ProductID: p.ID, Epoch: p.Epoch}
	s.cache.apply(c)
	s.onChanged(p)
	s.feed.Publish(context.WithoutCancel(ctx), c)
}

// ResetProduct restocks a product and forgets its purchases (see Reset).
func (s *Service) ResetProduct(ctx context.Context, id int64, r Reset) (Product, error) {
	if err := r.Validate(); err != nil {
		return Product{}, err
	}
	if r.Strategy != "" && !s.Enabled(r.Strategy) {
		return Product{}, invalid("strategy", "%q is not enabled on this server", r.Strategy)
	}
	if id <= 0 {
		return Product{}, ErrNotFound
	}
	r.SaleStartsAt, r.SaleEndsAt = r.SaleStartsAt.Truncate(time.Second), r.SaleEndsAt.Truncate(time.Second)
	if r.Admission != nil {
		a := r.Admission.Normalized().truncated()
		r.Admission = &a
	}
	p, err := s.store.ResetProduct(ctx, id, r, s.now().UTC().Truncate(time.Second))
	if err != nil {
		return Product{}, err
	}
	s.changed(ctx, p)
	return p, nil
}

type nopObserver struct{}

func (nopObserver) ObservePurchase(Observation) {}
