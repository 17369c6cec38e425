package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
)

// TestWipedEnsemble: the data of a three-server ensemble of the test's own is wiped while two
// Clients are connected. Every server now refuses them, for they have seen later zxids than the
// new data has. The Client forgets its zxid once it has been refused for a session timeout, gets
// a new session and grants again: a lease with a new issuer and a token below the old ones (what
// the fence's issuer is for). The control keeps its zxid, as go-zookeeper alone does, and still
// has no session three session timeouts after the other one was granted.
func TestWipedEnsemble(t *testing.T) {
	itest.Integration(t)
	e := itest.ZKEnsemble(t)
	// A second leader moves the old data to epoch 2 (the zxids' high 32 bits), above anything
	// the wiped data grants in its first epoch.
	leader := e.Leader()
	leader.Kill()
	e.WaitQuorum()
	leader.Start()
	e.WaitQuorum()

	const session = 2 * time.Second
	connect := func(keepZxid bool) *Client {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		c, err := Connect(ctx, e.Servers(), Options{SessionTimeout: session, Logger: itest.Logger(), test: testHooks{keepZxid: keepZxid}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	c, control := connect(false), connect(true)
	old := mustAcquire(t, c, "wiped")
	mustRelease(t, old)
	mustRelease(t, mustAcquire(t, control, "wiped"))

	e.Wipe()
	back := time.Now()
	var l *Lease
	itest.Eventually(t, time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		var err error
		l, err = c.Acquire(ctx, "wiped")
		return err == nil, "acquire on the wiped ensemble: " + errOrNone(err)
	})
	t.Logf("granted %s after the wiped ensemble's quorum: token %#x (was %#x), issuer %s (was %s)",
		time.Since(back).Round(time.Millisecond), l.Token(), old.Token(), l.Issuer(), old.Issuer())
	if l.Issuer() == old.Issuer() || l.Token() >= old.Token() {
		t.Errorf("after the wipe: issuer %q token %#x; want a new issuer and a token below %#x", l.Issuer(), l.Token(), old.Token())
	}
	mustRelease(t, l)

	time.Sleep(3 * session)
	if control.hasSession() {
		t.Fatal("control: the client that keeps its zxid got a session on the wiped data; the test shows nothing")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err := control.Acquire(ctx, "wiped")
	if !errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("control: Acquire = %v, want %v", err, lock.ErrUnavailable)
	}
	t.Logf("control: no session %s after the quorum: %v", time.Since(back).Round(time.Millisecond), err)
}
