// Package redislua is the decision of the `redis-lua` strategy: while a product is on sale with
// it, its stock, its buyers and its Idempotency-Key receipts live in Redis, and one Lua script
// decides each purchase atomically — the replay of a key, the per-user limit, the decrement, and
// the append of the reservation to a Redis Stream, from which a persister writes it to MySQL.
// Nothing else decides a purchase of such a product.
//
// Every key of one product's sale shares one hash tag, so that a Redis Cluster keeps the sale in
// one slot and the script may touch all of them. The package never talks to MySQL: loading the
// state and persisting the stream are its callers' work.
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

//go:embed purchase.lua
var purchaseLua string

var purchaseScript = redis.NewScript(purchaseLua)

// Keys are the Redis keys of one product's sale.
type Keys struct {
	// State is a hash: epoch, stock (units left), limit (units per buyer), initial, gen (the
	// generation of this state: see store.ReloadSale).
	State string
	// Buyers is a hash: user id → the buyer's purchase in this epoch, "order_id quantity
	// Idempotency-Key" (see Bought): the per-user limit and the key's receipt in one field.
	Buyers string
	// Stream holds the accepted reservations and the returns, in order, until the persister has
	// written them.
	Stream string
	// Returned is a set: the orders of this epoch whose units are back in State's stock (see
	// Sale.Return).
	Returned string
	// Rebuild is the lease of the one process rebuilding a lost state (see Sale.Rebuild).
	Rebuild string
	// Confirm is a scratch key a replayed receipt writes before its WAIT: WAIT waits for the
	// writes of its own connection, and a receipt read alone writes nothing (see
	// Deductor.Receipt).
	Confirm string
}

// KeysFor returns the keys of productID's sale. ns separates deployments (and tests) sharing a
// Redis; the app uses its database name. The hash tag is {ns:id}.
func KeysFor(ns string, productID int64) Keys {
	tag := "seckill:{" + ns + ":" + strconv.FormatInt(productID, 10) + "}:"
	return Keys{State: tag + "state", Buyers: tag + "buyers", Stream: tag + "stream", Returned: tag + "returned", Rebuild: tag + "rebuild", Confirm: tag + "confirm"}
}

// KeysPattern matches every key of every sale under namespace ns (a SCAN pattern).
func KeysPattern(ns string) string { return "seckill:{" + ns + ":*" }

// script are the keys the purchase script touches, in its KEYS order.
func (k Keys) script() []string { return []string{k.State, k.Buyers, k.Stream} }

// data are the keys that hold the sale: the purchase script's and Returned.
func (k Keys) data() []string { return append(k.script(), k.Returned) }

func (k Keys) all() []string { return append(k.data(), k.Rebuild, k.Confirm) }

// Result is what the script decided.
type Result int

const (
	// Accepted: the units were deducted and the reservation appended to the stream.
	Accepted Result = iota + 1
	// Replayed: the buyer used the key before for the same quantity; Outcome holds the first
	// purchase's order id, and nothing was deducted now.
	Replayed
	// KeyInUse: the buyer used the key before for another quantity.
	KeyInUse
	// LimitReached: the buyer already bought in this epoch, or asks for more than the limit.
	LimitReached
	// SoldOut: fewer units are left than asked for.
	SoldOut
	// NotLoaded: the sale has no state in Redis (never loaded, or lost: Redis restarted empty,
	// flushed, failed over to an empty replica). It must be rebuilt before anyone buys.
	NotLoaded
	// StaleEpoch: the state in Redis belongs to another epoch than the caller's (a reset happened
	// on one side and not yet on the other).
	StaleEpoch
)

var resultNames = map[string]Result{
	"accepted": Accepted, "replayed": Replayed, "key_in_use": KeyInUse, "limit_reached": LimitReached,
	"sold_out": SoldOut, "not_loaded": NotLoaded, "stale_epoch": StaleEpoch,
}

func (r Result) String() string {
	for name, v := range resultNames {
		if v == r {
			return name
		}
	}
	return "Result(" + strconv.Itoa(int(r)) + ")"
}

// Attempt is one purchase to decide.
type Attempt struct {
	Epoch    uint64
	UserID   string
	Quantity int
	// Key is the Idempotency-Key, or "".
	Key string
	// OrderID is the id the reservation gets if it is accepted (the caller makes one per attempt).
	OrderID string
	// TraceParent is the purchase's traceparent, or "" (sale.Reservation's): the stream entry
	// carries it to the persister, which stores it with the reservation.
	TraceParent string
}

// Outcome is the script's answer.
type Outcome struct {
	Result Result
	// OrderID is the new order's (Accepted) or the first purchase's (Replayed).
	OrderID string
	// Left is the stock left after the decision (Accepted, SoldOut).
	Left int
	// Epoch is the epoch of the state in Redis (StaleEpoch).
	Epoch uint64
}

// Sale decides the purchases of products sold with `redis-lua`.
type Sale struct {
	rdb redis.Scripter
	ns  string
}

