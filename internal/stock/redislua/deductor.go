package redislua

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Deductor is the `redis-lua` strategy as the sale service sees it (a sale.Deductor and
// sale.BatchDeductor, a sale.ReceiptKeeper, a sale.Preparer and, once SetReturned, a
// sale.Returner): a purchase is decided by the script alone, and accepted once it is in the sale's
// stream; a persister takes it to MySQL afterwards. Returns go the same way (see Return).
type Deductor struct {
	sale     *Sale
	rdb      redis.UniversalClient
	reload   Reload
	returned ReturnedOrders // nil: no returns (SetReturned)
	accepted func(productID int64, purchases int)
	repl     Replication // the zero value: no WAIT (SetReplication)
}

// NewDeductor returns the strategy over s's sales in rdb. reload reads a sale from MySQL to load or
// rebuild its state (*store.Store's ReloadSale); accepted, optional, is told of every accepted
// batch, with the purchases it accepted, and of every return that gave units back, with none (the
// persister's Wake).
func NewDeductor(rdb redis.UniversalClient, s *Sale, reload Reload, accepted func(productID int64, purchases int)) (*Deductor, error) {
	if rdb == nil || s == nil || reload == nil {
		return nil, errors.New("redislua: a deductor needs Redis, the sale and a reload from MySQL")
	}
	if accepted == nil {
		accepted = func(int64, int) {}
	}
	return &Deductor{sale: s, rdb: rdb, reload: reload, accepted: accepted}, nil
}

// Deduct decides one purchase: a batch of its own.
func (d *Deductor) Deduct(ctx context.Context, r sale.Reservation) error {
	errs, err := d.DeductBatch(ctx, []sale.Reservation{r})
	if err != nil {
		return err
	}
	return errs[0]
}

// DeductBatch runs the script once for the batch (a sale.BatchDeductor: the purchases of one
// product and epoch that queued up together, each of another buyer), deciding each in order. A
// state missing from Redis, or left from an older epoch, is rebuilt from MySQL first (see
// Sale.Rebuild). While another process rebuilds it the batch waits for it a little (rebuildWait:
// a rebuild is one MySQL read and one Redis write), then is refused as unavailable (503),
// deducting nothing. A replayed or conflicting key is reported as sale.ErrIdempotencyKeyInUse:
// the service then reads the receipt (Receipt) and answers as the first purchase was answered.
// With replicas to wait for (SetReplication), a batch that accepted any purchase sends WAIT after
// the script, on its connection, and its accepted purchases are sale.ErrUnconfirmed unless enough
// replicas acknowledged them in time.
func (d *Deductor) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	id, epoch := batch[0].ProductID, batch[0].Epoch
	as := make([]Attempt, len(batch))
	users := make(map[string]bool, len(batch))
	for i, r := range batch {
		if r.ProductID != id || r.Epoch != epoch || users[r.UserID] {
			return nil, errors.New("redislua: a batch spans products or epochs, or holds two purchases of one buyer")
		}
		users[r.UserID] = true
		as[i] = Attempt{Epoch: epoch, UserID: r.UserID, Quantity: r.Quantity, Key: r.IdempotencyKey, OrderID: r.OrderID, TraceParent: r.TraceParent}
	}
	var out []Outcome
	confirmed := true
	err := d.inState(ctx, id, epoch, func() (Result, uint64, error) {
		var err error
		out, confirmed, err = d.purchase(ctx, id, epoch, as)
		if err != nil {
			return 0, 0, err
		}
		return out[0].Result, out[0].Epoch, nil
	})
	if err != nil {
		return nil, err
	}
	return d.decided(id, out, confirmed), nil
}

// purchase runs the script for as and, with replicas to wait for and a purchase accepted, WAIT
// on the same connection to the sale's master. confirmed is false when the replicas did not
// acknowledge the accepted purchases in time.
func (d *Deductor) purchase(ctx context.Context, id int64, epoch uint64, as []Attempt) (out []Outcome, confirmed bool, err error) {
	if d.repl.MinReplicas == 0 {
		out, err = d.sale.PurchaseBatch(ctx, id, epoch, as)
		return out, true, err
	}
	err = d.onMaster(ctx, d.sale.Keys(id).State, func(c *redis.Conn) error {
		var err error
		if out, err = d.sale.purchaseOn(ctx, c, id, epoch, as); err != nil {
			return err
		}
		confirmed = !anyAccepted(out) || d.confirmed(ctx, c)
		return nil
	})
	return out, confirmed, err
}

func anyAccepted(out []Outcome) bool {
	for _, o := range out {
		if o.Result == Accepted {
			return true
		}
	}
	return false
}

