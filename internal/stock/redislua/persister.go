package redislua

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Strategy is the name of the strategy this package decides for.
const Strategy = sale.StrategyRedisLua

// Writer writes reservations that the script decided to MySQL, idempotent on the order id, the
// stock going down by the units written (*store.Store's PersistReservations), and refuses those
// MySQL cannot hold (more units than it has left, a second reservation of a buyer: what a Redis
// state that went backwards decides). It returns sale.ErrSaleChanged when the product has left
// that epoch (a reset cleared its sale) or that generation of its state (Redis lost the state
// that accepted them).
//
// PersistReturns writes returns that the return script made: it marks those of the orders that are
// closed and not yet returned as returned, and gives their units back to the stock, in one
// transaction (*store.Store's PersistReturns); an order marked already gives nothing, so a batch
// written twice returns once. It returns the units it gave back, or sale.ErrSaleChanged as
// PersistReservations does.
//
// Both fail with sale.ErrPoison, nothing written, when MySQL refuses a value of the batch (what
// no script in step with the schema writes). ParkMessages keeps what the persister can never
// write, each once, and returns what it kept now.
type Writer interface {
	PersistReservations(ctx context.Context, productID int64, st sale.Strategy, epoch, gen uint64, rs []sale.Reservation) (inserted int, refused []sale.Reservation, err error)
	PersistReturns(ctx context.Context, productID int64, st sale.Strategy, epoch, gen uint64, orderIDs []string) (int, error)
	ParkMessages(ctx context.Context, ms []sale.Parked) ([]sale.Parked, error)
}

// PersisterOptions tunes a Persister.
type PersisterOptions struct {
	// Consumer names this persister in the stream's consumer group: one per process.
	Consumer string
	// Group is the consumer group every persister shares ["persisters"].
	Group string
	// Batch is the most entries read at once, and the most reservations written in one
	// transaction, unless one entry (one batch of the script) holds more [512].
	Batch int64
	// Linger is how long a woken persister lets purchases gather before it reads them: a burst
	// is then written in a few large transactions rather than many small ones [20 ms].
	Linger time.Duration
	// Burst is the rate of purchases accepted by this process, per second, above which the
	// persister holds off: a burst gets the CPU and the database to itself, and its purchases are
	// written once it is over, in large batches (the peak shaving that a flash sale's queue is
	// for). It holds off until the rate falls below a quarter of Burst (see burstGate). 0 or less
	// never holds off (the app's default, SECKILL_PERSIST_BURST, is 1,000).
	Burst float64
	// MaxLag bounds the hold-off: during a burst longer than this, what it accepted is written
	// anyway, MaxLag after the first of it [10 s].
	MaxLag time.Duration
	// ClaimAfter is how long an entry read by another persister may stay unacknowledged before
	// this one takes it over (that one is taken for dead) [30 s].
	ClaimAfter time.Duration
	// Strategy is the products' strategy as the Writer checks it [Strategy].
	Strategy sale.Strategy
	Log      *slog.Logger
	// BeforeCommit and AfterCommit, optional, are test hooks (the chaos run's failpoints): called
	// with a batch read from the stream but not yet written to MySQL, and with one written but
	// not yet acknowledged, the two places where a crash leaves entries pending.
	BeforeCommit, AfterCommit func()
	// OnParked, optional, counts the entries (or reservations of an entry) parked: the
	// seckill_poison_rows_total{loop="persister"} metric.
	OnParked func(n int)
	// Trace, set only when tracing is on (internal/tracing's Persisting), starts the span of
	// writing a batch of reservations, in the trace of their purchases, and returns the context
	// to write it in and the span's end. Nil, the persister traces nothing.
	Trace func(ctx context.Context, rs []sale.Reservation) (context.Context, func(error))
}

