// Package waitroom says what a sale's waiting room is (issue #32): when a sale draws more buyers
// than its purchase path should serve at once, they join a fair queue, learn their place and an
// estimated wait, and are let in at a set rate, no more than a set number at a time. Whoever joins
// before the sale opens is in the pre-queue, shuffled at the opening when the sale says so (a
// head start for whoever scripted the fastest join is no fairer than a lottery), first come first
// served after. The queue says "sold out" to everyone in it at once, and units that come back go
// to the next in line.
//
// The package holds the settings, the answers a visitor gets and the arithmetic of the estimated
// wait. It never stores the queue (internal/waitroom/redisroom does, in Redis, shared by every
// replica) and never signs a pass (internal/waitroom/admit does: it needs a JWT library, which a
// domain package may not import).
package waitroom

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Mode is how a sale admits buyers. It is the product's sale.AdmissionMode: the mode is stored
// with the product, and sale may not import this package (it imports sale).
type Mode = sale.AdmissionMode

// The modes.
const (
	// Open lets every buyer straight to the purchase path: the sale has no waiting room.
	Open = sale.AdmissionOpen
	// WaitingRoom puts every buyer in the sale's queue; only an admission pass opens the
	// purchase path.
	WaitingRoom = sale.AdmissionWaitingRoom
)

// ParseMode reads a Mode ("" is Open: a sale has no waiting room unless it asks for one).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Open, nil
	case Open, WaitingRoom:
		return m, nil
	default:
		return "", fmt.Errorf("%w: unknown admission mode %q (open or waiting_room)", ErrInvalidSettings, s)
	}
}

// Limits on the settings: sale's, which checks a product's admission rule against the same
// ones, so that every rule an admin can save makes valid Settings.
const (
	MaxAdmitRate = sale.MaxAdmitRate
	MinSession   = sale.MinSession
	MaxSession   = sale.MaxSession
	MinAbandon   = sale.MinAbandon
)

// ErrInvalidSettings marks settings that cannot work; the error says which and why.
var ErrInvalidSettings = errors.New("invalid waiting room settings")

// Settings are a sale's admission rules, Cloudflare's waiting room settings by other names:
// AdmitRate is new_users_per_minute (per second here), MaxActive total_active_users, Session
// session_duration, OpensAt the event start that ends the pre-queue, Shuffle
// shuffle_at_event_start.
type Settings struct {
	Mode Mode
	// AdmitRate is how many visitors are admitted per second, across all replicas. A visitor
	// skipped as abandoned does not count.
	AdmitRate float64
	// MaxActive is the most visitors holding an unexpired session at once: when it is reached,
	// admission waits for sessions to end whatever the rate allows.
	MaxActive int
	// Session is how long an admission lasts: the pass expires then, and the visitor's place among
	// the MaxActive is freed.
	Session time.Duration
	// OpensAt is when admission starts; visitors who join before it are in the pre-queue.
	OpensAt time.Time
	// Shuffle orders the pre-queue at random when the sale opens; without it the pre-queue keeps
	// its order of joining. Visitors who join after the opening always queue in order.
	Shuffle bool
	// AbandonAfter is how long a visitor may go unheard (no join, no poll) before its turn and
	// still be admitted: one silent longer is skipped when its turn comes, so that closed tabs do
	// not hold the queue up, and must join again, at the back.
	AbandonAfter time.Duration
}

// Validate reports settings that cannot work, every problem at once. An Open sale needs nothing
// else: its other fields are ignored.
func (s Settings) Validate() error {
	switch s.Mode {
	case Open:
		return nil
	case WaitingRoom:
	default:
		return fmt.Errorf("%w: unknown admission mode %q (open or waiting_room)", ErrInvalidSettings, s.Mode)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSettings}, args...)...))
	}
	if !(s.AdmitRate > 0 && s.AdmitRate <= MaxAdmitRate) { // NaN fails both
		bad("admit rate %v per second: must be above 0 and at most %d", s.AdmitRate, MaxAdmitRate)
	}
	if s.MaxActive < 1 {
		bad("max active buyers %d: must be at least 1", s.MaxActive)
	}
	if s.Session < MinSession || s.Session > MaxSession {
		bad("session %v: must be between %v and %v", s.Session, MinSession, MaxSession)
	}
	if s.AbandonAfter < MinAbandon {
		bad("abandon timeout %v: must be at least %v", s.AbandonAfter, MinAbandon)
	}
	if s.OpensAt.IsZero() {
		bad("no opening time")
	}
	return errors.Join(errs...)
}

// SettingsOf returns the waiting room settings of product p's admission rule: admission starts
// when the sale does. The queue's opening for joining (p.Admission.QueueOpening) is not one of
// them: whoever serves the join refuses it before then.
func SettingsOf(p sale.Product) Settings {
	a := p.Admission.Normalized()
	return Settings{
		Mode:         a.Mode,
		AdmitRate:    a.AdmitRate,
		MaxActive:    a.MaxActive,
		Session:      a.Session,
		OpensAt:      p.SaleStartsAt,
		Shuffle:      a.Shuffle,
		AbandonAfter: a.AbandonAfter,
	}
}

// Throughput is the most visitors per second the settings can admit for long: the rate, unless
// MaxActive sessions end more slowly than that (MaxActive per Session).
func (s Settings) Throughput() float64 {
	if s.Session <= 0 {
		return s.AdmitRate
	}
	return math.Min(s.AdmitRate, float64(s.MaxActive)/s.Session.Seconds())
}

// MaxSaleIDLen is the longest sale id.
const MaxSaleIDLen = 64

// ValidateSaleID accepts 1 to MaxSaleIDLen characters of [A-Za-z0-9_.:-]: a sale id names Redis
// keys inside a Cluster hash tag, so it may hold no brace, and it is a pass's claim, so it is
// printable.
func ValidateSaleID(id string) error {
	if id == "" || len(id) > MaxSaleIDLen {
		return &sale.ValidationError{Field: "sale_id", Reason: fmt.Sprintf("must be 1 to %d characters", MaxSaleIDLen)}
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:-", c) >= 0) {
			return &sale.ValidationError{Field: "sale_id", Reason: "may contain only letters, digits and '_', '.', ':', '-'"}
		}
	}
	return nil
}
