package sale

import (
	"cmp"
	"fmt"
	"strconv"
	"time"
)

// AdmissionMode is how a sale admits its buyers to the purchase path.
//
// It is declared here, not in internal/waitroom, because it is a fact about the sale, stored and
// validated with the product: sale is the core domain and must read alone, while waitroom (the
// queue's arithmetic, issue #32) builds on sale (its ValidationError, its user ids) and so may not
// be imported by it. waitroom.Mode is an alias of this type, so the two packages share one
// definition of the modes and the limits below.
type AdmissionMode string

// The admission modes.
const (
	// AdmissionOpen lets every buyer straight to the purchase path: the sale has no waiting room.
	AdmissionOpen AdmissionMode = "open"
	// AdmissionWaitingRoom puts every buyer in the sale's queue; only an admission pass opens the
	// purchase path.
	AdmissionWaitingRoom AdmissionMode = "waiting_room"
)

// Limits on a waiting room's settings. They keep the queue's arithmetic (floats and milliseconds
// in Lua, whole seconds in a pass's expiry) far from its edges, a pass short-lived, and every
// value within its column. internal/waitroom checks its Settings against the same constants.
const (
	// MaxAdmitRate is the highest admission rate, per second: beyond it a waiting room admits
	// faster than one Redis slot decides, and the sale wants no waiting room.
	MaxAdmitRate = 100_000
	// MaxActiveBuyers is the most buyers a waiting room may let in at once: as many as a sale
	// may have units.
	MaxActiveBuyers = MaxStock
	// MinSession is the shortest session: a pass's expiry is in whole seconds.
	MinSession = time.Second
	// MaxSession is the longest session, and so a pass's longest life: the purchase path checks
	// the pass alone, so a pass copied to a bot is good until it expires.
	MaxSession = time.Hour
	// MinAbandon is the shortest abandon timeout: a visitor who polls every few seconds must not
	// be taken for one who left.
	MinAbandon = time.Second
	// MaxAbandon is the longest abandon timeout: a visitor silent for an hour has left, and a
	// closed tab must not hold the line up for longer.
	MaxAbandon = time.Hour
)

// AdmissionRule is a sale's admission rule: open, or a waiting room with its settings. The zero
// value is an open sale. An open sale carries none of the numbers: Normalized drops them, so that
// two open sales compare equal and nothing unused is stored. (Admission, the name without Rule, is
// the per-buyer rate limit the purchase path asks.) waitroom.SettingsOf turns it into the queue's
// Settings.
type AdmissionRule struct {
	Mode AdmissionMode
	// AdmitRate is how many buyers the queue lets in per second, across all replicas.
	AdmitRate float64
	// MaxActive is the most buyers holding an unexpired session at once.
	MaxActive int
	// Session is how long an admission lasts: whole seconds (the API speaks seconds).
	Session time.Duration
	// QueueOpensAt is when the queue opens for joining, before the sale starts: who joins before
	// the start is in the pre-queue. Zero means the sale's start (QueueOpening): no pre-queue.
	QueueOpensAt time.Time
	// Shuffle orders the pre-queue at random when the sale starts, instead of by joining.
	Shuffle bool
	// AbandonAfter is how long a waiting buyer may go unheard and still be admitted at its turn.
	AbandonAfter time.Duration
}

// Normalized returns a with an empty mode read as open, and an open sale's numbers dropped.
func (a AdmissionRule) Normalized() AdmissionRule {
	if a.Mode == "" || a.Mode == AdmissionOpen {
		return AdmissionRule{Mode: AdmissionOpen}
	}
	return a
}

// WaitingRoom reports whether buyers of the sale queue before they buy.
func (a AdmissionRule) WaitingRoom() bool { return a.Mode == AdmissionWaitingRoom }

// QueueOpening is when the queue of a sale that starts at start opens for joining: QueueOpensAt,
// or start when it is not set.
func (a AdmissionRule) QueueOpening(start time.Time) time.Time {
	if a.QueueOpensAt.IsZero() {
		return start
	}
	return a.QueueOpensAt
}

// ParseAdmissionMode reads a mode as the API spells it ("" is open: a sale has no waiting room
// unless it asks for one).
func ParseAdmissionMode(s string) (AdmissionMode, error) {
	switch m := AdmissionMode(s); m {
	case "", AdmissionOpen:
		return AdmissionOpen, nil
	case AdmissionWaitingRoom:
		return m, nil
	}
	return "", invalid("admission.mode", "must be %q or %q", AdmissionOpen, AdmissionWaitingRoom)
}

