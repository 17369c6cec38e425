package attack

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"time"

	_ "github.com/go-sql-driver/mysql" // the audit reads the database directly

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// UnsafeStrategy is the negative control: it deducts without any exclusion and must oversell.
const UnsafeStrategy = "none"

// OpenDB opens the app's database for the audit.
func OpenDB(dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("audit database: %w", err)
	}
	db.SetMaxOpenConns(4)
	return db, nil
}

// Judge audits one attack from both sides — what the buyers were told and what the database
// holds — and computes the figures of the report: tallyAnswers, then auditDatabase, then verdict.
// lostMay, nil but in a fault that destroys accepted purchases on purpose (redis-flush), are the
// order ids the fault could have destroyed: those of them acknowledged and not in the database
// are lost as that fault promises (lostOrders), and the audit holds the rest to every invariant.
func Judge(ctx context.Context, db *sql.DB, o *Options, strategy string, productID int64, answers, settled []Answer, events []Event, lostMay map[string]bool) (*StrategyReport, error) {
	lost, err := lostOrders(ctx, db, o, productID, answers, settled, lostMay)
	if err != nil {
		return nil, err
	}
	sr, accepted := TallyAnswers(answers, settled, o.Stock, lost)
	sr.Strategy, sr.ProductID, sr.Events = strategy, productID, events
	// A fault that may destroy purchases (lostMay) puts their units back on sale: a sold_out
	// before it is then no lie.
	if n := falseSoldOuts(answers); n > 0 && len(lostMay) == 0 {
		sr.Violations = append(sr.Violations, fmt.Sprintf("UNDERSOLD: %d buyers were told sold_out before a purchase sent later was accepted: "+
			"units were left when they were refused (false sold outs)", n))
	}
	found, err := auditDatabase(ctx, db, o, sr, accepted)
	if err != nil {
		return nil, err
	}
	sr.Violations = append(sr.Violations, found...)
	sr.Verdict, sr.Violations = Verdict(strategy, sr.Oversold, sr.Violations)
	return sr, nil
}

// falseSoldOuts counts the sold_out answers that came back before some purchase that was then
// accepted had even been sent, and returns the latest such sending. Within one sale the stock only
// falls (units come back only through returns, which an attack does not wait for), so a true
// sold_out is final: one followed by an acceptance decided after it was a lie, told while units
// were left — the undersell of a strategy that gives up (capped optimistic retries). It compares a
// refusal's arrival with an acceptance's sending, never two arrivals, so the network's reordering
// cannot make a true sold_out look false.
func falseSoldOuts(answers []Answer) int {
	var lastAcceptedSent time.Time
	for _, a := range answers {
		if a.Outcome() == string(sale.CodeAccepted) && a.Sent.After(lastAcceptedSent) {
			lastAcceptedSent = a.Sent
		}
	}
	n := 0
	for _, a := range answers {
		if a.Code == string(sale.CodeSoldOut) && a.Sent.Add(a.Latency).Before(lastAcceptedSent) {
			n++
		}
	}
	return n
}

// lostOrders returns the order ids among lostMay that a buyer was told were accepted and that
// the database does not hold once its order queue drained: the purchases the fault destroyed.
// Nothing when lostMay is empty, or when the queue did not drain (every missing order is then a
// violation, as without the fault).
func lostOrders(ctx context.Context, db *sql.DB, o *Options, productID int64, answers, settled []Answer, lostMay map[string]bool) (map[string]bool, error) {
	if len(lostMay) == 0 {
		return nil, nil
	}
	var candidates []string
	for _, a := range append(slices.Clone(answers), settled...) {
		if a.Status == http.StatusAccepted && lostMay[a.OrderID] && !slices.Contains(candidates, a.OrderID) {
			candidates = append(candidates, a.OrderID)
		}
	}
	// Which of them are lost is what this finds out: it cannot wait for them all.
	if _, drained, err := WaitDrained(ctx, db, productID, 0, o.DrainTimeout); err != nil || !drained {
		return nil, err
	}
	missing, _, err := audit.CompareAccepted(ctx, db, productID, candidates)
	if err != nil {
		return nil, err
	}
	lost := make(map[string]bool, len(missing))
	for _, id := range missing {
		lost[id] = true
	}
	return lost, nil
}

