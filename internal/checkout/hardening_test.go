package checkout_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// parkCount counts the orders each loop parked (checkout.Metrics).
type parkCount struct {
	mu     sync.Mutex
	parked map[string]int
}

func (*parkCount) Payment(error)                    {}
func (*parkCount) OrdersExpired(int)                {}
func (*parkCount) UnitsReturned(sale.Strategy, int) {}
func (c *parkCount) OrderParked(loop string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parked == nil {
		c.parked = map[string]int{}
	}
	c.parked[loop]++
}

func (c *parkCount) of(loop string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parked[loop]
}

// poison plants a trigger on table that refuses, with SQLSTATE 45000, the writes to the rows
// cond (in NEW/OLD terms) picks: a row that fails for what it holds, as a row out of range or
// breaking a constraint does, in the test's own database.
func (e *env) poison(t *testing.T, table, event, cond string) {
	t.Helper()
	name := "poison_" + strings.ReplaceAll(table+"_"+event, " ", "_")
	if _, err := e.st.DB().ExecContext(t.Context(), fmt.Sprintf(`CREATE TRIGGER %s BEFORE %s ON %s FOR EACH ROW
		BEGIN IF %s THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'planted poison'; END IF; END`, name, event, table, cond)); err != nil {
		t.Fatalf("plant a trigger: %v", err)
	}
}

func (e *env) parked(t *testing.T) map[string]string {
	t.Helper()
	rows, err := e.st.ParkedOrders(t.Context(), 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.OrderID] = r.ParkError
	}
	return out
}

// buyN buys one unit for each of n buyers and has their orders created.
func (e *env) buyN(t *testing.T, p sale.Product, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := e.buy(t, p, fmt.Sprintf("%s%d", prefix, i), true)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// TestPoisonedExpiryIsParked: one order whose expiry MySQL refuses does not stop the expirer: the
// batch is done order by order, the poisoned one parked (counted once, with why), and every other
// expired and returned; later rounds skip it.
func TestPoisonedExpiryIsParked(t *testing.T) {
	e := newEnv(t)
	p := e.product(t, sale.StrategyMySQL, 10)
	ids := e.buyN(t, p, "x", 6)
	e.due(t, ids...)
	e.poison(t, "order_events", "INSERT", fmt.Sprintf("NEW.order_id = '%s' AND NEW.kind = 'order.expired'", ids[2]))
	m := &parkCount{}
	svc := e.service(t, 0, 0, checkout.Options{Batch: 4, Metrics: m})
	if expired, returned := svc.Round(t.Context()); expired != 5 || returned != 5 {
		t.Fatalf("Round = %d expired, %d returned; want 5, 5 (all but the poisoned)", expired, returned)
	}
	if expired, returned := svc.Round(t.Context()); expired != 0 || returned != 0 {
		t.Fatalf("a second Round = %d, %d; want nothing (the poisoned order is parked)", expired, returned)
	}
	if got := e.parked(t); len(got) != 1 || !strings.Contains(got[ids[2]], "planted poison") {
		t.Fatalf("parked %v; want %s alone, with its cause", got, ids[2])
	}
	if n := m.of("expire"); n != 1 {
		t.Errorf("parked counted %d times, want once", n)
	}
	if o := e.order(t, ids[2]); o.Status != sale.StatusConfirmed {
		t.Errorf("the poisoned order is %s, want confirmed (untouched)", o.Status)
	}
	if f := e.audit(t, p); f.Stock != 9 {
		t.Errorf("stock %d, want 9 (five units back)", f.Stock)
	}
}

// TestPoisonedReturnIsParked: one order whose return MySQL refuses is parked and the other
// orders of its batch go back, for a strategy that returns with a relative write (mysql) and for
// one that returns under its lock (redis).
func TestPoisonedReturnIsParked(t *testing.T) {
	e := newEnv(t)
	var poisoned []string
	for _, strategy := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis} {
		p := e.product(t, strategy, 10)
		ids := e.buyN(t, p, "r", 5)
		e.due(t, ids...)
		poisoned = append(poisoned, ids[1])
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s: orders %v, poisoned %s", strategy, ids, ids[1])
			}
		})
	}
	e.poison(t, "orders", "UPDATE", fmt.Sprintf("NEW.returned_at IS NOT NULL AND OLD.order_id IN ('%s', '%s')", poisoned[0], poisoned[1]))
	m := &parkCount{}
	svc := e.service(t, 0, 0, checkout.Options{Metrics: m})
	if expired, returned := svc.Round(t.Context()); expired != 10 || returned != 8 {
		t.Fatalf("Round = %d expired, %d returned; want 10, 8", expired, returned)
	}
	if _, returned := svc.Round(t.Context()); returned != 0 {
		t.Fatalf("a second Round returned %d; want nothing", returned)
	}
	got := e.parked(t)
	for _, id := range poisoned {
		if !strings.Contains(got[id], "planted poison") {
			t.Errorf("order %s not parked with its cause: %v", id, got)
		}
	}
	if len(got) != 2 || m.of("return") != 2 {
		t.Errorf("parked %v, counted %d; want the two poisoned, once each", got, m.of("return"))
	}
}

