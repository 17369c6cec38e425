package payphase

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

func TestChoosePayers(t *testing.T) {
	for _, tc := range []struct {
		n        int
		fraction float64
		want     string // x pays, . does not
	}{
		{0, 0.5, ""},
		{4, 0, "...."},
		{4, 1, "xxxx"},
		{4, 0.5, ".x.x"},
		{5, 0.5, ".x.xx"}, // round(2.5) = 3
		{10, 0.3, "...x..x..x"},
		{3, 0.1, "..."},
	} {
		t.Run(fmt.Sprintf("%d×%g", tc.n, tc.fraction), func(t *testing.T) {
			var got strings.Builder
			for _, p := range choosePayers(tc.n, tc.fraction) {
				if p {
					got.WriteByte('x')
				} else {
					got.WriteByte('.')
				}
			}
			if got.String() != tc.want {
				t.Errorf("choosePayers(%d, %g) = %q, want %q", tc.n, tc.fraction, got.String(), tc.want)
			}
		})
	}
}

func TestWinnersOf(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	at := func(buyer, ms, status int, orderID string) attack.Answer {
		return attack.Answer{Attempt: attack.Attempt{Buyer: buyer, User: fmt.Sprint("u", buyer)}, Sent: start.Add(time.Duration(ms) * time.Millisecond),
			Latency: 10 * time.Millisecond, Status: status, OrderID: orderID}
	}
	answers := []attack.Answer{at(0, 0, 202, "o1"), at(0, 1, 202, "o1"), at(1, 2, 409, ""), at(2, 3, 202, "o2"), at(3, 4, 0, "")}
	settled := []attack.Answer{at(3, 500, 202, "o3"), at(2, 501, 202, "o2")}
	var got []string
	for _, w := range WinnersOf(answers, settled) {
		got = append(got, fmt.Sprintf("%s %s %dms", w.orderID, w.User, w.accepted.Sub(start).Milliseconds()))
	}
	want := []string{"o1 u0 10ms", "o2 u2 13ms", "o3 u3 510ms"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("winnersOf (-want +got):\n%s", diff)
	}
}

func TestPayOutcome(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
		paid   bool
		want   string
	}{
		{200, "", true, "paid"},
		{200, "", false, "other"}, // 200 without the order paid
		{0, "", false, "transport_error"},
		{502, "", false, "transport_error"},
		{502, "internal", false, "other"},
		{402, "payment_declined", false, "payment_declined"},
		{409, "order_expired", false, "order_expired"},
		{409, "payment_in_progress", false, "payment_in_progress"},
		{503, "unavailable", false, "unavailable"},
		{429, "rate_limited", false, "rate_limited"},
		{500, "internal", false, "other"},
		{404, "not_found", false, "other"},
	} {
		if got := payOutcome(tc.status, tc.code, tc.paid); got != tc.want {
			t.Errorf("payOutcome(%d, %q, %v) = %q, want %q", tc.status, tc.code, tc.paid, got, tc.want)
		}
	}
}

