package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
)

// The faults of a replicated topology (issue #17), played when the stack runs one (make up
// REDIS_MODE=cluster|sentinel ZK_MODE=ensemble) and skipped otherwise:
//
//	redis-failover  the Redis master that owns the redis strategy's lock slot (a cluster) or the
//	                master (Sentinel) SIGKILLed: its replica is promoted, the clients follow it by
//	                themselves; the killed node is started again and rejoins as a replica
//	redis-lua-failover  the same for the master of the redis-lua sale's slot
//	zk-leader       the ZooKeeper ensemble's leader SIGKILLed: the other two elect one, the
//	                sessions move to a surviving server; started again as a follower
//
// What a failover may lose: an asynchronous replica that had not copied the last writes. For
// the locks that is a grant (a second holder, whose writes the fence keeps apart from the first's:
// internal/stock's TestFailoverSecondHolder makes it happen on purpose); for redis-lua, the
// purchases that were only on the master (the stream's entries at the kill are the most that can
// be lost: the judge lets those, and only those, be lost), and MySQL refuses what a lagging state
// sells of units it gave away (TestLaggingStateNeverOversells). Natural kills on one machine
// replicate within milliseconds: the loss is usually none.

// topologyFaults are the faults above. Neither needs anyone to restore what it broke: its step's
// "down" is the failover (from the kill until a node the clients can use took over: another
// master of the slot, another leader), its "recovered after" counted from then; the killed node is
// started again after the load, as an operator would, and rejoins as a replica or follower.
func topologyFaults() map[string]Fault {
	return map[string]Fault{
		"redis-failover": {
			Name: "redis-failover", What: "the Redis master of the redis sale's lock slot (cluster) or the Sentinel master SIGKILLed: " +
				"its replica is promoted and the clients follow it by themselves; the killed node is started again after the load and rejoins as a replica. " +
				"redis-lua purchases only on it may be lost (those in the stream at the kill)",
			topology:  "redis",
			Inject:    killRedisMasterOf("redis"),
			Restore:   waitTakeover,
			AfterLoad: startKilled,
		},
		"redis-lua-failover": {
			Name: "redis-lua-failover", What: "the Redis master of the redis-lua sale's slot (cluster) or the Sentinel master SIGKILLed: " +
				"its replica is promoted with what it had copied of the sale; the killed node is started again after the load and rejoins as a replica. " +
				"Purchases only on it may be lost (those in the stream at the kill); what the lagging state sells of units MySQL gave away, MySQL refuses",
			topology: "redis", needs: luaStrategy,
			Inject:    killRedisMasterOf(luaStrategy),
			Restore:   waitTakeover,
			AfterLoad: startKilled,
		},
		"zk-leader": {
			Name: "zk-leader", What: "the ZooKeeper ensemble's leader SIGKILLed: the other two elect a leader and the sessions move to them; " +
				"the killed server is started again after the load and rejoins as a follower",
			topology: "zk",
			Inject: func(ctx context.Context, e *Env) error {
				e.whoLeads = []string{"zk-leader"}
				name, err := e.servicesOutput(ctx, e.whoLeads...)
				if err != nil {
					return err
				}
				e.killed, e.detail = name, name+" (the leader) SIGKILLed"
				return e.Services(ctx, "kill", name)
			},
			Restore:   waitTakeover,
			AfterLoad: startKilled,
		},
	}
}

// killRedisMasterOf is the inject of the Redis failovers: it SIGKILLs the master that serves
// strategy's sale (redisMasterToKill), after noting the redis-lua purchases it may take with it.
// When the replicas wait for a Redis replica before a redis-lua 202 (luaReplicated), it may take
// none: every purchase answered 202 must then be an order.
func killRedisMasterOf(strategy string) func(context.Context, *Env) error {
	return func(ctx context.Context, e *Env) error {
		name, who, err := e.redisMasterToKill(ctx, strategy)
		if err != nil {
			return err
		}
		inStream := luaStreamIDs(ctx, e)
		if !e.Options.Fault.luaReplicated {
			e.lostMay = inStream
		}
		e.killed, e.whoLeads = name, who
		e.detail = fmt.Sprintf("%s SIGKILLed; %d redis-lua purchases were in the stream", name, len(inStream[luaStrategy]))
		if e.Options.Fault.luaReplicated {
			e.detail += " (each confirmed by a replica: none may be lost)"
		}
		return e.Services(ctx, "kill", name)
	}
}

