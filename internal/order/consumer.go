package order

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/sethvargo/go-retry"
)

// OrderStore creates orders from reservations, idempotently.
type OrderStore interface {
	ConfirmOrders(ctx context.Context, orderIDs []string) (int64, error)
}

// ConsumerMetrics receives the consumer's counters.
type ConsumerMetrics interface {
	OrdersCreated(n int64)
	ConsumerBatch(size int)
	ConsumerMalformed()
	SetConsumerLag(n int64)
}

// Consumer reads order events in a consumer group and creates the orders. It commits a batch's
// offsets only after the orders are committed in the database, so a crash in between redelivers
// the batch, which ConfirmOrders makes harmless.
type Consumer struct {
	log     *slog.Logger
	reader  *kafka.Reader
	store   OrderStore
	metrics ConsumerMetrics
	// maxBatch bounds the events confirmed in one transaction; gather is how long a batch waits
	// after its first event for more to arrive.
	maxBatch int
	gather   time.Duration
	// afterConfirm, a test hook (SetAfterConfirm), runs between a batch's database commit and its
	// offset commit.
	afterConfirm func()
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

// NewConsumer returns a consumer of cfg.Topic in group cfg.GroupID; call Run to start it.
func NewConsumer(log *slog.Logger, cfg KafkaConfig, st OrderStore, m ConsumerMetrics) (*Consumer, error) {
	if st == nil || m == nil {
		return nil, errors.New("order: consumer needs a store and metrics")
	}
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
	return &Consumer{log: log, reader: reader, store: st, metrics: m, maxBatch: consumerMaxBatch, gather: consumerGather}, nil
}

// SetAfterConfirm installs a test hook that runs after each batch's orders are committed in the
// database and before its offsets are: the point where a crash leaves orders that the broker
// delivers again. Off unless set; the program sets it only for the chaos run's failpoint
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
		if !c.confirm(ctx, batch) {
			return nil // shutting down before the database commit: the batch will be redelivered
		}
		if c.afterConfirm != nil {
			c.afterConfirm()
		}
		// Commit even when shutdown has begun: the orders are in the database.
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

// confirm creates the batch's orders, retrying until it succeeds; it returns false if ctx ended
// first.
func (c *Consumer) confirm(ctx context.Context, batch []kafka.Message) bool {
	ids := make([]string, 0, len(batch))
	for _, m := range batch {
		id, err := decodeOrderID(m.Value)
		if err != nil {
			c.metrics.ConsumerMalformed()
			c.log.Error("consumer: skipping malformed event", "err", err,
				"partition", m.Partition, "offset", m.Offset)
			continue
		}
		ids = append(ids, id)
	}
	c.metrics.ConsumerBatch(len(batch))
	var failed error // the last attempt's error, logged with the wait that follows it
	backoff := outageBackoff()
	logged := retry.BackoffFunc(func() (time.Duration, bool) {
		wait, stop := backoff.Next()
		c.log.Warn("consumer: create orders; will retry", "err", failed, "batch", len(ids), "backoff", wait)
		return wait, stop
	})
	err := retry.Do(ctx, logged, func(ctx context.Context) error {
		n, err := c.store.ConfirmOrders(ctx, ids)
		switch {
		case err == nil:
			c.metrics.OrdersCreated(n)
			return nil
		case ctx.Err() != nil:
			return err // shutting down: neither logged nor retried
		}
		failed = err
		return retry.RetryableError(err)
	})
	return err == nil
}
