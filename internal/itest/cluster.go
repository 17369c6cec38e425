package itest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClusterOptions shapes a RedisCluster. The zero value is 3 masters with 1 replica each, no
// persistence, a node timeout of 1 s.
type ClusterOptions struct {
	// Masters is the number of masters the 16384 slots are split over; default 3 (a failover
	// needs a majority of the masters to agree, so fewer than 3 cannot fail over).
	Masters int
	// Replicas is the number of replicas of each master; default 1, negative for none.
	Replicas int
	// AppendOnly runs every node with appendonly yes and appendfsync always: a killed node comes
	// back with every write it acknowledged. Without it a node comes back empty (its nodes.conf
	// survives either way).
	AppendOnly bool
	// NodeTimeout is cluster-node-timeout: how long a node may not answer before it is failed and
	// its replica promoted (about this plus up to 1.5 s of election). Default 1 s.
	NodeTimeout time.Duration
}

// Cluster is a Redis Cluster of a test's own: throwaway redis-server processes on free ports
// (each needs its port and its cluster bus port), each with a directory that survives a
// Kill and Start so the node comes back as itself. Replicas are eligible for promotion however
// long they were cut off (cluster-replica-validity-factor 0): a failover is never refused for
// staleness, which is what lets a test lose a write deterministically (CutReplication).
type Cluster struct {
	tb    testing.TB
	nodes []*Server
	ids   map[*Server]string // node IDs, kept in nodes.conf across restarts
	opts  ClusterOptions
}

