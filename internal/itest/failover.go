package itest

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Failover is a replicated Redis of a test's own that the test breaks the way the write-ups'
// failure needs: a key's master, its replica cut off from it, the master SIGKILLed and the replica
// promoted. ClusterFailover and SentinelFailover make one of each kind, so that a failover test
// runs on both alike.
type Failover struct {
	// Client returns one more client (a process of its own), closed when the test ends.
	Client func(tb testing.TB) redis.UniversalClient
	// Master is the node that holds key now; Replica a replica of master.
	Master  func(key string) *Server
	Replica func(master *Server) *Server
	// Has reports whether node s has key (a replica answers from its own data).
	Has func(s *Server, key string) bool
	// Cut stops replica from copying its master's writes (CutReplication).
	Cut func(replica *Server)
	// Promoted waits until replica serves in master's place, as the topology (not a client) sees
	// it, and fails the test if another node was promoted.
	Promoted func(master, replica *Server)
}

// ClusterFailover is a Failover on a RedisCluster of 3 masters with a replica each.
func ClusterFailover(tb testing.TB) Failover {
	c := RedisCluster(tb, ClusterOptions{})
	return Failover{
		Client:   func(tb testing.TB) redis.UniversalClient { return c.Client(tb, nil) },
		Master:   c.MasterFor,
		Replica:  c.ReplicaOf,
		Has:      c.Has,
		Cut:      c.CutReplication,
		Promoted: func(_, replica *Server) { c.WaitMaster(replica) },
	}
}

// SentinelFailover is a Failover on a RedisSentinel: its one master holds every key.
func SentinelFailover(tb testing.TB) Failover {
	s := RedisSentinel(tb)
	return Failover{
		Client:  func(tb testing.TB) redis.UniversalClient { return s.Client(tb, nil) },
		Master:  func(string) *Server { return s.Master() },
		Replica: func(*Server) *Server { return s.Replica() },
		Has:     s.Has,
		Cut:     s.CutReplication,
		Promoted: func(master, replica *Server) {
			if got := s.WaitFailover(master); got != replica {
				tb.Fatalf("the sentinels promoted %s, want the replica %s", got.Addr(), replica.Addr())
			}
		},
	}
}
