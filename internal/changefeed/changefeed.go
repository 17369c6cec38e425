// Package changefeed broadcasts sale changes (a product created or reset, a product sold out)
// between the replicas over Redis pub/sub, so that each replica's in-memory sale state follows
// within milliseconds. Pub/sub delivers at most once: a replica that was disconnected misses
// messages, so after every (re)subscription it asks for a full refresh, and the sale domain
// refreshes periodically anyway. Nothing here is needed for correctness, only for speed; it must
// never hold anything the sale's invariants depend on.
package changefeed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sethvargo/go-retry"

	"github.com/seckill-go/seckill-go/internal/pause"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// Feed publishes changes and delivers every change published by any replica.
type Feed struct {
	rdb     redis.UniversalClient
	channel string
	log     *slog.Logger
	out     chan sale.Change
}

var _ sale.ChangeFeed = (*Feed)(nil)

// New returns a feed on rdb. namespace separates deployments that share one Redis (product ids
// are only unique within one database: the app passes the database name). Call Run to start it.
func New(log *slog.Logger, rdb redis.UniversalClient, namespace string) (*Feed, error) {
	if log == nil || rdb == nil {
		return nil, errors.New("changefeed: a logger and a Redis client are required")
	}
	return &Feed{rdb: rdb, channel: "seckill:" + namespace + ":sale-changes", log: log, out: make(chan sale.Change, 1024)}, nil
}

// Publish queues c for every replica and returns at once; if the queue is full the change is
// dropped (the replicas' periodic refresh catches up). A reset is published before Publish
// returns (at most a second; queued if Redis fails it): the admin's answer to a reset should mean
// that every replica was told, or a purchase sent right after it to another replica meets the old
// sale (sold out, say) for as long as the queue took (a fresh-clone CI run saw 100–300 ms of false
// sold outs on a loaded machine). Changes queued before it may arrive after it: the receivers
// order them by epoch.
func (f *Feed) Publish(ctx context.Context, c sale.Change) {
	if c.Kind == sale.ChangeReset {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := f.rdb.Publish(pctx, f.channel, encode(c)).Err()
		cancel()
		if err == nil {
			return
		}
		f.log.Warn("changefeed: publishing a reset failed; queued", "product_id", c.ProductID, "err", err)
	}
	select {
	case f.out <- c:
	default:
		f.log.Warn("changefeed: queue full, change dropped; replicas will see it at their next refresh",
			"product_id", c.ProductID, "kind", c.Kind)
	}
}

// Run publishes the queued changes and hands every change received to apply until ctx ends. It
// returns nil; Redis being away is logged and retried.
func (f *Feed) Run(ctx context.Context, apply func(sale.Change)) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.publish(ctx)
	}()
	f.subscribe(ctx, apply)
	<-done
	return nil
}

func (f *Feed) publish(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-f.out:
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			if err := f.rdb.Publish(pctx, f.channel, encode(c)).Err(); err != nil && ctx.Err() == nil {
				f.log.Warn("changefeed: publish failed; replicas will see the change at their next refresh",
					"product_id", c.ProductID, "err", err)
			}
			cancel()
		}
	}
}

// subscribe receives until ctx ends. go-redis reconnects and subscribes again by itself after a
// broken connection; each subscription (the first one too) is answered with a resync, since
// messages sent while it was away are lost. After a failed receive it waits 100 ms, then twice as
// long after each next one, 5 s at the most, and from 100 ms again once a receive succeeds.
func (f *Feed) subscribe(ctx context.Context, apply func(sale.Change)) {
	ps := f.rdb.Subscribe(ctx, f.channel)
	stop := context.AfterFunc(ctx, func() { ps.Close() })
	defer stop()
	defer ps.Close()
	var backoff retry.Backoff // nil until a receive fails, and again after one succeeds
	failing := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, 15*time.Second)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if isTimeout(err) {
				_ = ps.Ping(ctx) // a dead connection fails here and is replaced on the next receive
				continue
			}
			if !failing {
				f.log.Warn("changefeed: subscription broken; retrying", "err", err)
			}
			failing = true
			if backoff == nil {
				backoff = retry.WithCappedDuration(5*time.Second, retry.NewExponential(100*time.Millisecond))
			}
			wait, _ := backoff.Next()
			if pause.For(ctx, wait) != nil {
				return
			}
			continue
		}
		backoff = nil
		switch m := msg.(type) {
		case *redis.Subscription:
			if failing {
				f.log.Info("changefeed: subscribed again")
			}
			failing = false
			apply(sale.Change{Kind: sale.ChangeResync})
		case *redis.Message:
			c, err := decode(m.Payload)
			if err != nil {
				f.log.Warn("changefeed: ignoring a malformed message", "err", err)
				continue
			}
			apply(c)
		}
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// The wire format: "v1 <kind> <product id> <epoch>".
const version = "v1"

func encode(c sale.Change) string {
	return version + " " + strconv.Itoa(int(c.Kind)) + " " + strconv.FormatInt(c.ProductID, 10) + " " + strconv.FormatUint(c.Epoch, 10)
}

func decode(s string) (sale.Change, error) {
	f := strings.Fields(s)
	if len(f) != 4 || f[0] != version {
		return sale.Change{}, fmt.Errorf("changefeed: unknown message %q", s)
	}
	kind, err1 := strconv.Atoi(f[1])
	id, err2 := strconv.ParseInt(f[2], 10, 64)
	epoch, err3 := strconv.ParseUint(f[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || id <= 0 {
		return sale.Change{}, fmt.Errorf("changefeed: malformed message %q", s)
	}
	switch k := sale.ChangeKind(kind); k {
	case sale.ChangeReset, sale.ChangeSoldOut, sale.ChangeRestocked:
		return sale.Change{Kind: k, ProductID: id, Epoch: epoch}, nil
	}
	return sale.Change{}, fmt.Errorf("changefeed: unknown change kind in %q", s)
}
