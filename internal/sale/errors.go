package sale

import (
	"errors"
	"fmt"
)

// The domain's errors. Adapters translate their own failures (a MySQL duplicate key, redis.Nil, a
// lock wait that timed out) into these, and httpapi maps each to one status code and one stable
// error code. Match them with errors.Is.
var (
	// ErrInvalid marks input that can never succeed as given. Wrapped by *ValidationError.
	ErrInvalid = errors.New("invalid request")
	// ErrNotFound means the product or order does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSaleNotStarted means the sale window has not opened yet.
	ErrSaleNotStarted = errors.New("sale not started")
	// ErrSaleEnded means the sale window has closed.
	ErrSaleEnded = errors.New("sale ended")
	// ErrSoldOut means less stock is left than the quantity asked for.
	ErrSoldOut = errors.New("sold out")
	// ErrLimitReached means the purchase would take the user beyond the product's per-user limit.
	ErrLimitReached = errors.New("per-user limit reached")
	// ErrAlreadyPurchased means the user already holds a reservation for the product. A user buys a
	// product once (up to per_user_limit units), so it is reported as ErrLimitReached too.
	ErrAlreadyPurchased = fmt.Errorf("%w: this user already bought this product", ErrLimitReached)
	// ErrPassMissing means a purchase in a waiting-room sale carried no admission pass: the buyer
	// joins the sale's queue first. Nothing was deducted.
	ErrPassMissing = errors.New("this sale has a waiting room: join its queue, and buy with the admission pass it gives (Admission-Pass header)")
	// ErrPassInvalid means a purchase's admission pass is not a genuine pass for this buyer and
	// this sale: forged, malformed, another buyer's or another sale's (the error says which).
	// Nothing was deducted.
	ErrPassInvalid = errors.New("invalid admission pass")
	// ErrPassExpired means a purchase's admission pass was genuine but its session is over: the
	// buyer joins the queue again. Nothing was deducted.
	ErrPassExpired = errors.New("admission pass expired: join the sale's queue again")
	// ErrIdempotencyKeyInUse means another purchase already committed with the same user and
	// Idempotency-Key. Deductors return it; the Service answers with the stored receipt instead.
	ErrIdempotencyKeyInUse = errors.New("idempotency key in use")
	// ErrRateLimited means the caller sends faster than the server accepts, or the server is busy
	// with this product: back-pressure, answered 429 with Retry-After. Nothing was deducted.
	ErrRateLimited = errors.New("rate limited")
	// ErrBusy means this replica's queue of purchases for the product is full. Nothing was
	// deducted; the caller may retry shortly.
	ErrBusy = fmt.Errorf("too many purchases of this product queued: %w", ErrRateLimited)
	// ErrUnavailable means a dependency (database, lock service, broker) failed or is unreachable.
	// Nothing was deducted; the caller may retry.
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrUnconfirmed means the purchase was decided and its units taken on the Redis master, but
	// fewer replicas than required confirmed it in time (redis-lua with
	// SECKILL_REDISLUA_MIN_REPLICAS): a failover now could lose it, so it is not answered accepted.
	// It is not ErrUnavailable: something may have been deducted. A retry with the same
	// Idempotency-Key answers the first purchase's receipt once the replicas confirm it, or, if a
	// failover lost it, decides the purchase anew.
	ErrUnconfirmed = errors.New("the purchase is decided but not yet confirmed by the Redis replicas: retry with the same Idempotency-Key")
	// ErrLockTimeout means the product's lock could not be acquired in time. A busy lock is
	// back-pressure, not a fault: it is answered like ErrRateLimited. Nothing was deducted.
	ErrLockTimeout = fmt.Errorf("lock wait timed out: %w", ErrRateLimited)
	// ErrFenced means the stock write was refused because a newer lock holder had already written:
	// this holder's lease had expired. Nothing was deducted.
	ErrFenced = fmt.Errorf("stale fencing token: %w", ErrUnavailable)
	// ErrSaleChanged means the product was reset (a new sale epoch) while the purchase was under
	// way, so the rules it was admitted under are gone. Nothing was deducted; the Service retries
	// once with the new sale's rules.
	ErrSaleChanged = fmt.Errorf("sale reset during the purchase: %w", ErrUnavailable)
	// ErrStrategyChanged means the product's strategy was switched (by an admin reset) while the
	// purchase was under way. Nothing was deducted; a retry uses the new strategy.
	ErrStrategyChanged = fmt.Errorf("sale strategy changed: %w", ErrSaleChanged)
	// ErrStrategyDisabled means the product's strategy is not enabled on this server (for example
	// `none` without SECKILL_ALLOW_UNSAFE_STRATEGIES).
	ErrStrategyDisabled = fmt.Errorf("strategy not enabled on this server: %w", ErrUnavailable)
)

// ValidationError says which field of a request is wrong and why. It wraps ErrInvalid.
type ValidationError struct {
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// KeyUnused marks a deduction's refusal (ErrSoldOut, ErrAlreadyPurchased) as decided after the
// deduction saw the purchase's Idempotency-Key unused: its reservation was inserted under the
// key's unique index and rolled back, or the store was read for the key in the same transaction.
// The Service then answers the refusal as it is, without reading the key again to find an
// accepted purchase it could be the retry of. A lock strategy that decides "sold out" before it
// looks at keys leaves its refusal unmarked.
func KeyUnused(err error) error {
	if err == nil {
		return nil
	}
	return keyUnused{err}
}

type keyUnused struct{ error }

func (e keyUnused) Unwrap() error { return e.error }

// keyChecked reports whether err was marked by KeyUnused.
func keyChecked(err error) bool {
	var k keyUnused
	return errors.As(err, &k)
}

// KeyInUse is ErrIdempotencyKeyInUse with the receipt of the accepted purchase that used the key,
// for a deduction that has it at hand (it read the key's row, or accepted that purchase in the
// same batch): the Service answers the retry with it instead of reading it again.
func KeyInUse(r Receipt) error { return keyInUse{r} }

type keyInUse struct{ r Receipt }

func (e keyInUse) Error() string { return ErrIdempotencyKeyInUse.Error() }
func (e keyInUse) Unwrap() error { return ErrIdempotencyKeyInUse }

// InUseReceipt returns the receipt carried by an error made with KeyInUse.
func InUseReceipt(err error) (Receipt, bool) {
	var k keyInUse
	if errors.As(err, &k) {
		return k.r, true
	}
	return Receipt{}, false
}