// Persister moves the accepted reservations and the returns from a product's stream to MySQL. Any
// number may run (one per process): a consumer group hands each entry to one of them, an entry is
// acknowledged and deleted only after its reservation or return committed, and the entries of a
// persister that died before acknowledging are claimed by another after ClaimAfter. Writing twice
// is harmless: the Writer is idempotent on the order id.
type Persister struct {
	rdb  redis.Cmdable
	sale *Sale
	w    Writer
	o    PersisterOptions

	wake     chan struct{}
	accepted atomic.Int64 // purchases accepted by this process (Wake), for the burst's rate
	// held measures that rate between hold's checks, gate decides whether it is a burst (Run's
	// goroutine only).
	held      meter
	gate      burstGate
	mu        sync.Mutex
	woken     map[int64]struct{}
	persisted func()
	// refusedN counts the reservations MySQL refused (see refused).
	refusedN atomic.Int64
}

// Refused is how many accepted purchases this persister found MySQL refusing since it started:
// purchases a Redis state that went backwards accepted (see refused). Each one's buyer was told
// 202; its order is a refused one (sale.StatusRefused), which the buyer reads under that order id.
// A batch written again after a crash between its commit and its acknowledgement finds its
// refusals made already and counts them no more.
func (p *Persister) Refused() int64 { return p.refusedN.Load() }

// SetPersisted makes f be called after each commit of new reservations (the outbox relay's Wake:
// they are in the outbox now). Call it before Run.
func (p *Persister) SetPersisted(f func()) { p.persisted = f }

// NewPersister returns a persister of s's streams into w.
func NewPersister(rdb redis.Cmdable, s *Sale, w Writer, o PersisterOptions) (*Persister, error) {
	if rdb == nil || s == nil || w == nil || o.Consumer == "" {
		return nil, errors.New("redislua: a persister needs Redis, the sale, a writer and a consumer name")
	}
	if o.Group == "" {
		o.Group = "persisters"
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Linger <= 0 {
		o.Linger = 20 * time.Millisecond
	}
	if o.MaxLag <= 0 {
		o.MaxLag = 10 * time.Second
	}
	if o.ClaimAfter <= 0 {
		o.ClaimAfter = 30 * time.Second
	}
	if o.Strategy == "" {
		o.Strategy = Strategy
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, h := range []*func(){&o.BeforeCommit, &o.AfterCommit} {
		if *h == nil {
			*h = func() {}
		}
	}
	if o.OnParked == nil {
		o.OnParked = func(int) {}
	}
	return &Persister{rdb: rdb, sale: s, w: w, o: o, gate: burstGate{enter: o.Burst}, wake: make(chan struct{}, 1), woken: map[int64]struct{}{}}, nil
}

// Drain writes what productID's stream holds for this persister: its own unacknowledged entries
// (a write that failed earlier), entries of a dead persister, then new ones, up to the last entry
// the stream held when it began. It returns how many entries it settled (written, found written
// already, or of a cleared sale).
func (p *Persister) Drain(ctx context.Context, productID int64) (int, error) {
	return p.drain(ctx, productID, p.next)
}

// drainNew writes the entries of productID's stream that no persister has read yet, up to the
// last one it held when it began: a woken persister's round (the others' pending entries wait
// for a sweep).
func (p *Persister) drainNew(ctx context.Context, productID int64) (int, error) {
	return p.drain(ctx, productID, func(ctx context.Context, stream string) ([]redis.XMessage, error) {
		return p.read(ctx, stream, ">")
	})
}

func (p *Persister) drain(ctx context.Context, productID int64, next func(context.Context, string) ([]redis.XMessage, error)) (int, error) {
	stream := p.sale.Keys(productID).Stream
	// A round writes what the stream held when it began, not what arrives meanwhile: during a
	// burst the purchases outpace the writes, and a round chasing them would never end (and
	// never let the persister give way again).
	last, err := p.rdb.XRevRangeN(ctx, stream, "+", "-", 1).Result()
	if err != nil {
		return 0, fmt.Errorf("redislua: last entry of %s: %w", stream, err)
	}
	if len(last) == 0 {
		return 0, nil
	}
	settled := 0
	for created := false; ; {
		msgs, err := next(ctx, stream)
		if err != nil && !created && strings.Contains(err.Error(), "NOGROUP") {
			// The group is made on first use (and again after Redis lost it).
			if err := p.rdb.XGroupCreateMkStream(ctx, stream, p.o.Group, "0").Err(); err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
				return settled, fmt.Errorf("redislua: create group on %s: %w", stream, err)
			}
			created = true
			continue
		}
		if err != nil || len(msgs) == 0 {
			return settled, err
		}
		created = false // a group lost later (Redis flushed) is made again
		n, err := p.write(ctx, productID, stream, msgs)
		settled += n
		if err != nil || !streamIDBefore(msgs[len(msgs)-1].ID, last[0].ID) {
			return settled, err
		}
	}
}

// streamIDBefore reports whether stream entry id a ("ms-seq") comes before b.
func streamIDBefore(a, b string) bool {
	split := func(id string) (uint64, uint64) {
		ms, seq, _ := strings.Cut(id, "-")
		m, _ := strconv.ParseUint(ms, 10, 64)
		n, _ := strconv.ParseUint(seq, 10, 64)
		return m, n
	}
	am, as := split(a)
	bm, bs := split(b)
	return am < bm || am == bm && as < bs
}

// next returns the next entries to write: this consumer's pending ones, then a dead consumer's,
// then new ones.
func (p *Persister) next(ctx context.Context, stream string) ([]redis.XMessage, error) {
	for _, id := range []string{"0", ""} {
		if id == "" {
			msgs, _, err := p.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
				Stream: stream, Group: p.o.Group, Consumer: p.o.Consumer, MinIdle: p.o.ClaimAfter, Start: "0-0", Count: p.o.Batch,
			}).Result()
			if err != nil {
				return nil, fmt.Errorf("redislua: XAUTOCLAIM %s: %w", stream, err)
			}
			if len(msgs) > 0 {
				return msgs, nil
			}
			id = ">"
		}
		msgs, err := p.read(ctx, stream, id)
		if err != nil || len(msgs) > 0 || id == ">" {
			return msgs, err
		}
	}
	return nil, nil
}

