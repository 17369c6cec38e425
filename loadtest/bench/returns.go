package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
)

// returns measures how fast the units of unpaid orders go back on sale (issue #29): o.returnOrders
// orders, spread over one product per strategy of o.returnStrategies, are planted straight into
// the replicas' database as sold and confirmed (the stock lowered by as much, reservations and
// orders written: the purchase path is measured elsewhere, and 100,000 purchases would take most
// of the phase), their payment windows end at once, and the replicas' expirers expire them and
// give their units back. The figure is units returned per second, from the end of the windows to
// the last unit back in MySQL's stock. Meanwhile a buyer of another product cancels: the cancel's
// answer must say its unit is back already, however many others are due.
func (b *bench) returns(ctx context.Context, targets []string, label string) error {
	o := b.o
	db, err := sql.Open("mysql", o.mysqlDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	a := newAPI(targets[0], o.adminToken)
	var ids []int64
	for i, st := range o.returnStrategies {
		per := o.returnOrders / len(o.returnStrategies)
		if i < o.returnOrders%len(o.returnStrategies) {
			per++
		}
		id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · returns · %s", b.rep.RunID, st), st, per)
		if err != nil {
			return err
		}
		b.say("returns: planting %d sold orders of product %d (%s)", per, id, st)
		if err := plantSold(ctx, db, id, st, per, b.stamp); err != nil {
			return fmt.Errorf("returns: plant the orders of product %d: %w", id, err)
		}
		ids = append(ids, id)
	}
	total := o.returnOrders
	in := placeholders(len(ids))
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	// A redis-lua sale's state in Redis is read from MySQL when first needed: planted before
	// that, it holds the planted sale, as if its buyers had bought through the script.
	start := time.Now()
	if _, err := db.ExecContext(ctx, "UPDATE orders SET expires_at = NOW(6) WHERE product_id IN ("+in+")", args...); err != nil {
		return err
	}
	b.say("returns: %d orders due over %d products; the replicas' expirers return them", total, len(ids))
	cancel := make(chan cancelResult, 1)
	go func() { cancel <- b.cancelOne(ctx, a, db) }()

	deadline := start.Add(o.drainTimeout)
	left := total
	for left > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		if err := db.QueryRowContext(ctx, "SELECT COALESCE(SUM(initial_stock - stock), 0) FROM products WHERE id IN ("+in+")", args...).Scan(&left); err != nil {
			return err
		}
	}
	took := time.Since(start)
	row := Row{Kind: kindReturns, What: "returns: units of unpaid orders back on sale", Unit: "units/s",
		Config: fmt.Sprintf("%s orders due at once over %d products (%s) · %s · %s", appapi.Thousands(total), len(ids),
			strings.Join(o.returnStrategies, ", "), replicas(len(targets)), label),
		Figure: float64(total-left) / took.Seconds()}
	row.Notes = append(row.Notes, fmt.Sprintf("%s of %s units back in %.1f s", appapi.Thousands(total-left), appapi.Thousands(total), took.Seconds()))
	if left > 0 {
		b.problem("returns: %d of %d units not back after %s", left, total, o.drainTimeout)
	}
	c := <-cancel
	switch {
	case c.err != nil:
		b.problem("returns: the cancel meanwhile: %v", c.err)
	case !c.returned:
		b.problem("returns: a cancel on another product while %d orders were due answered without its unit back", total)
	default:
		row.P50 = float64(c.took.Microseconds()) / 1000
		row.Notes = append(row.Notes, fmt.Sprintf("a cancel on another product meanwhile answered in %.0f ms, its unit back", row.P50))
	}
	b.add(row)
	b.say("returns: %.0f units/s (%s)", row.Figure, strings.Join(row.Notes, "; "))
	return nil
}

// plantSold writes n sold and confirmed orders of one unit of product id (of strategy st), with
// their reservations, as the consumer would have, and takes their units from its stock. Their
// windows end far ahead: the phase ends them all at once.
func plantSold(ctx context.Context, db *sql.DB, id int64, st string, n int, stamp string) error {
	const chunk = 1000
	for from := 0; from < n; from += chunk {
		rows := min(chunk, n-from)
		vals := make([]any, 0, 4*rows)
		for i := from; i < from+rows; i++ {
			vals = append(vals, fmt.Sprintf("r%sp%d-%d", stamp, id, i), id, fmt.Sprintf("ret%s-%d", stamp, i), st)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at, published_at)
			VALUES `+strings.TrimSuffix(strings.Repeat("(?,?,?,1,?,NOW(6),NOW(6)),", rows), ","), vals...); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO orders (order_id, reservation_id, product_id, user_id, quantity, status, created_at, expires_at)
		SELECT order_id, id, product_id, user_id, quantity, 'confirmed', NOW(6), NOW(6) + INTERVAL 1 DAY FROM reservations WHERE product_id = ?`, id); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "UPDATE products SET stock = stock - ? WHERE id = ?", n, id)
	return err
}

type cancelResult struct {
	returned bool
	took     time.Duration
	err      error
}

// cancelOne buys the one unit of a product of its own, waits for the order, and cancels it,
// timing the cancel.
func (b *bench) cancelOne(ctx context.Context, a *api, db *sql.DB) cancelResult {
	id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · returns · the cancel", b.rep.RunID), "mysql", 1)
	if err != nil {
		return cancelResult{err: err}
	}
	user := "canceller-" + b.stamp
	var receipt struct {
		OrderID string `json:"order_id"`
	}
	if err := a.Call(ctx, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase", id), map[string]any{"user_id": user, "quantity": 1}, http.StatusAccepted, &receipt); err != nil {
		return cancelResult{err: err}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE order_id = ?", receipt.OrderID).Scan(&n); err != nil {
			return cancelResult{err: err}
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			return cancelResult{err: fmt.Errorf("order %s not created within 30 s", receipt.OrderID)}
		}
	}
	var o struct {
		Returned bool `json:"returned"`
	}
	start := time.Now()
	err = a.Call(ctx, http.MethodPost, "/api/v1/orders/"+receipt.OrderID+"/cancel", map[string]any{"user_id": user}, http.StatusOK, &o)
	return cancelResult{returned: o.Returned, took: time.Since(start), err: err}
}

func placeholders(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }
