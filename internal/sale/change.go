package sale

import "context"

// ChangeKind says what happened to a product's sale.
type ChangeKind uint8

// The changes replicas tell each other about.
const (
	// ChangeReset: the product was created or reset; Epoch is its new epoch. Cached state of an
	// older epoch is dropped.
	ChangeReset ChangeKind = iota + 1
	// ChangeSoldOut: a deduction found no stock left in Epoch. Purchases of that epoch are refused
	// from memory from now on.
	ChangeSoldOut
	// ChangeResync: changes may have been missed (the feed reconnected); re-read everything now.
	ChangeResync
	// ChangeRestocked: units of expired or cancelled orders went back into the stock of Epoch. A
	// state that says sold out (or too few) is stale: read the product afresh.
	ChangeRestocked
)

// Change is one message between replicas about a product's sale. Receiving one is never needed
// for correctness, only for speed: a replica that misses it refreshes its state within
// Options.Refresh, and a deduction never trusts cached state anyway (see Product.Epoch).
type Change struct {
	Kind      ChangeKind
	ProductID int64
	Epoch     uint64
}

// ChangeFeed broadcasts a change to every replica, this one included. Publish must not block on
// I/O: it is called on the purchase path.
type ChangeFeed interface {
	Publish(ctx context.Context, c Change)
}

type nopFeed struct{}

func (nopFeed) Publish(context.Context, Change) {}
