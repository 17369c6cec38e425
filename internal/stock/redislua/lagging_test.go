package redislua

import (
	"strconv"
	"testing"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestLaggingStateNeverOversells plays a failover to a replica that had not copied the latest
// purchases: the sale's keys go back to a snapshot taken three purchases earlier, after MySQL
// already holds all six. The state then counts three units too many and has forgotten three
// buyers. What it accepts that MySQL cannot hold (a forgotten buyer's second purchase, units MySQL
// gave to the forgotten purchases) is refused by MySQL, never written: no oversell, one purchase
// per buyer. The state is dropped and rebuilt from MySQL, which sells what MySQL has left. The
// buyers the lagging state accepted and MySQL refused were told 202: that is what such a failover
// loses, and each reads it as a refused order under the order id of its 202 (with why, and
// nothing charged), counted by Refused and by the audit. (The store's test shows the oversell
// the check prevents: TestPersistRefusesWhatMySQLCannotHold.)
func TestLaggingStateNeverOversells(t *testing.T) {
	ctx := t.Context()
	s, rdb, st, p := saleInMySQL(t, 8)
	k := s.Keys(p.ID)
	buy(t, s, p, 3) // buyer0..2
	snapshot := map[string]string{}
	for _, key := range []string{k.State, k.Buyers, k.Stream} {
		v, err := rdb.Dump(ctx, key).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", key, err)
		}
		snapshot[key] = v
	}
	for i := 3; i < 6; i++ { // buyer3..5: on the master only
		u := "buyer" + strconv.Itoa(i)
		if o, err := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: u, Quantity: 1, OrderID: "o-" + u}); err != nil || o.Result != Accepted {
			t.Fatalf("%s: %v %v", u, o.Result, err)
		}
	}
	ps := persister(t, rdb, s, st, "a", 0)
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	// The failover: the replica's copy, three purchases behind.
	for key, v := range snapshot {
		if err := rdb.RestoreReplace(ctx, key, 0, v).Err(); err != nil {
			t.Fatalf("RESTORE %s: %v", key, err)
		}
	}
	if got := left(t, rdb, s, p); got != 5 {
		t.Fatalf("the lagging state has %d left, want 5 (MySQL: 2)", got)
	}
	// It accepts buyer4 again (forgotten) and four new buyers for the five units it believes in.
	accepted := 0
	for _, u := range []string{"buyer4", "new0", "new1", "new2", "new3", "new4"} {
		o, err := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: u, Quantity: 1, OrderID: "o2-" + u})
		if err != nil {
			t.Fatal(err)
		}
		if o.Result == Accepted {
			accepted++
		}
	}
	if accepted != 5 {
		t.Fatalf("the lagging state accepted %d, want 5", accepted)
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	// MySQL held two more (new0, new1); buyer4's second purchase and new2, new3 were refused.
	if got := ps.Refused(); got != 3 {
		t.Errorf("refused %d, want 3", got)
	}
	f, err := audit.Load(ctx, st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Oversold() != 0 || f.Stock != 0 || f.ReservedUnits != 8 || f.UsersOverLimit != 0 || f.Refused != 3 || f.RefusedUnits != 3 {
		t.Fatalf("after the lagging state: %+v; want stock 0, 8 reserved, 3 refused, no oversell", f)
	}
	if v := f.Violations(false); len(v) != 0 {
		t.Fatalf("after the lagging state: %q", v)
	}
	for u, why := range map[string]sale.Code{"buyer4": sale.CodeLimitReached, "new2": sale.CodeSoldOut, "new3": sale.CodeSoldOut} {
		o, err := st.BuyerOrder(ctx, "o2-"+u, u)
		if err != nil || o.Status != sale.StatusRefused || o.Refusal != why {
			t.Errorf("%s's order: %+v, %v; want refused, %s", u, o, err, why)
		}
	}
	if o, err := st.BuyerOrder(ctx, "o2-new0", "new0"); err != nil || o.Status != sale.StatusQueued {
		t.Errorf("new0's order: %+v, %v; want queued", o, err)
	}
	// The state was dropped: the next purchase finds it missing, and the rebuild from MySQL sells
	// nothing more.
	if o, _ := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "late", Quantity: 1, OrderID: "o-late"}); o.Result != NotLoaded {
		t.Fatalf("after the refusals: %v, want not_loaded (the state dropped for a rebuild)", o.Result)
	}
	if err := s.Rebuild(ctx, rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "late", Quantity: 1, OrderID: "o-late"}); o.Result != SoldOut {
		t.Fatalf("after the rebuild: %v, want sold_out", o.Result)
	}
}
