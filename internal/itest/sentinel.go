package itest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name a RedisSentinel's sentinels monitor.
const SentinelMaster = "itest"

// Sentinel is a Redis master, its replica and three sentinels of a test's own, on free ports:
// the sentinels fail the master over to the replica 1 s after it stops answering (quorum 2). Each
// server has a directory and a config file that survive a Kill and Start (the sentinels rewrite
// theirs; a failover rewrites the data servers').
type Sentinel struct {
	tb        testing.TB
	data      []*Server // the first master and its replica
	sentinels []*Server
}

// RedisSentinel starts the master, the replica and the sentinels and waits until the replica is
// in sync and every sentinel knows the replica and the two other sentinels (a failover needs
// them). Everything is killed when the test ends.
func RedisSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	Integration(tb)
	start := time.Now()
	s := &Sentinel{tb: tb}
	for i := range 2 {
		port := strconv.Itoa(FreePort(tb))
		dir := tb.TempDir()
		// A config file, even an empty one, lets the failover's CONFIG REWRITE succeed.
		conf := writeConf(tb, dir, "redis.conf", "")
		args := []string{"redis-server", conf, "--bind", "127.0.0.1", "--port", port, "--daemonize", "no",
			"--dir", dir, "--save", "", "--appendonly", "no", "--repl-diskless-sync-delay", "0"}
		if i == 1 {
			args = append(args, "--replicaof", "127.0.0.1", s.data[0].Addr()[strings.LastIndex(s.data[0].Addr(), ":")+1:])
		}
		s.data = append(s.data, startServer(tb, "redis-server (sentinel's)", port, args...))
	}
	host, mport, _ := net.SplitHostPort(s.data[0].Addr())
	for range 3 {
		port := strconv.Itoa(FreePort(tb))
		dir := tb.TempDir()
		conf := writeConf(tb, dir, "sentinel.conf", fmt.Sprintf(`port %s
bind 127.0.0.1
daemonize no
dir %s
sentinel monitor %s %s %s 2
sentinel down-after-milliseconds %[3]s 1000
sentinel failover-timeout %[3]s 3000
sentinel parallel-syncs %[3]s 1
`, port, dir, SentinelMaster, host, mport))
		s.sentinels = append(s.sentinels, startServer(tb, "redis-sentinel", port, "redis-server", conf, "--sentinel"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitLinkUp(tb, s.data[1])
	Eventually(tb, 30*time.Second, func() (bool, string) {
		for _, sn := range s.sentinels {
			m, err := adminDo(ctx, sn, "sentinel", "master", SentinelMaster).StringSlice()
			if err != nil {
				return false, err.Error()
			}
			f := fields(m)
			if f["num-slaves"] != "1" || f["num-other-sentinels"] != "2" {
				return false, fmt.Sprintf("sentinel %s knows %s replicas and %s other sentinels", sn.Addr(), f["num-slaves"], f["num-other-sentinels"])
			}
		}
		return true, ""
	})
	tb.Logf("redis master, replica and 3 sentinels up in %s", time.Since(start).Round(time.Millisecond))
	return s
}

func writeConf(tb testing.TB, dir, name, text string) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// fields turns a flat list of name, value, name, value… into a map.
func fields(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// SentinelAddrs returns the sentinels' addresses.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// Sentinels returns the sentinel processes.
func (s *Sentinel) Sentinels() []*Server { return s.sentinels }

// Client returns a failover client (redis.NewFailoverClient) of the master, closed when the test
// ends: it asks the sentinels for the master and follows their +switch-master by itself. opts
// may be nil; its MasterName and SentinelAddrs are set.
func (s *Sentinel) Client(tb testing.TB, opts *redis.FailoverOptions) *redis.Client {
	tb.Helper()
	var o redis.FailoverOptions
	if opts != nil {
		o = *opts
	}
	o.MasterName, o.SentinelAddrs = SentinelMaster, s.SentinelAddrs()
	rdb := redis.NewFailoverClient(&o)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Master returns the current master, as the first running sentinel names it.
func (s *Sentinel) Master() *Server {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, sn := range s.sentinels {
		if !sn.Running() {
			continue
		}
		addr, err := adminDo(ctx, sn, "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
		if err != nil || len(addr) != 2 {
			s.tb.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME on %s = %v, %v", sn.Addr(), addr, err)
		}
		return s.byAddr(net.JoinHostPort(addr[0], addr[1]))
	}
	s.tb.Fatal("no sentinel is running")
	return nil
}

// Replica returns the data server that is not the current master.
func (s *Sentinel) Replica() *Server {
	s.tb.Helper()
	m := s.Master()
	for _, d := range s.data {
		if d != m {
			return d
		}
	}
	return nil
}

// WaitFailover waits until every running sentinel names a master other than old and that server
// says it is one.
func (s *Sentinel) WaitFailover(old *Server) *Server {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var now *Server
	Eventually(s.tb, 30*time.Second, func() (bool, string) {
		for _, sn := range s.sentinels {
			if !sn.Running() {
				continue
			}
			addr, err := adminDo(ctx, sn, "sentinel", "get-master-addr-by-name", SentinelMaster).StringSlice()
			if err != nil || len(addr) != 2 {
				return false, fmt.Sprintf("sentinel %s: %v %v", sn.Addr(), addr, err)
			}
			now = s.byAddr(net.JoinHostPort(addr[0], addr[1]))
			if now == old || now == nil {
				return false, fmt.Sprintf("sentinel %s still names %s", sn.Addr(), net.JoinHostPort(addr[0], addr[1]))
			}
		}
		repl, err := adminDo(ctx, now, "info", "replication").Text()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(repl, "role:master"), now.Addr() + " is not a master yet"
	})
	return now
}

// Has reports whether the data server d has key.
func (s *Sentinel) Has(d *Server, key string) bool {
	s.tb.Helper()
	return hasKey(s.tb, d, key, false)
}

// CutReplication stops replica from receiving the master's writes while both run (see
// cutReplication).
func (s *Sentinel) CutReplication(replica *Server) { cutReplication(s.tb, replica) }

// HealReplication undoes CutReplication and waits until the replica is in sync again.
func (s *Sentinel) HealReplication(replica *Server) { healReplication(s.tb, replica) }

func (s *Sentinel) byAddr(addr string) *Server {
	for _, d := range s.data {
		if d.Addr() == addr {
			return d
		}
	}
	return nil
}

// waitLinkUp waits until the replica's link to its master is up.
func waitLinkUp(tb testing.TB, replica *Server) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	Eventually(tb, 20*time.Second, func() (bool, string) {
		repl, err := adminDo(ctx, replica, "info", "replication").Text()
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(repl, "master_link_status:up"), "link down:\n" + repl
	})
}
