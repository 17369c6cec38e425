package redislua

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Returning units is a decision like a purchase: the return script puts the units of
// closed orders back into the sale's stock in Redis, each order once (the sale's Returned set),
// and appends one entry per order to the sale's stream; the persister then marks the orders
// returned in MySQL and gives their units back there, idempotently (an order marked already gives
// nothing), so that MySQL's stock stays what Redis holds.
//
// A rebuilt state counts the returns MySQL holds, and knows their orders (ReturnedOrders), so that
// no return is applied twice: not even one the expirer read as due before the rebuild and hands
// over after it. Return entries that Redis still held are dropped by a rebuild rather than written
// (their orders are still due in MySQL, and the expirer's next round returns them into the new
// state); a persister still holding them is refused by the new generation.

//go:embed return.lua
var returnLua string

var returnScript = redis.NewScript(returnLua)

// ReturnOutcome is what the return script did.
type ReturnOutcome struct {
	// Result is Accepted (every order is returned now, or was already), NotLoaded or StaleEpoch.
	Result Result
	// Units are the units the orders returned now gave back.
	Units int
	// Epoch is the epoch of the state in Redis (StaleEpoch).
	Epoch uint64
}

// Return puts the units of orders (closed orders of productID's sale in epoch) back into the
// sale's stock, each order once, in one run of the return script.
func (s *Sale) Return(ctx context.Context, productID int64, epoch uint64, orders []sale.ClosedOrder) (ReturnOutcome, error) {
	args := make([]any, 1, 1+3*len(orders))
	args[0] = epoch
	for _, o := range orders {
		if o.Quantity < 1 || o.OrderID == "" || o.UserID == "" || strings.ContainsRune(o.OrderID, ' ') || strings.ContainsRune(o.UserID, ' ') {
			return ReturnOutcome{}, fmt.Errorf("redislua: invalid order to return %+v", o)
		}
		args = append(args, o.OrderID, o.UserID, o.Quantity)
	}
	k := s.Keys(productID)
	res, err := returnScript.Run(ctx, s.rdb, []string{k.State, k.Returned, k.Stream}, args...).StringSlice()
	if err != nil {
		return ReturnOutcome{}, fmt.Errorf("redislua: return script: %w", err)
	}
	switch {
	case len(res) == 1 && res[0] == "not_loaded":
		return ReturnOutcome{Result: NotLoaded}, nil
	case len(res) == 2 && (res[0] == "stale_epoch" || res[0] == "returned"):
		n, err := strconv.ParseUint(res[1], 10, 63)
		if err != nil {
			break
		}
		if res[0] == "stale_epoch" {
			return ReturnOutcome{Result: StaleEpoch, Epoch: n}, nil
		}
		return ReturnOutcome{Result: Accepted, Units: int(n)}, nil
	}
	return ReturnOutcome{}, fmt.Errorf("redislua: reply %q to a return", res)
}

// ReturnedOrders reads the orders of productID's sale whose units MySQL has taken back
// (*store.Store's ReturnedOrders). A rebuild reads them after its reload (which started a new
// generation, so that no persister can mark more of them returned until the state is loaded).
type ReturnedOrders func(ctx context.Context, productID int64) ([]string, error)

// SetReturned gives the deductor what a rebuilt state learns its returned orders from, and with it
// the Return of a sale.Returner: without it, Return refuses, since a state rebuilt without them
// could return an order twice. Call it before the deductor is used.
func (d *Deductor) SetReturned(f ReturnedOrders) { d.returned = f }

var _ sale.Returner = (*Deductor)(nil)

// Return gives the units of the batch's closed orders back to the sale in Redis, in the script,
// each order once (see the package's returns), and wakes the persister, which writes them to MySQL:
// the orders' returned_at and the product's stock. It returns the units returned now; an order
// returned before (by an earlier round whose return MySQL does not show yet) gives nothing. A state
// missing from Redis, or of an older epoch, is rebuilt first, as for a purchase; a batch of an
// epoch the sale has left is sale.ErrSaleChanged.
func (d *Deductor) Return(ctx context.Context, b sale.ReturnBatch) (int, error) {
	if d.returned == nil {
		return 0, errors.New("redislua: returns are not wired: the deductor needs SetReturned")
	}
	if len(b.Orders) == 0 {
		return 0, nil
	}
	var units int
	err := d.inState(ctx, b.ProductID, b.Epoch, func() (Result, uint64, error) {
		out, err := d.sale.Return(ctx, b.ProductID, b.Epoch, b.Orders)
		units = out.Units
		return out.Result, out.Epoch, err
	})
	if err != nil {
		return 0, err
	}
	if units > 0 {
		d.accepted(b.ProductID, 0)
	}
	return units, nil
}

// returnEntry reads a return's stream entry (one field, ret: "order_id user_id quantity epoch
// gen"): the order, its epoch and the generation of the state that returned it.
func returnEntry(productID int64, m redis.XMessage) (sale.ClosedOrder, uint64, uint64, error) {
	v, _ := m.Values["ret"].(string)
	f := strings.Split(v, " ")
	bad := func(err error) (sale.ClosedOrder, uint64, uint64, error) {
		return sale.ClosedOrder{}, 0, 0, fmt.Errorf("redislua: malformed stream entry %s %v: %v", m.ID, m.Values, err)
	}
	if len(f) != 5 || f[0] == "" || f[1] == "" || len(m.Values) != 1 {
		return bad(nil)
	}
	qty, err1 := strconv.Atoi(f[2])
	epoch, err2 := strconv.ParseUint(f[3], 10, 64)
	gen, err3 := strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return bad(err)
	}
	return sale.ClosedOrder{OrderID: f[0], ProductID: productID, UserID: f[1], Quantity: qty}, epoch, gen, nil
}