// TallyAnswers is the buyers' side of an attack: what answers (the attack's) and settled (the
// retries that settled an unknown outcome after it) told them. It returns a report with the
// figures the answers alone give — counts by outcome and status, latencies, the timeline, the
// rates — and the violations they show (a 500, an unexpected answer, a retry told of another
// order, a buyer accepted twice, more purchases accepted than the stock of the product), and the
// distinct order ids acknowledged with a 202, in the order they were first seen. It sorts answers
// by the time they were sent. The 202s of lost orders (lostOrders) count as accepted and lost
// (sr.Lost) and are left out of the rest: their buyers' later purchases and retries, which Redis
// no longer remembered, are judged as first ones, and the units they had are sold again.
func TallyAnswers(answers, settled []Answer, stock int, lost map[string]bool) (*StrategyReport, []string) {
	sr := &StrategyReport{
		Requests: len(answers),
		Outcomes: map[string]int{},
		Status:   map[int]int{},
		Latency:  map[string]Latency{},
	}
	add := func(format string, args ...any) { sr.Violations = append(sr.Violations, fmt.Sprintf(format, args...)) }

	sort.Slice(answers, func(i, j int) bool { return answers[i].Sent.Before(answers[j].Sent) })
	accepted, ordersOfBuyer := tallyOrders(sr, answers, settled, lost, add)
	sr.Accepted = len(accepted) + sr.Lost
	tallyOutcomes(sr, answers, add)
	sr.Outcomes["settled_after_attack"] = len(settled)
	for _, b := range slices.Sorted(maps.Keys(ordersOfBuyer)) {
		if n := len(ordersOfBuyer[b]); n > 1 {
			add("buyer %d was accepted %d times (limit 1)", b, n)
		}
	}
	switch {
	case sr.Accepted-sr.Lost > stock && sr.Lost > 0:
		add("OVERSOLD: %d purchases accepted for %d units, beyond the %d lost", sr.Accepted, stock, sr.Lost)
	case sr.Accepted > stock && sr.Lost == 0:
		add("OVERSOLD: %d purchases accepted for %d units", sr.Accepted, stock)
	}
	return sr, accepted
}

// tallyOrders reads the 202s of answers and then settled: it counts the lost ones in sr.Lost,
// adds (with add) a retry told of another order than its first answer, and returns the other
// distinct order ids in the order first seen, and each buyer's orders.
func tallyOrders(sr *StrategyReport, answers, settled []Answer, lost map[string]bool, add func(string, ...any)) (accepted []string, ordersOfBuyer map[int]map[string]bool) {
	firstSeen := map[string]bool{}
	ordersOfBuyer = map[int]map[string]bool{}
	orderOfKey := map[string]string{}
	for _, a := range append(slices.Clone(answers), settled...) {
		if a.Status == http.StatusAccepted && lost[a.OrderID] {
			if !firstSeen[a.OrderID] {
				firstSeen[a.OrderID] = true
				sr.Lost++
			}
			continue
		}
		if a.Status == http.StatusAccepted {
			if prev, ok := orderOfKey[a.key]; ok && prev != a.OrderID {
				add("buyer %d's retry with the same Idempotency-Key got order %s, the first answer was %s", a.Buyer, a.OrderID, prev)
			}
			orderOfKey[a.key] = a.OrderID
			if ordersOfBuyer[a.Buyer] == nil {
				ordersOfBuyer[a.Buyer] = map[string]bool{}
			}
			ordersOfBuyer[a.Buyer][a.OrderID] = true
			if !firstSeen[a.OrderID] {
				firstSeen[a.OrderID] = true
				accepted = append(accepted, a.OrderID)
			}
		}
	}
	return accepted, ordersOfBuyer
}

