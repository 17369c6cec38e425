package redislua

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestClusterFailoverToALaggingReplica is TestLaggingStateNeverOversells on a real Redis Cluster
// (issue #17): the replica of the master that holds a sale stops copying it (replication cut:
// asynchronous replication's window, made certain), three more purchases are accepted on the
// master alone and persisted to MySQL, and the master is SIGKILLed. The replica takes over with
// the state of three purchases earlier. What it then sells that MySQL cannot hold is refused:
// no oversell, one purchase per buyer, and the state is rebuilt from MySQL. What is lost is what
// the replica had not copied: here the three purchases' units, sold again and refused, their
// buyers told 202 without an order (with the purchases not yet persisted at the kill, they would
// be lost instead; either way as many as the replica missed).
func TestClusterFailoverToALaggingReplica(t *testing.T) {
	itest.Integration(t)
	ctx := t.Context()
	c := itest.RedisCluster(t, itest.ClusterOptions{AppendOnly: true})
	rdb := c.Client(t, nil)
	s, err := New(rdb, "failover-"+itest.Suffix(6))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := itest.Store(t)
	now := time.Now().UTC()
	p, err := st.CreateProduct(ctx, sale.NewProduct{Name: "redis-lua failover", PriceCents: 1, Stock: 8, Strategy: Strategy,
		SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(ctx, rdb, p.ID, State{Epoch: p.Epoch, Initial: 8, Stock: 8, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	k := s.Keys(p.ID)
	master := c.MasterFor(k.State)
	replica := c.ReplicaOf(master)
	buyAs := func(users ...string) (accepted int) {
		t.Helper()
		for _, u := range users {
			o, err := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: u, Quantity: 1, OrderID: "o-" + u + "-" + itest.Suffix(4)})
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			if o.Result == Accepted {
				accepted++
			}
		}
		return accepted
	}
	buyAs("buyer0", "buyer1", "buyer2")
	node, err := rdb.MasterForKey(ctx, k.State)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := node.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 { // the replica has them
		t.Fatalf("WAIT = %d, %v", n, err)
	}
	c.CutReplication(replica)
	buyAs("buyer3", "buyer4", "buyer5") // on the master only
	ps := persister(t, rdb, s, st, "a", 0)
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}

	master.Kill()
	c.WaitMaster(replica)
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		n, err := rdb.HGet(ctx, k.State, "stock").Int()
		return err == nil && n == 5, "the promoted replica's stock: " + strconv.Itoa(n) + " (want 5: three purchases behind)"
	})
	// The lagging state sells its five units: to buyer4 again (forgotten) and to four new buyers.
	if got := buyAs("buyer4", "new0", "new1", "new2", "new3", "new4"); got != 5 {
		t.Fatalf("the lagging state accepted %d, want 5", got)
	}
	if _, err := ps.Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if got := ps.Refused(); got != 3 {
		t.Errorf("MySQL refused %d, want 3 (buyer4's second purchase, and two units it had given to buyer3 and buyer5)", got)
	}
	f, err := audit.Load(ctx, st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Oversold() != 0 || f.Stock != 0 || f.ReservedUnits != 8 || f.UsersOverLimit != 0 {
		t.Fatalf("after the failover: %+v; want stock 0, 8 reserved, no oversell", f)
	}
	// The state was dropped; rebuilt from MySQL it sells nothing more.
	if err := s.Rebuild(ctx, rdb, p.ID, 0, false, st.ReloadSale, st.ReturnedOrders); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "late", Quantity: 1, OrderID: "o-late"}); o.Result != SoldOut {
		t.Fatalf("after the rebuild: %v, want sold_out", o.Result)
	}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), k.all()...).Err() })
}
