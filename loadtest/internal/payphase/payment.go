package payphase

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/pause"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

const (
	// payTries is how often one payment is sent with one key before it is given up.
	payTries = attack.SettleTries
	// maxPayKeys is how many payments, each with a new key after a decline, one payer makes.
	maxPayKeys = 20
	// restockSettle is the pause between the units' return and the second wave: twice the app's
	// default staleness bound (SECKILL_SALE_REFRESH, 1 s), the longest a replica that missed the
	// broadcast that units came back keeps refusing them as sold out.
	restockSettle = 2 * time.Second
	// PollEvery is how often the run reads the database while it waits.
	PollEvery = 200 * time.Millisecond
)

// winner is a purchase acknowledged with a 202: its order, the buyer who pays it, and when the
// acknowledgement arrived.
type winner struct {
	attack.Attempt
	orderID  string
	accepted time.Time
}

// WinnersOf returns the distinct orders acknowledged with a 202 in answers (sorted by the time
// they were sent, as tallyAnswers leaves them) and then settled, in the order first seen.
func WinnersOf(answers, settled []attack.Answer) []winner {
	var out []winner
	seen := map[string]bool{}
	for _, a := range append(slices.Clone(answers), settled...) {
		if a.Status != http.StatusAccepted || a.OrderID == "" || seen[a.OrderID] {
			continue
		}
		seen[a.OrderID] = true
		out = append(out, winner{Attempt: a.Attempt, orderID: a.OrderID, accepted: a.Sent.Add(a.Latency)})
	}
	return out
}

// choosePayers says which of n winners pay: round(fraction × n) of them, spread evenly over the
// n (winner i pays when ⌊(i+1)k/n⌋ > ⌊ik/n⌋), so that payers and non-payers alike come from the
// whole attack and from every replica.
func choosePayers(n int, fraction float64) []bool {
	k := int(fraction*float64(n) + 0.5)
	k = max(0, min(k, n))
	pays := make([]bool, n)
	for i := range n {
		pays[i] = (i+1)*k/n > i*k/n
	}
	return pays
}

// Run is the payment phase of sr, the judged attack on one strategy (answers and settled
// are that attack's). It adds sr.Payment, the violations it finds, the oversell it sees, and the
// final audit's facts (sr.Facts). An error means the phase could not be run (the run ended, a
// read failed, the replicas' window is too long to wait out); what it finds broken are
// violations, and so is a window that ran out before the attack's queue drained.
func Run(ctx context.Context, db *sql.DB, o *attack.Options, po Options, runID string, sr *attack.StrategyReport, answers, settled []attack.Answer, say func(string, ...any)) error {
	p := &attack.PaymentReport{}
	sr.Payment = p
	if p.Skipped = skipPayment(po, sr, say); p.Skipped != "" {
		return nil
	}
	pid, hc := sr.ProductID, PayClient(o)
	w1, f1, backOK, err := payFirstWave(ctx, db, hc, o, po, sr, p, answers, settled, say)
	if err != nil {
		return err
	}
	w := &p.Second
	w2, orders2, broken2, err := runSecondWave(ctx, db, hc, o, po.SecondWave, runID, sr, w, f1, say)
	if err != nil {
		return err
	}
	deadline := time.Now()
	if w.Pay.Paid < len(w2) { // an unpaid order of the second wave expires too: wait for its return
		deadline = attack.Latest(deadline, latestExpiry(orders2))
	}
	final, finalOK, err := waitSettled(ctx, db, pid, deadline.Add(o.DrainTimeout))
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(w1)+len(w2))
	for _, w := range append(slices.Clone(w1), w2...) {
		ids = append(ids, w.orderID)
	}
	missing, unexpected, err := audit.CompareAccepted(ctx, db, pid, ids)
	if err != nil {
		return err
	}

	sr.Violations = append(sr.Violations, broken2...)
	e := paymentEvidence{
		winners1: len(w1), paid1: p.First.Paid, afterWindow: f1, backOK: backOK,
		units2: w.Units, buyers2: w.Buyers, accepted2: w.Accepted, paid2: w.Pay.Paid,
		final: final, finalOK: finalOK, missing: missing, unexpected: unexpected,
		problems: append(slices.Clone(p.First.Problems), w.Pay.Problems...),
		gaveUp:   p.First.GaveUp + w.Pay.GaveUp,
		timeout:  o.DrainTimeout,
	}
	sr.Oversold = max(sr.Oversold, e.oversold())
	sr.Violations = append(sr.Violations, paymentViolations(e, sr.Oversold)...)
	sr.Facts = final
	return nil
}