// read reads up to Batch entries of the stream for this consumer: its pending ones from id "0",
// new ones with ">".
func (p *Persister) read(ctx context.Context, stream, id string) ([]redis.XMessage, error) {
	streams, err := p.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: p.o.Group, Consumer: p.o.Consumer, Streams: []string{stream, id}, Count: p.o.Batch, Block: -1,
	}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redislua: XREADGROUP %s: %w", stream, err)
	}
	if len(streams) > 0 {
		return streams[0].Messages, nil
	}
	return nil, nil
}

// origin is what a stream entry's writes are checked against: a reservation or a return, of the
// state of that epoch and generation.
type origin struct {
	ret        bool
	epoch, gen uint64
}

// group is what one transaction writes: reservations (rs) or returns (rets) of one origin, from
// the entries ids. at[i] says where rs[i] or rets[i] came from, to park it.
type group struct {
	origin
	rs   []sale.Reservation
	rets []sale.ClosedOrder
	at   []position
	ids  []string
}

// position is where a reservation or a return was in the stream: its entry, and its line of a
// batch entry (0 for an entry of one).
type position struct {
	id   string
	line int
}

func (p position) String() string {
	if p.line == 0 {
		return p.id
	}
	return p.id + "#" + strconv.Itoa(p.line)
}