// New returns a Sale on rdb, its keys under namespace ns.
func New(rdb redis.Scripter, ns string) (*Sale, error) {
	if rdb == nil || ns == "" || strings.ContainsAny(ns, "{}") {
		return nil, errors.New("redislua: a Redis client and a namespace without braces are required")
	}
	return &Sale{rdb: rdb, ns: ns}, nil
}

// Keys returns the keys of productID's sale.
func (s *Sale) Keys(productID int64) Keys { return KeysFor(s.ns, productID) }

// Purchase runs the decision script for one attempt on productID.
func (s *Sale) Purchase(ctx context.Context, productID int64, a Attempt) (Outcome, error) {
	out, err := s.PurchaseBatch(ctx, productID, a.Epoch, []Attempt{a})
	if err != nil {
		return Outcome{}, err
	}
	return out[0], nil
}

// PurchaseBatch decides the attempts on productID in epoch, in order, in one run of the script:
// exactly as many separate runs would, in one round trip. The attempts' own Epoch is ignored. When
// the sale is not loaded, or loaded in another epoch, every outcome says so.
func (s *Sale) PurchaseBatch(ctx context.Context, productID int64, epoch uint64, as []Attempt) ([]Outcome, error) {
	return s.purchaseOn(ctx, s.rdb, productID, epoch, as)
}

// purchaseOn is PurchaseBatch on c: a connection of its own when the caller then waits for the
// replicas (WAIT counts the writes of its own connection).
func (s *Sale) purchaseOn(ctx context.Context, c redis.Scripter, productID int64, epoch uint64, as []Attempt) ([]Outcome, error) {
	if len(as) == 0 {
		return nil, nil
	}
	// A batch of which some attempt carries a traceparent sends five fields per attempt, the
	// traceparent last; any other batch (every one while tracing is off) sends four.
	stride := 4
	for _, a := range as {
		if a.TraceParent != "" {
			stride = 5
			break
		}
	}
	args := make([]any, 2, 2+stride*len(as))
	args[0], args[1] = epoch, stride
	for _, a := range as {
		if a.Quantity < 1 || a.UserID == "" || a.OrderID == "" || strings.ContainsAny(a.UserID, " \n") || strings.ContainsAny(a.OrderID, " \n") || strings.ContainsAny(a.Key, " \n") || strings.ContainsAny(a.TraceParent, " \n") {
			return nil, fmt.Errorf("redislua: invalid attempt %+v", a)
		}
		args = append(args, a.UserID, a.Quantity, a.Key, a.OrderID)
		if stride == 5 {
			args = append(args, a.TraceParent)
		}
	}
	res, err := purchaseScript.Run(ctx, c, s.Keys(productID).script(), args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redislua: purchase script: %w", err)
	}
	return parseOutcomes(res, as)
}

