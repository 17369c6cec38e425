package itest_test

import (
	"io"
	"log"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestZKEnsembleElectsNewLeader: after the leader's SIGKILL the two others elect a new leader, a
// client on the server list keeps its session and reads what it wrote before, and the killed
// server rejoins as a follower.
func TestZKEnsembleElectsNewLeader(t *testing.T) {
	t.Parallel() // servers of its own
	e := itest.ZKEnsemble(t)
	conn, events, err := zk.Connect(e.Servers(), 6*time.Second, zk.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	itest.Eventually(t, 15*time.Second, func() (bool, string) {
		return conn.State() == zk.StateHasSession, "no session: " + conn.State().String()
	})
	if _, err := conn.Create("/itest", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sid := conn.SessionID()
	go func() {
		for range events { // drained until Close closes it
		}
	}()

	leader := e.Leader()
	if leader == nil {
		t.Fatal("no leader after WaitQuorum")
	}
	killed := time.Now()
	leader.Kill()
	var next *itest.Server
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		next = e.Leader()
		return next != nil, "no leader yet"
	})
	elected := time.Since(killed)
	e.WaitQuorum()
	var data []byte
	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		data, _, err = conn.Get("/itest")
		return err == nil, "GET: " + errString(err)
	})
	t.Logf("leader %s SIGKILLed → %s leads: %s; → the client reads again: %s",
		leader.Addr(), next.Addr(), elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if next == leader || string(data) != "v" {
		t.Fatalf("new leader %s (old %s), data %q", next.Addr(), leader.Addr(), data)
	}
	if conn.SessionID() != sid {
		t.Fatalf("session %x replaced by %x: it expired across the election", sid, conn.SessionID())
	}

	leader.Start()
	e.WaitQuorum()
	if m := e.Mode(leader); m != "follower" {
		t.Fatalf("the restarted old leader is %q, want follower", m)
	}
}
