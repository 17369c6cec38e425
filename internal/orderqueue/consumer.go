package orderqueue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/sethvargo/go-retry"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// OrderStore creates orders from reservations, idempotently, and parks the messages that can
// never become one (MessageParker).
type OrderStore interface {
	ConfirmOrders(ctx context.Context, orderIDs []string) (int64, error)
	MessageParker
}

// MessageParker keeps the messages a consumer can never apply, each once however often it is
// given, and returns those it kept now.
type MessageParker interface {
	ParkMessages(ctx context.Context, ms []sale.Parked) ([]sale.Parked, error)
}

// ConsumerMetrics receives the order consumer's counters.
type ConsumerMetrics interface {
	GroupMetrics
	OrdersCreated(n int64)
}

// GroupMetrics receives the counters every consumer keeps, whichever topic it reads.
// ConsumerMalformed counts messages that could not be decoded; ConsumerParked counts the
// messages parked (those among them, and those the database refused): each is an alert.
type GroupMetrics interface {
	ConsumerBatch(size int)
	ConsumerMalformed()
	ConsumerParked(n int)
	SetConsumerLag(n int64)
}

// Consumer reads a topic in a consumer group and applies each batch in the database: the order
// topic's consumer (NewConsumer) creates the orders, the lifecycle topic's (NewEventConsumer)
// tallies the order events. It commits a batch's offsets only after the database commit, so a
// crash in between redelivers the batch, which the write it applies makes harmless.
type Consumer struct {
	log     *slog.Logger
	reader  *kafka.Reader
	metrics GroupMetrics
	// loop names the consumer in what it parks (sale.Parked.Loop), and parker keeps it.
	loop   string
	parker MessageParker
	// apply writes a batch's effect in the database, retrying until it succeeds; it returns false
	// if ctx ended first.
	apply func(ctx context.Context, batch []kafka.Message) bool
	// maxBatch bounds the events confirmed in one transaction; gather is how long a batch waits
	// after its first event for more to arrive.
	maxBatch int
	gather   time.Duration
	// afterConfirm, a test hook (SetAfterConfirm), runs between a batch's database commit and its
	// offset commit.
	afterConfirm func()
	// tracing is nil when tracing is off (SetTracing).
	tracing *tracing.Tracing
}

// consumerMaxBatch is the most events confirmed in one database transaction. Confirming costs
// the database per transaction as well as per row, so a busy consumer catches up in large
// batches; the reader prefetches as many.
const consumerMaxBatch = 1000

// consumerGather is how long a batch gathers events after its first one, and so the most the
// consumer adds to the time from purchase to order. An event arrives the moment the broker
// acknowledged it, while its relay is still marking it published, and the foreign-key check of
// its order waits for the relay's row lock: in the burst benchmark, confirming cost mariadbd
// 47-59 ms per 1,000 orders gathered for 5 ms, against 12-17 ms with nothing racing it.
// Gathering for 100 ms lets the marks commit first and makes batches larger; it cut mariadbd's
// time for the whole burst by about 20 ms per 1,000 orders.
const consumerGather = 100 * time.Millisecond

// NewConsumer returns the consumer that creates orders from the events of cfg.Topic, in group
// cfg.GroupID; call Run to start it.
func NewConsumer(log *slog.Logger, cfg KafkaConfig, st OrderStore, m ConsumerMetrics) (*Consumer, error) {
	if st == nil || m == nil {
		return nil, errConsumerDeps
	}
	c, err := newConsumer(log, cfg, m)
	if err != nil {
		return nil, err
	}
	c.loop, c.parker = "consumer", st
	c.apply = c.createOrders(st, m)
	return c, nil
}

// createOrders is the order consumer's apply: it creates the orders of a batch's events.
func (c *Consumer) createOrders(st OrderStore, m ConsumerMetrics) func(context.Context, []kafka.Message) bool {
	return func(ctx context.Context, batch []kafka.Message) bool {
		return applyBatch(ctx, c, "create orders", batch, decodeOrderID, func(ctx context.Context, ids []string) error {
			n, err := st.ConfirmOrders(ctx, ids)
			if err == nil {
				m.OrdersCreated(n)
			}
			return err
		})
	}
}

