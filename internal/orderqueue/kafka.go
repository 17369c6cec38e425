// Package orderqueue turns accepted purchases into orders: an outbox relay publishes committed
// reservations to Kafka and a consumer group creates the orders. Delivery is at least once on both
// hops and order creation is idempotent, so every reservation ends as exactly one order across
// crashes, SIGKILLs and broker outages. The same relay and consumer carry the order lifecycle's
// events (paid, expired, cancelled) from their outbox to a lifecycle topic and into per-product
// tallies, each event counted once. It never deducts stock, never creates an order without its
// reservation and never changes an order's status.
package orderqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
)

// KafkaConfig names the broker, the topic and the consumer group.
type KafkaConfig struct {
	Brokers []string
	Topic   string
	GroupID string
	// Partitions is used when the topic has to be created.
	Partitions int
}

// Event is the message published for each reservation. The consumer uses only OrderID: the
// order is built from the reservation row, so a stale or forged event cannot invent an order.
type Event struct {
	Version       int       `json:"v"`
	OrderID       string    `json:"order_id"`
	ReservationID int64     `json:"reservation_id"`
	ProductID     int64     `json:"product_id"`
	UserID        string    `json:"user_id"`
	Quantity      int       `json:"quantity"`
	Strategy      string    `json:"strategy"`
	ReservedAt    time.Time `json:"reserved_at"`
}

// eventVersion is the Event schema version this code writes and reads.
const eventVersion = 1

// decodeOrderID returns the only field of an event the consumer uses. Leaving the rest undecoded
// saves the allocations of the fields it does not need; encoding/json scans the whole value
// either way.
func decodeOrderID(value []byte) (string, error) {
	var e struct {
		Version int    `json:"v"`
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(value, &e); err != nil {
		return "", fmt.Errorf("order event: %w", err)
	}
	if err := checkEvent(e.Version, e.OrderID); err != nil {
		return "", err
	}
	return e.OrderID, nil
}

func checkEvent(version int, orderID string) error {
	if version != eventVersion || orderID == "" || len(orderID) > 40 {
		return fmt.Errorf("order event: unsupported version %d or bad order id %q", version, orderID)
	}
	return nil
}

// NewWriter returns a synchronous producer that waits for every in-sync replica (acks=all) and
// keys messages by product id.
func NewWriter(log *slog.Logger, cfg KafkaConfig) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.Topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		// WriteMessages returns when its batch is acknowledged; a batch not yet full is sent after
		// BatchTimeout, whose default (1 s) would delay every order by a second.
		BatchTimeout: 2 * time.Millisecond,
		// A relay's claim (RelayConfig.Batch, 1000 by default) goes out as one produce request per
		// partition even when every event has the same key (a sale of one product).
		BatchSize:    1000,
		MaxAttempts:  3,
		WriteTimeout: 10 * time.Second,
		ReadTimeout:  10 * time.Second,
		Logger:       kafkaLogger(log, slog.LevelDebug),
		ErrorLogger:  kafkaLogger(log, slog.LevelWarn),
	}
}

// EnsureTopic creates the topic with cfg.Partitions partitions unless it exists.
func EnsureTopic(ctx context.Context, cfg KafkaConfig) error {
	conn, err := dialAny(ctx, cfg.Brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	if parts, err := conn.ReadPartitions(cfg.Topic); err == nil && len(parts) > 0 {
		return nil
	}
	controller, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("kafka controller: %w", err)
	}
	var d kafka.Dialer
	cc, err := d.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		return fmt.Errorf("kafka controller: %w", err)
	}
	defer cc.Close()
	err = cc.CreateTopics(kafka.TopicConfig{
		Topic:             cfg.Topic,
		NumPartitions:     max(cfg.Partitions, 1),
		ReplicationFactor: 1,
	})
	if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", cfg.Topic, err)
	}
	return nil
}

// Ping checks that a broker answers and knows the topic.
func Ping(ctx context.Context, cfg KafkaConfig) error {
	conn, err := dialAny(ctx, cfg.Brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	parts, err := conn.ReadPartitions(cfg.Topic)
	if err != nil {
		return fmt.Errorf("kafka topic %s: %w", cfg.Topic, err)
	}
	if len(parts) == 0 {
		return fmt.Errorf("kafka topic %s has no partitions", cfg.Topic)
	}
	return nil
}

func dialAny(ctx context.Context, brokers []string) (*kafka.Conn, error) {
	d := kafka.Dialer{Timeout: 3 * time.Second}
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("kafka: no broker reachable: %w", errors.Join(errs...))
}

// kafkaLogger adapts kafka-go's printf-style logger to slog.
func kafkaLogger(log *slog.Logger, level slog.Level) kafka.Logger {
	return kafka.LoggerFunc(func(format string, args ...any) {
		if log.Enabled(context.Background(), level) {
			log.Log(context.Background(), level, fmt.Sprintf(format, args...), "component", "kafka-go")
		}
	})
}