// write commits msgs' reservations and returns, grouped by kind and by the epoch and generation of
// the state that made them, at most Batch reservations a transaction (an entry is never split: it
// is one batch of the script), and acknowledges and deletes each group's entries once it
// committed (or once it turned out to be of a cleared sale or a lost state). What can never be
// written is parked (sale.Parked) and acknowledged with the rest, so that it stalls nothing behind
// it: an entry the script did not write, and a reservation or return whose values MySQL refuses.
// Parked, it is still in MySQL, with everything needed to write it once fixed: no unit is lost.
func (p *Persister) write(ctx context.Context, productID int64, stream string, msgs []redis.XMessage) (int, error) {
	order, malformed, malformedIDs := p.groupEntries(productID, stream, msgs)
	settled := 0
	if len(malformed) > 0 {
		if err := p.park(ctx, malformed); err != nil {
			return settled, err
		}
		if err := p.ack(ctx, stream, malformedIDs); err != nil {
			return settled, err
		}
		settled += len(malformedIDs)
	}
	for _, g := range order {
		o := g.origin
		p.o.BeforeCommit()
		var n int
		var refused []sale.Reservation
		var parked []sale.Parked
		var err error
		if o.ret {
			n, parked, err = p.persistReturns(ctx, productID, stream, g)
		} else {
			n, refused, parked, err = p.persistReservations(ctx, productID, stream, g)
			if err == nil && len(refused) > 0 {
				p.refused(ctx, productID, o.gen, refused)
			}
		}
		switch {
		case errors.Is(err, sale.ErrSaleChanged):
			p.o.Log.Warn("entries of a cleared sale or a lost state dropped", "product_id", productID,
				"epoch", o.epoch, "gen", o.gen, "returns", o.ret, "entries", len(g.ids), "err", err)
			parked = nil // of the cleared sale too
		case err != nil:
			return settled, err
		case n > 0 && !o.ret && p.persisted != nil:
			p.persisted()
		}
		if err := p.park(ctx, parked); err != nil {
			return settled, err
		}
		p.o.AfterCommit()
		if err := p.ack(ctx, stream, g.ids); err != nil {
			return settled, err
		}
		settled += len(g.ids)
	}
	return settled, nil
}

// groupEntries sorts msgs, in stream order, into the groups write commits one transaction each:
// by kind and by the epoch and generation of the state that made them, at most Batch
// reservations a group, an entry never split. The entries that cannot be read are returned
// apart, to be parked, with their ids.
func (p *Persister) groupEntries(productID int64, stream string, msgs []redis.XMessage) (order []*group, malformed []sale.Parked, malformedIDs []string) {
	open := map[origin]*group{} // the group each origin's entries go to now
	for _, m := range msgs {
		var o origin
		var rs []sale.Reservation
		var ret sale.ClosedOrder
		var err error
		if isReturn(m) {
			ret, o.epoch, o.gen, err = returnEntry(productID, m)
			o.ret = true
		} else if rs, o.gen, err = reservations(productID, p.o.Strategy, m); err == nil {
			o.epoch = rs[0].Epoch
		}
		if err != nil {
			malformed = append(malformed, p.parked(stream, position{id: m.ID}, productID, "", fieldsJSON(m.Values), err))
			malformedIDs = append(malformedIDs, m.ID)
			continue
		}
		g, ok := open[o]
		if !ok || len(g.rs) > 0 && len(g.rs)+len(rs) > int(p.o.Batch) {
			g = &group{origin: o}
			open[o] = g
			order = append(order, g)
		}
		if o.ret {
			g.rets = append(g.rets, ret)
			g.at = append(g.at, position{id: m.ID})
		} else {
			g.rs = append(g.rs, rs...)
			for i := range rs {
				line := i + 1
				if len(rs) == 1 {
					line = 0
				}
				g.at = append(g.at, position{id: m.ID, line: line})
			}
		}
		g.ids = append(g.ids, m.ID)
	}
	return order, malformed, malformedIDs
}