// Validate checks the admission of a sale that starts at saleStartsAt (zero: not known yet, the
// queue's opening is then checked against it later, by Reset.AdmissionFor) and returns the first
// problem as a *ValidationError naming the API's field. An open sale needs none of the numbers.
func (a AdmissionRule) Validate(saleStartsAt time.Time) error {
	if _, err := ParseAdmissionMode(string(a.Mode)); err != nil {
		return err
	}
	if !a.WaitingRoom() {
		return nil
	}
	switch {
	case !(a.AdmitRate > 0 && a.AdmitRate <= MaxAdmitRate): // NaN fails both
		return invalid("admission.admit_rate", "must be above 0 and at most %d buyers per second", MaxAdmitRate)
	case a.MaxActive < 1 || a.MaxActive > MaxActiveBuyers:
		return invalid("admission.max_active", "must be between 1 and %d", MaxActiveBuyers)
	case a.Session < MinSession || a.Session > MaxSession:
		return invalid("admission.session_seconds", "must be between %d and %d", int(MinSession/time.Second), int(MaxSession/time.Second))
	case a.AbandonAfter < MinAbandon || a.AbandonAfter > MaxAbandon:
		return invalid("admission.abandon_seconds", "must be between %d and %d", int(MinAbandon/time.Second), int(MaxAbandon/time.Second))
	}
	if a.QueueOpensAt.IsZero() {
		return nil
	}
	if err := ValidateSaleTime("admission.queue_opens_at", a.QueueOpensAt); err != nil {
		return err
	}
	return a.checkOpening(saleStartsAt)
}

// checkOpening reports a queue that would open after the sale starts (at start; zero: unknown).
func (a AdmissionRule) checkOpening(start time.Time) error {
	if a.WaitingRoom() && !start.IsZero() && a.QueueOpensAt.After(start) {
		return invalid("admission.queue_opens_at", "must not be after the sale starts (%s): the queue opens before the sale",
			start.UTC().Format(time.RFC3339))
	}
	return nil
}

// truncated is a with its times and durations in whole seconds, as the API shows them and the
// store keeps them.
func (a AdmissionRule) truncated() AdmissionRule {
	a.Session, a.AbandonAfter = a.Session.Truncate(time.Second), a.AbandonAfter.Truncate(time.Second)
	a.QueueOpensAt = a.QueueOpensAt.Truncate(time.Second)
	return a
}

// AdmissionFor returns the admission of product p after the reset, whose sale starts at start
// (Reset.Window): the reset's own when it gives one, else p's, checked against the new start (a
// kept queue opening may now fall after it: that reset must give its admission anew).
func (r Reset) AdmissionFor(p Product, start time.Time) (AdmissionRule, error) {
	a := cmp.Or(r.Admission, &p.Admission).Normalized()
	if err := a.checkOpening(start); err != nil {
		return AdmissionRule{}, err
	}
	return a, nil
}

// SaleID is the id of p's current sale in the waiting room's vocabulary: the name of its queue
// and the "sale" claim of its admission passes. It is the product id and the sale epoch ("42.3"):
// a reset starts a new sale, so it starts a new, empty queue, and a pass of the sale before it
// opens nothing. The one place that says so: the purchase path and the queue's routes both use it.
func (p Product) SaleID() string {
	return strconv.FormatInt(p.ID, 10) + "." + strconv.FormatUint(p.Epoch, 10)
}

// PassVerifier checks an admission pass with no I/O (internal/waitroom/admit's Verifier). Verify
// returns nil when pass admits userID to the sale saleID (Product.SaleID) at now, else an error
// wrapping exactly one of ErrPassMissing, ErrPassInvalid and ErrPassExpired.
type PassVerifier interface {
	Verify(pass, userID, saleID string, now time.Time) error
}

// checkPass refuses a purchase of a waiting-room sale that carries no valid admission pass. An
// open sale ignores whatever pass a request brings.
func (s *Service) checkPass(p Product, req PurchaseRequest, now time.Time) error {
	if !p.Admission.WaitingRoom() {
		return nil
	}
	if req.Pass == "" {
		return ErrPassMissing
	}
	if s.passes == nil {
		return fmt.Errorf("%w: this server checks no admission passes", ErrUnavailable)
	}
	return s.passes.Verify(req.Pass, req.UserID, p.SaleID(), now)
}