// skipPayment says why sr's strategy gets no payment phase, having said so with say, or "" when
// it gets one.
func skipPayment(po Options, sr *attack.StrategyReport, say func(string, ...any)) string {
	if slices.Contains(po.Skip, sr.Strategy) {
		say("%s: no payment phase (-pay-skip %s)", sr.Strategy, strings.Join(po.Skip, ","))
		return "-pay-skip"
	}
	if sr.Facts.ClosedUnits > 0 {
		// Units came back during the attack and were sold again: the phase has no first wave to
		// judge, and auditDatabase has said so (a violation). The unsafe control may get here on
		// its own (its oversold orders expire while its slow attack still runs); its verdict
		// stands on its oversell.
		say("%s: no payment phase: %d units expired during the attack", sr.Strategy, sr.Facts.ClosedUnits)
		return "the window ran out during the attack"
	}
	return ""
}

// payFirstWave plays the first wave of the payment phase: a share of the attack's winners pays,
// the others let the window run out. It fills p's first-wave fields and returns the winners, the
// database once the unpaid units came back (backOK: all of them before the timeout), after the
// pause that lets the restock settle.
func payFirstWave(ctx context.Context, db *sql.DB, hc *http.Client, o *attack.Options, po Options, sr *attack.StrategyReport, p *attack.PaymentReport, answers, settled []attack.Answer, say func(string, ...any)) (w1 []winner, f1 audit.Facts, backOK bool, err error) {
	w1 = WinnersOf(answers, settled)
	orders1, err := readOrders(ctx, hc, o, w1)
	if err != nil {
		return nil, f1, false, err
	}
	p.WindowSeconds = windowOf(w1, orders1)
	last := latestExpiry(orders1)
	if wait := time.Until(last); wait > po.MaxWait {
		return nil, f1, false, fmt.Errorf("the replicas' orders wait %s more for payment, longer than -pay-max-wait %s: restart the replicas with a short window "+
			"(make down && SECKILL_PAYMENT_WINDOW=10s make up)", wait.Round(time.Second), po.MaxWait)
	}
	p.First = payAll(ctx, hc, o, w1, orders1, choosePayers(len(w1), po.Share))
	say("%s: payment: %d orders, window ≈ %.1f s; %d paid, %d declines, %d late; waiting for the rest to expire",
		sr.Strategy, len(w1), p.WindowSeconds, p.First.Paid, p.First.Declined, p.First.Late)
	if err := ctx.Err(); err != nil {
		return nil, f1, false, err
	}
	begun := time.Now()
	f1, backOK, err = waitSettled(ctx, db, sr.ProductID, attack.Latest(last, time.Now()).Add(o.DrainTimeout))
	if err != nil {
		return nil, f1, false, err
	}
	p.WaitSeconds = time.Since(begun).Seconds()
	p.Expired, p.Returned = f1.ClosedUnits, f1.ReturnedUnits
	say("%s: %d units expired, %d back in stock after %.1f s; second wave in %s", sr.Strategy, p.Expired, p.Returned, p.WaitSeconds, restockSettle)
	if err := pause.For(ctx, restockSettle); err != nil {
		return nil, f1, false, err
	}
	return w1, f1, backOK, nil
}

