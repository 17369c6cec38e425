package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestAdmissionRoundTrip: a product's admission rule is stored as created, read back by every
// read, kept by a reset that gives none and replaced by one that does; an open product stores
// none of the numbers.
func TestAdmissionRoundTrip(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	start, end := now.Add(time.Hour), now.Add(2*time.Hour)
	room := sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 12.5, MaxActive: 200, Session: 2 * time.Minute,
		QueueOpensAt: start.Add(-10 * time.Minute), Shuffle: true, AbandonAfter: 20 * time.Second}
	other := sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 1, MaxActive: 1, Session: time.Second,
		AbandonAfter: time.Hour}
	for _, tc := range []struct {
		name   string
		create sale.AdmissionRule
		reset  *sale.AdmissionRule
		// want after the create, and after the reset.
		want, wantReset sale.AdmissionRule
	}{
		{"open by default", sale.AdmissionRule{}, nil, openRule, openRule},
		{"open drops the numbers", sale.AdmissionRule{Mode: sale.AdmissionOpen, AdmitRate: 5, MaxActive: 5, Shuffle: true}, nil, openRule, openRule},
		{"waiting room kept by a reset", room, nil, room, room},
		{"waiting room changed by a reset", room, &other, room, other},
		{"waiting room opened by a reset", sale.AdmissionRule{}, &room, openRule, room},
		{"waiting room closed by a reset", room, &sale.AdmissionRule{Mode: sale.AdmissionOpen}, room, openRule},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := st.CreateProduct(ctx, sale.NewProduct{Name: tc.name, PriceCents: 1, Stock: 3, Strategy: sale.StrategyMySQL,
				SaleStartsAt: start, SaleEndsAt: end, PerUserLimit: 1, Admission: tc.create}, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, p.Admission); diff != "" {
				t.Errorf("created (-want +got):\n%s", diff)
			}
			read, err := st.Product(ctx, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, read.Admission); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
			r, err := st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 5, Admission: tc.reset}, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantReset, r.Admission); diff != "" {
				t.Errorf("reset (-want +got):\n%s", diff)
			}
			all, err := st.ProductsByID(ctx, []int64{p.ID})
			if err != nil || len(all) != 1 {
				t.Fatalf("products by id = %v, %v", all, err)
			}
			if diff := cmp.Diff(tc.wantReset, all[0].Admission); diff != "" {
				t.Errorf("read back after the reset (-want +got):\n%s", diff)
			}
		})
	}
}

// openRule is the admission rule of an open sale, as every read returns it.
var openRule = sale.AdmissionRule{Mode: sale.AdmissionOpen}

// TestResetRefusesAKeptQueueOpeningAfterTheStart: a reset that moves the sale before the queue
// opening it keeps is refused with the field to give anew, and changes nothing.
func TestResetRefusesAKeptQueueOpeningAfterTheStart(t *testing.T) {
	t.Parallel()
	st, _ := itest.Store(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	start := now.Add(time.Hour)
	room := sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 1, MaxActive: 1, Session: time.Minute,
		QueueOpensAt: start.Add(-time.Minute), AbandonAfter: time.Minute}
	p, err := st.CreateProduct(ctx, sale.NewProduct{Name: "moved", PriceCents: 1, Stock: 3, Strategy: sale.StrategyMySQL,
		SaleStartsAt: start, SaleEndsAt: start.Add(time.Hour), PerUserLimit: 1, Admission: room}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.ResetProduct(ctx, p.ID, sale.Reset{Stock: 1, SaleStartsAt: now, SaleEndsAt: start}, now)
	var ve *sale.ValidationError
	if !errors.As(err, &ve) || ve.Field != "admission.queue_opens_at" {
		t.Fatalf("reset = %v, want a validation error of admission.queue_opens_at", err)
	}
	got, err := st.Product(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got); diff != "" {
		t.Errorf("after the refused reset (-before +after):\n%s", diff)
	}
}
