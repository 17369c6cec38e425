package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestExpirerKilledMidBatch: an expirer SIGKILLed between committing a batch of expired orders and
// returning their units (the expirer-after-expire failpoint) leaves them closed and not returned;
// another process's expirer returns each unit once, and the units sell again. Paid orders are
// untouched throughout.
func TestExpirerKilledMidBatch(t *testing.T) {
	s := newStack(t)
	window := map[string]string{"SECKILL_PAYMENT_WINDOW": "5s", // the ten payments must come within it, on a loaded machine too (2 s: one came late under load 10–15)
		"SECKILL_PAYMENT_FAILURE_RATE": "0", "SECKILL_PAYMENT_LATENCY": "0s",
		"SECKILL_EXPIRE_EVERY": "100ms"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range window {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	front := s.start(t, with("SECKILL_EXPIRER", "false"))
	const stockN, payers = 40, 10
	id := createProduct(t, front, "mysql", stockN, nil)
	db := openDB(t, s.DSN)
	orders := map[string]string{}
	for i := range stockN {
		user := fmt.Sprintf("buyer-%02d", i)
		r := front.MustDo(t, "POST", purchasePath(id), map[string]any{"user_id": user}, nil)
		if r.Status != 202 {
			t.Fatalf("purchase %s: %d %v", user, r.Status, r.Body)
		}
		orders[user] = r.Str("order_id")
	}
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		f, err := audit.Load(context.Background(), db, id)
		return err == nil && f.Orders == stockN, fmt.Sprintf("%+v %v", f, err)
	})
	for i := range payers {
		user := fmt.Sprintf("buyer-%02d", i)
		r := front.MustDo(t, "POST", "/api/v1/orders/"+orders[user]+"/pay", map[string]any{"user_id": user},
			map[string]string{"Idempotency-Key": "pay-" + user})
		if r.Status != 200 || r.Str("status") != "paid" {
			t.Fatalf("pay %s: %d %v", user, r.Status, r.Body)
		}
	}

	// Every unpaid order past its window before the expirer starts: its first batch takes them all.
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		var due int
		err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'confirmed' AND expires_at <= NOW(6)", id).Scan(&due)
		return err == nil && due == stockN-payers, fmt.Sprintf("%d orders due (%v)", due, err)
	})
	victim := s.startChild(t, with("SECKILL_TEST_FAILPOINT", "expirer-after-expire"))
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := victim.Do("GET", "/healthz", nil, nil)
		return err != nil, "the expirer's process is still up"
	})
	f, err := audit.Load(context.Background(), db, id)
	if err != nil {
		t.Fatal(err)
	}
	if f.ClosedUnits != stockN-payers || f.ReturnedUnits != 0 || f.Stock != 0 {
		t.Fatalf("after the kill: %d closed, %d returned, stock %d; want %d closed, none returned, stock 0",
			f.ClosedUnits, f.ReturnedUnits, f.Stock, stockN-payers)
	}
	t.Logf("the expirer died with %d orders expired and none of their units returned", f.ClosedUnits)

	s.start(t, with()) // its expirer takes over
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		f, err = audit.Load(context.Background(), db, id)
		return err == nil && f.Drained(), fmt.Sprintf("%+v %v", f, err)
	})
	if v := f.Violations(true); len(v) > 0 || f.Stock != stockN-payers || f.PaidUnits != payers {
		t.Fatalf("after the takeover: stock %d, paid %d, violations %q; want stock %d, paid %d, none", f.Stock, f.PaidUnits, v, stockN-payers, payers)
	}
	// The returned units sell again (within the sold-out state's staleness bound) to new buyers,
	// no more of them, and not to a buyer who let one lapse.
	buy := func(user string) (int, string) {
		r := front.MustDo(t, "POST", purchasePath(id), map[string]any{"user_id": user}, nil)
		return r.Status, r.ErrorCode()
	}
	sold := 0
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		status, code := buy("second-00")
		sold += map[bool]int{true: 1}[status == 202]
		return status == 202, fmt.Sprintf("the first second-wave buyer: %d %s", status, code)
	})
	// Asked only now: until the front has seen the stock come back, its sold-out state answers
	// first, whoever asks.
	if status, code := buy(fmt.Sprintf("buyer-%02d", stockN-1)); status != 409 || code != "limit_reached" {
		t.Errorf("a buyer whose order expired buys again: %d %s, want 409 limit_reached", status, code)
	}
	// Until sold out. The second wave does not pay either: on a slow machine some of its orders
	// pass their 5 s window before the loop ends and come back on sale, and are bought again;
	// more than the returned units is then fine, fewer is not.
	for i := 1; i < 10*stockN; i++ {
		status, code := buy(fmt.Sprintf("second-%02d", i))
		if status != 202 {
			if code != "sold_out" {
				t.Fatalf("second wave: %d %s after %d sold", status, code, sold)
			}
			break
		}
		sold++
	}
	if sold < stockN-payers {
		t.Errorf("the second wave bought %d units, want the %d returned", sold, stockN-payers)
	}
	// Every second-wave order expires unpaid and its unit comes back once: what is left is the
	// stock less the paid units, the paid ones untouched.
	itest.Eventually(t, 60*time.Second, func() (bool, string) {
		var open int
		err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM orders WHERE product_id = ? AND status = 'confirmed'", id).Scan(&open)
		if err != nil || open > 0 {
			return false, fmt.Sprintf("%d orders still wait for payment (%v)", open, err)
		}
		f, err = audit.Load(context.Background(), db, id)
		return err == nil && f.Drained() && f.Orders == f.Reservations, fmt.Sprintf("%+v %v", f, err)
	})
	if v := f.Violations(true); len(v) > 0 || f.Stock != stockN-payers || f.PaidUnits != payers {
		// Seen once in CI (stock 1, no violation) and never since: say where the units are.
		t.Errorf("at the end: stock %d, paid %d, violations %q; want stock %d, paid %d, none\nfacts %+v\norders by status: %s",
			f.Stock, f.PaidUnits, v, stockN-payers, payers, f, ordersByStatus(t, db, id))
	}
}

// ordersByStatus describes the product's orders: per status, how many, their units and how many
// of those are back in stock.
func ordersByStatus(t *testing.T, db *sql.DB, id int64) string {
	rows, err := db.QueryContext(context.Background(), `SELECT status, COUNT(*), SUM(quantity), SUM(returned_at IS NOT NULL)
		FROM orders WHERE product_id = ? GROUP BY status ORDER BY status`, id)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var status string
		var n, units, returned int
		if err := rows.Scan(&status, &n, &units, &returned); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("%s: %d orders, %d units, %d returned", status, n, units, returned))
	}
	if err := rows.Err(); err != nil {
		t.Logf("orders by status: %v", err)
	}
	return strings.Join(out, "; ")
}
