package stock

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// Returning units is a strategy operation like taking them (sale.Returner): each strategy gives
// the units of expired and cancelled orders back the way it takes them, so that a return can
// never race a deduction into a lost write. Every one marks the orders returned in the
// transaction that restores their units (store.PurchaseTx.MarkReturned), which is what makes a
// return happen once however often it runs.

var (
	_ sale.Returner = (*MySQL)(nil)
	_ sale.Returner = (*Locked)(nil)
	_ sale.Returner = (*None)(nil)
)

// Return gives the units back with one relative increment in the orders' transaction: the same
// row lock that orders the conditional UPDATEs of purchases orders it among them.
func (m *MySQL) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	var units int
	err := m.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		var err error
		if units, err = tx.MarkReturned(ctx, b.ProductID, orderIDs(b)); err != nil || units == 0 {
			return err
		}
		return tx.Give(ctx, b.ProductID, sale.StrategyMySQL, b.Epoch, units)
	})
	return units, err
}

// Return gives the units back inside the critical section, under the product's lock and with
// its fence, as a deduction writes: the lock strategies write the stock they read (stock =
// read − taken), so an increment made outside the lock between a holder's read and its write
// would be written over and the units lost.
func (l *Locked) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	ctx = l.withOwner(ctx, "return")
	lease, err := l.acquire(ctx, b.ProductID)
	if err != nil {
		return 0, err
	}
	defer l.release(ctx, lease)
	if !l.unfenced {
		if err := l.store.ClaimFence(ctx, b.ProductID, l.strategy, b.Epoch, fenceOf(lease)); err != nil {
			return 0, err
		}
	}
	var units int
	err = l.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		stock, err := tx.Stock(ctx, b.ProductID, l.strategy, b.Epoch)
		if err != nil {
			return err
		}
		if units, err = tx.MarkReturned(ctx, b.ProductID, orderIDs(b)); err != nil || units == 0 {
			return err
		}
		if l.unfenced {
			return tx.SetStock(ctx, b.ProductID, l.strategy, b.Epoch, stock+units)
		}
		return tx.SetStockFenced(ctx, b.ProductID, l.strategy, b.Epoch, fenceOf(lease), stock+units)
	})
	return units, err
}

// Return is as unsafe as none's deductions: read, add, write, with nothing between the read and
// the write. A deduction that writes in between is lost (or loses the return), which the audit
// shows as units that are neither sold nor in stock.
func (n *None) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	var units int
	err := n.store.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		stock, err := tx.Stock(ctx, b.ProductID, sale.StrategyNone, b.Epoch)
		if err != nil {
			return err
		}
		if units, err = tx.MarkReturned(ctx, b.ProductID, orderIDs(b)); err != nil || units == 0 {
			return err
		}
		return tx.SetStock(ctx, b.ProductID, sale.StrategyNone, b.Epoch, stock+units)
	})
	return units, err
}

func orderIDs(b sale.ReturnBatch) []string {
	ids := make([]string, len(b.Orders))
	for i, o := range b.Orders {
		ids[i] = o.OrderID
	}
	return ids
}
