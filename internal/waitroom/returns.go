package waitroom

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// ReturnRooms is what Returns tells of returned units (internal/waitroom/redisroom's Room).
type ReturnRooms interface {
	// Returned credits saleID's room with n admissions of the next in line once it is sold out.
	// It is a counter: each call credits again.
	Returned(ctx context.Context, saleID string, n int) error
}

// Returns tells a sale's waiting room of the units that came back to it, so that the next in
// line are admitted for them (checkout's Queues). Only a waiting-room sale is told: the product
// says which, read by product (the process that returns units may hold no products in memory:
// a worker's expirer), once per returned batch.
type Returns struct {
	rooms   ReturnRooms
	product func(ctx context.Context, id int64) (sale.Product, error)
}

// NewReturns returns the teller over rooms, reading products with product.
func NewReturns(rooms ReturnRooms, product func(ctx context.Context, id int64) (sale.Product, error)) (*Returns, error) {
	if rooms == nil || product == nil {
		return nil, errors.New("waitroom: NewReturns needs ReturnRooms and a product reader")
	}
	return &Returns{rooms: rooms, product: product}, nil
}

// Returned tells the room of product productID's sale in epoch that n units came back. An open
// sale, or a sale of another epoch than the product's now (a reset came between: the room of
// that epoch is past), is told nothing. A room that does not exist is not an error: nobody
// queued, nobody is owed an admission. The caller calls it once per return (ReturnRooms
// counts).
func (r *Returns) Returned(ctx context.Context, productID int64, epoch uint64, n int) error {
	p, err := r.product(ctx, productID)
	if err != nil {
		return fmt.Errorf("waitroom: returned units of product %d: %w", productID, err)
	}
	if !p.Admission.WaitingRoom() || p.Epoch != epoch {
		return nil
	}
	if err := r.rooms.Returned(ctx, p.SaleID(), n); err != nil && !errors.Is(err, ErrNoRoom) {
		return fmt.Errorf("waitroom: returned units of sale %s: %w", p.SaleID(), err)
	}
	return nil
}