// runSecondWave sells the units that came back (back.Stock) to new buyers, whose winners all
// pay. It fills w and returns the wave's winners, their orders, and the violations it saw in the
// wave's answers, for the caller to add once the final audit has been read.
func runSecondWave(ctx context.Context, db *sql.DB, hc *http.Client, o *attack.Options, buyers2 int, runID string, sr *attack.StrategyReport, w *attack.WaveReport, back audit.Facts, say func(string, ...any)) ([]winner, []orderView, []string, error) {
	pid := sr.ProductID
	w.Units = back.Stock
	w.Buyers = buyers2
	if w.Buyers == 0 {
		// The unsafe control's stock after its returns can be anything: its wave is bounded by
		// the first one.
		w.Buyers = max(min(20*w.Units, o.Buyers), 100)
	}
	o2 := *o
	o2.Buyers, o2.During = w.Buyers, nil
	plan := attack.PlanAttempts(&o2, runID+"w2", sr.Strategy)
	answers2, _, err := attack.Attack(ctx, &o2, pid, plan, say)
	if err != nil {
		return nil, nil, nil, err
	}
	settled2, stuck2 := attack.Settle(ctx, &o2, pid, answers2)
	t2, accepted2 := attack.TallyAnswers(answers2, settled2, w.Units, nil)
	w.Requests, w.Accepted, w.Outcomes = t2.Requests, t2.Accepted, t2.Outcomes
	w2 := WinnersOf(answers2, settled2)
	if _, _, err := attack.WaitDrained(ctx, db, pid, back.Reservations+len(accepted2), o.DrainTimeout); err != nil {
		return nil, nil, nil, err
	}
	orders2, err := readOrders(ctx, hc, o, w2)
	if err != nil {
		return nil, nil, nil, err
	}
	w.Pay = payAll(ctx, hc, o, w2, orders2, choosePayers(len(w2), 1))
	say("%s: second wave: %d units, %d buyers, %d accepted, %d paid; final audit", sr.Strategy, w.Units, w.Buyers, w.Accepted, w.Pay.Paid)
	if err := ctx.Err(); err != nil {
		return nil, nil, nil, err
	}
	var broken []string
	for _, v := range t2.Violations {
		broken = append(broken, "second wave: "+v)
	}
	if t2.Requests != len(plan) {
		broken = append(broken, fmt.Sprintf("second wave: %d requests planned, %d answered", len(plan), t2.Requests))
	}
	if v := attack.StuckViolation(stuck2); v != "" {
		broken = append(broken, "second wave: "+v)
	}
	return w2, orders2, broken, nil
}

// paymentEvidence is what the payment phase saw: the answers' side and the database's.
type paymentEvidence struct {
	winners1, paid1 int         // the first wave's orders, and those its payers were told were paid
	afterWindow     audit.Facts // the database once the first wave's window ran out
	backOK          bool        // every unpaid unit of the first wave came back before the timeout
	units2          int         // on sale when the second wave began
	buyers2         int
	accepted2       int         // the second wave's orders
	paid2           int         // of them, those its payers were told were paid
	final           audit.Facts // the database at the end
	finalOK         bool        // every order settled (paid, or expired and returned) before the timeout
	missing         []string    // orders acknowledged to a buyer that the database does not hold
	unexpected      []string    // orders the database holds that no buyer was told of
	problems        []string    // answers no payment should get
	gaveUp          int         // payments of unknown outcome
	timeout         time.Duration
}

// oversold is the oversell the phase sees: the database's at both audits, the second wave's
// acceptances beyond the units on sale, and the units the buyers hold at the end by what they
// were told (every acknowledged purchase, less the units of the orders that expired) beyond the
// initial stock.
func (e paymentEvidence) oversold() int {
	held := e.winners1 + e.accepted2 - e.final.ClosedUnits
	return max(0, e.afterWindow.Oversold(), e.final.Oversold(), e.accepted2-e.units2, held-e.final.InitialStock)
}

