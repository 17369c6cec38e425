// Package redisconn opens the project's connections to Redis in the topology its settings name:
// one server, a Redis Cluster, or a master and its replicas watched by Redis Sentinel. Every Redis
// user of the app (the locks, the change feed, the rate limiter, the live figures, the stampede
// board, redis-lua) takes the redis.UniversalClient it returns, so that none of them knows which
// topology it runs on.
//
// What the topologies ask of those users, and what they already do: keys that one script,
// transaction or multi-key command touches share a Redis Cluster hash tag (the lock name, the
// product: "{…}"), and a pipeline of unrelated keys is split per node by go-redis. Pub/Sub in a
// cluster is sharded where a channel belongs to one lock: the locks SPUBLISH and SSUBSCRIBE on
// the lock's slot when they are handed a cluster client, where a classic PUBLISH would be copied
// to every node over the cluster bus. The change feed's one channel stays classic Pub/Sub, which
// a cluster broadcasts to every node, as the feed wants.
//
// It must never pick a topology by itself: a cluster seed list of one address is still a
// cluster, and two addresses are never silently taken for one.
package redisconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mode is a Redis topology.
type Mode string

// The topologies.
const (
	// Single is one Redis server (with or without replicas the app does not know of).
	Single Mode = "single"
	// Cluster is a Redis Cluster: Addrs are seed nodes, the client learns the rest.
	Cluster Mode = "cluster"
	// Sentinel is a master watched by Sentinel: Addrs are the sentinels, Master the name they
	// know the master by; the client asks them where the master is, and again after a failover.
	Sentinel Mode = "sentinel"
)

// ParseMode reads a Mode ("" is Single).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return Single, nil
	case Single, Cluster, Sentinel:
		return m, nil
	default:
		return "", fmt.Errorf("unknown Redis mode %q (single, cluster or sentinel)", s)
	}
}

// Topology says where Redis is.
type Topology struct {
	Mode Mode
	// Addrs are the server (Single, exactly one), the seed nodes (Cluster) or the sentinels
	// (Sentinel), host:port each.
	Addrs []string
	// Master is the name the sentinels know the master by (Sentinel only).
	Master string
	// Password is the servers' (and, in Sentinel mode, the sentinels').
	Password string
}

// Validate reports a topology that cannot work.
func (t Topology) Validate() error {
	var errs []error
	if len(t.Addrs) == 0 || t.Addrs[0] == "" {
		errs = append(errs, errors.New("no Redis address"))
	}
	switch t.Mode {
	case Single:
		if len(t.Addrs) > 1 {
			errs = append(errs, fmt.Errorf("mode single takes one Redis address, got %d (cluster or sentinel for more)", len(t.Addrs)))
		}
	case Sentinel:
		if t.Master == "" {
			errs = append(errs, errors.New("mode sentinel needs the name of the Redis master"))
		}
	case Cluster:
	default:
		errs = append(errs, fmt.Errorf("unknown Redis mode %q", t.Mode))
	}
	return errors.Join(errs...)
}

// String describes the topology for logs and reports, e.g. "cluster (seeds 127.0.0.1:7001,…)".
func (t Topology) String() string {
	switch t.Mode {
	case Cluster:
		return "cluster (seeds " + strings.Join(t.Addrs, ",") + ")"
	case Sentinel:
		return "sentinel (master " + t.Master + ", sentinels " + strings.Join(t.Addrs, ",") + ")"
	default:
		return "single (" + strings.Join(t.Addrs, ",") + ")"
	}
}

// ClusterReload is how old a cluster client's map of slots to masters may grow before the next
// call reads it again. go-redis's default is a minute, and a refused connection does not make it
// read again (only a MOVED or ASK answer does): after a master's crash, its slots' calls went to
// the dead address for up to that minute (itest's cluster failover test shows it), long after
// the replica had taken over. The read is one CLUSTER SLOTS, lazily, on a call.
const ClusterReload = 500 * time.Millisecond

// Open returns a client of t. opts tunes pools, timeouts and retries; its addresses, master name,
// password and cluster mode are set from t. The caller closes the client.
func Open(t Topology, opts redis.UniversalOptions) redis.UniversalClient {
	opts.Addrs = t.Addrs
	opts.Password = t.Password
	opts.MasterName = ""
	opts.IsClusterMode = false
	switch t.Mode {
	case Cluster:
		co := opts.Cluster()
		co.ClusterStateReloadInterval = ClusterReload
		return redis.NewClusterClient(co)
	case Sentinel:
		opts.MasterName = t.Master
		opts.SentinelPassword = t.Password
	default:
		opts.Addrs = t.Addrs[:1]
	}
	return redis.NewUniversalClient(&opts)
}

// ForEachMaster calls fn with a client of every master: the one server (or the sentinels'
// current master), or each master of a cluster, concurrently. A SCAN, FLUSHALL or INFO meant for
// the whole data set must go to each.
func ForEachMaster(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	default:
		return fmt.Errorf("redisconn: ForEachMaster on a %T", rdb)
	}
}

// SetLogger makes go-redis log through log, at warning level, rather than through the standard
// logger to stderr: its own lines (a pool that cannot dial, a Sentinel that switched masters, a
// cluster slot map that moved) then reach the process's structured log with the rest. go-redis
// has one logger per process, so the last call wins.
func SetLogger(log *slog.Logger) {
	redis.SetLogger(slogPrintf{log.With("component", "go-redis")})
}

// slogPrintf adapts an slog.Logger to go-redis's Printf logger.
type slogPrintf struct{ log *slog.Logger }

func (l slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
