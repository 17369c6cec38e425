package order

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/sethvargo/go-retry"
)

// Outbox is the reservation table as the relay sees it. ClaimOutboxFrom claims only entries
// whose id is at least fromID (0: all).
type Outbox interface {
	ClaimOutboxFrom(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]OutboxEntry, error)
	MarkPublished(ctx context.Context, ids []int64) error
	ReleaseClaims(ctx context.Context, owner string, ids []int64) error
	OutboxBacklog(ctx context.Context) (int64, error)
	RequeueUnconfirmed(ctx context.Context, minAge, maxAge time.Duration, limit int) (int64, error)
}

// OutboxEntry is a committed reservation waiting to be published to the order queue: what the
// relay turns into an Event.
type OutboxEntry struct {
	ID        int64
	OrderID   string
	ProductID int64
	UserID    string
	Quantity  int
	Strategy  string
	CreatedAt time.Time
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
type OutboxMetrics interface {
	RelayPublished(n int)
	RelayFailed()
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
	cfg     RelayConfig
	wake    chan struct{}

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
// messages to publish for them.
type source interface {
	claim(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]int64, []kafka.Message, error)
	MarkPublished(ctx context.Context, ids []int64) error
	ReleaseClaims(ctx context.Context, owner string, ids []int64) error
	OutboxBacklog(ctx context.Context) (int64, error)
}

// reservations is the reservation table as a source: each entry is an Event keyed by product id.
type reservations struct{ Outbox }

func (o reservations) claim(ctx context.Context, owner string, lease time.Duration, limit int, fromID int64) ([]int64, []kafka.Message, error) {
	entries, err := o.ClaimOutboxFrom(ctx, owner, lease, limit, fromID)
	if err != nil || len(entries) == 0 {
		return nil, nil, err
	}
	ids, msgs := make([]int64, len(entries)), make([]kafka.Message, len(entries))
	for i, e := range entries {
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
		if err != nil {
			return nil, nil, fmt.Errorf("encode event: %w", err)
		}
		ids[i], msgs[i] = e.ID, kafka.Message{Key: []byte(strconv.FormatInt(e.ProductID, 10)), Value: value}
	}
	return ids, msgs, nil
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
			if !sleep(ctx, wait) {
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
		if !sleep(ctx, time.Until(claimed.Add(r.cfg.ClaimInterval))) {
			return nil
		}
	}
}

// publishBatch claims, publishes and marks one batch, and returns how many entries it claimed.
func (r *Relay) publishBatch(ctx context.Context) (int, error) {
	ids, msgs, err := r.outbox.claim(ctx, r.cfg.Owner, r.cfg.Lease, r.cfg.Batch, r.claimFrom())
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	r.from = ids[0]

	// The publish must not outlive the lease, or another relay would publish the batch as well.
	pctx, cancel := context.WithTimeout(ctx, r.cfg.Lease/2)
	werr := r.writer.WriteMessages(pctx, msgs...)
	cancel()

	var done, failed []int64
	var writeErrs kafka.WriteErrors
	for i, id := range ids {
		if werr == nil || (errors.As(werr, &writeErrs) && len(writeErrs) == len(ids) && writeErrs[i] == nil) {
			done = append(done, id)
		} else {
			failed = append(failed, id)
		}
	}
	// Bookkeeping outlives a shutdown's cancel: what the broker acknowledged should be marked.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.outbox.MarkPublished(bctx, done); err != nil {
		return len(ids), fmt.Errorf("mark %d published (they will be published again): %w", len(done), err)
	}
	r.metrics.RelayPublished(len(done))
	if werr != nil {
		if err := r.outbox.ReleaseClaims(bctx, r.cfg.Owner, failed); err != nil {
			r.log.Warn("relay: release claims", "err", err)
		}
		return len(ids), fmt.Errorf("publish %d of %d: %w", len(failed), len(ids), werr)
	}
	return len(ids), nil
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
	n, err := outbox.RequeueUnconfirmed(ctx, r.cfg.RequeueAfter, 24*time.Hour, 1000)
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

// sleep waits for d or until ctx ends, and reports whether it waited the full d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