// tallyOutcomes counts answers (sorted by the time they were sent) by outcome and status, with
// their latencies, timeline and rates (sr.Accepted already counted), and adds (with add) each
// 500 and each unexpected answer.
func tallyOutcomes(sr *StrategyReport, answers []Answer, add func(string, ...any)) {
	var start, end, lastFirstAccept time.Time
	if len(answers) > 0 {
		start = answers[0].Sent
	}
	byOutcome := map[string][]time.Duration{}
	for _, a := range answers {
		out := a.Outcome()
		if out == "accepted" {
			lastFirstAccept = Latest(lastFirstAccept, a.Sent.Add(a.Latency))
		}
		sr.Outcomes[out]++
		sr.Status[a.Status]++
		byOutcome[out] = append(byOutcome[out], a.Latency)
		byOutcome["all"] = append(byOutcome["all"], a.Latency)
		if t := a.Sent.Add(a.Latency); t.After(end) {
			end = t
		}
		if a.Status == http.StatusInternalServerError {
			add("a 500 answered buyer %d: %s", a.Buyer, a.err)
		}
		if a.Outcome() == "other" {
			add("unexpected answer to buyer %d: %d %s %s", a.Buyer, a.Status, a.Code, a.err)
		}
	}
	for out, lat := range byOutcome {
		sr.Latency[out] = yardstick.Percentiles(lat)
	}
	sr.Timeline = timeline(answers, start)
	if !start.IsZero() {
		sr.Seconds = end.Sub(start).Seconds()
		sr.RequestsPerSec = float64(sr.Requests) / max(sr.Seconds, 1e-9)
		if !lastFirstAccept.IsZero() {
			sr.SellOutSeconds = lastFirstAccept.Sub(start).Seconds()
			sr.AcceptedPerSec = float64(sr.Accepted) / max(sr.SellOutSeconds, 1e-9)
			sr.SoldOutPerSec = soldOutRate(answers, lastFirstAccept, end)
		}
	}
}

// auditDatabase is the database's side of an attack on sr.ProductID: it waits, up to
// o.drainTimeout, for the order queue to drain, then reads the product's rows and its orders. It
// sets sr.Facts and sr.Oversold (the larger of the database's oversell and the buyers': sr.Accepted
// beyond the initial stock) and returns what dbViolations finds in them, and units of orders that
// expired before the audit (a payment window shorter than the attack, under which its checks do
// not hold). accepted are the order ids the buyers were told of (tallyAnswers).
func auditDatabase(ctx context.Context, db *sql.DB, o *Options, sr *StrategyReport, accepted []string) ([]string, error) {
	facts, drained, err := WaitDrained(ctx, db, sr.ProductID, len(accepted), o.DrainTimeout)
	if err != nil {
		return nil, err
	}
	missing, unexpected, err := audit.CompareAccepted(ctx, db, sr.ProductID, accepted)
	if err != nil {
		return nil, err
	}
	sr.Facts = facts
	// A refused order is a 202 the sale did not keep, but no unit: it is reported below, not
	// counted as sold.
	sr.Oversold = max(facts.Oversold(), sr.Accepted-sr.Lost-facts.Refused-facts.InitialStock)
	v := DbViolations(DbEvidence{Facts: facts, Drained: drained, Missing: missing, Unexpected: unexpected},
		sr.Oversold, o.Buyers, o.DrainTimeout)
	if facts.ClosedUnits > 0 {
		// The attack's checks count every acknowledged unit as sold: one that came back and was
		// sold again reads as an oversell, one that came back after it as an undersell.
		v = append(v, fmt.Sprintf("%d units of the attack's orders expired before its queue drained: the replicas' payment window is shorter than the attack, "+
			"and the checks above do not hold (raise SECKILL_PAYMENT_WINDOW or attack with fewer -buyers)", facts.ClosedUnits))
	}
	return v, nil
}