// RedisCluster starts a Redis Cluster, assigns the slots evenly to the first Masters nodes, makes
// the others their replicas, and waits until every node reports cluster_state:ok and every
// replica is in sync. Its nodes are killed when the test ends.
func RedisCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	Integration(tb)
	opts.defaults()
	start := time.Now()
	c := &Cluster{tb: tb, ids: map[*Server]string{}, opts: opts}
	for range opts.Masters * (1 + opts.Replicas) {
		c.nodes = append(c.nodes, startClusterNode(tb, opts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range c.nodes {
		id, err := c.do(ctx, s, "cluster", "myid").Text()
		if err != nil {
			tb.Fatalf("CLUSTER MYID on %s: %v", s.Addr(), err)
		}
		c.ids[s] = id
	}
	per := 16384 / opts.Masters
	for i, m := range c.masters0() {
		lo, hi := i*per, (i+1)*per-1
		if i == opts.Masters-1 {
			hi = 16383
		}
		// Distinct epochs, as redis-cli --cluster create sets them: no collision to resolve.
		c.must(ctx, m, "cluster", "set-config-epoch", i+1)
		c.must(ctx, m, "cluster", "addslotsrange", lo, hi)
	}
	first := c.nodes[0]
	host, port, _ := net.SplitHostPort(first.Addr())
	bus, err := c.do(ctx, first, "config", "get", "cluster-port").StringSlice()
	if err != nil || len(bus) != 2 {
		tb.Fatalf("CONFIG GET cluster-port on %s: %v %v", first.Addr(), bus, err)
	}
	for _, s := range c.nodes[1:] {
		c.must(ctx, s, "cluster", "meet", host, port, bus[1]) // not port+10000: its own bus port
	}
	c.eventually(30*time.Second, func() (bool, string) {
		for _, s := range c.nodes {
			nodes, err := c.clusterNodes(ctx, s)
			if err != nil {
				return false, err.Error()
			}
			if len(nodes) != len(c.nodes) {
				return false, fmt.Sprintf("%s knows %d nodes of %d", s.Addr(), len(nodes), len(c.nodes))
			}
			for _, n := range nodes {
				if n.has("handshake") || n.has("noaddr") {
					return false, fmt.Sprintf("%s sees %s in %s", s.Addr(), n.addr, n.flags)
				}
			}
		}
		return true, ""
	})
	for i, r := range c.nodes[opts.Masters:] {
		c.must(ctx, r, "cluster", "replicate", c.ids[c.nodes[i%opts.Masters]])
	}
	c.WaitOK()
	tb.Logf("redis cluster of %d masters × %d replicas up in %s: %v", opts.Masters, opts.Replicas,
		time.Since(start).Round(time.Millisecond), c.Addrs())
	return c
}

// defaults fills in the zero fields as ClusterOptions documents them.
func (o *ClusterOptions) defaults() {
	if o.Masters == 0 {
		o.Masters = 3
	}
	switch {
	case o.Replicas == 0:
		o.Replicas = 1
	case o.Replicas < 0:
		o.Replicas = 0
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = time.Second
	}
}

// startClusterNode starts one cluster-enabled redis-server on a free port, with a directory of
// its own that keeps its nodes.conf (and, with opts.AppendOnly, its data) across a restart.
func startClusterNode(tb testing.TB, opts ClusterOptions) *Server {
	tb.Helper()
	// The bus gets a claimed port of its own (cluster-port, Redis 7): the default, port+10000, is
	// in the kernel's ephemeral range, where any connection may take it.
	port, bus := strconv.Itoa(FreePort(tb)), strconv.Itoa(FreePort(tb))
	dir := tb.TempDir()
	args := []string{"redis-server", "--bind", "127.0.0.1", "--port", port, "--cluster-port", bus, "--daemonize", "no",
		"--dir", dir, "--save", "", "--repl-diskless-sync-delay", "0",
		"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(opts.NodeTimeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0"}
	if opts.AppendOnly {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return startServer(tb, "redis-server (cluster)", port, args...)
}

func (c *Cluster) masters0() []*Server { return c.nodes[:c.opts.Masters] }

// Nodes returns every node, masters as created first, then their replicas.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Addrs returns the addresses of every node, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// ClientReloadInterval is the ClusterStateReloadInterval that Client sets unless told otherwise.
// go-redis v9.23's default is 60 s, and only a MOVED, ASK or READONLY reply reloads the slot map
// sooner: after a master's SIGKILL, a client keeps dialling the dead master (connection refused,
// every call failing) until the interval is up, since nothing else answers for its slots. Measured
// here: every GET failed for 60.1 s after the kill, although the replica was promoted in 2.5 s.
const ClientReloadInterval = 500 * time.Millisecond

// Client returns a cluster client of the nodes, closed when the test ends. opts may be nil; its
// Addrs are set, and a zero ClusterStateReloadInterval becomes ClientReloadInterval.
func (c *Cluster) Client(tb testing.TB, opts *redis.ClusterOptions) *redis.ClusterClient {
	tb.Helper()
	var o redis.ClusterOptions
	if opts != nil {
		o = *opts
	}
	o.Addrs = c.Addrs()
	if o.ClusterStateReloadInterval == 0 {
		o.ClusterStateReloadInterval = ClientReloadInterval
	}
	rdb := redis.NewClusterClient(&o)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// ID returns the cluster node ID of s.
func (c *Cluster) ID(s *Server) string { return c.ids[s] }

// MasterFor returns the node that serves key's slot now, as the running nodes see it.
func (c *Cluster) MasterFor(key string) *Server {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := c.anyRunning()
	slot, err := c.do(ctx, s, "cluster", "keyslot", key).Int()
	if err != nil {
		c.tb.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
	}
	var found *Server
	c.eventually(30*time.Second, func() (bool, string) {
		nodes, err := c.clusterNodes(ctx, c.anyRunning())
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.has("master") && !n.has("fail") && n.serves(slot) {
				found = c.byID(n.id)
				return found != nil, "unknown node " + n.id
			}
		}
		return false, fmt.Sprintf("no live master serves slot %d", slot)
	})
	return found
}

// ReplicaOf returns a replica of master that the cluster does not consider failed.
func (c *Cluster) ReplicaOf(master *Server) *Server {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var found *Server
	c.eventually(30*time.Second, func() (bool, string) {
		nodes, err := c.clusterNodes(ctx, c.anyRunning())
		if err != nil {
			return false, err.Error()
		}
		for _, n := range nodes {
			if n.has("slave") && !n.has("fail") && n.master == c.ids[master] {
				found = c.byID(n.id)
				return found != nil && found.Running(), "replica not running"
			}
		}
		return false, "no replica of " + master.Addr()
	})
	return found
}

// WaitMaster waits until node is a master serving slots, as it and every other running node
// see it, and the cluster is ok everywhere again: after its master was killed, the replica's
// promotion is complete.
func (c *Cluster) WaitMaster(node *Server) {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := c.ids[node]
	c.eventually(30*time.Second, func() (bool, string) {
		for _, s := range c.running() {
			nodes, err := c.clusterNodes(ctx, s)
			if err != nil {
				return false, err.Error()
			}
			n, ok := nodes[id]
			if !ok || !n.has("master") || len(n.slots) == 0 {
				return false, fmt.Sprintf("%s sees %s as %s", s.Addr(), node.Addr(), n.flags)
			}
		}
		return true, ""
	})
	c.WaitOK()
}

// WaitOK waits until every running node reports cluster_state:ok, every running replica's link
// to its master is up, and they agree on who replicates whom.
func (c *Cluster) WaitOK() {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.eventually(30*time.Second, func() (bool, string) {
		for _, s := range c.running() {
			info, err := c.do(ctx, s, "cluster", "info").Text()
			if err != nil {
				return false, err.Error()
			}
			if !strings.Contains(info, "cluster_state:ok") {
				return false, s.Addr() + " not ok"
			}
			repl, err := c.do(ctx, s, "info", "replication").Text()
			if err != nil {
				return false, err.Error()
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return false, s.Addr() + ": link to its master down"
			}
		}
		return true, ""
	})
}

// CutReplication stops replica from receiving its master's writes while both keep running (see
// cutReplication). HealReplication ends it.
func (c *Cluster) CutReplication(replica *Server) { cutReplication(c.tb, replica) }

// HealReplication lets replica resynchronise with its master again and waits until it has.
func (c *Cluster) HealReplication(replica *Server) { healReplication(c.tb, replica) }

func (c *Cluster) running() []*Server {
	var out []*Server
	for _, s := range c.nodes {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

func (c *Cluster) anyRunning() *Server {
	c.tb.Helper()
	r := c.running()
	if len(r) == 0 {
		c.tb.Fatal("no cluster node is running")
	}
	return r[0]
}

func (c *Cluster) byID(id string) *Server {
	for s, sid := range c.ids {
		if sid == id {
			return s
		}
	}
	return nil
}

func (c *Cluster) do(ctx context.Context, s *Server, args ...any) *redis.Cmd {
	return adminDo(ctx, s, args...)
}

func (c *Cluster) must(ctx context.Context, s *Server, args ...any) {
	c.tb.Helper()
	if err := c.do(ctx, s, args...).Err(); err != nil {
		c.tb.Fatalf("%v on %s: %v", args, s.Addr(), err)
	}
}

func (c *Cluster) eventually(timeout time.Duration, cond func() (bool, string)) {
	c.tb.Helper()
	Eventually(c.tb, timeout, cond)
}

// adminDo sends one command to s on a connection of its own, without retries.
func adminDo(ctx context.Context, s *Server, args ...any) *redis.Cmd {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second,
		ReadTimeout: 5 * time.Second, PoolSize: 1, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	return rdb.Do(ctx, args...)
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, master string
	flags            []string
	slots            [][2]int
}

func (n clusterNode) has(flag string) bool {
	for _, f := range n.flags {
		if f == flag {
			return true
		}
	}
	return false
}

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes is s's view of the cluster, by node ID.
func (c *Cluster) clusterNodes(ctx context.Context, s *Server) (map[string]clusterNode, error) {
	text, err := c.do(ctx, s, "cluster", "nodes").Text()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", s.Addr(), err)
	}
	out := map[string]clusterNode{}
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := clusterNode{id: f[0], addr: strings.SplitN(f[1], "@", 2)[0], flags: strings.Split(f[2], ","), master: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated
				continue
			}
			lo, hi, found := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b := a
			var err2 error
			if found {
				b, err2 = strconv.Atoi(hi)
			}
			if err1 == nil && err2 == nil {
				n.slots = append(n.slots, [2]int{a, b})
			}
		}
		out[n.id] = n
	}
	return out, nil
}

// cutUser is the user a cut replica authenticates to its master as: it does not exist, so the
// master refuses every resync (the default user is nopass and would accept any password).
const cutUser = "itest-no-such-user"

// cutReplication makes replica authenticate to its master as a user that does not exist and drops
// its link: it keeps serving reads of what it has, and retries the sync every second, failing
// each time, so the master's writes from now on never reach it, while both servers run and
// the master believes nothing is wrong beyond a replica that went away. Asynchronous replication's
// lag, made as long as the test wants.
func cutReplication(tb testing.TB, replica *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// masteruser only counts with a masterauth: the replica sends AUTH only when one is set.
	for _, args := range [][]any{
		{"config", "set", "masteruser", cutUser},
		{"config", "set", "masterauth", "itest-cut"},
		{"client", "kill", "type", "master"},
	} {
		if err := adminDo(ctx, replica, args...).Err(); err != nil {
			tb.Fatalf("cut replication of %s: %v: %v", replica.Addr(), args, err)
		}
	}
	Eventually(tb, 10*time.Second, func() (bool, string) {
		repl, err := adminDo(ctx, replica, "info", "replication").Text()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(repl, "master_link_status:down"), "link still up:\n" + repl
	})
}

// healReplication undoes cutReplication and waits until the replica's link is up again.
func healReplication(tb testing.TB, replica *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, args := range [][]any{
		{"config", "set", "masteruser", ""},
		{"config", "set", "masterauth", ""},
	} {
		if err := adminDo(ctx, replica, args...).Err(); err != nil {
			tb.Fatalf("heal replication of %s: %v: %v", replica.Addr(), args, err)
		}
	}
	waitLinkUp(tb, replica)
}

// Has reports whether the node s has key, asked on a READONLY connection so that a replica
// answers from its own data instead of redirecting to its master.
func (c *Cluster) Has(s *Server, key string) bool {
	c.tb.Helper()
	return hasKey(c.tb, s, key, true)
}

// hasKey reports whether the server s has key (readonly: send READONLY first, for a cluster
// replica).
func hasKey(tb testing.TB, s *Server, key string, readonly bool) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, PoolSize: 1, Protocol: 2, DisableIdentity: true})
	defer rdb.Close()
	conn := rdb.Conn()
	defer conn.Close()
	if readonly {
		if err := conn.Do(ctx, "readonly").Err(); err != nil {
			tb.Fatalf("READONLY on %s: %v", s.Addr(), err)
		}
	}
	n, err := conn.Exists(ctx, key).Result()
	if err != nil {
		tb.Fatalf("EXISTS %s on %s: %v", key, s.Addr(), err)
	}
	return n == 1
}
