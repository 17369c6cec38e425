package stock

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// maxDuplicateRounds bounds how often a batch's INSERT is tried again after some of its purchases
// collided with committed ones (of the same users, from another replica, say).
const maxDuplicateRounds = 4

// errNothingTaken rolls a batch's transaction back when none of its purchases got stock; their
// outcomes (sold out) are already decided.
var errNothingTaken = errors.New("stock: no purchase of the batch got stock")

// checkBatch refuses a batch that breaks the BatchDeductor contract: empty, of several
// products, epochs or strategies, or with two purchases of one user.
func checkBatch(batch []sale.Reservation, st sale.Strategy) error {
	if len(batch) == 0 {
		return errors.New("stock: empty batch")
	}
	users := make(map[string]bool, len(batch))
	for _, r := range batch {
		switch {
		case r.ProductID != batch[0].ProductID || r.Epoch != batch[0].Epoch:
			return errors.New("stock: a batch must be of one product and one sale epoch")
		case r.Strategy != st:
			return fmt.Errorf("stock: a %s purchase was handed to the %s strategy", r.Strategy, st)
		case users[r.UserID]:
			return fmt.Errorf("stock: two purchases of user %q in one batch", r.UserID)
		}
		users[r.UserID] = true
	}
	return nil
}

// outcomes holds the decision of each purchase of a batch as a transaction attempt makes it.
type outcomes []error

// open returns the indexes of the purchases not refused yet.
func (o outcomes) open() []int {
	var out []int
	for i, err := range o {
		if err == nil {
			out = append(out, i)
		}
	}
	return out
}

// allocate hands stock to the purchases idx in arrival order, each one that still fits getting
// its units, exactly as if they had come one after another; the others are marked sold out. It
// returns the winners and the units they take. inserted says the transaction holds the
// reservations of idx: their keys are unused, which their refusals carry (sale.KeyUnused).
func (o outcomes) allocate(batch []sale.Reservation, idx []int, stock int, inserted bool) (winners []int, taken int) {
	left := stock
	for _, i := range idx {
		if batch[i].Quantity <= left {
			left -= batch[i].Quantity
			winners = append(winners, i)
		}
	}
	for _, i := range idx {
		if o[i] == nil && !contains(winners, i) {
			o[i] = fmt.Errorf("%w: %d left", sale.ErrSoldOut, left)
			if inserted {
				o[i] = sale.KeyUnused(o[i])
			}
		}
	}
	return winners, stock - left
}

// reserve inserts the reservations idx of batch and returns those it inserted. A purchase that
// collides with a committed one (its user bought the product, or used its key) is not inserted:
// its outcome says why, and the others are inserted without it, in the same transaction.
func (o outcomes) reserve(ctx context.Context, tx *store.PurchaseTx, batch []sale.Reservation, idx []int) ([]int, error) {
	for range maxDuplicateRounds {
		if len(idx) == 0 {
			return nil, nil
		}
		err := tx.Reserve(ctx, pick(batch, idx)...)
		if !errors.Is(err, store.ErrDuplicate) {
			return idx, err
		}
		conflicts, err := tx.Conflicts(ctx, batch[0].ProductID, pick(batch, idx))
		if err != nil {
			return nil, err
		}
		var rest []int
		for j, i := range idx {
			if conflicts[j] != nil {
				o[i] = conflicts[j]
			} else {
				rest = append(rest, i)
			}
		}
		idx = rest
	}
	return nil, fmt.Errorf("%w: the batch kept colliding with concurrent purchases of the same users", sale.ErrUnavailable)
}

// losers returns the indexes of idx that are not in winners.
func losers(idx, winners []int) []int {
	var out []int
	for _, i := range idx {
		if !contains(winners, i) {
			out = append(out, i)
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// minQuantity is the smallest quantity the batch asks for.
func minQuantity(batch []sale.Reservation) int {
	n := batch[0].Quantity
	for _, r := range batch[1:] {
		n = min(n, r.Quantity)
	}
	return n
}

func pick(batch []sale.Reservation, idx []int) []sale.Reservation {
	out := make([]sale.Reservation, len(idx))
	for i, j := range idx {
		out[i] = batch[j]
	}
	return out
}

func units(batch []sale.Reservation, idx []int) int {
	n := 0
	for _, i := range idx {
		n += batch[i].Quantity
	}
	return n
}

// single runs a batch of one and returns its outcome.
func single(errs []error, err error) error {
	if err != nil {
		return err
	}
	return errs[0]
}