// parseOutcomes reads the script's reply to attempts as.
func parseOutcomes(res []string, as []Attempt) ([]Outcome, error) {
	out := make([]Outcome, len(as))
	switch {
	case len(res) == 1 && res[0] == "not_loaded":
		for i := range out {
			out[i].Result = NotLoaded
		}
		return out, nil
	case len(res) == 2 && res[0] == "stale_epoch":
		e, err := strconv.ParseUint(res[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redislua: reply %q: %w", res, err)
		}
		for i := range out {
			out[i] = Outcome{Result: StaleEpoch, Epoch: e}
		}
		return out, nil
	case len(res) != 1+len(as) || res[0] != "decided":
		return nil, fmt.Errorf("redislua: reply %q to %d attempts", res, len(as))
	}
	for i, a := range as {
		o, err := parseOutcome(res[1+i], a)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	return out, nil
}

// parseOutcome reads the script's decision of one attempt: the result's name, then a detail that
// depends on it.
func parseOutcome(reply string, a Attempt) (Outcome, error) {
	name, detail, _ := strings.Cut(reply, " ")
	r, ok := resultNames[name]
	if !ok {
		return Outcome{}, fmt.Errorf("redislua: unknown reply %q", reply)
	}
	o := Outcome{Result: r}
	switch r {
	case Accepted, SoldOut:
		left, err := strconv.Atoi(detail)
		if err != nil {
			return Outcome{}, fmt.Errorf("redislua: reply %q: %w", reply, err)
		}
		o.Left = left
		if r == Accepted {
			o.OrderID = a.OrderID
		}
	case Replayed: // the stored receipt: "order_id user_id quantity"
		f := strings.Fields(detail)
		if len(f) != 3 {
			return Outcome{}, fmt.Errorf("redislua: receipt %q", detail)
		}
		if f[1] != a.UserID || f[2] != strconv.Itoa(a.Quantity) {
			return Outcome{Result: KeyInUse}, nil
		}
		o.OrderID = f[0]
	case LimitReached:
	default:
		return Outcome{}, fmt.Errorf("redislua: reply %q", reply)
	}
	return o, nil
}

// State is what a sale's Redis state is loaded from: the product's row and what MySQL already
// holds of this epoch.
type State struct {
	Epoch uint64
	// Gen is the state's generation (store.ReloadSale starts one at each load); the script stamps
	// every stream entry with it.
	Gen     uint64
	Initial int
	// Stock is the units still on sale: the caller computes it (initial − units in MySQL −
	// units still in the stream when rebuilding).
	Stock int
	Limit int
	// Buyers are the purchases of this epoch, by buyer.
	Buyers map[string]Bought
	// Returned are the orders of this epoch whose units Stock counts again (see Sale.Return).
	Returned []string
}

// Bought is a buyer's purchase in a sale's epoch as the state keeps it: its order, its units and
// its Idempotency-Key ("" for none).
type Bought struct {
	OrderID  string
	Quantity int
	Key      string
}

func (b Bought) String() string { return b.OrderID + " " + strconv.Itoa(b.Quantity) + " " + b.Key }

// parseBought reads a Buyers field's value as the script and Load write it.
func parseBought(v string) (Bought, error) {
	order, rest, ok1 := strings.Cut(v, " ")
	qty, key, ok2 := strings.Cut(rest, " ")
	n, err := strconv.Atoi(qty)
	if !ok1 || !ok2 || err != nil || order == "" || strings.Contains(key, " ") {
		return Bought{}, fmt.Errorf("redislua: buyer's purchase %q", v)
	}
	return Bought{OrderID: order, Quantity: n, Key: key}, nil
}

// Load replaces productID's state in Redis (its state, buyers and returned orders) with st in one
// transaction, keeping the stream (its entries are reservations and returns not yet in MySQL, or
// already there: the persister is idempotent).
func (s *Sale) Load(ctx context.Context, c redis.Cmdable, productID int64, st State) error {
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error { return s.load(ctx, p, s.Keys(productID), st) })
	if err != nil {
		return fmt.Errorf("redislua: load product %d: %w", productID, err)
	}
	return nil
}

// load queues the commands that replace k's state with st.
func (s *Sale) load(ctx context.Context, p redis.Pipeliner, k Keys, st State) error {
	p.Del(ctx, k.State, k.Buyers, k.Returned)
	p.HSet(ctx, k.State, "epoch", st.Epoch, "stock", st.Stock, "limit", st.Limit, "initial", st.Initial, "gen", st.Gen)
	if len(st.Buyers) > 0 {
		args := make([]any, 0, 2*len(st.Buyers))
		for u, b := range st.Buyers {
			args = append(args, u, b.String())
		}
		p.HSet(ctx, k.Buyers, args...)
	}
	if len(st.Returned) > 0 {
		ids := make([]any, len(st.Returned))
		for i, id := range st.Returned {
			ids[i] = id
		}
		p.SAdd(ctx, k.Returned, ids...)
	}
	return nil
}

// Drop deletes productID's sale from Redis if its state is of an epoch before epoch: the product
// left redis-lua at a reset, whose clearing covers the entries still in the stream too.
func (s *Sale) Drop(ctx context.Context, rdb redis.Scripter, productID int64, epoch uint64) error {
	if err := dropScript.Run(ctx, rdb, s.Keys(productID).data(), epoch).Err(); err != nil {
		return fmt.Errorf("redislua: drop product %d: %w", productID, err)
	}
	return nil
}

var dropScript = redis.NewScript(strings.TrimSpace(`
local e = redis.call('HGET', KEYS[1], 'epoch')
if e and tonumber(e) < tonumber(ARGV[1]) then return redis.call('DEL', unpack(KEYS)) end
return 0`))

// Stocks reads the live stock of redis-lua sales for the read side (board.LiveStock): the stock
// of the state in Redis of each product whose state is of the product's epoch, with one
// pipeline. Products without such a state (not loaded yet, or lost) are left out: their MySQL
// stock stands.
type Stocks struct {
	rdb redis.Cmdable
	ns  string
}

// NewStocks returns the live-stock reader of the sales under namespace ns.
func NewStocks(rdb redis.Cmdable, ns string) *Stocks { return &Stocks{rdb: rdb, ns: ns} }

// Stocks implements board.LiveStock.
func (s *Stocks) Stocks(ctx context.Context, ps []sale.Product) (map[int64]int, error) {
	cmds := make([]*redis.SliceCmd, len(ps))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, pr := range ps {
			cmds[i] = p.HMGet(ctx, KeysFor(s.ns, pr.ID).State, "epoch", "stock")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis-lua live stock: %w", err)
	}
	out := make(map[int64]int, len(ps))
	for i, pr := range ps {
		v := cmds[i].Val()
		if len(v) != 2 {
			continue
		}
		epoch, _ := v[0].(string)
		stock, _ := v[1].(string)
		n, err := strconv.Atoi(stock)
		if err != nil || epoch != strconv.FormatUint(pr.Epoch, 10) {
			continue
		}
		out[pr.ID] = n
	}
	return out, nil
}
