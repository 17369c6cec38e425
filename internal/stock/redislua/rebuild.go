package redislua

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// ErrRebuilding means another process is rebuilding the sale's state: the purchase must wait
// (503) rather than be decided without it.
var ErrRebuilding = errors.New("redislua: the sale's state is being rebuilt")

// Snapshot reads the product and every reservation of its current sale from MySQL, in one
// consistent read (*store.Store's SaleReservations).
type Snapshot func(ctx context.Context, productID int64) (sale.Product, []sale.KeyedReceipt, error)

// rebuildLease bounds a rebuild: a process that dies while rebuilding holds the others off no
// longer than this.
const rebuildLease = 10 * time.Second

// Rebuild loads productID's state into Redis from MySQL when Redis has none, or has one of an
// epoch older than want (a reset's new sale not loaded yet): after Redis lost it (restarted empty,
// flushed, failed over to an empty replica) or at a create or reset. It does it once however many
// processes try at once: the first takes a lease in the sale's slot and the others get
// ErrRebuilding until the state is back. want 0 rebuilds only a missing state. A product no longer
// sold with redis-lua is not loaded: sale.ErrStrategyChanged.
//
// Stock = MySQL's stock (initial − units the persisters wrote) − the units of stream entries of
// this epoch not yet in MySQL; the buyers and keys are those of both. The stream is read before
// MySQL: an entry a persister writes and deletes between the two reads is then seen in MySQL, never
// in neither. No entry of the epoch can be added meanwhile, since the script refuses while the
// state is missing or of another epoch. The state is written only if it has not changed since it
// was read (WATCH), so a rebuild that outlived its lease cannot overwrite a newer one.
func (s *Sale) Rebuild(ctx context.Context, rdb *redis.Client, productID int64, want uint64, snapshot Snapshot) error {
	k := s.Keys(productID)
	lease, owner := k.Rebuild, strconv.FormatInt(time.Now().UnixNano(), 10)
	ok, err := rdb.SetNX(ctx, lease, owner, rebuildLease).Result()
	if err != nil {
		return fmt.Errorf("redislua: rebuild lease: %w", err)
	}
	if !ok {
		return ErrRebuilding
	}
	defer releaseLease(context.WithoutCancel(ctx), rdb, lease, owner)

	err = rdb.Watch(ctx, func(tx *redis.Tx) error {
		cur, err := tx.HGet(ctx, k.State, "epoch").Uint64()
		switch {
		case errors.Is(err, redis.Nil):
			cur = 0
		case err != nil:
			return err
		case cur >= want:
			return nil // loaded meanwhile, or never stale: nothing to do
		}
		entries, err := tx.XRange(ctx, k.Stream, "-", "+").Result()
		if err != nil {
			return err
		}
		p, rs, err := snapshot(ctx, productID)
		switch {
		case err != nil:
			return err
		case p.Strategy != Strategy:
			return sale.ErrStrategyChanged
		case cur != 0 && cur >= p.Epoch:
			return nil
		}
		st := State{Epoch: p.Epoch, Initial: p.InitialStock, Stock: p.Stock, Limit: p.PerUserLimit,
			Buyers: map[string]int{}, Receipts: map[string]Receipt{}}
		stored := make(map[string]bool, len(rs))
		for _, r := range rs {
			stored[r.OrderID] = true
			st.Buyers[r.UserID] += r.Quantity
			if r.Key != "" {
				st.Receipts[ReceiptField(r.UserID, r.Key)] = Receipt{OrderID: r.OrderID, UserID: r.UserID, Quantity: r.Quantity}
			}
		}
		for _, m := range entries {
			r, err := reservation(productID, Strategy, m)
			if err != nil {
				return err
			}
			if r.Epoch != p.Epoch || stored[r.OrderID] {
				continue
			}
			st.Stock -= r.Quantity
			st.Buyers[r.UserID] += r.Quantity
			if r.IdempotencyKey != "" {
				st.Receipts[ReceiptField(r.UserID, r.IdempotencyKey)] = Receipt{OrderID: r.OrderID, UserID: r.UserID, Quantity: r.Quantity}
			}
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error { return s.load(ctx, pipe, k, st) })
		return err
	}, k.State)
	if err != nil {
		return fmt.Errorf("redislua: rebuild product %d: %w", productID, err)
	}
	return nil
}

// releaseLease deletes the lease if it is still owner's.
func releaseLease(ctx context.Context, rdb *redis.Client, lease, owner string) {
	_ = releaseScript.Run(ctx, rdb, []string{lease}, owner).Err()
}

var releaseScript = redis.NewScript(strings.TrimSpace(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`))
