package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// TestMain lets the test binary be the bare gin child of the yardsticks.
func TestMain(m *testing.M) { yardstick.Main(m.Run) }

// TestSmoke is the load test in small, inside `make test`: the four safe strategies and the
// unsafe control over three replicas, 50 units, 1,000 buyers each. The safe ones must pass every
// check; the control must be caught overselling — the proof that the auditor catches one.
func TestSmoke(t *testing.T) {
	stack := apptest.NewStack(t)
	env := map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true"}
	var targets []string
	for range 3 {
		targets = append(targets, stack.Start(t, env).URL)
	}
	o, err := parseOptions([]string{
		"-targets", strings.Join(targets, ","),
		"-strategies", "mysql,redis,zk,redis-lua,none",
		"-stock", "50", "-buyers", "1000", "-workers", "32",
		"-baseline", "500ms", "-drain-timeout", "90s",
		"-admin-token", apptest.AdminToken,
		"-mysql-dsn", stack.DSN,
		"-out", t.TempDir(),
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(o.mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := runAll(ctx, db, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(markdown(rep))
	if _, err := writeReport(o.outDir, rep); err != nil {
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

// TestBuyerTokens: against a replica that verifies buyer tokens, the load test with
// -buyer-jwt-key signs each buyer's token and passes; without it every purchase is refused 401
// (the control: the tokens are what lets them buy).
func TestBuyerTokens(t *testing.T) {
	const key = "the load test's buyer key, 32 bytes or more"
	stack := apptest.NewStack(t)
	target := stack.Start(t, map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": key}).URL
	run := func(extra ...string) *Report {
		t.Helper()
		o, err := parseOptions(append([]string{
			"-targets", target, "-strategies", "mysql", "-stock", "20", "-buyers", "200", "-workers", "16",
			"-baseline", "0", "-drain-timeout", "60s", "-admin-token", apptest.AdminToken,
			"-mysql-dsn", stack.DSN, "-out", "", "-quiet",
		}, extra...), func(string) string { return "" }, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		db, err := openDB(o.mysqlDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rep, err := runAll(t.Context(), db, o, t.Logf)
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
