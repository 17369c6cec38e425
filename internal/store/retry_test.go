package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestInTxRetriesLostDeadlocks: a transaction whose function reports a deadlock is rolled back and
// run again, four times in all; the fourth deadlock is returned as sale.ErrUnavailable.
func TestInTxRetriesLostDeadlocks(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	deadlock := &mysql.MySQLError{Number: 1213, Message: "Deadlock found when trying to get lock"}
	for _, tt := range []struct {
		name      string
		deadlocks int
		wantCalls int
	}{
		{"recovers", 2, 3},
		{"gives up", 10, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := st.InTx(ctx, "test", func(tx *gorm.DB) error {
				calls++
				// A statement, so that each attempt is a transaction the server saw.
				if err := tx.Exec("SELECT COUNT(*) FROM products").Error; err != nil {
					return err
				}
				if calls <= tt.deadlocks {
					return deadlock
				}
				return nil
			})
			if calls != tt.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tt.wantCalls)
			}
			gaveUp := tt.deadlocks >= tt.wantCalls
			switch {
			case !gaveUp && err != nil:
				t.Errorf("err = %v, want nil", err)
			case gaveUp && (!errors.Is(err, sale.ErrUnavailable) || !errors.Is(err, deadlock)):
				t.Errorf("err = %v, want the deadlock as sale.ErrUnavailable", err)
			}
		})
	}
}
