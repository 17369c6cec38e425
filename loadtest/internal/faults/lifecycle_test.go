package faults

import (
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// TestLifecycleCaughtUp: an order event published during the step and not consumed holds the
// audit back until it is; one published before the step does not count.
func TestLifecycleCaughtUp(t *testing.T) {
	itest.Integration(t)
	db, err := attack.OpenDB(itest.DatabaseDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := t.Context()
	publish := func(order string) int64 {
		t.Helper()
		res, err := db.ExecContext(ctx, `INSERT INTO order_events (order_id, product_id, user_id, kind, quantity, created_at, published_at)
			VALUES (?, 1, 'u', 'order.paid', 1, NOW(6), NOW(6))`, order)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	publish("before") // never consumed, but published before the step began
	time.Sleep(5 * time.Millisecond)
	began, err := dbNow(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	id := publish("during")

	published, behind, _, err := lifecycleCaughtUp(ctx, db, began, 300*time.Millisecond)
	if err != nil || published != 1 || behind != 1 {
		t.Fatalf("with the step's event not consumed: published %d, behind %d, %v; want 1, 1", published, behind, err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO order_events_consumed (event_id, product_id, kind, quantity, batch_token, consumed_at)
		VALUES (?, 1, 'order.paid', 1, 1, NOW(6))`, id); err != nil {
		t.Fatal(err)
	}
	published, behind, _, err = lifecycleCaughtUp(ctx, db, began, 300*time.Millisecond)
	if err != nil || published != 1 || behind != 0 {
		t.Fatalf("once consumed: published %d, behind %d, %v; want 1, 0", published, behind, err)
	}
}