// payServer answers payments from script, one answer per request in order ("paid" or
// "status code"), and records the Idempotency-Key and the buyer of each.
func payServer(t *testing.T, script ...string) (url string, sent func() []string) {
	t.Helper()
	var mu sync.Mutex
	var log []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			UserID string `json:"user_id"`
		}
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &body)
		mu.Lock()
		i := len(log)
		log = append(log, r.URL.Path+" "+body.UserID+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if i >= len(script) {
			t.Errorf("payment %d beyond the script", i+1)
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var status int
		var code string
		if script[i] == "paid" {
			_, _ = io.WriteString(w, `{"order_id":"o1","status":"paid"}`)
			return
		}
		fmt.Sscanf(script[i], "%d %s", &status, &code)
		if status == 0 { // no answer: the connection is dropped
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"scripted"}}`, code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), log...) }
}

func TestPayOne(t *testing.T) {
	w := winner{Attempt: attack.Attempt{Buyer: 0, User: "u7"}, orderID: "o1"}
	for _, tc := range []struct {
		name   string
		script []string
		want   PayResult
		keys   []string
	}{
		{
			name:   "paid at once",
			script: []string{"paid"},
			want:   PayResult{Outcome: "paid", Answers: map[string]int{"paid": 1}},
			keys:   []string{"u7-pay1"},
		},
		{
			name:   "the same key after no answer, a 503 and a payment in progress; a new one after a decline",
			script: []string{"0", "503 unavailable", "409 payment_in_progress", "402 payment_declined", "paid"},
			want: PayResult{Outcome: "paid", Declined: 1, Retried: 3,
				Answers: map[string]int{"transport_error": 1, "unavailable": 1, "payment_in_progress": 1, "payment_declined": 1, "paid": 1}},
			keys: []string{"u7-pay1", "u7-pay1", "u7-pay1", "u7-pay1", "u7-pay2"},
		},
		{
			name:   "declined until the order expired: late",
			script: []string{"402 payment_declined", "402 payment_declined", "409 order_expired"},
			want:   PayResult{Outcome: "late", Declined: 2, Answers: map[string]int{"payment_declined": 2, "order_expired": 1}},
			keys:   []string{"u7-pay1", "u7-pay2", "u7-pay3"},
		},
		{
			name:   "an answer no payment should get",
			script: []string{"409 order_cancelled"},
			want: PayResult{Outcome: "unexpected", Problem: "payment of order o1 by buyer 0: unexpected answer 409 order_cancelled",
				Answers: map[string]int{"order_cancelled": 1}},
			keys: []string{"u7-pay1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, sent := payServer(t, tc.script...)
			got := PayOne(t.Context(), &http.Client{Timeout: 5 * time.Second}, []string{url}, w)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(PayResult{})); diff != "" {
				t.Errorf("payOne (-want +got):\n%s", diff)
			}
			var keys []string
			for _, s := range sent() {
				if !strings.HasPrefix(s, "/api/v1/orders/o1/pay u7 ") {
					t.Errorf("sent %q: want the buyer's payment of o1", s)
				}
				keys = append(keys, s[strings.LastIndexByte(s, ' ')+1:])
			}
			if diff := cmp.Diff(tc.keys, keys); diff != "" {
				t.Errorf("Idempotency-Keys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPayAllTallies(t *testing.T) {
	url, sent := payServer(t, "402 payment_declined", "paid")
	o := &attack.Options{Targets: []string{url}, Workers: 1}
	ws := []winner{
		{Attempt: attack.Attempt{Buyer: 0, User: "u0"}, orderID: "o1"},
		{Attempt: attack.Attempt{Buyer: 1, User: "u1"}, orderID: "o2"}, // does not pay
		{Attempt: attack.Attempt{Buyer: 2, User: "u2"}, orderID: "o3"}, // expired before its buyer came
		{Attempt: attack.Attempt{Buyer: 3, User: "u3"}, orderID: "o4"}, // never confirmed
	}
	orders := []orderView{{Status: "confirmed"}, {Status: "confirmed"}, {Status: "expired"}, {Status: "queued"}}
	got := payAll(t.Context(), &http.Client{Timeout: 5 * time.Second}, o, ws, orders, []bool{true, false, true, true})
	want := attack.PayTally{Orders: 4, Payers: 3, Paid: 1, Declined: 1, Late: 1,
		Answers:  map[string]int{"payment_declined": 1, "paid": 1},
		Problems: []string{"order o4 of buyer 3 is queued when its buyer comes to pay"}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(attack.PayTally{})); diff != "" {
		t.Errorf("payAll (-want +got):\n%s", diff)
	}
	if n := len(sent()); n != 2 {
		t.Errorf("%d payments sent, want 2", n)
	}
}

func TestPaymentViolations(t *testing.T) {
	// sound: 10 units sold to 10 winners, 4 paid, 6 expired and returned; the second wave sold
	// the 6 again and paid them all.
	after := audit.Facts{InitialStock: 10, Stock: 6, PerUserLimit: 1, Reservations: 10, ReservedUnits: 10, Orders: 10, OrderUnits: 10,
		PaidUnits: 4, ClosedUnits: 6, ReturnedUnits: 6}
	final := audit.Facts{InitialStock: 10, Stock: 0, PerUserLimit: 1, Reservations: 16, ReservedUnits: 16, Orders: 16, OrderUnits: 16,
		PaidUnits: 10, ClosedUnits: 6, ReturnedUnits: 6}
	sound := paymentEvidence{winners1: 10, paid1: 4, afterWindow: after, backOK: true, units2: 6, buyers2: 120, accepted2: 6, paid2: 6,
		final: final, finalOK: true, timeout: time.Minute}
	with := func(change func(*paymentEvidence)) paymentEvidence { e := sound; change(&e); return e }
	for _, tc := range []struct {
		name     string
		e        paymentEvidence
		oversold int
		want     []string
	}{
		{"sound", sound, 0, nil},
		{
			"a second-wave order expired too: its unit back in stock is no undersell",
			with(func(e *paymentEvidence) {
				e.paid2 = 5
				e.final.PaidUnits, e.final.ClosedUnits, e.final.ReturnedUnits, e.final.Stock = 9, 7, 7, 1
			}),
			0, nil,
		},
		{
			"units not back in time",
			with(func(e *paymentEvidence) {
				e.backOK, e.afterWindow.ClosedUnits, e.afterWindow.ReturnedUnits = false, 5, 4
			}),
			0,
			[]string{
				"NOT RETURNED in time: 1m0s after the window ran out, 1 units still await payment and 4 of 5 expired units are back in stock",
				"the first wave left 6 orders unpaid, but 5 units expired",
			},
		},
		{
			"the second wave took fewer units than came back",
			with(func(e *paymentEvidence) {
				e.accepted2, e.paid2 = 4, 4
				e.final.Stock, e.final.Reservations, e.final.ReservedUnits, e.final.Orders, e.final.OrderUnits, e.final.PaidUnits = 2, 14, 14, 14, 14, 8
			}),
			0,
			[]string{"UNDERSOLD: 2 of the 6 units that came back were not sold again although 120 second-wave buyers came"},
		},
		{
			"a payment told paid that the database does not hold, and other payment problems",
			with(func(e *paymentEvidence) {
				e.paid2 = 7
				e.problems = []string{"payment of order o1 by buyer 0: unexpected answer 500 internal"}
				e.gaveUp = 2
			}),
			0,
			[]string{
				"the payers were told 11 orders were paid; the database holds 10 paid units",
				"payment of order o1 by buyer 0: unexpected answer 500 internal",
				"2 payments still of unknown outcome after 30 tries each",
			},
		},
		{
			"the final audit's own violations: a second-wave order expired and its unit never came back",
			with(func(e *paymentEvidence) {
				e.finalOK, e.paid2 = false, 5
				e.final.PaidUnits, e.final.ClosedUnits, e.final.ChargedUnpaid = 9, 7, 1
				e.missing = []string{"o9"}
			}),
			0,
			[]string{
				"the second wave's orders did not settle within 1m0s: 0 units await payment, 6 of 7 expired units are back in stock",
				"1 successful charges are not a paid order: money taken for a unit not sold",
				"NOT RETURNED: 7 units of expired or cancelled orders, 6 back in stock",
				"1 accepted purchases have no order (first: o9)",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := paymentViolations(tc.e, tc.oversold)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("paymentViolations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPaymentOversold(t *testing.T) {
	after := audit.Facts{InitialStock: 10, Stock: 6, Reservations: 10, ReservedUnits: 10, Orders: 10, OrderUnits: 10, PaidUnits: 4, ClosedUnits: 6, ReturnedUnits: 6}
	final := audit.Facts{InitialStock: 10, Stock: 0, Reservations: 16, ReservedUnits: 16, Orders: 16, OrderUnits: 16, PaidUnits: 10, ClosedUnits: 6, ReturnedUnits: 6}
	e := paymentEvidence{winners1: 10, afterWindow: after, units2: 6, accepted2: 6, final: final}
	if n := e.oversold(); n != 0 {
		t.Errorf("a sound phase oversold %d", n)
	}
	e.accepted2 = 8 // two more acknowledged than came back, the database none the wiser
	if n := e.oversold(); n != 2 {
		t.Errorf("oversold %d, want 2: 8 acknowledged for 6 units", n)
	}
	e.accepted2, e.final.Stock = 6, -3
	if n := e.oversold(); n != 3 {
		t.Errorf("oversold %d, want 3: a negative stock", n)
	}
}