// persistReservations writes g's reservations. A batch MySQL refuses for a value
// (sale.ErrPoison) is written again in halves, down to the reservation that causes it, which is
// parked: the others are written, and a batch without such a reservation costs one transaction as
// before. It returns the reservations inserted and refused (PersistReservations), and those to
// park.
func (p *Persister) persistReservations(ctx context.Context, productID int64, stream string, g *group) (inserted int, refused []sale.Reservation, parked []sale.Parked, err error) {
	var write func(rs []sale.Reservation, at []position) error
	write = func(rs []sale.Reservation, at []position) error {
		n, ref, err := p.w.PersistReservations(ctx, productID, p.o.Strategy, g.epoch, g.gen, rs)
		switch {
		case errors.Is(err, sale.ErrPoison) && len(rs) == 1:
			line := reservationLine(rs[0], g.gen)
			parked = append(parked, p.parked(stream, at[0], productID, rs[0].OrderID, fieldsJSON(map[string]any{"rs": line}), err))
			return nil
		case errors.Is(err, sale.ErrPoison):
			half := len(rs) / 2
			if err := write(rs[:half], at[:half]); err != nil {
				return err
			}
			return write(rs[half:], at[half:])
		case err != nil:
			return err
		}
		inserted += n
		refused = append(refused, ref...)
		return nil
	}
	if p.o.Trace != nil {
		var end func(error)
		ctx, end = p.o.Trace(ctx, g.rs)
		defer func() { end(err) }()
	}
	err = write(g.rs, g.at)
	return inserted, refused, parked, err
}

// persistReturns writes g's returns, parking those MySQL refuses as persistReservations does.
func (p *Persister) persistReturns(ctx context.Context, productID int64, stream string, g *group) (units int, parked []sale.Parked, err error) {
	var write func(rets []sale.ClosedOrder, at []position) error
	write = func(rets []sale.ClosedOrder, at []position) error {
		ids := make([]string, len(rets))
		for i, r := range rets {
			ids[i] = r.OrderID
		}
		n, err := p.w.PersistReturns(ctx, productID, p.o.Strategy, g.epoch, g.gen, ids)
		switch {
		case errors.Is(err, sale.ErrPoison) && len(rets) == 1:
			r := rets[0]
			v := fmt.Sprintf("%s %s %d %d %d", r.OrderID, r.UserID, r.Quantity, g.epoch, g.gen)
			parked = append(parked, p.parked(stream, at[0], productID, r.OrderID, fieldsJSON(map[string]any{"ret": v}), err))
			return nil
		case errors.Is(err, sale.ErrPoison):
			half := len(rets) / 2
			if err := write(rets[:half], at[:half]); err != nil {
				return err
			}
			return write(rets[half:], at[half:])
		case err != nil:
			return err
		}
		units += n
		return nil
	}
	err = write(g.rets, g.at)
	return units, parked, err
}

// reservationLine is r as a line of the purchase script's rs field (see reservations).
func reservationLine(r sale.Reservation, gen uint64) string {
	return fmt.Sprintf("%s %s %d %d %d %s", r.OrderID, r.UserID, r.Quantity, r.Epoch, gen, r.IdempotencyKey)
}

// fieldsJSON is a stream entry's fields as a JSON object, the payload it is parked with: an
// operator replays it by adding those fields to the stream again.
func fieldsJSON(fields map[string]any) []byte {
	b, err := json.Marshal(fields)
	if err != nil {
		return []byte(fmt.Sprintf("%q", fmt.Sprint(fields)))
	}
	return b
}

// parked is what the persister parks for the reservation or entry at pos of stream.
func (p *Persister) parked(stream string, pos position, productID int64, orderID string, payload []byte, err error) sale.Parked {
	return sale.Parked{Loop: "persister", Source: stream, Position: pos.String(), OrderID: orderID, ProductID: productID,
		Payload: payload, Reason: err.Error()}
}

// park parks ps, then logs and counts those it parked now: each once, however often a round that
// failed to acknowledge it reads it again.
func (p *Persister) park(ctx context.Context, ps []sale.Parked) error {
	if len(ps) == 0 {
		return nil
	}
	fresh, err := p.w.ParkMessages(ctx, ps)
	if err != nil {
		return fmt.Errorf("redislua: park %d entries of %s: %w", len(ps), ps[0].Source, err)
	}
	for _, f := range fresh {
		p.o.Log.Error("a redis-lua stream entry can never be written to MySQL; parked, the persister goes on without it",
			"product_id", f.ProductID, "stream", f.Source, "position", f.Position, "order_id", f.OrderID, "reason", f.Reason)
	}
	p.o.OnParked(len(fresh))
	return nil
}

