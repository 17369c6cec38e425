package waitroom_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit/admittest"
	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// queueFixture is a Queue over rooms of the test Redis under a namespace of its own, its keys
// deleted at the end, and the verifier of its passes.
func queueFixture(t *testing.T, ids ...string) (*waitroom.Queue, *redisroom.Room, *admit.Verifier) {
	t.Helper()
	itest.Integration(t)
	rdb := itest.Redis(t)
	rooms, err := redisroom.New(rdb, "test-"+itest.Suffix(8))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, id := range ids {
			_ = rdb.Del(context.Background(), rooms.Keys(id).All()...).Err()
		}
	})
	signer, verifier := admittest.Keys(t)
	q, err := waitroom.NewQueue(rooms, signer, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q, rooms, verifier
}

func queuedProduct(id int64) sale.Product {
	now := time.Now().Truncate(time.Second)
	return sale.Product{ID: id, Epoch: 1, Stock: 10, InitialStock: 10, PerUserLimit: 1, Strategy: sale.StrategyMySQL,
		SaleStartsAt: now.Add(-time.Second), SaleEndsAt: now.Add(time.Hour),
		Admission: sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 100, MaxActive: 100, Session: time.Minute, AbandonAfter: 9 * time.Second}}
}

// TestQueueConcurrentJoins: joins racing on one replica's Queue (its first use of the sale, the
// room configured lazily by whichever comes first) give each buyer one ticket, the same to all
// of its requests, and distinct buyers distinct tickets.
func TestQueueConcurrentJoins(t *testing.T) {
	p := queuedProduct(7)
	q, _, _ := queueFixture(t, p.SaleID())
	const buyers, tries = 20, 3
	tickets := make([][tries]int64, buyers)
	var wg sync.WaitGroup
	errs := make(chan error, buyers*tries)
	for b := range buyers {
		for i := range tries {
			wg.Go(func() {
				tk, err := q.Join(context.Background(), p, fmt.Sprint("buyer-", b))
				if err != nil {
					errs <- err
					return
				}
				tickets[b][i] = tk.Ticket
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for b, ts := range tickets {
		for _, tk := range ts[1:] {
			if tk != ts[0] {
				t.Errorf("buyer-%d got tickets %v: want one", b, ts)
			}
		}
		if other, dup := seen[ts[0]]; dup {
			t.Errorf("buyer-%d and buyer-%d share ticket %d", b, other, ts[0])
		}
		seen[ts[0]] = b
		if ts[0] < 1 || ts[0] > buyers {
			t.Errorf("buyer-%d: ticket %d, want 1..%d", b, ts[0], buyers)
		}
	}
}

// TestQueueTicket: what a visitor is told as it goes: the wait and the poll while in line, a pass
// for its buyer and sale once admitted, and the refusals.
func TestQueueTicket(t *testing.T) {
	p := queuedProduct(8)
	q, rooms, verifier := queueFixture(t, p.SaleID())
	ctx := context.Background()
	for i := range 3 {
		if _, err := q.Join(ctx, p, fmt.Sprint("early-", i)); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := q.Join(ctx, p, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != waitroom.Waiting || tk.Ticket != 4 || tk.Ahead() != 3 || !tk.WaitKnown || tk.Pass != "" {
		t.Fatalf("alice joins behind three: %+v", tk)
	}
	// 3 s of abandon timeout over 3 polls: a poll at most every 3 s, at least every 500 ms.
	if tk.PollAfter < waitroom.MinPoll || tk.PollAfter > 3*time.Second {
		t.Errorf("alice polls in %v; want between %v and 3s", tk.PollAfter, waitroom.MinPoll)
	}
	if _, err := rooms.Admit(ctx, p.SaleID()); err != nil {
		t.Fatal(err)
	}
	tk, err = q.Status(ctx, p, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != waitroom.Admitted || tk.Pass == "" || tk.PassExpires.IsZero() {
		t.Fatalf("alice polls once admitted: %+v", tk)
	}
	if err := verifier.Verify(tk.Pass, "alice", p.SaleID(), time.Now()); err != nil {
		t.Errorf("alice's pass: %v", err)
	}
	if err := verifier.Verify(tk.Pass, "alice", "8.2", time.Now()); !errors.Is(err, sale.ErrPassInvalid) {
		t.Errorf("alice's pass in the next sale of the product: %v, want invalid", err)
	}

	open := queuedProduct(9)
	open.Admission = sale.AdmissionRule{Mode: sale.AdmissionOpen}
	later := queuedProduct(10)
	later.SaleStartsAt = time.Now().Add(time.Hour)
	later.Admission.QueueOpensAt = time.Now().Add(time.Minute)
	ended := queuedProduct(11)
	ended.SaleEndsAt = time.Now().Add(-time.Second)
	for _, tc := range []struct {
		name  string
		p     sale.Product
		buyer string
		want  error
	}{
		{"an open sale", open, "alice", waitroom.ErrNoWaitingRoom},
		{"before the queue opens", later, "alice", waitroom.ErrQueueNotOpen},
		{"after the sale", ended, "alice", sale.ErrSaleEnded},
		{"a bad buyer", p, "a b", sale.ErrInvalid},
	} {
		if _, err := q.Join(ctx, tc.p, tc.buyer); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestQueueRoomLost: a room deleted under a replica that configured it (Redis lost it) is set up
// again at the next visit, not answered 503 for ever.
func TestQueueRoomLost(t *testing.T) {
	p := queuedProduct(12)
	q, rooms, _ := queueFixture(t, p.SaleID())
	ctx := context.Background()
	if _, err := q.Join(ctx, p, "alice"); err != nil {
		t.Fatal(err)
	}
	if err := rooms.Delete(ctx, p.SaleID()); err != nil {
		t.Fatal(err)
	}
	tk, err := q.Status(ctx, p, "alice")
	if err != nil || tk.State != waitroom.NotJoined {
		t.Fatalf("alice polls the lost room: %+v, %v; want not_joined (she joins again)", tk, err)
	}
	if tk, err := q.Join(ctx, p, "alice"); err != nil || tk.Ticket != 1 {
		t.Errorf("alice joins the new room: %+v, %v", tk, err)
	}
}
