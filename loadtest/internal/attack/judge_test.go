package attack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
)

func TestSoldOutRate(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	// One answer every 10 ms for 2 s, each taking 5 ms; the product sold out at 1 s.
	var answers []Answer
	for i := range 200 {
		answers = append(answers, Answer{Sent: start.Add(time.Duration(i) * 10 * time.Millisecond), Latency: 5 * time.Millisecond})
	}
	soldOut, end := start.Add(time.Second), start.Add(1995*time.Millisecond)
	// Answers at 1.005 s … 1.995 s: 100 of them in 0.995 s.
	if got, want := soldOutRate(answers, soldOut, end), 100/0.995; got < want-0.01 || got > want+0.01 {
		t.Errorf("soldOutRate = %.2f, want %.2f", got, want)
	}
	// A tail too short to be a rate: sold out with the last answers.
	if got := soldOutRate(answers, start.Add(1900*time.Millisecond), end); got != 0 {
		t.Errorf("soldOutRate of a 0.1 s tail = %.1f, want 0 (no rate)", got)
	}
	if got := soldOutRate(answers[:20], start, start.Add(time.Second)); got != 0 {
		t.Errorf("soldOutRate of 20 answers = %.1f, want 0 (too few)", got)
	}
}

func TestTimeline(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	at := func(ms int, status int, replayed bool) Answer {
		return Answer{Sent: start.Add(time.Duration(ms) * time.Millisecond), Latency: 10 * time.Millisecond, Status: status, Replayed: replayed}
	}
	got := timeline([]Answer{at(0, 202, false), at(50, 409, false), at(250, 202, true), at(260, 202, false)}, start)
	want := []Sample{
		{T: 0, Requests: 2, Accepted: 1, P50: 10, P99: 10},
		{T: 0.1},
		{T: 0.2, Requests: 2, Accepted: 1, P50: 10, P99: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("timeline (-want +got):\n%s", diff)
	}
}

func TestPlanAttempts(t *testing.T) {
	o := &Options{Buyers: 2, Attempts: 3, Targets: []string{"http://a", "http://b"}}
	plan := PlanAttempts(o, "20261122-000000", "mysql")
	var got []string
	for _, a := range plan {
		got = append(got, a.target+" "+a.User+" "+a.key)
	}
	want := []string{
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k1",
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k1",
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k2",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k1",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k1",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
}

func TestK6Accepted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n, err := k6Accepted(write("a.json", `{"metrics":{"seckill_accepted":{"type":"counter","values":{"count":42,"rate":3.5}}}}`)); err != nil || n != 42 {
		t.Fatalf("k6Accepted = %d, %v; want 42", n, err)
	}
	if n, err := k6Accepted(write("b.json", `{"metrics":{}}`)); err != nil || n != 0 {
		t.Fatalf("k6Accepted without the counter = %d, %v; want 0", n, err)
	}
	if _, err := k6Accepted(write("c.json", `not json`)); err == nil {
		t.Fatal("k6Accepted accepted a broken summary")
	}
}

// TestJudgeEndsWithTheRun: a run ended during the audit (Ctrl-C) ends the audit with the run's
// error, at once, instead of a verdict on a queue it did not wait for.
func TestJudgeEndsWithTheRun(t *testing.T) {
	db, err := OpenDB("root:@tcp(127.0.0.1:1)/none") // never reached: the context ends first
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := &Options{Stock: 1, Buyers: 1, DrainTimeout: time.Minute}
	start := time.Now()
	sr, err := Judge(ctx, db, o, "mysql", 1, nil, nil, nil, nil)
	if !errors.Is(err, context.Canceled) || sr != nil {
		t.Fatalf("judge after the run ended = %v, %v; want no report and context.Canceled", sr, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("judge took %s to notice the run ended", d)
	}
}

func TestTallyAnswers(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	// at is buyer's try n (3: the second purchase, with a key of its own), sent ms after start
	// and answered 10 ms later.
	at := func(buyer, n, ms, status int, code, orderID string) Answer {
		key := fmt.Sprintf("b%d-k1", buyer)
		if n == 3 {
			key = fmt.Sprintf("b%d-k2", buyer)
		}
		return Answer{Attempt: Attempt{Buyer: buyer, n: n, key: key}, Sent: start.Add(time.Duration(ms) * time.Millisecond),
			Latency: 10 * time.Millisecond, Status: status, Code: code, OrderID: orderID}
	}
	replayed := func(a Answer) Answer { a.Replayed = true; return a }
	failed := func(a Answer, err string) Answer { a.err = err; return a }

	// tally is the part of the report tallyAnswers fills in that the cases check.
	type tally struct {
		Requests, Accepted      int
		Lost                    int
		AcceptedIDs             []string
		Outcomes                map[string]int
		Status                  map[int]int
		Seconds, SellOutSeconds float64
		Violations              []string
	}
	for _, tc := range []struct {
		name             string
		answers, settled []Answer
		stock            int
		lost             map[string]bool
		want             tally
	}{
		{
			name: "a clean attack, out of order",
			answers: []Answer{
				at(2, 1, 4, 409, "sold_out", ""),
				at(0, 1, 0, 202, "", "o1"),
				replayed(at(0, 2, 1, 202, "", "o1")),
				at(0, 3, 2, 409, "limit_reached", ""),
				failed(at(3, 1, 5, 0, "", ""), "connection refused"),
				at(1, 1, 3, 202, "", "o2"),
			},
			settled: []Answer{at(3, 1, 500, 409, "sold_out", "")},
			stock:   2,
			want: tally{
				Requests: 6, Accepted: 2, AcceptedIDs: []string{"o1", "o2"},
				Outcomes: map[string]int{"accepted": 2, "replayed": 1, "limit_reached": 1, "sold_out": 1, "transport_error": 1, "settled_after_attack": 1},
				Status:   map[int]int{202: 3, 409: 2, 0: 1},
				Seconds:  0.015, SellOutSeconds: 0.013,
			},
		},
		{
			name:    "a purchase settled after the attack counts as accepted, not as a request",
			answers: []Answer{at(0, 1, 0, 202, "", "o1"), failed(at(1, 1, 1, 0, "", ""), "EOF")},
			settled: []Answer{at(1, 1, 300, 202, "", "o2")},
			stock:   2,
			want: tally{
				Requests: 2, Accepted: 2, AcceptedIDs: []string{"o1", "o2"},
				Outcomes: map[string]int{"accepted": 1, "transport_error": 1, "settled_after_attack": 1},
				Status:   map[int]int{202: 1, 0: 1},
				Seconds:  0.011, SellOutSeconds: 0.010,
			},
		},
		{
			name: "every violation the answers can show",
			answers: []Answer{
				at(0, 1, 0, 202, "", "o1"),
				at(0, 2, 1, 202, "", "o9"), // the retry told of another order
				failed(at(1, 1, 2, 500, "", ""), "boom"),
				at(2, 1, 3, 202, "", "o3"),
			},
			stock: 2,
			want: tally{
				Requests: 4, Accepted: 3, AcceptedIDs: []string{"o1", "o9", "o3"},
				Outcomes: map[string]int{"accepted": 3, "other": 1, "settled_after_attack": 0},
				Status:   map[int]int{202: 3, 500: 1},
				Seconds:  0.013, SellOutSeconds: 0.013,
				Violations: []string{
					"buyer 0's retry with the same Idempotency-Key got order o9, the first answer was o1",
					"a 500 answered buyer 1: boom",
					"unexpected answer to buyer 1: 500  boom",
					"buyer 0 was accepted 2 times (limit 1)",
					"OVERSOLD: 3 purchases accepted for 2 units",
				},
			},
		},
		{
			// Redis emptied after o1 and o2 were accepted, o1 still only in its stream: buyer 0's
			// retry and second purchase are accepted anew (o4), o1's unit sold again (o3).
			name: "a lost purchase, its buyer's next ones and its unit sold again",
			answers: []Answer{
				at(0, 1, 0, 202, "", "o1"),
				at(1, 1, 1, 202, "", "o2"),
				at(0, 2, 2, 202, "", "o4"),
				at(0, 3, 3, 409, "limit_reached", ""),
				at(2, 1, 4, 202, "", "o3"),
			},
			stock: 3,
			lost:  map[string]bool{"o1": true},
			want: tally{
				Requests: 5, Accepted: 4, Lost: 1, AcceptedIDs: []string{"o2", "o4", "o3"},
				Outcomes: map[string]int{"accepted": 4, "limit_reached": 1, "settled_after_attack": 0},
				Status:   map[int]int{202: 4, 409: 1},
				Seconds:  0.014, SellOutSeconds: 0.014,
			},
		},
		{
			name: "a loss excuses no sale beyond it",
			answers: []Answer{
				at(0, 1, 0, 202, "", "o1"),
				at(1, 1, 1, 202, "", "o2"),
				at(2, 1, 2, 202, "", "o3"),
			},
			stock: 1,
			lost:  map[string]bool{"o1": true},
			want: tally{
				Requests: 3, Accepted: 3, Lost: 1, AcceptedIDs: []string{"o2", "o3"},
				Outcomes: map[string]int{"accepted": 3, "settled_after_attack": 0},
				Status:   map[int]int{202: 3},
				Seconds:  0.012, SellOutSeconds: 0.012,
				Violations: []string{"OVERSOLD: 3 purchases accepted for 1 units, beyond the 1 lost"},
			},
		},
		{
			name:  "no answers",
			stock: 2,
			want:  tally{Outcomes: map[string]int{"settled_after_attack": 0}, Status: map[int]int{}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr, accepted := TallyAnswers(tc.answers, tc.settled, tc.stock, tc.lost)
			got := tally{
				Requests: sr.Requests, Accepted: sr.Accepted, Lost: sr.Lost, AcceptedIDs: accepted,
				Outcomes: sr.Outcomes, Status: sr.Status,
				Seconds: sr.Seconds, SellOutSeconds: sr.SellOutSeconds,
				Violations: sr.Violations,
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("tallyAnswers (-want +got):\n%s", diff)
			}
			if n := sr.Latency["all"].Count; n != len(tc.answers) {
				t.Errorf("latency of all answers counts %d, want %d", n, len(tc.answers))
			}
		})
	}
}

func TestDBViolations(t *testing.T) {
	// sound is a product of 2 units that sold out, every purchase ordered.
	sound := audit.Facts{InitialStock: 2, Stock: 0, PerUserLimit: 1, Reservations: 2, ReservedUnits: 2, Orders: 2, OrderUnits: 2}
	with := func(f audit.Facts, change func(*audit.Facts)) audit.Facts { change(&f); return f }
	oneLeft := with(sound, func(f *audit.Facts) { f.Stock, f.Reservations, f.ReservedUnits, f.Orders, f.OrderUnits = 1, 1, 1, 1, 1 })
	for _, tc := range []struct {
		name      string
		evidence  DbEvidence
		oversold  int
		buyers    int
		violation []string
	}{
		{"sound", DbEvidence{Facts: sound, Drained: true}, 0, 10, nil},
		{
			"the queue did not drain: a missing order may still come",
			DbEvidence{Facts: with(sound, func(f *audit.Facts) { f.Orders, f.OrderUnits = 1, 1 }), Missing: []string{"o2"}},
			0, 10,
			[]string{"the order queue did not drain within 2m0s: 2 reservations, 1 orders"},
		},
		{
			"acknowledged, never ordered",
			DbEvidence{Facts: oneLeft, Drained: true, Missing: []string{"o2", "o3"}},
			0, 1,
			[]string{"2 accepted purchases have no order (first: o2)"},
		},
		{
			"ordered, never acknowledged",
			DbEvidence{Facts: sound, Drained: true, Unexpected: []string{"o7", "o8"}},
			0, 10,
			[]string{"2 orders were never acknowledged to a buyer (first: o7)"},
		},
		{
			"undersold",
			DbEvidence{Facts: oneLeft, Drained: true},
			0, 10,
			[]string{"UNDERSOLD: 1 of 2 units left although 10 buyers came"},
		},
		{
			"acknowledged, then refused: ordered as refused, no unit",
			DbEvidence{Facts: with(sound, func(f *audit.Facts) { f.Refused, f.RefusedUnits = 1, 1 }), Drained: true},
			0, 10,
			[]string{"1 accepted purchases were refused when they were recorded (refused orders: the redis-lua state went backwards)"},
		},
		{"stock left, but no more buyers than units", DbEvidence{Facts: oneLeft, Drained: true}, 0, 2, nil},
		{"stock left on an oversold product is not an undersell", DbEvidence{Facts: oneLeft, Drained: true}, 3, 10, nil},
		{
			"the facts' own violations, after the drain's",
			DbEvidence{Facts: with(sound, func(f *audit.Facts) { f.Orders, f.OrderUnits, f.UsersOverLimit = 1, 1, 1 })},
			0, 10,
			[]string{
				"the order queue did not drain within 2m0s: 2 reservations, 1 orders",
				"1 users hold more than the per-user limit of 1",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DbViolations(tc.evidence, tc.oversold, tc.buyers, 2*time.Minute)
			if diff := cmp.Diff(tc.violation, got); diff != "" {
				t.Errorf("dbViolations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	const controlMissed = "the unsafe control did not oversell: the run could not have caught an oversell"
	broken := []string{"OVERSOLD: 3 purchases accepted for 2 units"}
	for _, tc := range []struct {
		name           string
		strategy       string
		oversold       int
		violations     []string
		want           string
		wantViolations []string
	}{
		{"a safe strategy without violations passes", "mysql", 0, nil, "PASS", nil},
		{"a safe strategy with one fails", "redis", 0, []string{"a 500 answered buyer 1: boom"}, "FAIL", []string{"a 500 answered buyer 1: boom"}},
		{"a safe strategy that oversold fails", "zk", 1, broken, "FAIL", broken},
		{"the control caught overselling", UnsafeStrategy, 1, broken, "OVERSOLD", broken},
		{"the control not caught fails the run", UnsafeStrategy, 0, nil, "FAIL", []string{controlMissed}},
		{"the control not caught, with other violations", UnsafeStrategy, 0, []string{"x"}, "FAIL", []string{"x", controlMissed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, violations := Verdict(tc.strategy, tc.oversold, tc.violations)
			if got != tc.want {
				t.Errorf("verdict = %s, want %s", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantViolations, violations); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAuditDatabase reads a product of a real database: a drained product with stock left and
// one purchase acknowledged to a buyer that has no order.
func TestAuditDatabase(t *testing.T) {
	dsn := itest.DatabaseDSN(t)
	db, err := OpenDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := db.ExecContext(ctx, `INSERT INTO products
		(name, price_cents, stock, initial_stock, strategy, sale_starts_at, sale_ends_at, per_user_limit, created_at, updated_at)
		VALUES ('audit', 100, 2, 2, 'mysql', NOW(6), NOW(6) + INTERVAL 1 HOUR, 1, NOW(6), NOW(6))`)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	o := &Options{Buyers: 10, DrainTimeout: 5 * time.Second}

	sr := &StrategyReport{ProductID: id, Accepted: 1}
	got, err := auditDatabase(ctx, db, o, sr, []string{"o1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"1 accepted purchases have no order (first: o1)",
		"UNDERSOLD: 2 of 2 units left although 10 buyers came",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if wantFacts := (audit.Facts{ProductID: id, InitialStock: 2, Stock: 2, PerUserLimit: 1}); sr.Facts != wantFacts || sr.Oversold != 0 {
		t.Errorf("facts %+v, oversold %d; want %+v, 0", sr.Facts, sr.Oversold, wantFacts)
	}

	// More purchases acknowledged than units: the buyers' oversell is the report's.
	sr = &StrategyReport{ProductID: id, Accepted: 5}
	if _, err := auditDatabase(ctx, db, o, sr, nil); err != nil {
		t.Fatal(err)
	}
	if sr.Oversold != 3 {
		t.Errorf("oversold %d, want 3: 5 purchases acknowledged for 2 units", sr.Oversold)
	}
}

// TestFalseSoldOuts: a sold_out that came back before a purchase accepted later was even sent is
// a lie; one that merely arrived before an earlier-sent acceptance's answer is not.
func TestFalseSoldOuts(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	ans := func(sent, took int, status int, code string) Answer {
		return Answer{Sent: t0.Add(ms(sent)), Latency: ms(took), Status: status, Code: code}
	}
	accepted := func(sent, took int) Answer { return ans(sent, took, 202, "") }
	soldOut := func(sent, took int) Answer { return ans(sent, took, 409, "sold_out") }
	for _, c := range []struct {
		name    string
		answers []Answer
		want    int
	}{
		{"sold out at the end", []Answer{accepted(0, 5), accepted(1, 5), soldOut(2, 5), soldOut(9, 1)}, 0},
		{"a sold_out overtaking a slow acceptance sent before it", []Answer{accepted(0, 50), soldOut(2, 3)}, 0},
		{"refused, then a later buyer accepted", []Answer{accepted(0, 5), soldOut(1, 3), accepted(10, 5), soldOut(12, 1)}, 1},
		{"no acceptance at all", []Answer{soldOut(0, 1), soldOut(3, 1)}, 0},
	} {
		if got := falseSoldOuts(c.answers); got != c.want {
			t.Errorf("%s: %d false sold outs, want %d", c.name, got, c.want)
		}
	}
}