// ack acknowledges and deletes entries of stream.
func (p *Persister) ack(ctx context.Context, stream string, ids []string) error {
	_, err := p.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.XAck(ctx, stream, p.o.Group, ids...)
		pipe.XDel(ctx, stream, ids...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redislua: acknowledge %d entries of %s: %w", len(ids), stream, err)
	}
	return nil
}

// refused handles what MySQL refused of generation gen's reservations: purchases the script
// accepted that MySQL cannot hold, because the state in Redis went backwards (a failover to a
// replica that had not copied the latest purchases; a restart from an older file): it still
// counted units MySQL had given to purchases it forgot, or no longer knew a buyer. The Writer made
// each a refused order in the transaction that refused it; their entries are acknowledged like the
// rest, and each is logged once, loudly, by order id: their buyers were told 202. The state is
// dropped, if it is still that generation, so that the next purchase rebuilds it from MySQL (a
// forgotten buyer's refused purchase took a unit from the state that MySQL still has, which would
// otherwise stay unsold).
func (p *Persister) refused(ctx context.Context, productID int64, gen uint64, rs []sale.Reservation) {
	p.refusedN.Add(int64(len(rs)))
	dropped, err := dropStateScript.Run(ctx, p.rdb, []string{p.sale.Keys(productID).State}, gen).Int()
	// One line per refusedPerLine orders: every refused order id is in the log, and a failover
	// that refuses a whole batch writes a few lines, not hundreds.
	for chunk := range slices.Chunk(rs, refusedPerLine) {
		ids := make([]string, len(chunk))
		for i, r := range chunk {
			ids[i] = r.OrderID
		}
		p.o.Log.Error("accepted redis-lua purchases that MySQL cannot hold: refused, each now a refused order (nothing charged); the Redis state went backwards (a failover to a lagging replica?)",
			"product_id", productID, "gen", gen, "refused", len(chunk), "order_ids", ids, "state_dropped_for_rebuild", dropped == 1, "err", err)
	}
}

// refusedPerLine is the most refused order ids one log line lists.
const refusedPerLine = 100

// dropStateScript deletes a sale's state (KEYS[1]) if it is still of generation ARGV[1].
var dropStateScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'gen') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// isReturn reports whether a stream entry is a return (the return script's field ret) rather than
// a reservation (the purchase script's r).
func isReturn(m redis.XMessage) bool {
	_, ok := m.Values["ret"]
	return ok
}

