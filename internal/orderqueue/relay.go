package orderqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/sethvargo/go-retry"
	"go.opentelemetry.io/otel/trace"

	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/pause"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// Outbox is the reservation table as the relay sees it. ClaimOutboxFrom claims only entries
// whose id is at least fromID (0: all), and never a parked one; ParkOutbox parks entries and
// returns the ids it parked now (not those parked before).
type Outbox interface {
	ClaimOutboxFrom(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]order.OutboxEntry, error)
	MarkPublished(ctx context.Context, ids []int64) error
	ReleaseClaims(ctx context.Context, owner string, ids []int64) error
	ParkOutbox(ctx context.Context, entries []order.ParkedEntry) ([]int64, error)
	OutboxBacklog(ctx context.Context) (int64, error)
	RequeueUnconfirmed(ctx context.Context, since time.Time, minAge, maxAge time.Duration, limit int) (requeued int64, upTo time.Time, err error)
}

// MessageWriter publishes messages and returns once the broker acknowledged them (or failed).
// *kafka.Writer implements it.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// RelayMetrics receives the counters of the reservations' relay.
type RelayMetrics interface {
	OutboxMetrics
	RelayRequeued(n int64)
}

// OutboxMetrics receives the counters every relay keeps, whichever outbox it drains.
// RelayParked counts entries parked (order.ParkedEntry): each is an alert.
type OutboxMetrics interface {
	RelayPublished(n int)
	RelayFailed()
	RelayParked(n int)
	SetOutboxBacklog(n int64)
}

// RelayConfig tunes the relay. Zero values take the defaults in brackets.
type RelayConfig struct {
	// Owner names this relay in claims; unique per process.
	Owner string
	// Batch is the most entries claimed and published at once [1000]. A claim costs the
	// database a few milliseconds whatever its size, so a backlog drains fastest and cheapest in
	// large batches.
	Batch int
	// Lease is how long a claim keeps other relays away; longer than a publish can take [30s].
	Lease time.Duration
	// Poll is the idle wait between looks at the outbox when nothing wakes the relay [250ms].
	Poll time.Duration
	// ClaimInterval is the least time from the start of a claim that came back less than full to
	// the start of the next one [100ms]. Purchases wake the relay one by one; the wakes of a burst
	// that arrive sooner are gathered into one claim, so the relay claims a few times a second,
	// in batches that grow with the rate, instead of once per purchase. A wake that comes later
	// than that after the previous claim is claimed at once, and a full claim is followed by the
	// next one at once. It is the most it adds to the time from purchase to publish.
	ClaimInterval time.Duration
	// RequeueAfter is how long a published reservation may go without an order before it is
	// published again [5m]; RequeueEvery is how often that is checked [1m].
	RequeueAfter time.Duration
	RequeueEvery time.Duration
}

func (c *RelayConfig) defaults() {
	c.Batch = cmpOr(c.Batch, 1000)
	c.Lease = cmpOr(c.Lease, 30*time.Second)
	c.Poll = cmpOr(c.Poll, 250*time.Millisecond)
	c.ClaimInterval = cmpOr(c.ClaimInterval, 100*time.Millisecond)
	c.RequeueAfter = cmpOr(c.RequeueAfter, 5*time.Minute)
	c.RequeueEvery = cmpOr(c.RequeueEvery, time.Minute)
}

func cmpOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Relay publishes the committed entries of an outbox to Kafka: reservations to the order topic
// (NewRelay), or the order events of the lifecycle to the lifecycle topic (NewEventRelay). Any
// number of relays may run against one database: they claim disjoint batches, and a batch whose
// relay died is claimed again after its lease. A relay that dies after publishing and before
// marking publishes twice; the consumer makes that harmless.
type Relay struct {
	log     *slog.Logger
	outbox  source
	writer  MessageWriter
	metrics OutboxMetrics
	// requeue, nil for an outbox that has none, publishes again what was published long ago and
	// had no effect (RequeueUnconfirmed).
	requeue func(ctx context.Context)
	// requeuedTo is where the last requeue's look ended (the database's clock): the next one
	// starts there. Zero, the first one looks a whole day back.
	requeuedTo time.Time
	cfg        RelayConfig
	wake       chan struct{}
	// tracing is nil when tracing is off (SetTracing).
	tracing *tracing.Tracing

	// from and fullScan are where the next claim starts looking; see claimFrom.
	from     int64
	fullScan time.Time
}

// fullScanEvery is how often a claim looks at the whole outbox rather than from near the
// previous claim: the longest an entry that appeared behind the relay waits for it.
const fullScanEvery = time.Second

