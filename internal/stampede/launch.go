package stampede

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Sales is what an admin's stampede needs of the sale: the product it targets, and its reset.
// *sale.Service implements it.
type Sales interface {
	Product(ctx context.Context, id int64) (sale.Product, error)
	ResetProduct(ctx context.Context, id int64, r sale.Reset) (sale.Product, error)
}

// Request is an admin's stampede: Buyers simulated buyers on a product. When Strategy or Stock is
// given, the product is reset first; the other one then keeps the product's current strategy,
// or its initial stock.
type Request struct {
	ProductID int64
	Buyers    int
	Strategy  string
	Stock     *int
}

// Launcher is the admin's use case "reset the product if asked, then run a stampede on it".
type Launcher struct {
	runner *Runner
	sales  Sales
}

// NewLauncher returns a Launcher running its stampedes on runner and resetting through sales.
func NewLauncher(runner *Runner, sales Sales) (*Launcher, error) {
	if runner == nil || sales == nil {
		return nil, errors.New("stampede: a launcher needs a runner and the sales")
	}
	return &Launcher{runner: runner, sales: sales}, nil
}

// Launch checks req, then starts the stampede. The product is looked up (ErrNotFound before
// anything runs) and, when asked, reset through the reset use case only once the runner is
// reserved for this stampede, so that a refused one (ErrBusy) resets nothing.
func (l *Launcher) Launch(ctx context.Context, req Request) (Progress, error) {
	if n := l.runner.MaxBuyers(); req.Buyers < 1 || req.Buyers > n {
		return Progress{}, &sale.ValidationError{Field: "buyers", Reason: fmt.Sprintf("must be between 1 and %d", n)}
	}
	var strategy sale.Strategy
	if req.Strategy != "" {
		var err error
		if strategy, err = sale.ParseStrategy(req.Strategy); err != nil {
			return Progress{}, err
		}
	}
	reset := strategy != "" || req.Stock != nil
	prepare := func(ctx context.Context) error {
		p, err := l.sales.Product(ctx, req.ProductID)
		if err != nil || !reset {
			return err
		}
		r := sale.Reset{Stock: p.InitialStock, Strategy: strategy}
		if req.Stock != nil {
			r.Stock = *req.Stock
		}
		_, err = l.sales.ResetProduct(ctx, req.ProductID, r)
		return err
	}
	return l.runner.Start(ctx, Plan{ProductID: req.ProductID, Buyers: req.Buyers, Prepare: prepare})
}

// Progress returns where the stampede id stands (see Runner.Progress).
func (l *Launcher) Progress(ctx context.Context, id string) (Progress, error) {
	return l.runner.Progress(ctx, id)
}