// TestOverflowingPaymentIsParked: an order whose amount does not fit 64 bits (a product stored
// before the limits) is refused alone: reading it, paying it (nothing claimed) and settling it
// (parked) fail for it, while a stuck payment of another product is settled as usual.
func TestOverflowingPaymentIsParked(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	big := e.product(t, sale.StrategyMySQL, 10)
	bigIDs := e.buyN(t, big, "b", 2)
	// What the probe of issue #29 stored: price_cents 10^11 and an order of 10^8 units.
	db := e.st.DB()
	for _, q := range []string{
		"UPDATE products SET price_cents = 100000000000 WHERE id = ?",
		"UPDATE reservations SET quantity = 100000000 WHERE product_id = ?",
		"UPDATE orders SET quantity = 100000000 WHERE product_id = ?",
	} {
		if _, err := db.ExecContext(ctx, q, big.ID); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.st.Order(ctx, bigIDs[0])
	want(t, err, sale.ErrAmountOutOfRange)
	svc := e.service(t, 0, 0, checkout.Options{StuckAfter: time.Millisecond, ChargeTimeout: time.Millisecond, Metrics: &parkCount{}})
	_, err = svc.Pay(ctx, bigIDs[0], "b0", "k")
	want(t, err, sale.ErrAmountOutOfRange)
	var status string
	if err := db.QueryRowContext(ctx, "SELECT status FROM orders WHERE order_id = ?", bigIDs[0]).Scan(&status); err != nil || status != "confirmed" {
		t.Fatalf("after a refused payment the order is %q (%v), want confirmed: nothing claimed", status, err)
	}

	small := e.product(t, sale.StrategyMySQL, 10)
	smallID := e.buyN(t, small, "s", 1)[0]
	if _, _, err := e.st.ClaimPayment(ctx, smallID, "s0", "k"); err != nil {
		t.Fatal(err)
	}
	// The stuck payment of the overflowing order, as the probe left it (claimed before the read).
	if _, err := db.ExecContext(ctx, "UPDATE orders SET status = 'paying', pay_key = 'k', pay_started_at = NOW(6) WHERE order_id = ?", bigIDs[1]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	m := &parkCount{}
	svc = e.service(t, 0, 0, checkout.Options{StuckAfter: time.Millisecond, ChargeTimeout: time.Millisecond, Metrics: m})
	svc.Round(ctx)
	svc.Round(ctx)
	if o := e.order(t, smallID); o.Status != sale.StatusConfirmed {
		t.Errorf("the other product's stuck payment is %s, want settled (confirmed again, never charged)", o.Status)
	}
	if got := e.parked(t); len(got) != 1 || !strings.Contains(got[bigIDs[1]], "out of range") || m.of("settle") != 1 {
		t.Errorf("parked %v (counted %d); want the overflowing stuck payment alone, once", got, m.of("settle"))
	}
}

// TestAmountsAtTheLimits: a product at every limit at once (the highest price, stock and per-user
// limit) sells its whole stock to one buyer, whose order reads, pays and charges the largest
// amount the limits allow.
func TestAmountsAtTheLimits(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	now := time.Now().UTC()
	p, err := e.st.CreateProduct(ctx, sale.NewProduct{
		Name: "limits " + t.Name(), PriceCents: sale.MaxPriceCents, Stock: sale.MaxStock, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: sale.MaxStock,
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	r := sale.Reservation{
		Receipt: sale.Receipt{OrderID: "o-limits", Status: sale.StatusQueued, ProductID: p.ID, UserID: "whale",
			Quantity: sale.MaxQuantity, Strategy: p.Strategy},
		Epoch: p.Epoch, CreatedAt: now,
	}
	if err := e.deduct[p.Strategy].Deduct(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.ConfirmOrders(ctx, []string{r.OrderID}); err != nil {
		t.Fatal(err)
	}
	wantAmount := int64(sale.MaxQuantity) * sale.MaxPriceCents
	if o := e.order(t, r.OrderID); o.AmountCents != wantAmount {
		t.Fatalf("amount %d, want %d", o.AmountCents, wantAmount)
	}
	o, err := e.service(t, 0, 0, checkout.Options{}).Pay(ctx, r.OrderID, "whale", "k")
	if err != nil || o.Status != sale.StatusPaid || o.AmountCents != wantAmount {
		t.Fatalf("Pay = %+v, %v; want paid, %d cents", o, err, wantAmount)
	}
	e.audit(t, p)
}

// TestReturnsFairAcrossProducts: the return sweep serves every product with units due in one
// pass — a batch of the crowded product's oldest, and the lone cancel of another — rather than
// one product after the other.
func TestReturnsFairAcrossProducts(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	crowded := e.product(t, sale.StrategyMySQL, 30)
	lone := e.product(t, sale.StrategyMySQL, 5)
	crowdIDs := e.buyN(t, crowded, "c", 30)
	loneID := e.buyN(t, lone, "l", 1)[0]
	e.due(t, append(crowdIDs, loneID)...)
	// Expired in MySQL, their returns not made (a replica died in between, say).
	if _, err := e.st.ExpireDue(ctx, 100); err != nil {
		t.Fatal(err)
	}
	due, err := e.st.Unreturned(ctx, 10, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]int{}
	for _, d := range due {
		got[d.ProductID] = len(d.Orders)
	}
	if got[crowded.ID] != 10 || got[lone.ID] != 1 {
		t.Fatalf("one sweep reads %v; want 10 of the crowded product and the lone one", got)
	}
	if only, _ := e.st.Unreturned(ctx, 10, 1, 1); len(only) != 1 || only[0].ProductID != lone.ID {
		t.Fatalf("a sweep of one product from the second = %+v; want the lone product", only)
	}
}

// TestCancelReturnsAtOnce: a cancel answers with its units back in stock even while another
// product's crowd of due orders waits for the expirer.
func TestCancelReturnsAtOnce(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	crowded := e.product(t, sale.StrategyMySQL, 50)
	e.due(t, e.buyN(t, crowded, "c", 50)...)
	if _, err := e.st.ExpireDue(ctx, 100); err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua} {
		p := e.product(t, strategy, 1)
		id := e.buyN(t, p, "one", 1)[0]
		o, err := e.service(t, 0, 0, checkout.Options{Batch: 10}).Cancel(context.WithoutCancel(ctx), id, "one0")
		if err != nil || !o.Returned {
			t.Fatalf("%s: Cancel = %+v, %v; want returned at once", strategy, o, err)
		}
		if _, err := e.buy(t, p, "next", true); err != nil {
			t.Fatalf("%s: the cancelled unit is not on sale again: %v", strategy, err)
		}
	}
}
