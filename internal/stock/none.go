package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// None is the negative control: the read-check-write of the lock strategies with no lock and no
// condition. Two buyers who read the same stock both pass the check and both write stock-1, so it
// oversells under concurrency. It exists to prove that the tests and the load test catch an
// oversell, and is served only when unsafe strategies are explicitly allowed.
type None struct {
	store *store.Store
}

var _ sale.Deductor = (*None)(nil)

// NewNone returns the unsafe strategy.
func NewNone(st *store.Store) (*None, error) {
	if st == nil {
		return nil, errors.New("stock: nil store")
	}
	return &None{store: st}, nil
}

// Deduct reads, checks and writes with nothing to stop a concurrent purchase in between.
func (n *None) Deduct(ctx context.Context, r sale.Reservation) error {
	return n.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		return readCheckWrite(ctx, tx, r, sale.StrategyNone, func(stock int) error {
			return tx.SetStock(ctx, r.ProductID, sale.StrategyNone, r.Epoch, stock)
		})
	})
}

// readCheckWrite is the critical section the lock strategies protect (for a batch) and None
// leaves bare: read the stock, check it, reserve, and hand the new stock to write.
func readCheckWrite(ctx context.Context, tx *store.PurchaseTx, r sale.Reservation, st sale.Strategy, write func(stock int) error) error {
	stock, err := tx.Stock(ctx, r.ProductID, st, r.Epoch)
	if err != nil {
		return err
	}
	if stock < r.Quantity {
		return fmt.Errorf("%w: %d left", sale.ErrSoldOut, stock)
	}
	if err := tx.Reserve(ctx, r); errors.Is(err, store.ErrDuplicate) {
		conflicts, cerr := tx.Conflicts(ctx, r.ProductID, []sale.Reservation{r})
		if cerr != nil {
			return cerr
		}
		if conflicts[0] != nil {
			return conflicts[0]
		}
		// The row it collided with is gone already (an admin reset): the buyer may try again.
		return fmt.Errorf("%w: the purchase collided with one that no longer exists", sale.ErrUnavailable)
	} else if err != nil {
		return err
	}
	return write(stock - r.Quantity)
}