// waitTakeover waits until the command e.whoLeads names a node other than the one killed: the
// promoted replica, the new leader.
func waitTakeover(ctx context.Context, e *Env) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		name, err := e.servicesOutput(ctx, e.whoLeads...)
		if err == nil && name != e.killed {
			e.detail += "; " + name + " took over"
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nobody took over from %s within a minute (last: %q, %v)", e.killed, name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startKilled starts the node the fault killed again, after the load.
func startKilled(ctx context.Context, e *Env) (string, error) {
	if err := e.Services(ctx, "start", e.killed); err != nil {
		return "", err
	}
	return e.killed + " started again after the load: rejoined", nil
}

// topologySkip says why the fault f cannot be played on this run's topology ("" when it can).
func topologySkip(o *Options, f Fault) string {
	switch {
	case f.topology == "redis" && o.Fault.Redis.Mode == redisconn.Single:
		return "it needs a replicated Redis (make up REDIS_MODE=cluster or sentinel); the stack's is " + o.Fault.Redis.String()
	case f.topology == "zk" && len(o.Fault.zkServers) < 3:
		return "it needs a ZooKeeper ensemble (make up ZK_MODE=ensemble); the stack's is " + strings.Join(o.Fault.zkServers, ",")
	}
	return ""
}

// servicesOutput runs scripts/services.sh with args and returns what it printed.
func (e *Env) servicesOutput(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.Options.Fault.servicesScript, args...)
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", e.Options.Fault.servicesScript, strings.Join(args, " "), err)
	}
	name := strings.TrimSpace(string(out))
	if name == "" {
		return "", fmt.Errorf("%s %s printed nothing", e.Options.Fault.servicesScript, strings.Join(args, " "))
	}
	return name, nil
}

// redisMasterToKill names the service of the master to kill, and the services.sh command that
// names the master serving the same data: on a cluster, the one of the slot of strategy's sale
// (the redis sale's lock, the redis-lua sale's state), the Sentinel master otherwise.
func (e *Env) redisMasterToKill(ctx context.Context, strategy string) (string, []string, error) {
	if e.Options.Fault.Redis.Mode == redisconn.Sentinel {
		name, err := e.servicesOutput(ctx, "sentinel-master")
		return name, []string{"sentinel-master"}, err
	}
	pid, ok := e.Products[strategy]
	if !ok {
		for _, id := range e.Products { // any sale's lock slot will do
			pid = id
			break
		}
	}
	dsn, err := mysql.ParseDSN(e.Options.MysqlDSN)
	if err != nil {
		return "", nil, err
	}
	key := redislock.DefaultPrefix + "{" + stock.LockName(dsn.DBName, pid) + "}"
	if strategy == luaStrategy {
		key = redislua.KeysFor(dsn.DBName, pid).State
	}
	who := []string{"cluster-master", key}
	name, err := e.servicesOutput(ctx, who...)
	return name, who, err
}

// luaStreamIDs are the order ids of the step's redis-lua stream (nil without a redis-lua sale):
// purchases not yet in MySQL, which a failover to a replica that had not copied them loses.
func luaStreamIDs(ctx context.Context, e *Env) map[string]map[string]bool {
	pid, lua := e.Products[luaStrategy]
	dsn, err := mysql.ParseDSN(e.Options.MysqlDSN)
	if !lua || err != nil {
		return nil
	}
	rdb := redisconn.Open(e.Options.Fault.Redis, redis.UniversalOptions{})
	defer rdb.Close()
	entries, err := rdb.XRange(ctx, redislua.KeysFor(dsn.DBName, pid).Stream, "-", "+").Result()
	if err != nil {
		return nil
	}
	return map[string]map[string]bool{luaStrategy: streamOrderIDs(entries)}
}