// reservations reads one stream entry as the purchase script wrote it (field rs: the
// reservations of one batch, one per line, "order_id user_id quantity epoch gen Idempotency-Key";
// or r, one reservation, as the script wrote an entry before it wrote batches; and, when the batch
// carried any, field tp: their traceparents, one per line in the same order), and the generation
// of the state that accepted them (one script run: one epoch, one generation).
func reservations(productID int64, st sale.Strategy, m redis.XMessage) ([]sale.Reservation, uint64, error) {
	bad := func(err error) ([]sale.Reservation, uint64, error) {
		return nil, 0, fmt.Errorf("redislua: malformed stream entry %s %v: %v", m.ID, m.Values, err)
	}
	v, _ := m.Values["rs"].(string)
	if v == "" {
		if v, _ = m.Values["r"].(string); strings.Contains(v, "\n") {
			return bad(nil)
		}
	}
	fields := 1
	tp, traced := m.Values["tp"].(string)
	if traced {
		fields = 2
	}
	ms, err := strconv.ParseInt(strings.SplitN(m.ID, "-", 2)[0], 10, 64)
	if v == "" || len(m.Values) != fields || err != nil {
		return bad(err)
	}
	lines := strings.Split(v, "\n")
	var tps []string
	if traced {
		if tps = strings.Split(tp, "\n"); len(tps) != len(lines) {
			return bad(fmt.Errorf("%d traceparents for %d reservations", len(tps), len(lines)))
		}
	}
	rs := make([]sale.Reservation, len(lines))
	var gen uint64
	for i, line := range lines {
		f := strings.SplitN(line, " ", 6)
		if len(f) != 6 || f[0] == "" || f[1] == "" {
			return bad(fmt.Errorf("line %d", i+1))
		}
		qty, err1 := strconv.Atoi(f[2])
		epoch, err2 := strconv.ParseUint(f[3], 10, 64)
		g, err3 := strconv.ParseUint(f[4], 10, 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return bad(err)
		}
		if qty < 1 { // a unit MySQL would take back, not give
			return bad(fmt.Errorf("line %d: quantity %d", i+1, qty))
		}
		if i > 0 && (g != gen || epoch != rs[0].Epoch) {
			return bad(fmt.Errorf("line %d: epoch %d gen %d, the first %d and %d", i+1, epoch, g, rs[0].Epoch, gen))
		}
		gen = g
		rs[i] = sale.Reservation{
			Receipt: sale.Receipt{OrderID: f[0], Status: sale.StatusQueued, ProductID: productID,
				UserID: f[1], Quantity: qty, Strategy: st},
			IdempotencyKey: f[5],
			Epoch:          epoch,
			CreatedAt:      time.UnixMilli(ms).UTC(),
		}
		if traced && len(tps[i]) <= maxTraceParent {
			// A traceparent longer than its column is no trace of this program's: it is dropped,
			// and the reservation kept.
			rs[i].TraceParent = tps[i]
		}
	}
	return rs, gen, nil
}

// maxTraceParent is the longest traceparent the reservations' column keeps (version 00's length).
const maxTraceParent = 55

// OrderIDs returns the order ids of a stream entry's reservations, none for a return's entry or
// an entry the purchase script did not write (the chaos run's check of what a flush may lose).
func OrderIDs(m redis.XMessage) []string {
	if isReturn(m) {
		return nil
	}
	rs, _, err := reservations(0, Strategy, m)
	if err != nil {
		return nil
	}
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.OrderID
	}
	return ids
}

