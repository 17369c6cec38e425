package redislua

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replication is how many of the master's replicas must hold a batch's purchases before they are
// answered accepted. Redis replicates asynchronously: without it a 202 means the script ran on
// the master, and a failover to a replica that had not copied it loses the purchase while its
// buyer holds a 202 and an order id.
type Replication struct {
	// MinReplicas is how many replicas must acknowledge the batch (WAIT); 0 answers as soon as
	// the script ran, without a WAIT.
	MinReplicas int
	// Timeout is how long WAIT waits for them; past it the batch's accepted purchases are
	// answered sale.ErrUnconfirmed.
	Timeout time.Duration
}

// MaxReplicaWait bounds Replication.Timeout: the batch's purchases, and every purchase of the
// product queued behind it on the replica, wait that long when the replicas are away.
const MaxReplicaWait = 5 * time.Second

// Validate reports a Replication that cannot work. WAIT takes whole milliseconds and its 0 means
// forever, so a Timeout under a millisecond is refused rather than rounded to never.
func (r Replication) Validate() error {
	switch {
	case r.MinReplicas < 0:
		return errors.New("redislua: the replicas to wait for must not be negative")
	case r.MinReplicas > 0 && (r.Timeout < time.Millisecond || r.Timeout > MaxReplicaWait):
		return fmt.Errorf("redislua: the wait for the replicas must be between 1ms and %s", MaxReplicaWait)
	}
	return nil
}

// SetReplication makes the deductor answer a batch's purchases accepted only once r.MinReplicas
// replicas hold them, and a replayed receipt only once they hold it (see Receipt). It needs the
// client of one server or Sentinel-watched master (*redis.Client) or of a cluster
// (*redis.ClusterClient): WAIT must run on the connection, and the node, that ran the script.
func (d *Deductor) SetReplication(r Replication) error {
	if err := r.Validate(); err != nil {
		return err
	}
	switch d.rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
	default:
		if r.MinReplicas > 0 {
			return fmt.Errorf("redislua: waiting for replicas needs a *redis.Client or *redis.ClusterClient, not %T", d.rdb)
		}
	}
	d.repl = r
	return nil
}

// maxRedirects is how many MOVED or ASK answers onMaster follows before it gives up.
const maxRedirects = 2

// onMaster runs fn on one connection to the master that serves key: the client's server (one
// server, or the master Sentinel named), or on a cluster the master of key's slot as the client's
// map has it. fn owns the connection for its run, so a WAIT it sends counts the writes it sent
// before. On a cluster, a MOVED or ASK answer (the map is behind a failover or a resharding)
// makes it read the map again and run fn again, twice at the most: fn must return such an answer
// only from a command that changed nothing, which a redirection is.
func (d *Deductor) onMaster(ctx context.Context, key string, fn func(c *redis.Conn) error) error {
	for try := 0; ; try++ {
		node, err := d.masterFor(ctx, key)
		if err != nil {
			return err
		}
		c := node.Conn()
		err = fn(c)
		_ = c.Close()
		if !redirected(err) || try == maxRedirects {
			return err
		}
		d.reloadSlots(ctx, key, node)
	}
}

// masterFor returns the client of the master that serves key.
func (d *Deductor) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := d.rdb.(type) {
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	case *redis.Client:
		return c, nil
	default:
		return nil, fmt.Errorf("redislua: no master to wait on with a %T", d.rdb)
	}
}

// redirected reports a cluster's MOVED or ASK answer.
func redirected(err error) bool {
	if err == nil {
		return false
	}
	_, moved := redis.IsMovedError(err)
	_, ask := redis.IsAskError(err)
	return moved || ask
}

// reloadSlots has a cluster client read its map of slots again, and waits a little for key's
// master to be another than old: go-redis reloads the map in the background.
func (d *Deductor) reloadSlots(ctx context.Context, key string, old *redis.Client) {
	c, ok := d.rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	c.ReloadState(ctx)
	for waited := time.Duration(0); waited < redirectWait; waited += redirectPoll {
		if node, err := c.MasterForKey(ctx, key); err == nil && node != old {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(redirectPoll):
		}
	}
}

// A redirected script waits for the cluster client's new map of slots up to redirectWait,
// looking every redirectPoll.
const (
	redirectPoll = 5 * time.Millisecond
	redirectWait = 250 * time.Millisecond
)

// confirmed sends WAIT on c, which just wrote, and reports whether enough replicas acknowledged
// every write c sent. An error counts as not confirmed: the writes may have happened.
func (d *Deductor) confirmed(ctx context.Context, c *redis.Conn) bool {
	n, err := c.Wait(ctx, d.repl.MinReplicas, d.repl.Timeout).Result()
	return err == nil && n >= int64(d.repl.MinReplicas)
}
