package sale_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
)

// queuedSale is openSale(id, stock) behind a waiting room.
func queuedSale(id int64, stock int) sale.Product {
	p := openSale(id, stock)
	p.Admission = sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 10, MaxActive: 10,
		Session: time.Minute, AbandonAfter: 10 * time.Second}
	return p
}

// passService is a Service over a memStore of ps that checks passes with a verifier of signer's
// key, at saleNow.
func passService(tb testing.TB, ps ...sale.Product) (*sale.Service, *memStore, *memDeductor, *admit.Signer) {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := admit.NewSigner(priv)
	if err != nil {
		tb.Fatal(err)
	}
	verifier, err := admit.NewVerifier(signer.Public())
	if err != nil {
		tb.Fatal(err)
	}
	st := newMemStore(ps...)
	d := &memDeductor{s: st}
	var n atomic.Int64
	svc, err := sale.NewService(sale.Options{
		Store:           st,
		Deductors:       map[sale.Strategy]sale.Deductor{sale.StrategyMySQL: d},
		DefaultStrategy: sale.StrategyMySQL,
		NewOrderID:      func() string { return fmt.Sprintf("order-%d", n.Add(1)) },
		Passes:          verifier,
		Refresh:         time.Hour,
		Now:             func() time.Time { return saleNow },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return svc, st, d, signer
}

// TestPassRefusalsCostNothing: a waiting-room sale's purchase without a valid pass is refused with
// the pass's own error, before the deduction and without a read, even with an Idempotency-Key (no
// replay is looked for); the genuine pass buys; an open sale ignores a pass.
func TestPassRefusalsCostNothing(t *testing.T) {
	svc, st, d, signer := passService(t, queuedSale(1, 5), openSale(2, 5))
	sign := func(buyer, saleID string, from, to time.Time) string {
		tok, err := signer.Sign(buyer, saleID, from, to)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	ctx := context.Background()
	buy := func(id int64, user, pass string) error {
		_, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: id, UserID: user, Quantity: 1, IdempotencyKey: "k-" + user, Pass: pass})
		return err
	}
	if got := queuedSale(1, 5).SaleID(); got != "1.1" {
		t.Fatalf("SaleID = %q, want 1.1", got)
	}
	// The first purchase loads the sale into memory; the refusals after it read nothing.
	if err := buy(1, "warm", ""); !errors.Is(err, sale.ErrPassMissing) {
		t.Fatalf("no pass: %v, want ErrPassMissing", err)
	}
	reads := st.productReads.Load()
	for _, tc := range []struct {
		name, pass string
		want       error
	}{
		{"none", "", sale.ErrPassMissing},
		{"expired", sign("alice", "1.1", saleNow.Add(-time.Hour), saleNow.Add(-time.Second)), sale.ErrPassExpired},
		{"another buyer's", sign("bob", "1.1", saleNow, saleNow.Add(time.Minute)), sale.ErrPassInvalid},
		{"another sale's", sign("alice", "2.1", saleNow, saleNow.Add(time.Minute)), sale.ErrPassInvalid},
		{"an earlier epoch's", sign("alice", "1.0", saleNow, saleNow.Add(time.Minute)), sale.ErrPassInvalid},
		{"garbage", "garbage", sale.ErrPassInvalid},
	} {
		err := buy(1, "alice", tc.pass)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if code := sale.CodeOf(err); code == sale.CodeInternal || code == sale.CodeInvalid {
			t.Errorf("%s: code %s", tc.name, code)
		}
	}
	if d.calls.Load() != 0 || st.receiptReads.Load() != 0 || st.productReads.Load() != reads {
		t.Errorf("the refusals cost %d deductions, %d receipt reads, %d product reads; want none",
			d.calls.Load(), st.receiptReads.Load(), st.productReads.Load()-reads)
	}
	if err := buy(1, "alice", sign("alice", "1.1", saleNow, saleNow.Add(time.Minute))); err != nil {
		t.Errorf("the genuine pass: %v", err)
	}
	if err := buy(2, "carol", "garbage"); err != nil {
		t.Errorf("an open sale with a stray pass: %v", err)
	}
}

// TestPassWithoutVerifier: a server that checks no passes refuses a waiting-room sale's
// purchases; it never lets one through unchecked.
func TestPassWithoutVerifier(t *testing.T) {
	f := newFixture(t, time.Hour, queuedSale(1, 5))
	_, err := f.svc.Purchase(context.Background(), sale.PurchaseRequest{ProductID: 1, UserID: "a", Quantity: 1, Pass: "x"})
	if !errors.Is(err, sale.ErrUnavailable) || f.d.calls.Load() != 0 {
		t.Errorf("purchase with a pass and no verifier: %v, %d deductions; want unavailable, none", err, f.d.calls.Load())
	}
}

// BenchmarkPurchasePass: the purchase path's cost of the pass, accepted purchases of an open sale
// against a waiting-room sale's with a genuine pass (one Ed25519 verification each).
func BenchmarkPurchasePass(b *testing.B) {
	for _, queued := range []bool{false, true} {
		name := "open"
		p := openSale(1, sale.MaxStock)
		if queued {
			name, p = "waiting_room", queuedSale(1, sale.MaxStock)
		}
		b.Run(name, func(b *testing.B) {
			svc, _, _, signer := passService(b, p)
			users := make([]string, 1024)
			passes := make([]string, len(users))
			for i := range users {
				users[i] = fmt.Sprint("buyer-", i)
				tok, err := signer.Sign(users[i], p.SaleID(), saleNow, saleNow.Add(time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				passes[i] = tok
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				j := i % len(users)
				i++
				if _, err := svc.Purchase(ctx, sale.PurchaseRequest{ProductID: 1, UserID: users[j], Quantity: 1, Pass: passes[j]}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
