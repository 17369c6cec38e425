package sale_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// room is a valid waiting room for a sale that starts at roomStart.
var (
	roomStart = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	room      = sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 50, MaxActive: 200, Session: 2 * time.Minute,
		QueueOpensAt: roomStart.Add(-10 * time.Minute), Shuffle: true, AbandonAfter: 20 * time.Second}
)

// TestAdmissionRuleValidate: every bad setting is refused with its API field; an open sale needs
// none of them, and a waiting room's limits are inclusive.
func TestAdmissionRuleValidate(t *testing.T) {
	with := func(f func(*sale.AdmissionRule)) sale.AdmissionRule { a := room; f(&a); return a }
	for _, tc := range []struct {
		name  string
		rule  sale.AdmissionRule
		start time.Time
		field string // "" when valid
	}{
		{"zero is open", sale.AdmissionRule{}, roomStart, ""},
		{"open ignores the numbers", sale.AdmissionRule{Mode: sale.AdmissionOpen, AdmitRate: -1, MaxActive: -1}, roomStart, ""},
		{"waiting room", room, roomStart, ""},
		{"no queue opening", with(func(a *sale.AdmissionRule) { a.QueueOpensAt = time.Time{} }), roomStart, ""},
		{"opening at the start", with(func(a *sale.AdmissionRule) { a.QueueOpensAt = roomStart }), roomStart, ""},
		{"start not known", with(func(a *sale.AdmissionRule) { a.QueueOpensAt = roomStart.Add(time.Hour) }), time.Time{}, ""},
		{"the limits", sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: sale.MaxAdmitRate, MaxActive: sale.MaxActiveBuyers,
			Session: sale.MaxSession, AbandonAfter: sale.MaxAbandon}, roomStart, ""},
		{"unknown mode", with(func(a *sale.AdmissionRule) { a.Mode = "lottery" }), roomStart, "admission.mode"},
		{"mode in capitals", with(func(a *sale.AdmissionRule) { a.Mode = "WAITING_ROOM" }), roomStart, "admission.mode"},
		{"no rate", with(func(a *sale.AdmissionRule) { a.AdmitRate = 0 }), roomStart, "admission.admit_rate"},
		{"negative rate", with(func(a *sale.AdmissionRule) { a.AdmitRate = -1 }), roomStart, "admission.admit_rate"},
		{"NaN rate", with(func(a *sale.AdmissionRule) { a.AdmitRate = math.NaN() }), roomStart, "admission.admit_rate"},
		{"rate too high", with(func(a *sale.AdmissionRule) { a.AdmitRate = sale.MaxAdmitRate + 0.5 }), roomStart, "admission.admit_rate"},
		{"no max active", with(func(a *sale.AdmissionRule) { a.MaxActive = 0 }), roomStart, "admission.max_active"},
		{"max active too high", with(func(a *sale.AdmissionRule) { a.MaxActive = sale.MaxActiveBuyers + 1 }), roomStart, "admission.max_active"},
		{"no session", with(func(a *sale.AdmissionRule) { a.Session = 0 }), roomStart, "admission.session_seconds"},
		{"session too long", with(func(a *sale.AdmissionRule) { a.Session = sale.MaxSession + time.Second }), roomStart, "admission.session_seconds"},
		{"no abandon timeout", with(func(a *sale.AdmissionRule) { a.AbandonAfter = 0 }), roomStart, "admission.abandon_seconds"},
		{"abandon timeout too long", with(func(a *sale.AdmissionRule) { a.AbandonAfter = sale.MaxAbandon + time.Second }), roomStart, "admission.abandon_seconds"},
		{"opening after the start", with(func(a *sale.AdmissionRule) { a.QueueOpensAt = roomStart.Add(time.Second) }), roomStart, "admission.queue_opens_at"},
		{"opening out of range", with(func(a *sale.AdmissionRule) { a.QueueOpensAt = time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC) }), roomStart, "admission.queue_opens_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.field, fieldOf(t, tc.rule.Validate(tc.start))); diff != "" {
				t.Errorf("the field refused (-want +got):\n%s", diff)
			}
		})
	}
}

// fieldOf is the field of err, a *sale.ValidationError or nil ("").
func fieldOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ve *sale.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("%v is not a *sale.ValidationError", err)
	}
	return ve.Field
}

// TestAdmissionOfProductAndReset: the product's and the reset's validations check the admission,
// against the sale's start when the request has one, and a reset keeps the product's rule unless
// it gives one.
func TestAdmissionOfProductAndReset(t *testing.T) {
	np := sale.NewProduct{Name: "n", PriceCents: 1, Stock: 1, Strategy: sale.StrategyMySQL, SaleStartsAt: roomStart,
		SaleEndsAt: roomStart.Add(time.Hour), PerUserLimit: 1, Admission: room}
	np.Admission.MaxActive = 0
	if got := fieldOf(t, np.Validate()); got != "admission.max_active" {
		t.Errorf("new product: field %q, want admission.max_active", got)
	}
	late := room
	late.QueueOpensAt = roomStart.Add(time.Minute)
	if got := fieldOf(t, (sale.Reset{Stock: 1, SaleStartsAt: roomStart, SaleEndsAt: roomStart.Add(time.Hour), Admission: &late}).Validate()); got != "admission.queue_opens_at" {
		t.Errorf("reset with a window: field %q, want admission.queue_opens_at", got)
	}
	if err := (sale.Reset{Stock: 1, Admission: &late}).Validate(); err != nil {
		t.Errorf("reset without a window: %v (the opening is checked against the kept start later)", err)
	}

	p := sale.Product{SaleStartsAt: roomStart, Admission: room}
	for _, tc := range []struct {
		name  string
		reset sale.Reset
		start time.Time
		want  sale.AdmissionRule
		field string
	}{
		{"kept", sale.Reset{}, roomStart, room, ""},
		{"given", sale.Reset{Admission: &sale.AdmissionRule{}}, roomStart, sale.AdmissionRule{Mode: sale.AdmissionOpen}, ""},
		{"kept, the sale moved before its opening", sale.Reset{}, room.QueueOpensAt.Add(-time.Second), sale.AdmissionRule{}, "admission.queue_opens_at"},
		{"given, after the kept start", sale.Reset{Admission: &late}, roomStart, sale.AdmissionRule{}, "admission.queue_opens_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.reset.AdmissionFor(p, tc.start)
			if diff := cmp.Diff(tc.field, fieldOf(t, err)); diff != "" {
				t.Errorf("the field refused (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admission (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmissionRuleQueueOpening: the queue opens at QueueOpensAt, or with the sale.
func TestAdmissionRuleQueueOpening(t *testing.T) {
	if got := room.QueueOpening(roomStart); !got.Equal(room.QueueOpensAt) {
		t.Errorf("set: %v, want %v", got, room.QueueOpensAt)
	}
	if got := (sale.AdmissionRule{}).QueueOpening(roomStart); !got.Equal(roomStart) {
		t.Errorf("not set: %v, want the start %v", got, roomStart)
	}
}
