package checkout_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit/admittest"
	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// queueEnv is a waiting-room sale over the test's database and the real Redis: its room, the
// visitors' queue signing real passes, and a checkout service that tells the room of returns.
type queueEnv struct {
	*env
	svc      *checkout.Service
	rooms    *redisroom.Room
	queue    *waitroom.Queue
	verifier *admit.Verifier
	p        sale.Product
}

func newQueueEnv(t *testing.T, stockN int, rate float64) *queueEnv {
	t.Helper()
	e := newEnv(t)
	rooms, err := redisroom.New(itest.Redis(t), "checkout-"+itest.Suffix(8))
	if err != nil {
		t.Fatal(err)
	}
	returns, err := waitroom.NewReturns(rooms, e.st.Product)
	if err != nil {
		t.Fatal(err)
	}
	signer, verifier := admittest.Keys(t)
	queue, err := waitroom.NewQueue(rooms, signer, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	p, err := e.st.CreateProduct(t.Context(), sale.NewProduct{
		Name: "queued " + itest.Suffix(6), PriceCents: 250, Stock: stockN, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now.Add(-time.Minute), SaleEndsAt: now.Add(time.Hour), PerUserLimit: 1,
		Admission: sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: rate, MaxActive: 100,
			Session: time.Minute, AbandonAfter: time.Minute},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rooms.Delete(context.Background(), p.SaleID()) })
	return &queueEnv{env: e, svc: e.service(t, 0, 0, checkout.Options{Queues: returns}), rooms: rooms, queue: queue, verifier: verifier, p: p}
}

