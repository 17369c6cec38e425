package redislua

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// failoverRig plays a failover on an itest.Failover: cut stops the replica copying the master of
// key, failover SIGKILLs that master and waits until the replica serves in its place, rejoin
// starts the old master again, to come back as the new master's replica (a cluster node rejoins
// by itself; with replicaOf the rig sends it REPLICAOF, as Sentinel would).
type failoverRig struct {
	rdb      redis.UniversalClient
	cut      func(key string)
	failover func()
	rejoin   func()
}

func newRig(t *testing.T, fo itest.Failover, replicaOf bool) failoverRig {
	var master, replica *itest.Server
	return failoverRig{
		rdb: fo.Client(t),
		cut: func(key string) {
			master = fo.Master(key)
			replica = fo.Replica(master)
			fo.Cut(replica)
		},
		failover: func() { master.Kill(); fo.Promoted(master, replica) },
		rejoin: func() {
			master.Start()
			if replicaOf {
				// The sentinels would convert it after a while (not within a minute under -race
				// on two cores, measured): do what they would.
				host, port, _ := net.SplitHostPort(replica.Addr())
				c := redis.NewClient(&redis.Options{Addr: master.Addr()})
				defer c.Close()
				if err := c.Do(t.Context(), "replicaof", host, port).Err(); err != nil {
					t.Fatalf("REPLICAOF on the old master: %v", err)
				}
			}
		},
	}
}

// TestFailoverKeepsEvery202 is the acceptance of replicated redis-lua purchases, on a Redis
// Cluster and on Sentinel: three purchases are made while the sale master's replica is cut off,
// then the master is SIGKILLed and the replica promoted, three purchases behind. With SECKILL_REDISLUA_MIN_REPLICAS=1 those
// three are answered unconfirmed (503), their retries with the same Idempotency-Key too while the
// replica is away, and every purchase answered 202 is an order after the failover; a retry after
// it, once the old master is back as a replica, gets a 202 and an order. The negative control,
// MinReplicas 0 (one node's default): the three are answered 202 and lost, their buyers holding
// order ids that no order answers.
func TestFailoverKeepsEvery202(t *testing.T) {
	itest.Integration(t)
	t.Parallel()
	for _, topo := range []struct {
		name      string
		topology  func(testing.TB) itest.Failover
		replicaOf bool
	}{{"cluster", itest.ClusterFailover, false}, {"sentinel", itest.SentinelFailover, true}} {
		for _, n := range []int{1, 0} {
			t.Run(topo.name+"/min-replicas="+strconv.Itoa(n), func(t *testing.T) {
				t.Parallel() // servers of its own
				lost, unconfirmed := failoverCase(t, newRig(t, topo.topology(t), topo.replicaOf), n)
				wantLost, wantUnconfirmed := 0, 3
				if n == 0 {
					wantLost, wantUnconfirmed = 3, 0
				}
				if lost != wantLost || unconfirmed != wantUnconfirmed {
					t.Fatalf("with %d replicas to wait for: %d purchases answered 202 lost, %d answered unconfirmed; want %d and %d",
						n, lost, unconfirmed, wantLost, wantUnconfirmed)
				}
			})
		}
	}
}

// failoverCase plays the failover through the sale service over a redis-lua deductor that waits
// for minReplicas, and returns how many purchases answered 202 have no order after it, and how
// many were answered unconfirmed before it.
func failoverCase(t *testing.T, rig failoverRig, minReplicas int) (lost, unconfirmed int) {
	ctx := t.Context()
	f := newFailoverSale(t, rig.rdb, minReplicas)
	k := f.s.Keys(f.p.ID)
	accepted := map[string]string{} // buyer → the order id of their 202
	buy := func(users ...string) {
		t.Helper()
		for _, u := range users {
			r, err := f.purchase(u)
			switch {
			case err == nil:
				accepted[u] = r.OrderID
			case sale.CodeOf(err) == sale.CodeUnconfirmed:
				unconfirmed++
			default:
				t.Fatalf("%s: %v", u, err)
			}
		}
	}
	buy("buyer0", "buyer1", "buyer2")
	if len(accepted) != 3 {
		t.Fatalf("before the cut %d of 3 purchases were answered 202", len(accepted))
	}
	rig.cut(k.State)
	buy("buyer3", "buyer4", "buyer5") // on the master only
	if minReplicas > 0 {
		if _, err := f.purchase("buyer3"); sale.CodeOf(err) != sale.CodeUnconfirmed {
			t.Fatalf("buyer3's retry while the replica is cut off: %v, want unconfirmed (the replay waits too)", err)
		}
	}
	rig.failover()
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		n, err := rig.rdb.HGet(ctx, k.State, "stock").Int()
		return err == nil && n == 5, "the promoted replica's stock: " + strconv.Itoa(n) + " (want 5: three purchases behind)"
	})
	if minReplicas > 0 {
		rig.rejoin()
		f.retryUntilAccepted(t, "buyer3", accepted)
	}
	ps := persister(t, rig.rdb, f.s, f.st, "after-"+itest.Suffix(4), 0)
	if _, err := ps.Drain(ctx, f.p.ID); err != nil {
		t.Fatal(err)
	}
	for u, id := range accepted {
		_, err := f.svc.BuyerOrder(ctx, id, u)
		switch {
		case errors.Is(err, sale.ErrNotFound):
			lost++
			t.Logf("%s was answered 202 with order %s, which does not exist after the failover", u, id)
		case err != nil:
			t.Fatal(err)
		}
	}
	return lost, unconfirmed
}