var errConsumerDeps = errors.New("order: consumer needs a store and metrics")

// newConsumer returns a consumer without its apply.
func newConsumer(log *slog.Logger, cfg KafkaConfig, m GroupMetrics) (*Consumer, error) {
	if cfg.GroupID == "" || cfg.Topic == "" || len(cfg.Brokers) == 0 {
		return nil, errors.New("order: consumer needs brokers, a topic and a group id")
	}
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:  cfg.Brokers,
		GroupID:  cfg.GroupID,
		Topic:    cfg.Topic,
		MinBytes: 1,
		MaxBytes: 10 << 20,
		MaxWait:  500 * time.Millisecond,
		// Prefetched messages wait here for FetchMessage: room for a whole batch.
		QueueCapacity: consumerMaxBatch,
		StartOffset:   kafka.FirstOffset,
		// Offsets are committed explicitly, after the database commit.
		CommitInterval: 0,
		// A replica killed with SIGKILL never leaves the group: its partitions move to the others
		// after the session timeout, so keep it short (the broker's minimum is 6 s).
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		HeartbeatInterval: 2 * time.Second,
		JoinGroupBackoff:  time.Second,
		ReadBackoffMin:    100 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		Logger:            kafkaLogger(log, slog.LevelDebug),
		ErrorLogger:       kafkaLogger(log, slog.LevelWarn),
	})
	return &Consumer{log: log, reader: reader, metrics: m, maxBatch: consumerMaxBatch, gather: consumerGather}, nil
}

// SetAfterConfirm installs a test hook that runs after each batch is committed in the database
// (its orders, or its tallies) and before its offsets are: the point where a crash leaves writes
// whose events the broker delivers again. Off unless set; the program sets it only for the chaos run's failpoint
// (SECKILL_TEST_FAILPOINT), never by default. Call it before Run.
func (c *Consumer) SetAfterConfirm(f func()) { c.afterConfirm = f }

// Run consumes until ctx is done, then leaves the group and returns nil.
func (c *Consumer) Run(ctx context.Context) error {
	defer func() {
		if err := c.reader.Close(); err != nil {
			c.log.Warn("consumer: close reader", "err", err)
		}
	}()
	for {
		batch, err := c.fetch(ctx)
		if err != nil || ctx.Err() != nil {
			return nil
		}
		c.metrics.ConsumerBatch(len(batch))
		actx, end := ctx, func(bool) {}
		if c.tracing != nil {
			actx, end = startConsume(ctx, c.tracing, batch)
		}
		ok := c.apply(actx, batch)
		end(ok)
		if !ok {
			return nil // shutting down before the database commit: the batch will be redelivered
		}
		if c.afterConfirm != nil {
			c.afterConfirm()
		}
		// Commit even when shutdown has begun: the batch is in the database.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := c.reader.CommitMessages(cctx, batch...); err != nil {
			c.log.Warn("consumer: commit offsets (the batch will be redelivered)", "err", err)
		}
		cancel()
		c.metrics.SetConsumerLag(c.reader.Stats().Lag)
	}
}

// fetch returns the next batch (fetchBatch), trying again a second after each failure; it fails
// only when ctx ends.
func (c *Consumer) fetch(ctx context.Context) ([]kafka.Message, error) {
	return retry.DoValue(ctx, retry.NewConstant(time.Second), func(ctx context.Context) ([]kafka.Message, error) {
		batch, err := c.fetchBatch(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("consumer: fetch", "err", err)
			return nil, retry.RetryableError(err)
		}
		return batch, err
	})
}

// fetchBatch waits for one message, then takes what else arrives within c.gather, up to
// c.maxBatch. Messages the reader has already prefetched come at once.
func (c *Consumer) fetchBatch(ctx context.Context) ([]kafka.Message, error) {
	first, err := c.reader.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafka.Message{first}
	gctx, cancel := context.WithTimeout(ctx, c.gather)
	defer cancel()
	for len(batch) < c.maxBatch {
		m, err := c.reader.FetchMessage(gctx)
		if err != nil {
			break // the window closed; what failed otherwise fails again on the next fetch
		}
		batch = append(batch, m)
	}
	return batch, nil
}

