package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// room is where the Acquire calls of one Client that wait for the same lock take turns: only
// the goroutine holding the turn waits in Redis, on a subscription to the lock's channel that
// the room keeps, and hands on, for as long as anyone is in it. The others wait for the turn in
// the process. So a release wakes one goroutine per Client instead of all of them, and a
// contended name costs one Pub/Sub connection per Client instead of one per waiting call.
type room struct {
	turn  chan struct{} // holds one token: the right to wait in Redis
	users int           // Acquire calls in the room; guarded by Client.mu

	// Used only by the holder of the turn, and by the last user out once no one holds it.
	ps   *redis.PubSub // nil until the first turn subscribes
	msgs <-chan any    // ps's messages and subscription confirmations
	// heldOver says the previous turn ended with its holder getting the lock: the lock is taken
	// and its release is still to come, so the next turn need not try before it is notified.
	heldOver bool
	// idle, while the room is empty and its subscription kept (Options.KeepSubscribed), closes
	// it when it fires. stale says the room was empty for a while: the notifications queued
	// meanwhile are old, and the next turn drops them and tries before it waits.
	idle  *time.Timer
	stale bool
}

func (c *Client) enter(key string) *room {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.rooms[key]
	if r == nil {
		r = &room{turn: make(chan struct{}, 1)}
		r.turn <- struct{}{}
		c.rooms[key] = r
	}
	if r.idle != nil {
		r.idle.Stop() // if it fired already, it finds the room in use and leaves it
		r.idle, r.stale = nil, true
	}
	r.users++
	return r
}

// leave keeps the room and its subscription for Options.KeepSubscribed when the last user
// leaves, and closes them then unless someone came back. Every user gives the turn back before
// leaving, so no one holds it while the room is empty.
func (c *Client) leave(key string, r *room) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.users--; r.users > 0 {
		return
	}
	if r.ps == nil || c.keep < 0 {
		delete(c.rooms, key)
		go r.close()
		return
	}
	r.idle = time.AfterFunc(c.keep, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r.users == 0 && c.rooms[key] == r {
			delete(c.rooms, key)
			go r.close()
		}
	})
}

// close closes the room's subscription, if it has one. Nobody uses the room any more.
func (r *room) close() {
	if r.ps == nil {
		return
	}
	_ = r.ps.Close()
	for range r.msgs { // go-redis's receiving goroutine closes msgs as it exits
	}
}

// Close closes the subscriptions kept for names nobody waits for now, stops the prober of an
// unreachable Redis and waits for the undos of failed acquires still under way (each bounded by
// the TTL). Waits in progress are not affected; call it once the Client is no longer used.
func (c *Client) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.done)
	}
	var idle []*room
	for key, r := range c.rooms {
		if r.users == 0 {
			r.idle.Stop()
			delete(c.rooms, key)
			idle = append(idle, r)
		}
	}
	c.mu.Unlock()
	for _, r := range idle {
		r.close()
	}
	c.wg.Wait()
}

// wait is Acquire after a first try found the lock held; pttl is what that try saw.
//
// A release is announced on the lock's channel. The turn's holder subscribes if the room has no
// subscription yet and tries again once the server confirms it (go-redis's Subscribe returns
// when the command is written, not when it took effect; a release before that would be
// missed). After that it tries whenever a release is announced, and in any case after
// min(PTTL, Recheck): a holder that dies announces nothing, and its key simply expires.
func (c *Client) wait(ctx context.Context, k lockKeys, pttl time.Duration) (*Lease, error) {
	r := c.enter(k.key)
	defer c.leave(k.key, r)
	select {
	case <-r.turn:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.outageCh():
		return nil, errUnreachable
	}
	var lease *Lease
	defer func() {
		r.heldOver = lease != nil
		r.turn <- struct{}{}
	}()

	if r.stale {
		// Releases announced while the room was empty are old news; one of them may be the
		// release of the lock now free, which the try below finds.
		r.drain()
		r.stale, r.heldOver = false, false
	}
	wait := c.recheckAfter(pttl)
	switch {
	case r.ps == nil:
		ps, err := c.subscribe(ctx, k.channel)
		if err != nil {
			_ = ps.Close()
			if unreachable(err) && ctx.Err() == nil {
				c.observe(err)
				return nil, fmt.Errorf("%w: subscribe: %w", lock.ErrUnavailable, err)
			}
			return nil, fmt.Errorf("subscribe: %w", err)
		}
		// The health-check ping is off: the re-check timer already bounds a wait on a dead
		// connection, and go-redis's receiving goroutine reconnects on errors by itself.
		r.ps, r.msgs = ps, ps.ChannelWithSubscriptions(redis.WithChannelHealthCheckInterval(0))
	case !r.heldOver:
		// The previous turn gave up (ctx, error) and may have taken a notification with it.
		var err error
		if lease, pttl, err = c.try(ctx, k, answerBound); lease != nil || err != nil {
			return lease, err
		}
		wait = c.recheckAfter(pttl)
	default:
		wait = c.recheck // the lock was just granted: its PTTL is a whole lease
	}

	timer := time.NewTimer(wait)
	defer timer.Stop()
	outage := c.outageCh()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-outage:
			// No grant can come while Redis is unreachable: say so now, not when ctx ends.
			return nil, errUnreachable
		case m, ok := <-r.msgs:
			if !ok { // only Close ends it, and only once the room is empty
				return nil, errors.New("release notifications ended")
			}
			// A message: the lock was released. A subscribe confirmation, first or after a
			// reconnect: a release may have slipped by before it.
			if s, ok := m.(*redis.Subscription); ok && s.Kind != c.subscribed() {
				continue
			}
		case <-timer.C:
		}
		var err error
		if lease, pttl, err = c.try(ctx, k, answerBound); lease != nil || err != nil {
			return lease, err
		}
		timer.Reset(c.recheckAfter(pttl))
	}
}

// recheckAfter is how long a waiter sleeps without a notification, given the holder's PTTL
// (negative: the key has no expiry).
func (c *Client) recheckAfter(pttl time.Duration) time.Duration {
	d := c.recheck
	if pttl >= 0 && pttl < d {
		d = pttl
	}
	return max(d, time.Millisecond)
}

// drain drops the notifications already queued. Only the holder of the turn calls it.
func (r *room) drain() {
	for {
		select {
		case _, ok := <-r.msgs:
			if !ok {
				return
			}
		default:
			return
		}
	}
}