// retryUntilAccepted retries user's purchase with its key until it is answered 202 (the old
// master back as a replica that confirms it), and records the order.
func (f *failoverSale) retryUntilAccepted(t *testing.T, user string, accepted map[string]string) {
	t.Helper()
	tries := 0
	itest.Eventually(t, 60*time.Second, func() (bool, string) {
		tries++
		r, err := f.purchase(user)
		if err != nil {
			return false, user + "'s retry: " + err.Error()
		}
		accepted[user] = r.OrderID
		return true, ""
	})
	t.Logf("%s's retry with its key answered 202 at try %d, once the old master was back as a replica", user, tries)
	// Again: now a replay of the receipt, which waits for the replica too (a rejoining node's
	// link may still drop once: the replay is then unconfirmed, and retried).
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		r, err := f.purchase(user)
		switch {
		case err != nil:
			return false, user + "'s replay: " + err.Error()
		case !r.Replayed || r.OrderID != accepted[user]:
			t.Fatalf("%s's replay: %+v; want order %s replayed", user, r, accepted[user])
		}
		return true, ""
	})
}

// TestUnconfirmedWithoutAReplica: waiting for a replica on a server that has none (a throwaway
// one), a purchase is decided, its unit taken and its reservation left for the persister, and
// answered unconfirmed, never 202; so is its retry with the same key, whose replay waits too.
// Without the wait, the same retry answers 202 with the first purchase's order, which the
// persister writes: the unconfirmed purchase was real, and its key is how the buyer learns so.
func TestUnconfirmedWithoutAReplica(t *testing.T) {
	itest.Integration(t)
	t.Parallel()
	srv := itest.RedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	f := newFailoverSale(t, rdb, 1)
	for try := range 2 {
		if _, err := f.purchase("alice"); !errors.Is(err, sale.ErrUnconfirmed) {
			t.Fatalf("try %d without a replica: %v, want unconfirmed", try, err)
		}
	}
	if got := left(t, rdb, f.s, f.p); got != 7 {
		t.Fatalf("stock in Redis after the unconfirmed purchase: %d, want 7 (decided)", got)
	}
	if _, err := f.svc.Purchase(t.Context(), sale.PurchaseRequest{ProductID: f.p.ID, UserID: "alice", Quantity: 1}); !errors.Is(err, sale.ErrAlreadyPurchased) {
		t.Fatalf("alice again without a key: %v, want already purchased", err)
	}
	if err := f.d.SetReplication(Replication{}); err != nil {
		t.Fatal(err)
	}
	r, err := f.purchase("alice")
	if err != nil || !r.Replayed {
		t.Fatalf("the retry without the wait: %+v, %v; want a replay", r, err)
	}
	ps := persister(t, rdb, f.s, f.st, "p-"+itest.Suffix(4), 0)
	if _, err := ps.Drain(t.Context(), f.p.ID); err != nil {
		t.Fatal(err)
	}
	if o, err := f.svc.BuyerOrder(t.Context(), r.OrderID, "alice"); err != nil || o.Quantity != 1 {
		t.Fatalf("alice's order %s: %+v, %v", r.OrderID, o, err)
	}
}

// TestReplicationValidate: the settings a deductor refuses, WAIT's "0 is forever" among them.
func TestReplicationValidate(t *testing.T) {
	for _, tc := range []struct {
		r  Replication
		ok bool
	}{
		{Replication{}, true},
		{Replication{MinReplicas: 1, Timeout: time.Millisecond}, true},
		{Replication{MinReplicas: -1}, false},
		{Replication{MinReplicas: 1}, false},
		{Replication{MinReplicas: 1, Timeout: 500 * time.Microsecond}, false},
		{Replication{MinReplicas: 1, Timeout: MaxReplicaWait + time.Millisecond}, false},
	} {
		if err := tc.r.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", tc.r, err, tc.ok)
		}
	}
}

