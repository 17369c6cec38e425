package proof

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/stacktest"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// TestMain lets the test binary be the bare gin child of the yardsticks.
func TestMain(m *testing.M) { yardstick.Main(m.Run) }

// TestSmoke is the load test in small, inside `make test`: the four safe strategies and the
// unsafe control over three replicas, 50 units, 1,000 buyers each. The safe ones must pass every
// check; the control must be caught overselling — the proof that the auditor catches one.
func TestSmoke(t *testing.T) {
	o, db := threeReplicas(t, "-strategies", "mysql,redis,zk,redis-lua,none",
		"-stock", "50", "-buyers", "1000", "-workers", "32")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, db, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(Markdown(rep))
	if _, err := WriteReport(o.OutDir, rep); err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Strategies {
		switch {
		case s.Strategy == "none" && (s.Verdict != "OVERSOLD" || s.Oversold == 0):
			t.Errorf("none: verdict %s, oversold %d; the auditor must catch the control's oversell", s.Verdict, s.Oversold)
		case s.Strategy != "none" && s.Verdict != "PASS":
			t.Errorf("%s: %s: %q", s.Strategy, s.Verdict, s.Violations)
		case s.Strategy != "none" && (s.Accepted != 50 || s.Facts.Orders != 50):
			t.Errorf("%s: accepted %d, orders %d; want 50 and 50", s.Strategy, s.Accepted, s.Facts.Orders)
		}
	}
	if y := rep.Yardsticks; y == nil || y.R.RowsPerSec <= 0 || y.BareGin.RequestsPerSec <= 0 {
		t.Errorf("yardsticks %+v: want R and the bare gin ceiling measured", y)
	}
	if !rep.Passed {
		t.Error("the run did not pass")
	}
}

// threeReplicas starts three replicas of the app, the unsafe strategies served, on a fresh
// database, and returns the options of a load test of args against them and the database.
func threeReplicas(t *testing.T, args ...string) (*Options, *sql.DB) {
	t.Helper()
	args, db := stacktest.ThreeReplicas(t, args...)
	o, err := Parse(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return o, db
}

// TestBuyerTokens: against a replica that verifies buyer tokens, the load test with
// -buyer-jwt-key signs each buyer's token and passes; without it every purchase is refused 401
// (the control: the tokens are what lets them buy).
func TestBuyerTokens(t *testing.T) {
	const key = "the load test's buyer key, 32 bytes or more"
	stack := apptest.NewStack(t)
	target := stack.Start(t, map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": key}).URL
	run := func(extra ...string) *attack.Report {
		t.Helper()
		o, err := Parse(append([]string{
			"-targets", target, "-strategies", "mysql", "-stock", "20", "-buyers", "200", "-workers", "16",
			"-baseline", "0", "-drain-timeout", "60s", "-admin-token", apptest.AdminToken,
			"-mysql-dsn", stack.DSN, "-out", "", "-quiet",
		}, extra...), func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		db, err := attack.OpenDB(o.MysqlDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rep, err := Run(t.Context(), db, o, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if s := run("-buyer-jwt-key", key).Strategies[0]; s.Verdict != "PASS" || s.Accepted != 20 || s.Facts.Orders != 20 {
		t.Fatalf("with tokens: %s, accepted %d, orders %d, %q; want PASS, 20, 20", s.Verdict, s.Accepted, s.Facts.Orders, s.Violations)
	}
	if s := run().Strategies[0]; s.Accepted != 0 {
		t.Fatalf("without tokens: %d accepted, want none (every purchase 401)", s.Accepted)
	}
}

// TestPaymentPhase is the payment phase in small (-pay 0.5), inside `make test`: three replicas
// with a payment window of a few seconds and a provider that declines a fifth of the charges. For
// every safe strategy half the winners pay, the other half's units come back and a second wave
// takes exactly those, and the final audit is clean; the unsafe control must still be caught.
func TestPaymentPhase(t *testing.T) {
	const stock = 50
	stack, targets := apptest.Cluster(t, 3, map[string]string{
		"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true",
		"SECKILL_PAYMENT_WINDOW":          "10s",
		"SECKILL_EXPIRE_EVERY":            "500ms",
		"SECKILL_PAYMENT_LATENCY":         "20ms",
		"SECKILL_PAYMENT_FAILURE_RATE":    "0.2",
	})
	o, err := Parse([]string{
		"-targets", strings.Join(targets, ","),
		"-strategies", "mysql,redis,zk,redis-lua,none",
		"-stock", fmt.Sprint(stock), "-buyers", "600", "-workers", "32", "-pay", "0.5", "-second-wave", "250",
		"-baseline", "0", "-drain-timeout", "60s",
		"-admin-token", apptest.AdminToken,
		"-mysql-dsn", stack.DSN,
		"-out", "",
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	db, err := attack.OpenDB(o.MysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, db, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(Markdown(rep))
	for _, s := range rep.Strategies {
		p := s.Payment
		switch {
		case p == nil || p.Skipped != "":
			t.Errorf("%s: no payment phase: %+v", s.Strategy, p)
		case s.Strategy == "none" && (s.Verdict != "OVERSOLD" || s.Oversold == 0):
			t.Errorf("none: verdict %s, oversold %d; the auditor must catch the control's oversell", s.Verdict, s.Oversold)
		case s.Strategy == "none":
		case s.Verdict != "PASS":
			t.Errorf("%s: %s: %q", s.Strategy, s.Verdict, s.Violations)
		case p.First.Orders != stock || p.First.Paid+p.First.Late != stock/2 || p.Expired != stock-p.First.Paid || p.Returned != p.Expired:
			t.Errorf("%s: %d winners, %d paid, %d late, %d expired, %d returned; want %d winners, half of them paying, the rest expired and returned",
				s.Strategy, p.First.Orders, p.First.Paid, p.First.Late, p.Expired, p.Returned, stock)
		case p.Second.Units != p.Returned || p.Second.Accepted != p.Returned || s.Facts.Stock != 0 || s.Facts.PaidUnits != stock:
			t.Errorf("%s: second wave: %d units, %d accepted; stock after %d, %d paid units; want the %d returned units sold and paid",
				s.Strategy, p.Second.Units, p.Second.Accepted, s.Facts.Stock, s.Facts.PaidUnits, p.Returned)
		}
	}
	if declined := rep.Strategies[0].Payment.First.Declined; declined == 0 {
		t.Logf("no payment was declined at a failure rate of 0.2 (possible, unlikely)")
	}
	if !rep.Passed {
		t.Error("the run did not pass")
	}
}