// DbEvidence is what auditDatabase read: the product's facts, whether its order queue drained, and
// the orders compared with the ones the buyers were told of.
type DbEvidence struct {
	Facts      audit.Facts
	Drained    bool
	Missing    []string // order ids acknowledged to a buyer that have no order
	Unexpected []string // orders no buyer was told of
}

// DbViolations are the broken invariants in e: a queue that did not drain within drainTimeout,
// the facts' own (audit.Facts.Violations), a purchase acknowledged but never ordered (once the
// queue drained: before, it may still come), an order nobody was told of, a purchase acknowledged
// and then refused (a refused order: no unit lost, but a 202 not kept), and stock left over
// although more buyers came than units (undersold: units lost) when nothing was oversold.
func DbViolations(e DbEvidence, oversold, buyers int, drainTimeout time.Duration) []string {
	var v []string
	add := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	f := e.Facts
	// Not drained, yet every reservation in MySQL has its order: what is missing never reached
	// MySQL (the wait was for the accepted purchases to arrive there).
	drained := e.Drained || f.Drained()
	if !drained {
		add("the order queue did not drain within %s: %d reservations, %d orders", drainTimeout, f.Reservations, f.Orders)
	}
	v = append(v, f.Violations(drained)...)
	if drained && len(e.Missing) > 0 {
		add("%d accepted purchases have no order (first: %s)", len(e.Missing), e.Missing[0])
	}
	if len(e.Unexpected) > 0 {
		add("%d orders were never acknowledged to a buyer (first: %s)", len(e.Unexpected), e.Unexpected[0])
	}
	if f.Refused > 0 {
		add("%d accepted purchases were refused when they were recorded (refused orders: the redis-lua state went backwards)", f.Refused)
	}
	if buyers > f.InitialStock && f.Stock > 0 && oversold == 0 {
		add("UNDERSOLD: %d of %d units left although %d buyers came", f.Stock, f.InitialStock, buyers)
	}
	return v
}

// ControlMissed is the violation of an unsafe control that did not oversell.
const ControlMissed = "the unsafe control did not oversell: the run could not have caught an oversell"

// Verdict decides a strategy from its violations and its oversell, and returns the violations to
// report. A safe strategy PASSes without violations and FAILs with any. The unsafe control must
// be caught overselling (OVERSOLD: its violations are the evidence); when it was not, it FAILs
// with one violation more, for then the run could not have caught an oversell.
func Verdict(strategy string, oversold int, violations []string) (string, []string) {
	switch {
	case strategy == UnsafeStrategy && oversold > 0:
		return "OVERSOLD", violations
	case strategy == UnsafeStrategy:
		if !slices.Contains(violations, ControlMissed) { // verdict may be asked again with more violations
			violations = append(violations, ControlMissed)
		}
		return "FAIL", violations
	case len(violations) > 0:
		return "FAIL", violations
	}
	return "PASS", violations
}

// WaitDrained waits up to timeout for every reservation of the product to have its order, and
// returns the last facts seen and whether the queue drained. The timeout running out is a finding
// of the audit (drained false, no error); ctx ending — Ctrl-C — is an error, and so is a failed read.
func WaitDrained(ctx context.Context, db *sql.DB, productID int64, accepted int, timeout time.Duration) (audit.Facts, bool, error) {
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	facts, err := audit.WaitDrained(dctx, db, productID, accepted, 100*time.Millisecond)
	switch {
	case err == nil:
		return facts, true, nil
	case ctx.Err() != nil:
		return facts, false, fmt.Errorf("audit of product %d: %w", productID, context.Cause(ctx))
	case errors.Is(err, context.DeadlineExceeded):
		return facts, false, nil
	}
	return facts, false, err
}

// The shortest sold-out tail that soldOutRate calls a rate.
const (
	minSoldOutSeconds = 0.25
	minSoldOutAnswers = 50
)

