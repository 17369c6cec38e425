package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestRefusedOrder: a reservation MySQL cannot hold becomes a refused order its buyer reads under
// the order id of the 202, with why; it takes no unit and no buyer's slot, cannot be paid,
// cancelled, expired or confirmed by the consumer, and is refused once: the batch written again
// (a persister that died between its commit and its acknowledgement) neither refuses it twice
// nor reserves it once stock has come back. The audit counts it apart, and (the control) reports
// a refused order that holds a reservation after all.
func TestRefusedOrder(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 1, sale.StrategyMySQL)
	first := decided(p, "a", "")
	if _, _, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, []sale.Reservation{first}); err != nil {
		t.Fatal(err)
	}
	second, late := decided(p, "a", ""), decided(p, "b", "") // a's second purchase; b's, no unit left
	batch := []sale.Reservation{second, late}
	if n, refused, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, batch); err != nil || n != 0 || len(refused) != 2 {
		t.Fatalf("inserted %d, refused %d, %v; want 0 and 2", n, len(refused), err)
	}
	for _, c := range []struct {
		r    sale.Reservation
		why  sale.Code
		read string
	}{{second, sale.CodeLimitReached, "a"}, {late, sale.CodeSoldOut, "b"}} {
		got, err := st.BuyerOrder(ctx, c.r.OrderID, c.read)
		if err != nil {
			t.Fatalf("read %s: %v", c.r.OrderID, err)
		}
		want := sale.Order{OrderID: c.r.OrderID, Status: sale.StatusRefused, ProductID: p.ID, UserID: c.read, Quantity: 1,
			AmountCents: 1, Refusal: c.why}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("refused order (-want +got):\n%s", diff)
		}
	}
	if _, err := st.BuyerOrder(ctx, late.OrderID, "a"); !errors.Is(err, sale.ErrNotFound) {
		t.Errorf("another buyer reads b's refused order: %v, want not found", err)
	}
	if _, _, err := st.ClaimPayment(ctx, late.OrderID, "b", "pay-1"); !errors.Is(err, sale.ErrOrderRefused) {
		t.Errorf("pay a refused order: %v, want ErrOrderRefused", err)
	}
	if _, err := st.CancelOrder(ctx, late.OrderID, "b"); !errors.Is(err, sale.ErrOrderRefused) {
		t.Errorf("cancel a refused order: %v, want ErrOrderRefused", err)
	}
	if due, err := st.ExpireOrder(ctx, late.OrderID); err != nil || len(due) != 0 {
		t.Errorf("expire a refused order: %v, %v; want nothing expired", due, err)
	}
	if n, err := st.ConfirmOrders(ctx, []string{second.OrderID, late.OrderID}); err != nil || n != 0 {
		t.Errorf("the consumer confirms refused orders: %d, %v; want 0", n, err)
	}
	if o, _ := st.BuyerOrder(ctx, late.OrderID, "b"); o.Status != sale.StatusRefused {
		t.Errorf("after pay, cancel, expire and confirm: %s, want refused", o.Status)
	}
	if s, err := st.Stats(ctx, p.ID); err != nil || s.RefusedOrders != 2 || s.OrdersConfirmed != 0 || s.ReservedUnits != 1 || s.Stock != 0 {
		t.Errorf("stats %+v, %v; want 2 refused, 1 reserved, no order, stock 0", s, err)
	}
	f, err := audit.Load(ctx, st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Refused != 2 || f.RefusedUnits != 2 || f.Accepted() != 2 || f.Reservations != 1 || len(f.Violations(false)) != 0 {
		t.Errorf("audit %+v, violations %q; want 2 refused (2 units), 1 reservation, sound", f, f.Violations(false))
	}

	// Stock back (an operator restocks, say), then the batch again: still refused, once.
	if _, err := st.DB().ExecContext(ctx, "UPDATE products SET stock = stock + 5 WHERE id = ?", p.ID); err != nil {
		t.Fatal(err)
	}
	if n, refused, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, batch); err != nil || n != 0 || len(refused) != 0 {
		t.Fatalf("again: inserted %d, refused %d, %v; want 0 and 0", n, len(refused), err)
	}
	if s, r := stockOf(t, st, p.ID); s != 5 || r != 1 {
		t.Fatalf("again: stock %d, reserved %d; want 5 and 1", s, r)
	}

	// Control: a refusal that took a unit after all (a reservation under the refused order id)
	// is what the audit reports.
	err = st.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		return tx.Reserve(ctx, late)
	})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = audit.Load(ctx, st.DB(), p.ID); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(f.Violations(false), "; "); f.RefusedReserved != 1 || !strings.Contains(v, "refused orders hold a reservation") {
		t.Fatalf("control: %d refused reserved, violations %q; want the refused order with a reservation reported", f.RefusedReserved, v)
	}
}

// TestRefusedOnceConcurrently: persisters racing with overlapping batches that MySQL can hold
// only half of (one claimed the entries of another it thought dead) reserve each purchase or
// refuse it, never both, and each once.
func TestRefusedOnceConcurrently(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 30, sale.StrategyMySQL)
	var all []sale.Reservation
	for i := range 60 {
		all = append(all, decided(p, fmt.Sprintf("c%d", i), ""))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused []string
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w * 10; i+20 <= len(all); i += 20 { // windows of 20 that overlap between workers
				_, ref, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, all[i:i+20])
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range ref {
					refused = append(refused, r.OrderID)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if _, ref, err := st.PersistReservations(ctx, p.ID, p.Strategy, p.Epoch, 0, all); err != nil {
		t.Fatal(err)
	} else {
		for _, r := range ref {
			refused = append(refused, r.OrderID)
		}
	}
	slices.Sort(refused)
	if distinct := len(slices.Compact(slices.Clone(refused))); len(refused) != 30 || distinct != 30 {
		t.Errorf("refused %d order ids (%d distinct), want 30 once each", len(refused), distinct)
	}
	f, err := audit.Load(ctx, st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Reservations != 30 || f.Refused != 30 || f.Stock != 0 || len(f.Violations(false)) != 0 {
		t.Fatalf("audit %+v, violations %q; want 30 reserved, 30 refused, stock 0, sound", f, f.Violations(false))
	}
}