// applyBatch decodes the messages of batch with decode and writes what they carry with write,
// retrying through outages (retry); it returns false if ctx ended first. A message that cannot
// be decoded, or whose item write refuses for its values (sale.ErrPoison), is parked and the
// others are written: a refused batch is written again in halves until the item that causes it is
// alone, so a batch pays for the search only when it holds such an item (about two writes per
// halving), and the writes that went through are not undone (write is idempotent).
func applyBatch[T any](ctx context.Context, c *Consumer, op string, batch []kafka.Message, decode func([]byte) (T, error), write func(context.Context, []T) error) bool {
	items, from := make([]T, 0, len(batch)), make([]kafka.Message, 0, len(batch))
	var parked []sale.Parked
	for _, m := range batch {
		v, err := decode(m.Value)
		if err != nil {
			c.metrics.ConsumerMalformed()
			parked = append(parked, c.parked(m, err))
			continue
		}
		items, from = append(items, v), append(from, m)
	}
	var apply func(items []T, from []kafka.Message) bool
	apply = func(items []T, from []kafka.Message) bool {
		if len(items) == 0 {
			return true
		}
		var refused error
		ok := c.retry(ctx, op, len(items), func(ctx context.Context) error {
			err := write(ctx, items)
			if errors.Is(err, sale.ErrPoison) {
				refused = err
				return nil
			}
			return err
		})
		switch {
		case !ok:
			return false
		case refused == nil:
			return true
		case len(items) == 1:
			parked = append(parked, c.parked(from[0], refused))
			return true
		}
		half := len(items) / 2
		return apply(items[:half], from[:half]) && apply(items[half:], from[half:])
	}
	return apply(items, from) && c.park(ctx, parked)
}

// parked is m as the consumer parks it for err.
func (c *Consumer) parked(m kafka.Message, err error) sale.Parked {
	orderID, productID := named(m.Value)
	return sale.Parked{
		Loop: c.loop, Source: m.Topic, Position: strconv.Itoa(m.Partition) + ":" + strconv.FormatInt(m.Offset, 10),
		OrderID: orderID, ProductID: productID, Payload: m.Value, Reason: err.Error(),
	}
}

// named returns the order and product a message names, as far as it can be read: both topics'
// messages carry order_id and product_id.
func named(value []byte) (orderID string, productID int64) {
	var v struct {
		OrderID   string `json:"order_id"`
		ProductID int64  `json:"product_id"`
	}
	_ = json.Unmarshal(value, &v) // what could not be read stays empty
	return v.OrderID, v.ProductID
}

// park parks ms, retrying through outages, then logs and counts those it parked now: each once,
// however often it is delivered. It returns false if ctx ended first: the batch is then not
// committed, and comes again.
func (c *Consumer) park(ctx context.Context, ms []sale.Parked) bool {
	if len(ms) == 0 {
		return true
	}
	return c.retry(ctx, "park messages", len(ms), func(ctx context.Context) error {
		fresh, err := c.parker.ParkMessages(ctx, ms)
		if err != nil {
			return err
		}
		for _, p := range fresh {
			c.log.Error("consumer: a message can never be applied; parked, the consumer goes on without it",
				"topic", p.Source, "position", p.Position, "order_id", p.OrderID, "reason", p.Reason)
		}
		c.metrics.ConsumerParked(len(fresh))
		return nil
	})
}

// retry runs write, the database write of a batch of n events, until it succeeds, waiting
// outageBackoff between attempts; it returns false if ctx ended first.
func (c *Consumer) retry(ctx context.Context, op string, n int, write func(context.Context) error) bool {
	var failed error // the last attempt's error, logged with the wait that follows it
	backoff := outageBackoff()
	logged := retry.BackoffFunc(func() (time.Duration, bool) {
		wait, stop := backoff.Next()
		c.log.Warn("consumer: "+op+"; will retry", "err", failed, "batch", n, "backoff", wait)
		return wait, stop
	})
	err := retry.Do(ctx, logged, func(ctx context.Context) error {
		err := write(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return err // shutting down: neither logged nor retried
		}
		failed = err
		return retry.RetryableError(err)
	})
	return err == nil
}