// claimMargin is how far below the previous claim's first id the next claim starts: more ids
// than purchases usually hold uncommitted at once (a batch of up to 128 per product and replica,
// three replicas: 384 for a one-product sale). An entry that falls further behind is found by the
// full look, within fullScanEvery.
const claimMargin = 1024

// source is an outbox as a relay drains it: a claim comes back as the entries' ids and the
// messages to publish for them, and the entries that cannot become a message.
type source interface {
	claim(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) (claimed, error)
	MarkPublished(ctx context.Context, ids []int64) error
	ReleaseClaims(ctx context.Context, owner string, ids []int64) error
	park(ctx context.Context, entries []order.ParkedEntry) ([]int64, error)
	OutboxBacklog(ctx context.Context) (int64, error)
}

// claimed is one claim of a source: ids[i]'s message is msgs[i]; bad are claimed entries that
// cannot become one.
type claimed struct {
	ids  []int64
	msgs []kafka.Message
	bad  []order.ParkedEntry
}

// add appends entry id's message value, with the entry's traceparent tp (if any) as its header,
// or parks it with why it has none.
func (c *claimed) add(id int64, key string, value []byte, tp, invalid string, err error) {
	switch {
	case invalid != "":
		c.bad = append(c.bad, order.ParkedEntry{ID: id, Reason: invalid})
	case err != nil:
		c.bad = append(c.bad, order.ParkedEntry{ID: id, Reason: fmt.Sprintf("encode: %v", err)})
	default:
		c.ids = append(c.ids, id)
		c.msgs = append(c.msgs, kafka.Message{Key: []byte(key), Value: value, Headers: traceHeader(tp)})
	}
}

// size is how many entries the claim took, and first the smallest id among them.
func (c claimed) size() int { return len(c.ids) + len(c.bad) }

func (c claimed) first() int64 {
	first := int64(math.MaxInt64)
	for _, id := range c.ids {
		first = min(first, id)
	}
	for _, b := range c.bad {
		first = min(first, b.ID)
	}
	return first
}

// reservations is the reservation table as a source: each entry is an Event keyed by product id.
type reservations struct{ Outbox }

func (o reservations) claim(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) (claimed, error) {
	entries, err := o.ClaimOutboxFrom(ctx, owner, lease, limit, fromID)
	if err != nil || len(entries) == 0 {
		return claimed{}, err
	}
	c := claimed{ids: make([]int64, 0, len(entries)), msgs: make([]kafka.Message, 0, len(entries))}
	for _, e := range entries {
		value, err := json.Marshal(Event{
			Version:       eventVersion,
			OrderID:       e.OrderID,
			ReservationID: e.ID,
			ProductID:     e.ProductID,
			UserID:        e.UserID,
			Quantity:      e.Quantity,
			Strategy:      e.Strategy,
			ReservedAt:    e.CreatedAt.UTC(),
		})
		c.add(e.ID, strconv.FormatInt(e.ProductID, 10), value, e.TraceParent, e.Invalid, err)
	}
	return c, nil
}

func (o reservations) park(ctx context.Context, entries []order.ParkedEntry) ([]int64, error) {
	return o.ParkOutbox(ctx, entries)
}

// NewRelay returns the relay of the reservations to the order topic; call Run to start it.
func NewRelay(log *slog.Logger, outbox Outbox, w MessageWriter, m RelayMetrics, cfg RelayConfig) (*Relay, error) {
	if outbox == nil || m == nil {
		return nil, errRelayDeps
	}
	r, err := newRelay(log, reservations{outbox}, w, m, cfg)
	if err != nil {
		return nil, err
	}
	r.requeue = func(ctx context.Context) { r.requeueUnconfirmed(ctx, outbox, m) }
	return r, nil
}

var errRelayDeps = errors.New("order: relay needs an outbox, a writer and metrics")