// Wake asks a running persister to drain productID's stream now rather than at its next round:
// the deductor calls it after each batch that accepted purchases (how many: the burst's rate),
// and after each return that gave units back (none). It never blocks; wakes that arrive while a
// drain runs are served by the next one, so under load a persister drains back to back, each
// round writing everything that arrived during the last.
func (p *Persister) Wake(productID int64, purchases int) {
	p.accepted.Add(int64(purchases))
	p.mu.Lock()
	p.woken[productID] = struct{}{}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run drains, until ctx ends, the new entries of the products woken (Wake), a Linger after they
// are, and every interval everything in the streams of all the products that products names
// (those on sale with redis-lua): the sweep writes this persister's entries left pending by a
// failure, takes over those of a dead persister, and those of a replica that died before its
// own persister ran. While this process accepts more than Burst purchases a second, both wait,
// MaxLag at the most. A failure is logged and tried again at the next round: the entries stay
// in the stream meanwhile, nothing is lost.
func (p *Persister) Run(ctx context.Context, products func(ctx context.Context) ([]int64, error), every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	p.held.rate(p.accepted.Load())
	var ticked meter // the rate between two ticks
	ticked.rate(p.accepted.Load())
	swept := time.Now()
	sweep, drain := true, false
	for {
		if sweep {
			ids, err := products(ctx)
			if err != nil && ctx.Err() == nil {
				p.o.Log.Warn("redis-lua products unknown; trying again", "err", err)
			}
			p.sweep(ctx, append(ids, p.takeWoken()...))
			swept = time.Now()
		} else if drain {
			p.drainWoken(ctx, p.takeWoken())
		}
		sweep, drain = false, false
		select {
		case <-ctx.Done():
			// Stopping: persist what this process accepted last, briefly, rather than leave it
			// for another persister's sweep.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			p.drainWoken(last, p.takeWoken())
			return nil
		case <-t.C:
			// A burst's sweep waits too, so that a replica's purchases are not written by its
			// own sweep while its round holds off.
			sweep = !p.bursting(ticked.rate(p.accepted.Load())) || time.Since(swept) >= p.o.MaxLag
		case <-p.wake:
			p.hold(ctx)
			drain = true
		}
	}
}

// hold waits Linger, then for as long as this process keeps accepting more than Burst purchases
// a second, up to MaxLag in all. Each check measures the rate since the previous one, so the
// first check of a round covers the time since the last round too, not only the Linger: on two
// cores saturated by the burst itself, a replica can accept nothing for tens of milliseconds.
// burstWindow spaces the checks once a burst is one.
func (p *Persister) hold(ctx context.Context) {
	start := time.Now()
	for wait := p.o.Linger; ; wait = burstWindow {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if !p.bursting(p.held.rate(p.accepted.Load())) || time.Since(start) >= p.o.MaxLag {
			return
		}
	}
}

// burstWindow is the time between two checks of a burst's rate.
const burstWindow = 250 * time.Millisecond

// meter measures the rate of a growing count between two readings.
type meter struct {
	n  int64
	at time.Time
}

// rate returns how fast the count grew, per second, since the previous reading (0 at the first),
// and starts the next window at n.
func (m *meter) rate(n int64) float64 {
	now := time.Now()
	r := 0.0
	if !m.at.IsZero() {
		r = float64(n-m.n) / now.Sub(m.at).Seconds()
	}
	m.n, m.at = n, now
	return r
}

func (p *Persister) bursting(rate float64) bool { return p.gate.bursting(rate) }

// burstGate tells a burst from a quiet sale by its rate, with hysteresis: a burst begins when
// the rate rises above enter and ends only when it falls below enter × burstExit. With one
// threshold, a burst whose rate sat near it flapped: on two shared cores a replica's rate dips for
// a quarter of a second (its CPU taken by the others, or by the hypervisor), the dip started a
// round, the round's MySQL writes took CPU from the burst, and the next window dipped too — the
// bench's 256-worker phase on a slow morning wrote 30–50 % of its purchases during the burst and
// accepted half as many.
type burstGate struct {
	enter float64 // 0 or less: never a burst
	exit  float64 // the share of enter below which a burst is over [burstExit]
	in    bool
}

// burstExit is the share of the entering rate below which a burst is over.
const burstExit = 0.25

func (g *burstGate) bursting(rate float64) bool {
	threshold := g.enter
	if g.in {
		threshold *= cmp.Or(g.exit, burstExit)
	}
	g.in = g.enter > 0 && rate > threshold
	return g.in
}

// takeWoken returns the products woken since it was last called.
func (p *Persister) takeWoken() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := slices.Collect(maps.Keys(p.woken))
	clear(p.woken)
	return ids
}

// drainWoken writes the new entries of the streams of ids.
func (p *Persister) drainWoken(ctx context.Context, ids []int64) {
	for _, id := range ids {
		if _, err := p.drainNew(ctx, id); err != nil && ctx.Err() == nil {
			p.o.Log.Warn("persisting redis-lua reservations failed; trying again", "product_id", id, "err", err)
		}
	}
}

// sweep drains the streams of ids that hold entries, asking Redis their lengths in one round trip
// first: most products' streams are empty most of the time.
func (p *Persister) sweep(ctx context.Context, ids []int64) {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if len(ids) == 0 {
		return
	}
	lens := make([]*redis.IntCmd, len(ids))
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, id := range ids {
			lens[i] = pipe.XLen(ctx, p.sale.Keys(id).Stream)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		p.o.Log.Warn("redis-lua streams unreadable; trying again", "err", err)
		return
	}
	for i, id := range ids {
		if lens[i].Val() == 0 {
			continue
		}
		if _, err := p.Drain(ctx, id); err != nil && ctx.Err() == nil {
			p.o.Log.Warn("persisting redis-lua reservations failed; trying again", "product_id", id, "err", err)
		}
	}
}