// failoverSale is a redis-lua product of 8 units, one per buyer, sold through the sale service.
type failoverSale struct {
	ctx context.Context
	svc *sale.Service
	s   *Sale
	st  *store.Store
	d   *Deductor
	p   sale.Product
}

func newFailoverSale(t *testing.T, rdb redis.UniversalClient, minReplicas int) *failoverSale {
	t.Helper()
	s, err := New(rdb, "failover-"+itest.Suffix(6))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := itest.Store(t)
	d, err := NewDeductor(rdb, s, st.ReloadSale, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetReplication(Replication{MinReplicas: minReplicas, Timeout: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	svc, err := sale.NewService(sale.Options{
		Store: st, Deductors: map[sale.Strategy]sale.Deductor{Strategy: d}, DefaultStrategy: Strategy,
		NewOrderID: func() string {
			mu.Lock()
			defer mu.Unlock()
			n++
			return "o-" + itest.Suffix(6) + "-" + strconv.Itoa(n)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	p, err := svc.CreateProduct(t.Context(), sale.NewProduct{Name: "redis-lua failover", PriceCents: 1, Stock: 8, Strategy: Strategy,
		SaleStartsAt: now.Add(-time.Hour), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &failoverSale{ctx: t.Context(), svc: svc, s: s, st: st, d: d, p: p}
}

// purchase buys one unit for user with the key "k-"+user.
func (f *failoverSale) purchase(user string) (sale.Receipt, error) {
	return f.svc.Purchase(f.ctx, sale.PurchaseRequest{ProductID: f.p.ID, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user})
}

// BenchmarkConfirmedBatch is what waiting for a replica costs a batch, on a throwaway cluster and
// Sentinel (the table in docs/scaling.md): one op is one DeductBatch of batchSize purchases,
// min-replicas=0 the script alone, min-replicas=1 the script and its WAIT on the same
// connection; from 1 goroutine (ns/op: one batch's latency) and from 8, each on a product of its
// own (ns/op: the run's time over its batches). Compare the two of one topology in one run: the
// servers share the machine's cores with the client.
func BenchmarkConfirmedBatch(b *testing.B) {
	itest.Integration(b)
	const batchSize = 16
	for _, topo := range []struct {
		name     string
		topology func(testing.TB) itest.Failover
	}{{"cluster", itest.ClusterFailover}, {"sentinel", itest.SentinelFailover}} {
		b.Run(topo.name, func(b *testing.B) {
			rdb := topo.topology(b).Client(b)
			for _, goroutines := range []int{1, 8} {
				// ABBA: a drift of the shared machine over the run weighs on both alike.
				for _, n := range []int{1, 0, 0, 1} {
					b.Run("goroutines="+strconv.Itoa(goroutines)+"/min-replicas="+strconv.Itoa(n), func(b *testing.B) {
						benchConfirmed(b, rdb, n, batchSize, goroutines)
					})
				}
			}
		})
	}
}

func benchConfirmed(b *testing.B, rdb redis.UniversalClient, minReplicas, batchSize, goroutines int) {
	ctx := b.Context()
	s, err := New(rdb, "bench-"+itest.Suffix(6))
	if err != nil {
		b.Fatal(err)
	}
	noReload := func(context.Context, int64, sale.Strategy, func(uint64, uint64) []sale.Reservation) (sale.Product, []sale.KeyedReceipt, uint64, error) {
		return sale.Product{}, nil, 0, errors.New("the benchmark's sales are loaded, never rebuilt")
	}
	d, err := NewDeductor(rdb, s, noReload, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.SetReplication(Replication{MinReplicas: minReplicas, Timeout: time.Second}); err != nil {
		b.Fatal(err)
	}
	var products, users, ops atomic.Int64
	ops.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range goroutines {
		wg.Go(func() {
			id := products.Add(1)
			if err := s.Load(ctx, rdb, id, State{Epoch: 1, Initial: 1 << 30, Stock: 1 << 30, Limit: 1}); err != nil {
				b.Error(err)
				return
			}
			deductBatches(b, d, id, batchSize, &users, &ops)
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N*batchSize)/b.Elapsed().Seconds(), "purchases/s")
}

// deductBatches runs batches of batchSize new buyers on product id until ops runs out.
func deductBatches(b *testing.B, d *Deductor, id int64, batchSize int, users, ops *atomic.Int64) {
	batch := make([]sale.Reservation, batchSize)
	for ops.Add(-1) >= 0 {
		for i := range batch {
			u := "u" + strconv.FormatInt(users.Add(1), 10)
			batch[i] = sale.Reservation{Receipt: sale.Receipt{OrderID: "o-" + u, ProductID: id, UserID: u, Quantity: 1, Strategy: Strategy}, Epoch: 1}
		}
		errs, err := d.DeductBatch(b.Context(), batch)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			b.Error(err)
			return
		}
	}
}