// paymentViolations are the invariants of the payment phase that e breaks: every unpaid unit came
// back once (and only the unpaid ones), the second wave took all of them and no more, every
// payment the buyers were told of is a paid order with its charge and no other charge succeeded,
// and every order of both waves is accounted for (audit.Facts.Violations, dbViolations).
// oversold is the run's; it excuses units left unsold (the unsafe control's stock is anything).
func paymentViolations(e paymentEvidence, oversold int) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	a := e.afterWindow
	if !e.backOK {
		add("NOT RETURNED in time: %s after the window ran out, %d units still await payment and %d of %d expired units are back in stock",
			e.timeout, a.ReservedUnits-a.PaidUnits-a.ClosedUnits, a.ReturnedUnits, a.ClosedUnits)
	}
	if unpaid := e.winners1 - e.paid1; a.ClosedUnits != unpaid {
		add("the first wave left %d orders unpaid, but %d units expired", unpaid, a.ClosedUnits)
	}
	if !e.finalOK {
		add("the second wave's orders did not settle within %s: %d units await payment, %d of %d expired units are back in stock",
			e.timeout, e.final.ReservedUnits-e.final.PaidUnits-e.final.ClosedUnits, e.final.ReturnedUnits, e.final.ClosedUnits)
	}
	// The order queue drained (every reservation has its order) is what dbViolations asks: then
	// a unit not back in stock is NOT RETURNED, however long the wait for it was.
	queueDrained := e.final.Orders == e.final.Reservations && e.final.OrderUnits == e.final.ReservedUnits
	v = append(v, attack.DbViolations(attack.DbEvidence{Facts: e.final, Drained: queueDrained, Missing: e.missing, Unexpected: e.unexpected}, oversold, 0, e.timeout)...)
	if told := e.paid1 + e.paid2; told != e.final.PaidUnits {
		add("the payers were told %d orders were paid; the database holds %d paid units", told, e.final.PaidUnits)
	}
	// The units that came back and were not sold again: the stock left, less the units of the
	// second wave's own orders that expired (their buyers could not pay in time).
	if left := e.final.Stock - (e.final.ClosedUnits - a.ClosedUnits); oversold == 0 && e.buyers2 > e.units2 && left > 0 {
		add("UNDERSOLD: %d of the %d units that came back were not sold again although %d second-wave buyers came", left, e.units2, e.buyers2)
	}
	for _, p := range e.problems {
		add("%s", p)
	}
	if e.gaveUp > 0 {
		add("%d payments still of unknown outcome after %d tries each", e.gaveUp, payTries)
	}
	return v
}

// waitSettled waits until deadline for every reservation of the product to have its order, no
// unit to await payment (queued, confirmed or paying) and every expired or cancelled unit to be
// back in stock, and returns the last facts seen and whether it got there. Only ctx ending, or
// a failed read, is an error.
func waitSettled(ctx context.Context, db *sql.DB, productID int64, deadline time.Time) (audit.Facts, bool, error) {
	for {
		f, err := audit.Load(ctx, db, productID)
		if err != nil {
			return f, false, err
		}
		if f.Drained() && f.ReservedUnits == f.PaidUnits+f.ClosedUnits {
			return f, true, nil
		}
		if time.Now().After(deadline) {
			return f, false, nil
		}
		if err := pause.For(ctx, PollEvery); err != nil {
			return f, false, err
		}
	}
}

// orderView is an order as GET /api/v1/orders/{id} shows it.
type orderView struct {
	Status    string    `json:"status"`
	ExpiresAt time.Time `json:"expires_at"`
}

