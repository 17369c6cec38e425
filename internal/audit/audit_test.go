package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestWaitDrainedKeepsTheLastFacts: a wait that ends while it reads returns the facts of its last
// complete read, not the empty ones of the read cut short (the load test once judged a product
// from those: stock 0 of 0 instead of 2 of 2).
func TestWaitDrainedKeepsTheLastFacts(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	db := st.DB()
	res, err := db.ExecContext(t.Context(), `INSERT INTO products
		(name, price_cents, stock, initial_stock, strategy, sale_starts_at, sale_ends_at, per_user_limit, created_at, updated_at)
		VALUES ('audit', 100, 2, 2, 'mysql', NOW(6), NOW(6) + INTERVAL 1 HOUR, 1, NOW(6), NOW(6))`)
	if err != nil {
		t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		// One purchase acknowledged that never reaches MySQL: the wait runs to its end, polling
		// with no pause, so its end falls inside a read most of the time. Long enough for the
		// first read to end before it even on a busy machine (20 ms was not, once, in make test).
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(150+3*i)*time.Millisecond)
		f, err := audit.WaitDrained(ctx, db, id, 1, 0)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait %d: error %v, want the deadline", i, err)
		}
		if f.ProductID != id || f.InitialStock != 2 || f.Stock != 2 {
			t.Fatalf("wait %d: facts %+v, want the product's (initial 2, stock 2)", i, f)
		}
	}
}
