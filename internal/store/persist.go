package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// PersistReservations writes reservations that another system already decided and deducted (the
// redis-lua strategy's stream) in one transaction: those whose order id is not yet in MySQL are
// inserted, and the product's stock goes down by their units, so that MySQL's stock stays what
// the decider has deducted. It is idempotent on the order id: a batch written twice (a persister
// that died after its commit and before its acknowledgement) changes nothing the second time. It
// returns how many reservations it inserted, or sale.ErrSaleChanged (nothing written) when the
// product is no longer in epoch with strategy st (a reset cleared the sale those reservations
// belonged to), or its redis-lua state is no longer of generation gen (Redis lost the state that
// accepted them, and the state rebuilt since does not count them: see ReloadSale).
//
// An Idempotency-Key that the same user already holds for another product (keys are unique per
// user in MySQL, while the decider keeps them per product) is not stored with the reservation:
// the unit is kept, only a replay of that key after the decider lost its state would not find it.
//
// MySQL's stock and its one reservation per buyer stay the truth whatever the decider says: a
// reservation that would take more units than MySQL has left, or that is a second one of a buyer
// who holds a reservation of the product already, is not reserved: it becomes an order of status
// refused (sale.StatusRefused) in the same transaction, and is returned as refused. Only those
// refused now are returned: written again, the batch finds them refused already, and neither
// refuses nor reserves them again. A decider in step with MySQL never makes one; a Redis state that went backwards
// does (a failover to a replica that had not copied the latest purchases, a restart from an older
// file): it still counts units that MySQL gave to purchases it forgot, and no longer knows those
// buyers. Without the check, its purchases would oversell.
//
// A reservation whose values MySQL refuses (a user id too long for its column, say: what no
// decider in step with this schema writes) fails the whole batch with sale.ErrPoison, nothing
// written, for the caller to find it by writing the batch's halves.
func (s *Store) PersistReservations(ctx context.Context, productID int64, st sale.Strategy, epoch, gen uint64, rs []sale.Reservation) (inserted int, refused []sale.Reservation, err error) {
	var out persisted
	err = s.Purchase(ctx, func(ctx context.Context, tx *PurchaseTx) error {
		row, err := tx.lockLuaState(ctx, productID, st, epoch, gen)
		if err != nil {
			return err
		}
		out, err = tx.persist(ctx, productID, row.Stock, rs)
		return err
	})
	if errors.Is(err, ErrDuplicate) {
		err = fmt.Errorf("%w: %w", sale.ErrPoison, err)
	}
	if err != nil {
		return 0, nil, err
	}
	return out.inserted, out.refused, nil
}

// luaCapacity is how many units a redis-lua sale's reservations may take in MySQL: its stock,
// plus the units of its orders closed (expired, cancelled) but not yet returned here. The return
// script gives those units back to the Redis state at once, and the persister adds them to
// MySQL's stock only when it writes the return's stream entry, which may come after the entries
// of the purchases that took them: in a later group of the same batch, or in another persister's
// batch. Without them, a second wave buying returned units was refused whenever its entries were
// written first (its buyers told 202, without an order; the state dropped and rebuilt). Every
// such order's units do reach MySQL's stock (each closed order is returned exactly once), so the
// stock may dip below zero for that moment and ends where it should.
func (t *PurchaseTx) luaCapacity(ctx context.Context, productID int64, stock int) (int, error) {
	var returning int
	err := t.tx.WithContext(ctx).Raw(`SELECT COALESCE(SUM(quantity), 0) FROM orders
		WHERE status IN ('expired', 'cancelled') AND returned_at IS NULL AND product_id = ?`, productID).Scan(&returning).Error
	if err != nil {
		return 0, fmt.Errorf("units returning to product %d: %w", productID, err)
	}
	return stock + returning, nil
}

// persisted is what persist did: how many reservations it inserted, and those it refused (in the
// order given) because MySQL cannot hold them.
type persisted struct {
	inserted int
	refused  []sale.Reservation
}