func (q *queueEnv) join(t *testing.T, buyer string) waitroom.Ticket {
	t.Helper()
	tk, err := q.queue.Join(t.Context(), q.p, buyer)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func (q *queueEnv) poll(t *testing.T, buyer string) waitroom.Ticket {
	t.Helper()
	tk, err := q.queue.Status(t.Context(), q.p, buyer)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// admitted runs the room's admissions (as the replicas' tickers do) for a little over the time
// the room's rate needs to give its next admission, and returns who was admitted meanwhile.
func (q *queueEnv) admitted(t *testing.T, over time.Duration) []string {
	t.Helper()
	var who []string
	for end := time.Now().Add(over); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		a, err := q.rooms.Admit(t.Context(), q.p.SaleID())
		if err != nil {
			t.Fatal(err)
		}
		who = append(who, a.Admitted...)
	}
	return who
}

// wantStates polls each buyer and wants its state.
func (q *queueEnv) wantStates(t *testing.T, want map[string]waitroom.State) {
	t.Helper()
	for b, w := range want {
		if tk := q.poll(t, b); tk.State != w {
			t.Errorf("%s polls: %v, want %v", b, tk.State, w)
		}
	}
}

// wantPass wants buyer admitted with a genuine pass of the sale.
func (q *queueEnv) wantPass(t *testing.T, buyer string) {
	t.Helper()
	tk := q.poll(t, buyer)
	if tk.State != waitroom.Admitted || tk.Pass == "" {
		t.Fatalf("%s polls: %+v, want admitted with a pass", buyer, tk)
	}
	if err := q.verifier.Verify(tk.Pass, buyer, q.p.SaleID(), time.Now()); err != nil {
		t.Fatalf("%s's pass: %v", buyer, err)
	}
}

// TestReturnedUnitsAdmitNextInLine, against MySQL and Redis: a waiting-room sale sells out with
// visitors in line; a cancelled order's unit admits the next in line (who gets a pass), an
// expired order's the one after, and nobody else: not the rest of the line, not a newcomer; a
// replayed cancel and the expirer's later rounds give nothing back and admit nobody more.
func TestReturnedUnitsAdmitNextInLine(t *testing.T) {
	q := newQueueEnv(t, 2, 2) // a second's worth of the rate is 2: alice and bob at once
	ctx := t.Context()
	for _, b := range []string{"alice", "bob", "carol", "dave", "erin"} {
		if tk := q.join(t, b); tk.State != waitroom.Waiting {
			t.Fatalf("%s joins: %+v, want waiting", b, tk)
		}
	}
	if got := q.admitted(t, 100*time.Millisecond); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("admitted %v, want [alice bob]", got)
	}
	orders := map[string]string{}
	for _, b := range []string{"alice", "bob"} {
		q.wantPass(t, b)
		id, err := q.buy(t, q.p, b, true)
		if err != nil {
			t.Fatal(err)
		}
		orders[b] = id
	}
	// Sold out: the replicas' tickers tell the room (waitroom.Ticker; here directly).
	if err := q.rooms.SoldOut(ctx, q.p.SaleID()); err != nil {
		t.Fatal(err)
	}
	q.wantStates(t, map[string]waitroom.State{"carol": waitroom.SoldOut, "dave": waitroom.SoldOut, "erin": waitroom.SoldOut})

	// alice cancels: her unit goes to carol, the next in line.
	if o, err := q.svc.Cancel(ctx, orders["alice"], "alice"); err != nil || !o.Returned {
		t.Fatalf("alice cancels: %+v, %v; want cancelled and returned", o, err)
	}
	if got := q.admitted(t, 1200*time.Millisecond); !slices.Equal(got, []string{"carol"}) {
		t.Fatalf("admitted after alice's cancel: %v, want [carol]", got)
	}
	q.wantPass(t, "carol")
	if tk := q.join(t, "frank"); tk.State != waitroom.SoldOut {
		t.Errorf("frank joins after the return: %v, want sold_out", tk.State)
	}
	q.wantStates(t, map[string]waitroom.State{"dave": waitroom.SoldOut, "erin": waitroom.SoldOut})

	// Replays give nothing back and admit nobody more.
	if o, err := q.svc.Cancel(ctx, orders["alice"], "alice"); err != nil || o.Status != sale.StatusCancelled {
		t.Fatalf("alice cancels again: %+v, %v; want her cancelled order", o, err)
	}
	if expired, returned := q.svc.Round(ctx); expired != 0 || returned != 0 {
		t.Fatalf("a round after the cancel: %d expired, %d returned; want nothing", expired, returned)
	}
	if got := q.admitted(t, 1200*time.Millisecond); len(got) != 0 {
		t.Fatalf("admitted after the replays: %v, want nobody", got)
	}

	// bob's payment window runs out: the expirer's return admits dave, and only dave.
	q.due(t, orders["bob"])
	if expired, returned := q.svc.Round(ctx); expired != 1 || returned != 1 {
		t.Fatalf("the expirer's round: %d expired, %d returned; want 1, 1", expired, returned)
	}
	for range 2 {
		if expired, returned := q.svc.Round(ctx); expired != 0 || returned != 0 {
			t.Fatalf("the expirer's next round: %d expired, %d returned; want nothing", expired, returned)
		}
	}
	if got := q.admitted(t, 2500*time.Millisecond); !slices.Equal(got, []string{"dave"}) {
		t.Fatalf("admitted after bob's order expired: %v, want [dave]", got)
	}
	q.wantPass(t, "dave")
	q.wantStates(t, map[string]waitroom.State{"erin": waitroom.SoldOut, "frank": waitroom.SoldOut})
	credit, err := itest.Redis(t).HGet(ctx, q.rooms.Keys(q.p.SaleID()).Meta, "credit").Int()
	if err != nil || credit != 0 {
		t.Errorf("the room's credit: %d (%v), want 0: every returned unit admitted once", credit, err)
	}
	q.audit(t, q.p)
}

// TestReturnsOfAnOpenSaleTellNoRoom: the units of an open sale go back without a word to any
// room: none is created.
func TestReturnsOfAnOpenSaleTellNoRoom(t *testing.T) {
	q := newQueueEnv(t, 1, 2)
	p := q.product(t, sale.StrategyMySQL, 1)
	id, err := q.buy(t, p, "alice", true)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := q.svc.Cancel(t.Context(), id, "alice"); err != nil || !o.Returned {
		t.Fatalf("cancel: %+v, %v", o, err)
	}
	n, err := itest.Redis(t).Exists(t.Context(), q.rooms.Keys(p.SaleID()).All()...).Result()
	if err != nil || n != 0 {
		t.Errorf("keys of the open sale's room: %d (%v), want none", n, err)
	}
}
