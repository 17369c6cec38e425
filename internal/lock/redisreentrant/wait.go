package redisreentrant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// sub is the subscription to one lock's release channel that the waiting Acquire calls of one
// Client share, as Redisson's waiters share a RedissonLockEntry. Each release message is
// received by one of them (msgs is one channel they all read), which wakes it as the message
// releases one permit of Redisson's semaphore: one wake-up per release, not a herd.
type sub struct {
	users int           // waiting calls; guarded by Client.mu
	ready chan struct{} // closed once subscribed, or once that failed (err)
	err   error
	ps    *redis.PubSub
	msgs  <-chan *redis.Message
}

// subscribe joins, or opens, the subscription to k's release channel, and returns once Redis
// has confirmed it: a release after that is not missed. The caller leaves it with unsubscribe.
func (c *Client) subscribe(ctx context.Context, k lockKeys) (*sub, error) {
	for {
		c.mu.Lock()
		s := c.subs[k.channel]
		opener := s == nil
		if opener {
			s = &sub{ready: make(chan struct{})}
			c.subs[k.channel] = s
		}
		s.users++
		c.mu.Unlock()
		if opener {
			s.err = c.open(ctx, s, k.channel)
			if s.err != nil {
				c.mu.Lock()
				delete(c.subs, k.channel) // the next waiter opens another
				c.mu.Unlock()
			}
			close(s.ready)
		}
		select {
		case <-s.ready:
		case <-ctx.Done():
			c.unsubscribe(k, s)
			return nil, ctx.Err()
		}
		if s.err == nil {
			return s, nil
		}
		c.unsubscribe(k, s)
		if opener || ctx.Err() != nil {
			return nil, s.err
		}
		// Another waiter's subscribe failed, perhaps only because its ctx ended: try ours.
	}
}

func (c *Client) open(ctx context.Context, s *sub, channel string) error {
	// The subscription outlives the opener's call: other waiters use it. Its ctx bounds only the
	// wait for the confirmation below.
	var ps *redis.PubSub
	if c.publish == "SPUBLISH" {
		ps = c.rdb.SSubscribe(context.WithoutCancel(ctx), channel)
	} else {
		ps = c.rdb.Subscribe(context.WithoutCancel(ctx), channel)
	}
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		_ = ps.Close()
		if unreachable(err) && ctx.Err() == nil {
			return fmt.Errorf("%w: subscribe: %w", lock.ErrUnavailable, err)
		}
		return fmt.Errorf("subscribe: %w", err)
	}
	s.ps = ps
	// No health-check ping: the re-check timer bounds a wait on a dead connection, and go-redis
	// reconnects and resubscribes by itself.
	s.msgs = ps.Channel(redis.WithChannelHealthCheckInterval(0))
	return nil
}

// unsubscribe leaves s; the last waiter out closes it.
func (c *Client) unsubscribe(k lockKeys, s *sub) {
	c.mu.Lock()
	s.users--
	last := s.users == 0
	if last && c.subs[k.channel] == s {
		delete(c.subs, k.channel)
	}
	c.mu.Unlock()
	if !last || s.ps == nil {
		return
	}
	_ = s.ps.Close()
	for range s.msgs { // go-redis's receiving goroutine closes msgs as it exits
	}
}

// wait is Acquire after a first try found the lock held by another owner. It subscribes to the
// release channel, tries again (a release may have come before the subscription), and then tries
// whenever a release message wakes it, and in any case after min(PTTL, recheck): a holder that
// dies announces nothing, and its hash simply expires.
func (c *Client) wait(ctx context.Context, k lockKeys, who caller) (*Lease, error) {
	s, err := c.subscribe(ctx, k)
	if err != nil {
		return nil, err
	}
	defer c.unsubscribe(k, s)
	for {
		lease, held, err := c.try(ctx, k, who, answerBound)
		if lease != nil || err != nil {
			return lease, err
		}
		timer := time.NewTimer(c.recheckAfter(held))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case _, ok := <-s.msgs:
			timer.Stop()
			if !ok { // only the last waiter out closes it, and this one has not left
				return nil, errors.New("release notifications ended")
			}
		case <-timer.C:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// recheckAfter is how long a waiter sleeps without a release message, given the holder's PTTL
// (negative: the hash has no expiry).
func (c *Client) recheckAfter(pttl time.Duration) time.Duration {
	d := c.recheck
	if pttl >= 0 && pttl < d {
		d = pttl
	}
	return max(d, time.Millisecond)
}