// inState runs script, a run of one of the sale's scripts that reports the state it found (its
// Result: NotLoaded, StaleEpoch with the state's epoch, or anything else once it decided), until
// it ran on productID's state of epoch: a state missing, or left from an older epoch, is rebuilt
// from MySQL once (see Sale.Rebuild), waiting a little while another process rebuilds it
// (rebuildWait: a rebuild is one MySQL read and one Redis write). It returns sale.ErrSaleChanged
// when the state is of a later epoch, and sale.ErrUnavailable when Redis fails or the state is
// still not there.
func (d *Deductor) inState(ctx context.Context, productID int64, epoch uint64, script func() (Result, uint64, error)) error {
	var waited time.Duration
	for rebuilt := false; ; {
		r, have, err := script()
		switch {
		case err != nil:
			return fmt.Errorf("%w: %w", sale.ErrUnavailable, err)
		case r == StaleEpoch && have > epoch:
			return sale.ErrSaleChanged // admitted under rules that are gone
		case r != NotLoaded && r != StaleEpoch:
			return nil
		}
		// Not loaded, or loaded for an epoch before the batch's.
		if rebuilt {
			return fmt.Errorf("%w: the sale's state in Redis is not loaded", sale.ErrUnavailable)
		}
		err = d.sale.Rebuild(ctx, d.rdb, productID, epoch, false, d.reload, d.returned)
		switch {
		case err == nil:
			rebuilt = true
		case errors.Is(err, ErrRebuilding) && waited < rebuildWait:
			pause := min(rebuildPoll<<min(waited/rebuildPoll, 4), rebuildWait-waited)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%w: %w", sale.ErrUnavailable, ctx.Err())
			case <-time.After(pause):
			}
			waited += pause
		case errors.Is(err, sale.ErrSaleChanged) || errors.Is(err, sale.ErrNotFound):
			return err
		default:
			return fmt.Errorf("%w: %w", sale.ErrUnavailable, err)
		}
	}
}

// decided turns the script's outcomes into the batch's answers: an accepted purchase the
// replicas did not confirm is sale.ErrUnconfirmed, and still counts as accepted for the
// persister (its units are taken; it becomes an order unless a failover loses it).
func (d *Deductor) decided(productID int64, out []Outcome, confirmed bool) []error {
	errs := make([]error, len(out))
	accepted := 0
	for i, o := range out {
		switch o.Result {
		case Accepted:
			accepted++
			if !confirmed {
				errs[i] = sale.ErrUnconfirmed
			}
		case Replayed, KeyInUse:
			errs[i] = sale.ErrIdempotencyKeyInUse
		case LimitReached:
			errs[i] = sale.ErrAlreadyPurchased
		default:
			errs[i] = sale.ErrSoldOut
		}
	}
	if accepted > 0 {
		d.accepted(productID, accepted)
	}
	return errs
}

// A purchase that finds its sale being rebuilt by another process polls for the state from
// rebuildPoll, doubling, for rebuildWait in all.
const (
	rebuildPoll = 2 * time.Millisecond
	rebuildWait = 100 * time.Millisecond
)

// Receipt returns the receipt the script keeps for userID's purchase of productID with key, or
// sale.ErrNotFound (none, or the state is not loaded: the store may have it). With replicas to
// wait for, the receipt is read on the sale's master and returned only once enough replicas hold
// it, else sale.ErrUnconfirmed: the retry of a purchase answered unconfirmed must not turn into
// a 202 that a failover can still take back. Its WAIT follows a write of its own (Keys.Confirm),
// so that it covers every write the master had made before, the receipt's included.
func (d *Deductor) Receipt(ctx context.Context, productID int64, userID, key string) (sale.Receipt, error) {
	k := d.sale.Keys(productID)
	var v string
	var err error
	if d.repl.MinReplicas == 0 {
		v, err = d.rdb.HGet(ctx, k.Buyers, userID).Result()
	} else {
		err = d.onMaster(ctx, k.Buyers, func(c *redis.Conn) error {
			var err error
			if v, err = c.HGet(ctx, k.Buyers, userID).Result(); err != nil {
				return err
			}
			if b, perr := parseBought(v); perr != nil || key == "" || b.Key != key {
				return nil // answered below, without a wait: nothing of it is accepted
			}
			if err := c.Set(ctx, k.Confirm, "", confirmTTL).Err(); err != nil {
				return err
			}
			if !d.confirmed(ctx, c) {
				return sale.ErrUnconfirmed
			}
			return nil
		})
	}
	switch {
	case errors.Is(err, redis.Nil):
		return sale.Receipt{}, sale.ErrNotFound
	case errors.Is(err, sale.ErrUnconfirmed):
		return sale.Receipt{}, err
	case err != nil:
		return sale.Receipt{}, fmt.Errorf("%w: %w", sale.ErrUnavailable, err)
	}
	b, err := parseBought(v)
	switch {
	case err != nil:
		return sale.Receipt{}, fmt.Errorf("%w: %w", sale.ErrUnavailable, err)
	case key == "" || b.Key != key:
		return sale.Receipt{}, sale.ErrNotFound // the buyer's purchase was made with another key, or none
	}
	return sale.Receipt{OrderID: b.OrderID, Status: sale.StatusQueued, ProductID: productID, UserID: userID, Quantity: b.Quantity, Strategy: Strategy}, nil
}

// confirmTTL is how long Keys.Confirm stays: it holds nothing anyone reads.
const confirmTTL = time.Minute

// Prepare is told of a product's new sale epoch (a create or a reset). Sold with redis-lua, its
// state is loaded now rather than at its first purchase, replacing whatever Redis holds under the
// sale's keys (an earlier epoch's state, or a state left by a database of the same name that was
// dropped). Sold otherwise, a state an earlier epoch left in Redis is dropped, so that a replica
// still holding the old rules cannot sell from it.
func (d *Deductor) Prepare(ctx context.Context, p sale.Product) error {
	if p.Strategy == Strategy {
		err := d.sale.Rebuild(ctx, d.rdb, p.ID, p.Epoch, true, d.reload, d.returned)
		if errors.Is(err, ErrRebuilding) {
			return nil // another process is loading it
		}
		return err
	}
	return d.sale.Drop(ctx, d.rdb, p.ID, p.Epoch)
}
