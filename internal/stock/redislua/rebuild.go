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

// Reload is what a sale's state is (re)loaded from (*store.Store's ReloadSale): in one MySQL
// transaction under the product's row lock, it writes the reservations that surviving gives (the
// stream's reservations not yet persisted that belong to the product's epoch and current
// generation), starts a new generation, and reads the product and every reservation of its sale.
type Reload func(ctx context.Context, productID int64, st sale.Strategy, surviving func(epoch, gen uint64) []sale.Reservation) (sale.Product, []sale.KeyedReceipt, uint64, error)

// rebuildLease bounds a rebuild: a process that dies while rebuilding holds the others off no
// longer than this.
const rebuildLease = 10 * time.Second

// Rebuild loads productID's state into Redis from MySQL when Redis has none, or has one of an
// epoch older than want (a reset's new sale not loaded yet), or always with force (a create or a
// reset: whatever Redis holds under the sale's keys is not this sale's): after Redis lost it
// (restarted empty, flushed, failed over to an empty replica) or at a create or reset. It does it
// once however many processes try at once: the first takes a lease in the sale's slot and the
// others get ErrRebuilding until the state is back. A product no longer sold with redis-lua is
// not loaded: sale.ErrStrategyChanged.
//
// The stream's reservations that survived are written to MySQL by the reload itself, and a new
// generation starts there: a persister still holding entries it read before Redis lost the state
// can no longer write them (their generation is gone), so the rebuilt state, read from MySQL alone,
// counts exactly what MySQL will ever hold of the old generations. What Redis lost before any
// persister wrote it is lost — the gap the AOF closes. A return is not lost that way: the
// stream's return entries are dropped, and their orders, still due in MySQL, are returned again
// into the new state by the expirer. The orders MySQL has returned are read after the reload
// (returned; nil when the sale has no returns), when no persister can mark more of them any more,
// and kept in the state's Returned set, so that a return the expirer read as due before the
// rebuild gives nothing after it. The stream is then emptied, and the state written, only if
// neither changed since they were read (WATCH), so a rebuild that outlived its lease cannot
// overwrite a newer one. No entry of the epoch can be added meanwhile: the script
// refuses while the state is missing or of another epoch.
func (s *Sale) Rebuild(ctx context.Context, rdb redis.UniversalClient, productID int64, want uint64, force bool, reload Reload, returned ReturnedOrders) error {
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
		case err != nil:
			return err
		case !force && cur >= want:
			return nil // loaded meanwhile, or never stale: nothing to do
		}
		entries, err := tx.XRange(ctx, k.Stream, "-", "+").Result()
		if err != nil {
			return err
		}
		type entry struct {
			rs  []sale.Reservation // one batch of the script: one epoch, one generation
			gen uint64
		}
		var parsed []entry
		for _, m := range entries {
			if isReturn(m) {
				continue
			}
			rs, gen, err := reservations(productID, Strategy, m)
			if err != nil {
				return err
			}
			parsed = append(parsed, entry{rs, gen})
		}
		p, rs, gen, err := reload(ctx, productID, Strategy, func(epoch, gen uint64) []sale.Reservation {
			var out []sale.Reservation
			for _, e := range parsed {
				if e.rs[0].Epoch == epoch && e.gen == gen {
					out = append(out, e.rs...)
				}
			}
			return out
		})
		if err != nil {
			return err
		}
		st := State{Epoch: p.Epoch, Gen: gen, Initial: p.InitialStock, Stock: p.Stock, Limit: p.PerUserLimit,
			Buyers: make(map[string]Bought, len(rs))}
		for _, r := range rs { // one per buyer: MySQL's unique (product_id, user_id)
			st.Buyers[r.UserID] = Bought{OrderID: r.OrderID, Quantity: r.Quantity, Key: r.Key}
		}
		if returned != nil {
			if st.Returned, err = returned(ctx, productID); err != nil {
				return err
			}
		}
		_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			// Every reservation is in MySQL now, or of a generation that is gone; every return too,
			// or still due there.
			pipe.Del(ctx, k.Stream)
			return s.load(ctx, pipe, k, st)
		})
		return err
	}, k.State, k.Stream)
	if err != nil {
		return fmt.Errorf("redislua: rebuild product %d: %w", productID, err)
	}
	return nil
}

// releaseLease deletes the lease if it is still owner's.
func releaseLease(ctx context.Context, rdb redis.UniversalClient, lease, owner string) {
	_ = releaseScript.Run(ctx, rdb, []string{lease}, owner).Err()
}

var releaseScript = redis.NewScript(strings.TrimSpace(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`))
