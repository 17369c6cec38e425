package redislock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// health is what the Client knows of Redis's reachability. A call that fails to reach Redis marks
// it down; while it is down, Acquire and TryAcquire refuse at once and waiters give up, and one
// prober PINGs Redis every Options.ProbeEvery until it answers. Without this, every purchase of
// an outage would spend go-redis's dial retries and the rest of its lock wait before hearing the
// same answer (with go-redis's defaults, seconds against a stopped Redis, and then the ctx's
// deadline made it look like a busy lock).
type health struct {
	// outage is closed while Redis is down; while it is up, it is the open channel that the next
	// outage closes, so that waiters hear of it. Both guarded by Client.mu.
	outage  chan struct{}
	isDown  bool
	lastErr error // what marked it down
}

// errUnreachable wraps lock.ErrUnavailable: the Client knows Redis to be down.
var errUnreachable = fmt.Errorf("%w: redis unreachable", lock.ErrUnavailable)

// unreachable reports whether err says that Redis could not be reached or that the connection
// broke: a dial, read or write error (timeouts included), or a connection closed under the call.
func unreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed)
}

// outageCh returns the channel that is closed while Redis is down: closed already, or the one
// the next outage closes.
func (c *Client) outageCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health.outage
}

// refuse returns an error wrapping lock.ErrUnavailable and the error that marked Redis down if it
// is down, and nil otherwise.
func (c *Client) refuse() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.health.isDown {
		return nil
	}
	return fmt.Errorf("%w (%w)", errUnreachable, c.health.lastErr)
}

// observe notes a call to Redis that failed with err, an error that says Redis is unreachable:
// it marks Redis down and starts the prober.
func (c *Client) observe(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.health.isDown || c.closed {
		return
	}
	c.health.isDown, c.health.lastErr = true, err
	close(c.health.outage)
	c.wg.Add(1)
	go c.probe()
	c.log.Warn("redislock: redis unreachable: lock calls refuse until it answers again", "err", err)
}

// probe PINGs Redis every ProbeEvery until it answers, then marks it up. Close stops it.
func (c *Client) probe() {
	defer c.wg.Done()
	start := time.Now()
	t := time.NewTicker(c.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(c.probeEvery, 500*time.Millisecond))
		err := c.rdb.Ping(ctx).Err()
		cancel()
		if err != nil {
			continue
		}
		c.mu.Lock()
		c.health.isDown, c.health.lastErr = false, nil
		c.health.outage = make(chan struct{})
		c.mu.Unlock()
		c.log.Info("redislock: redis answers again", "down_for", time.Since(start).Round(time.Millisecond))
		return
	}
}