// ReloadSale is what the redis-lua strategy (re)loads a sale's state in Redis from, in one
// transaction under the product's row lock: it writes the reservations that surviving returns
// (given the product's epoch and current generation: the entries of the sale's stream that a
// persister has not written yet, those of that epoch and generation), starts a new generation, and
// reads the product and every reservation of its sale. From then on a persister's batch of an
// older generation is refused (PersistReservations): an entry that Redis lost with the state
// counts neither in MySQL nor in the rebuilt state, and one that survived in the stream is written
// here, once. It returns sale.ErrNotFound, or sale.ErrStrategyChanged for a product not sold with
// st.
func (s *Store) ReloadSale(ctx context.Context, productID int64, st sale.Strategy, surviving func(epoch, gen uint64) []sale.Reservation) (sale.Product, []sale.KeyedReceipt, uint64, error) {
	var (
		p   sale.Product
		out []sale.KeyedReceipt
		gen uint64
	)
	err := s.Purchase(ctx, func(ctx context.Context, tx *PurchaseTx) error {
		row, err := tx.lockLuaSale(ctx, productID, st)
		if err != nil {
			return err
		}
		// What MySQL cannot hold of the survivors (see PersistReservations) becomes a refused
		// order, not a reservation: the state rebuilt below counts it nowhere.
		if _, err := tx.persist(ctx, productID, row.Stock, surviving(row.SaleEpoch, row.LuaGen)); err != nil {
			return err
		}
		gen = row.LuaGen + 1
		if err := tx.tx.WithContext(ctx).Exec("UPDATE products SET lua_gen = ? WHERE id = ?", gen, productID).Error; err != nil {
			return err
		}
		// The row is locked: no persister commits for this product until this transaction ends, so
		// these reads see every reservation there will be of this generation's predecessors.
		var full productRow
		if err := tx.tx.WithContext(ctx).Take(&full, productID).Error; err != nil {
			return err
		}
		p = full.domain()
		var rows []keyedRow // idem_key NULL scans as ""
		err = tx.tx.WithContext(ctx).Raw(`SELECT order_id, product_id, user_id, COALESCE(idem_key, '') AS idem_key, quantity, strategy
			FROM reservations WHERE product_id = ?`, productID).Scan(&rows).Error
		if err != nil {
			return err
		}
		out = make([]sale.KeyedReceipt, len(rows))
		for i, r := range rows {
			out[i] = sale.KeyedReceipt{Key: r.IdemKey, Receipt: r.receipt()}
		}
		return nil
	})
	return p, out, gen, err
}

// lockLuaSale locks the product's row and returns its stock, strategy, epoch and redis-lua
// generation, or sale.ErrNotFound or sale.ErrStrategyChanged.
func (t *PurchaseTx) lockLuaSale(ctx context.Context, productID int64, st sale.Strategy) (productRow, error) {
	var row productRow
	res := t.tx.WithContext(ctx).Raw("SELECT id, stock, strategy, sale_epoch, lua_gen FROM products WHERE id = ? FOR UPDATE", productID).Scan(&row)
	switch {
	case res.Error != nil:
		return row, res.Error
	case res.RowsAffected == 0:
		return row, sale.ErrNotFound
	case row.Strategy != string(st):
		return row, sale.ErrStrategyChanged
	}
	return row, nil
}

// lockLuaState is lockLuaSale for a writer of redis-lua state of epoch and generation gen: it
// returns sale.ErrSaleChanged when the product is no longer in epoch, or its state no longer of
// generation gen.
func (t *PurchaseTx) lockLuaState(ctx context.Context, productID int64, st sale.Strategy, epoch, gen uint64) (productRow, error) {
	row, err := t.lockLuaSale(ctx, productID, st)
	switch {
	case err != nil:
		return row, err
	case row.SaleEpoch != epoch:
		return row, sale.ErrSaleChanged
	case row.LuaGen != gen:
		return row, fmt.Errorf("redis-lua state generation %d of product %d is gone (now %d): %w", gen, productID, row.LuaGen, sale.ErrSaleChanged)
	}
	return row, nil
}

// persist inserts those of rs whose order id is not stored yet and takes their units, under the
// product's row lock (stock is what the row holds), in order, refusing each that MySQL cannot
// hold: more units than its capacity (luaCapacity, asked only when rs want more than stock)
// leaves, or a buyer who has a reservation of the product already. Each refused one becomes an
// order of status refused in this transaction (refuse), so that its buyer, told 202, reads what
// happened; an order id refused already is, like one reserved already, done: a batch written
// again (a persister that died after its commit) refuses nothing twice, and never reserves what
// it refused once, whatever the stock has become since.
func (t *PurchaseTx) persist(ctx context.Context, productID int64, stock int, rs []sale.Reservation) (persisted, error) {
	var out persisted
	if len(rs) == 0 {
		return out, nil
	}
	capacity, want := stock, 0
	for _, r := range rs {
		want += r.Quantity
	}
	if want > stock {
		var err error
		if capacity, err = t.luaCapacity(ctx, productID, stock); err != nil {
			return out, err
		}
	}
	done, held, err := t.stored(ctx, productID, rs)
	if err != nil {
		return out, err
	}
	fresh := make([]sale.Reservation, 0, len(rs))
	var why []sale.Code
	units := 0
	for _, r := range rs {
		switch {
		case done[r.OrderID]:
		case held[r.UserID]:
			out.refused, why = append(out.refused, r), append(why, sale.CodeLimitReached)
		case r.Quantity > capacity-units:
			out.refused, why = append(out.refused, r), append(why, sale.CodeSoldOut)
		default:
			fresh = append(fresh, r)
			units += r.Quantity
			held[r.UserID] = true
		}
		done[r.OrderID] = true // an order id given twice is written once
	}
	if err := t.refuse(ctx, out.refused, why); err != nil {
		return out, err
	}
	if len(fresh) == 0 {
		return out, nil
	}
	err = t.Reserve(ctx, fresh...)
	if errors.Is(err, ErrDuplicate) {
		if err = t.dropForeignKeys(ctx, fresh); err == nil {
			err = t.Reserve(ctx, fresh...)
		}
	}
	if err != nil {
		return out, err
	}
	out.inserted = len(fresh)
	return out, t.Take(ctx, productID, units)
}