// soldOutRate is the rate of answers once the product sold out: the answers that arrived after
// soldOut (the moment of the last first-time 202) ÷ the time from soldOut to end (the last
// answer). It is 0 when that tail is shorter than minSoldOutSeconds or minSoldOutAnswers, which
// is no rate at all (the buyers ran out together with the stock).
func soldOutRate(answers []Answer, soldOut, end time.Time) float64 {
	n := 0
	for _, a := range answers {
		if a.Sent.Add(a.Latency).After(soldOut) {
			n++
		}
	}
	secs := end.Sub(soldOut).Seconds()
	if secs < minSoldOutSeconds || n < minSoldOutAnswers {
		return 0
	}
	return float64(n) / secs
}

// Latest is the later of a and b.
func Latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// timeline buckets the answers by when their request was sent.
func timeline(answers []Answer, start time.Time) []Sample {
	if len(answers) == 0 {
		return nil
	}
	var out []Sample
	var lat []time.Duration
	flush := func(i int) {
		l := yardstick.Percentiles(lat)
		out[i].P50, out[i].P99 = l.P50, l.P99
		lat = lat[:0]
	}
	for _, a := range answers {
		i := int(a.Sent.Sub(start) / TimelineStep)
		for len(out) <= i {
			if len(out) > 0 {
				flush(len(out) - 1)
			}
			out = append(out, Sample{T: float64(len(out)) * TimelineStep.Seconds()})
		}
		out[i].Requests++
		if a.Outcome() == "accepted" {
			out[i].Accepted++
		}
		lat = append(lat, a.Latency)
	}
	flush(len(out) - 1)
	return out
}

// AuditOnly drains and audits one product (the k6 run's), reading how many purchases k6 saw
// accepted from its summary when given.
func AuditOnly(ctx context.Context, db *sql.DB, o *AuditOptions, w io.Writer) error {
	k6 := -1 // no summary
	if o.k6Summary != "" {
		n, err := k6Accepted(o.k6Summary)
		if err != nil {
			return err
		}
		k6 = n
	}
	facts, drained, err := WaitDrained(ctx, db, o.productID, max(k6, 0), o.DrainTimeout)
	if err != nil {
		return err
	}
	violations := facts.Violations(drained)
	if !drained {
		violations = append(violations, fmt.Sprintf("the order queue did not drain within %s: %d reservations, %d orders",
			o.DrainTimeout, facts.Reservations, facts.Orders))
	}
	if n := k6; n >= 0 {
		if n != facts.Reservations {
			violations = append(violations, fmt.Sprintf("k6 saw %d purchases accepted, the database holds %d reservations", n, facts.Reservations))
		}
		fmt.Fprintf(w, "k6 accepted: %d\n", n)
	}
	out, _ := json.MarshalIndent(facts, "", "  ")
	fmt.Fprintf(w, "product %d: %s\n", o.productID, out)
	if len(violations) > 0 {
		for _, v := range violations {
			fmt.Fprintln(w, "VIOLATION:", v)
		}
		return cli.Failure(fmt.Sprintf("product %d: %d invariants broken", o.productID, len(violations)))
	}
	fmt.Fprintf(w, "PASS: initial %d, stock %d, reserved %d, ordered %d, oversold %d\n",
		facts.InitialStock, facts.Stock, facts.ReservedUnits, facts.OrderUnits, facts.Oversold())
	return nil
}

// k6Accepted reads the seckill_accepted counter of a k6 JSON summary.
func k6Accepted(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var s struct {
		Metrics map[string]struct {
			Values map[string]float64 `json:"values"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return 0, fmt.Errorf("k6 summary %s: %w", path, err)
	}
	m, ok := s.Metrics["seckill_accepted"]
	if !ok {
		return 0, nil // no purchase was accepted: k6 omits a counter never added to
	}
	return int(m.Values["count"]), nil
}