// readOrders reads the order of every winner, waiting up to o.drainTimeout for each to leave
// queued. An order the API does not know reads as status "missing", one that stayed queued as
// "queued". Only ctx ending is an error.
func readOrders(ctx context.Context, hc *http.Client, o *attack.Options, ws []winner) ([]orderView, error) {
	out := make([]orderView, len(ws))
	deadline := time.Now().Add(o.DrainTimeout)
	forEach(ctx, len(ws), o.Workers, func(i int) {
		for try := 0; ; try++ {
			v, status := getOrder(ctx, hc, o.Targets[(ws[i].Buyer+try)%len(o.Targets)], ws[i])
			switch {
			case status == http.StatusNotFound:
				v.Status = "missing"
			case status == http.StatusOK && v.Status != string(sale.StatusQueued):
			case time.Now().Before(deadline) && pause.For(ctx, PollEvery) == nil:
				continue
			default:
				v.Status = string(sale.StatusQueued)
			}
			out[i] = v
			return
		}
	})
	return out, ctx.Err()
}

// getOrder reads w's order as its buyer: the token when the replicas verify buyers, the user_id
// of the query otherwise (an order is its buyer's alone: anyone else gets 404).
func getOrder(ctx context.Context, hc *http.Client, target string, w winner) (orderView, int) {
	var v orderView
	req, err := client.NewGetOrderRequest(target, w.orderID, &client.GetOrderParams{UserID: &w.User})
	if err != nil {
		return v, 0
	}
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	res, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		return v, 0
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 8192))
	if res.StatusCode == http.StatusOK && json.Unmarshal(data, &v) != nil {
		return v, 0
	}
	return v, res.StatusCode
}

// windowOf is the payment window as the orders show it (PaymentReport.WindowSeconds), 0 when no
// order has an expires_at.
func windowOf(ws []winner, orders []orderView) float64 {
	least := time.Duration(-1)
	for i, v := range orders {
		if v.ExpiresAt.IsZero() {
			continue
		}
		if d := v.ExpiresAt.Sub(ws[i].accepted); least < 0 || d < least {
			least = d
		}
	}
	return max(least, 0).Seconds()
}

// latestExpiry is the last expires_at of orders (zero when none has one).
func latestExpiry(orders []orderView) time.Time {
	var t time.Time
	for _, v := range orders {
		t = attack.Latest(t, v.ExpiresAt)
	}
	return t
}

// payAll pays the orders of the winners ws whose pays is true, o.workers at a time, and tallies
// what their payers were told. A payer whose order has expired already is late and sends
// nothing; one whose order is missing or still queued is a problem.
func payAll(ctx context.Context, hc *http.Client, o *attack.Options, ws []winner, orders []orderView, pays []bool) attack.PayTally {
	t := attack.PayTally{Orders: len(ws), Answers: map[string]int{}}
	var mu sync.Mutex
	forEach(ctx, len(ws), o.Workers, func(i int) {
		if !pays[i] {
			return
		}
		var r PayResult
		switch orders[i].Status {
		case string(sale.StatusConfirmed):
			r = PayOne(ctx, hc, o.Targets, ws[i])
		case string(sale.StatusExpired):
			r = PayResult{Outcome: "late"}
		default:
			r = PayResult{Outcome: "unexpected", Problem: fmt.Sprintf("order %s of buyer %d is %s when its buyer comes to pay", ws[i].orderID, ws[i].Buyer, orders[i].Status)}
		}
		mu.Lock()
		defer mu.Unlock()
		tally(&t, r)
	})
	return t
}

// PayResult is one payer's payments: how they ended (paid, late, gave_up, unexpected, with
// problem in words), and the answers on the way.
type PayResult struct {
	Outcome           string
	Problem           string
	Declined, Retried int
	Answers           map[string]int
}