func newRelay(log *slog.Logger, outbox source, w MessageWriter, m OutboxMetrics, cfg RelayConfig) (*Relay, error) {
	if w == nil {
		return nil, errRelayDeps
	}
	if cfg.Owner == "" {
		return nil, errors.New("order: relay needs an owner name")
	}
	cfg.defaults()
	return &Relay{log: log, outbox: outbox, writer: w, metrics: m, cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Wake makes the relay look at the outbox now rather than at its next poll. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run publishes until ctx is done. Failures are logged and retried after outageBackoff's wait,
// which starts over after a batch that went through; it returns nil when ctx ends.
func (r *Relay) Run(ctx context.Context) error {
	var backoff retry.Backoff // nil until a batch fails, and again after one goes through
	var requeue <-chan time.Time
	if r.requeue != nil {
		t := time.NewTicker(r.cfg.RequeueEvery)
		defer t.Stop()
		requeue = t.C
	}
	poll := time.NewTimer(r.cfg.Poll)
	defer poll.Stop()
	lastBacklog := time.Time{}
	for {
		claimed := time.Now()
		n, err := r.publishBatch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.metrics.RelayFailed()
			if backoff == nil {
				backoff = outageBackoff()
			}
			wait, _ := backoff.Next()
			r.log.Warn("relay: publish failed; will retry", "err", err, "backoff", wait)
			if pause.For(ctx, wait) != nil {
				return nil
			}
			continue
		}
		backoff = nil
		if n == r.cfg.Batch {
			continue // more are probably waiting
		}
		if time.Since(lastBacklog) > time.Second {
			lastBacklog = time.Now()
			if b, err := r.outbox.OutboxBacklog(ctx); err == nil {
				r.metrics.SetOutboxBacklog(b)
			}
		}
		poll.Reset(r.cfg.Poll)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-poll.C:
		case <-requeue:
			r.requeue(ctx)
		}
		// The outbox was drained a moment ago: let what woke the relay gather with what follows.
		if pause.For(ctx, time.Until(claimed.Add(r.cfg.ClaimInterval))) != nil {
			return nil
		}
	}
}

// publishBatch claims, publishes and marks one batch, and returns how many entries it claimed.
// What can never be published (an entry that cannot become a message, a message the broker
// refuses for itself) is parked and the rest goes on; what failed for an outage is released for
// the next try.
func (r *Relay) publishBatch(ctx context.Context) (int, error) {
	c, err := r.outbox.claim(ctx, r.cfg.Owner, r.cfg.Lease, r.cfg.Batch, r.claimFrom())
	if err != nil || c.size() == 0 {
		return 0, err
	}
	r.from = c.first()

	// The publish must not outlive the lease, or another relay would publish the batch as well.
	pctx, cancel := context.WithTimeout(ctx, r.cfg.Lease/2)
	var spans []trace.Span
	if r.tracing != nil {
		spans = startPublish(ctx, r.tracing, c.ids, c.msgs)
	}
	w := r.publish(pctx, c.ids, c.msgs)
	cancel()
	endPublish(spans, c.ids, w)
	if len(w.refused) > 1 && len(w.refused) == len(c.ids) {
		// Every message refused, each alone: the topic's limits or the broker's, not a message's.
		// Parking them all would empty the outbox into the parked rows; retry as for an outage.
		w.failed, w.refused = append(w.failed, c.ids...), nil
		w.err = fmt.Errorf("the broker refuses every message of the batch: %w", w.err)
	}

	// Bookkeeping outlives a shutdown's cancel: what the broker acknowledged should be marked.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.outbox.MarkPublished(bctx, w.done); err != nil {
		return c.size(), fmt.Errorf("mark %d published (they will be published again): %w", len(w.done), err)
	}
	r.metrics.RelayPublished(len(w.done))
	if err := r.park(bctx, append(c.bad, w.refused...)); err != nil {
		w.failed = append(w.failed, idsOf(c.bad)...)
		w.failed = append(w.failed, idsOf(w.refused)...)
		if w.err == nil {
			w.err = err
		}
	}
	if len(w.failed) > 0 {
		if err := r.outbox.ReleaseClaims(bctx, r.cfg.Owner, w.failed); err != nil {
			r.log.Warn("relay: release claims", "err", err)
		}
		return c.size(), fmt.Errorf("publish %d of %d: %w", len(w.failed), c.size(), w.err)
	}
	return c.size(), nil
}

// written is what became of a batch's messages: done (acknowledged), refused (the broker refuses
// the message itself: it failed alone) and failed (an outage, with its error).
type written struct {
	done    []int64
	refused []order.ParkedEntry
	failed  []int64
	err     error
}