// refuse writes the refused orders of rs, why[i] saying why rs[i] was refused: without a
// reservation (they took no unit and hold no buyer's slot), a payment window or anything to
// return. A plain INSERT: persist found none of these order ids stored, under the product's row
// lock, so a duplicate is a bug to fail on, not one to ignore.
func (t *PurchaseTx) refuse(ctx context.Context, rs []sale.Reservation, why []sale.Code) error {
	if len(rs) == 0 {
		return nil
	}
	rows := make([]any, 0, 7*len(rs))
	for i, r := range rs {
		rows = append(rows, r.OrderID, r.ProductID, r.UserID, r.Quantity, string(sale.StatusRefused), string(why[i]), r.CreatedAt)
	}
	return t.tx.WithContext(ctx).Exec("INSERT INTO orders (order_id, product_id, user_id, quantity, status, refusal, created_at) VALUES "+
		placeholders(len(rs), 7), rows...).Error
}

// stored returns, in one query, which of the reservations' order ids are already stored (done:
// reserved, or refused as an order of status refused), and which of their users hold a
// reservation of the product already (held; a reserved done one's user among them). A refused
// order holds no slot: its user is not held for it.
func (t *PurchaseTx) stored(ctx context.Context, productID int64, rs []sale.Reservation) (done, held map[string]bool, err error) {
	ids, users := make([]string, len(rs)), make([]string, len(rs))
	asked := make(map[string]bool, len(rs))
	for i, r := range rs {
		ids[i], users[i] = r.OrderID, r.UserID
		asked[r.OrderID] = true
	}
	var found []struct {
		OrderID   string
		ProductID int64
		UserID    string
		Refused   bool
	}
	err = t.tx.WithContext(ctx).Raw(`SELECT order_id, product_id, user_id, FALSE AS refused FROM reservations
		WHERE order_id IN ? OR (product_id = ? AND user_id IN ?)
		UNION ALL
		SELECT order_id, product_id, user_id, TRUE FROM orders WHERE order_id IN ? AND reservation_id IS NULL`,
		ids, productID, users, ids).Scan(&found).Error
	if err != nil {
		return nil, nil, err
	}
	done, held = make(map[string]bool, len(found)), make(map[string]bool, len(found))
	for _, f := range found {
		if asked[f.OrderID] {
			done[f.OrderID] = true
		}
		if f.ProductID == productID && !f.Refused {
			held[f.UserID] = true
		}
	}
	return done, held, nil
}

// dropForeignKeys clears, in rs, the Idempotency-Key of each reservation whose user already holds
// that key in a committed reservation.
func (t *PurchaseTx) dropForeignKeys(ctx context.Context, rs []sale.Reservation) error {
	var pairs []any
	for _, r := range rs {
		if r.IdempotencyKey != "" {
			pairs = append(pairs, []any{r.UserID, r.IdempotencyKey})
		}
	}
	if len(pairs) == 0 {
		return ErrDuplicate // not a key: a user's second reservation of the product, a decider's bug
	}
	var held []struct{ UserID, IdemKey string }
	if err := t.tx.WithContext(ctx).Raw("SELECT user_id, idem_key FROM reservations WHERE (user_id, idem_key) IN ?", pairs).
		Scan(&held).Error; err != nil {
		return err
	}
	taken := make(map[[2]string]bool, len(held))
	for _, h := range held {
		taken[[2]string{h.UserID, h.IdemKey}] = true
	}
	for i := range rs {
		if taken[[2]string{rs[i].UserID, rs[i].IdempotencyKey}] {
			rs[i].IdempotencyKey = ""
		}
	}
	return nil
}