// PayOne pays w's order as a careful client does: one Idempotency-Key per payment, sent again
// with the same key while the outcome is unknown (no answer, 5xx, 429) or the API says to wait
// (a payment in progress, the order not confirmed yet), and a new key after a decline, until the
// order is paid or has expired.
func PayOne(ctx context.Context, hc *http.Client, targets []string, w winner) PayResult {
	r := PayResult{Answers: map[string]int{}}
	for k := 1; k <= maxPayKeys; k++ {
		key := fmt.Sprintf("%s-pay%d", w.User, k)
		for try := 0; ; try++ {
			if try == payTries || ctx.Err() != nil {
				r.Outcome = "gave_up"
				return r
			}
			if try > 0 {
				r.Retried++
				if pause.For(ctx, PollEvery) != nil {
					continue
				}
			}
			status, code, paid := postPay(ctx, hc, targets[(w.Buyer+try)%len(targets)], w, key)
			out := payOutcome(status, code, paid)
			r.Answers[out]++
			switch out {
			case "paid":
				r.Outcome = "paid"
				return r
			case string(sale.CodeOrderExpired):
				r.Outcome = "late"
				return r
			case string(sale.CodePaymentDeclined):
				r.Declined++
			case "transport_error", string(sale.CodeUnavailable), string(sale.CodeRateLimited),
				string(sale.CodePaymentInProgress), string(sale.CodeOrderNotConfirmed):
				continue
			default:
				r.Outcome = "unexpected"
				r.Problem = fmt.Sprintf("payment of order %s by buyer %d: unexpected answer %d %s", w.orderID, w.Buyer, status, code)
				return r
			}
			break // declined: the next payment, with a new key
		}
	}
	r.Outcome = "gave_up"
	return r
}

// payOutcome names an answer to a payment: paid (200 with the order paid), the API's error code,
// transport_error (no answer, or a proxy's 502/504 without one), or other.
func payOutcome(status int, code string, paid bool) string {
	switch {
	case status == http.StatusOK && paid:
		return "paid"
	case status == 0, (status == http.StatusBadGateway || status == http.StatusGatewayTimeout) && code == "":
		return "transport_error"
	case status == http.StatusPaymentRequired && code == string(sale.CodePaymentDeclined),
		status == http.StatusConflict && code != "",
		status == http.StatusServiceUnavailable && code == string(sale.CodeUnavailable),
		status == http.StatusTooManyRequests && code == string(sale.CodeRateLimited):
		return code
	}
	return "other"
}

// postPay sends one payment of w's order with key and returns the answer's status, its error
// code, and whether it shows the order paid.
func postPay(ctx context.Context, hc *http.Client, target string, w winner, key string) (status int, code string, paid bool) {
	req, err := client.NewPayOrderRequest(target, w.orderID, &client.PayOrderParams{IdempotencyKey: key}, client.OrderBuyer{UserID: &w.User})
	if err != nil {
		return 0, "", false
	}
	if w.Token != "" {
		req.Header.Set("Authorization", "Bearer "+w.Token)
	}
	res, err := hc.Do(req.WithContext(ctx))
	if err != nil {
		return 0, "", false
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 8192))
	var b struct { // an Order, or an Error
		Status client.OrderStatus `json:"status"`
		Error  client.ErrorDetail `json:"error"`
	}
	_ = json.Unmarshal(data, &b)
	return res.StatusCode, string(b.Error.Code), b.Status == client.OrderStatus(sale.StatusPaid)
}

// PayClient is the HTTP client of the payment phase: keep-alive connections for o.workers
// requests in flight.
func PayClient(o *attack.Options) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Workers}}
}

// forEach calls fn(i) for every i below n, workers at a time, and returns once every call has;
// calls not begun when ctx ends are not made.
func forEach(ctx context.Context, n, workers int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(workers, 1), n) {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

// tally adds r, one payer's payments, to t.
func tally(t *attack.PayTally, r PayResult) {
	t.Payers++
	t.Declined += r.Declined
	t.Retried += r.Retried
	for out, n := range r.Answers {
		t.Answers[out] += n
	}
	switch r.Outcome {
	case "paid":
		t.Paid++
	case "late":
		t.Late++
	case "gave_up":
		t.GaveUp++
	default:
		t.Problems = append(t.Problems, r.Problem)
	}
}