// publish writes msgs (ids[i]'s is msgs[i]). Messages that fail for a reason of their own
// (refusedByBroker) are written again in halves until each that still fails is alone: a batch
// pays for the search only when it has such a message, about two writes per halving. (A topic
// that refuses every message costs about two writes per message, bounded by ctx.)
func (r *Relay) publish(ctx context.Context, ids []int64, msgs []kafka.Message) written {
	type suspect struct {
		i   int
		err error
	}
	var w written
	var suspects []suspect
	werr := r.writer.WriteMessages(ctx, msgs...)
	var writeErrs kafka.WriteErrors
	perMessage := errors.As(werr, &writeErrs) && len(writeErrs) == len(msgs)
	for i, id := range ids {
		err := werr
		if perMessage {
			err = writeErrs[i]
		}
		switch {
		case err == nil:
			w.done = append(w.done, id)
		case refusedByBroker(err) && ctx.Err() == nil:
			suspects = append(suspects, suspect{i, err})
		default:
			w.failed = append(w.failed, id)
			w.err = err
		}
	}
	if len(suspects) == 1 {
		s := suspects[0]
		w.refused = append(w.refused, order.ParkedEntry{ID: ids[s.i], Reason: fmt.Sprintf("refused by the broker (a %d-byte message): %v", len(msgs[s.i].Value), s.err)})
		w.err = cmp.Or(w.err, s.err)
		return w
	}
	half := len(suspects) / 2
	for _, part := range [][]suspect{suspects[:half], suspects[half:]} {
		if len(part) == 0 {
			continue
		}
		pids, pmsgs := make([]int64, len(part)), make([]kafka.Message, len(part))
		for j, s := range part {
			pids[j], pmsgs[j] = ids[s.i], msgs[s.i]
		}
		sub := r.publish(ctx, pids, pmsgs)
		w.done = append(w.done, sub.done...)
		w.refused = append(w.refused, sub.refused...)
		w.failed = append(w.failed, sub.failed...)
		w.err = cmp.Or(w.err, sub.err)
	}
	return w
}

// refusedByBroker reports a write error that is the message's own: too large for the writer's
// or the topic's limit (kafka-go's MessageTooLargeError unwraps to MessageSizeTooLarge), a batch
// too large (its halves fit), a record or timestamp the broker will not take. Anything else, the
// codes kafka-go calls temporary and every network error among them, is an outage.
func refusedByBroker(err error) bool {
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge) ||
		errors.Is(err, kafka.InvalidRecord) || errors.Is(err, kafka.InvalidTimestamp)
}

// park parks entries, then logs and counts those it parked now: each once, whatever happens to
// the batch or the relay afterwards.
func (r *Relay) park(ctx context.Context, entries []order.ParkedEntry) error {
	if len(entries) == 0 {
		return nil
	}
	parked, err := r.outbox.park(ctx, entries)
	if err != nil {
		return fmt.Errorf("park %d entries: %w", len(entries), err)
	}
	now := make(map[int64]bool, len(parked))
	for _, id := range parked {
		now[id] = true
	}
	for _, e := range entries {
		if now[e.ID] {
			r.log.Error("relay: an outbox entry can never be published; parked, the relay goes on without it",
				"id", e.ID, "reason", e.Reason)
		}
	}
	r.metrics.RelayParked(len(parked))
	return nil
}

func idsOf(entries []order.ParkedEntry) []int64 {
	ids := make([]int64, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return ids
}

// claimFrom returns the smallest id the next claim considers. Published entries leave
// delete-marked records at the front of the outbox index until InnoDB purges them, which lags
// behind a burst; a claim from the front walks them all (draining a backlog in batches of 150,
// its SELECT cost mariadbd 17 ms per 1,000 entries from the front, 5.5 ms from near the previous
// claim). So a claim starts claimMargin ids below the first entry of the previous one: the
// margin covers purchases that committed out of id order (a transaction that took its ids first
// and committed last, skipped as locked). What else can appear further behind (a claim released
// or expired, a requeued entry) is found by the full look at least every fullScanEvery.
func (r *Relay) claimFrom() int64 {
	if time.Since(r.fullScan) >= fullScanEvery {
		r.fullScan = time.Now()
		return 0
	}
	return max(0, r.from-claimMargin)
}

func (r *Relay) requeueUnconfirmed(ctx context.Context, outbox Outbox, m RelayMetrics) {
	n, upTo, err := outbox.RequeueUnconfirmed(ctx, r.requeuedTo, r.cfg.RequeueAfter, 24*time.Hour, 1000)
	r.requeuedTo = upTo
	if err != nil {
		r.log.Warn("relay: requeue unconfirmed", "err", err)
		return
	}
	if n > 0 {
		m.RelayRequeued(n)
		r.log.Warn("relay: published reservations had no order; publishing them again", "count", n, "after", r.cfg.RequeueAfter)
	}
}

// outageBackoff is the wait of the relay and the consumer before they try again what failed
// while the database or the broker is away: 100 ms, then twice as long each time, 5 s at the
// most, without jitter. Each call starts a new sequence.
func outageBackoff() retry.Backoff {
	return retry.WithCappedDuration(5*time.Second, retry.NewExponential(100*time.Millisecond))
}
