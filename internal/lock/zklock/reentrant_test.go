package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
)

// The contract, each acquisition for an owner of its own (as each call of the contract is a
// different holder): the re-entrant lock excludes every other owner as the plain lock does.
func TestReentrantContract(t *testing.T) {
	itest.Integration(t)
	locktest.Run(t, contractSuite(t, func(c *Client) lock.Locker {
		return ownerPerCall{Locker: c.Reentrant(MutexOptions{}).Locker()}
	}))
}

var owners atomic.Int64

// ownerPerCall acquires every time for a new owner.
type ownerPerCall struct{ lock.Locker }

func newOwner(ctx context.Context) context.Context {
	return lock.WithOwner(ctx, fmt.Sprintf("owner-%d", owners.Add(1)))
}

func (o ownerPerCall) Acquire(ctx context.Context, name string) (lock.Lease, error) {
	return o.Locker.Acquire(newOwner(ctx), name)
}

func (o ownerPerCall) TryAcquire(ctx context.Context, name string) (lock.Lease, error) {
	return o.Locker.TryAcquire(newOwner(ctx), name)
}

// TestReentrant: an owner that holds the lock gets it again at once, without a request to
// ZooKeeper, with the same token; it keeps the lock until it has released every acquisition,
// while another owner (on the same Reentrant, in the same process) waits; the node names its
// owner.
func TestReentrant(t *testing.T) {
	itest.Integration(t)
	root := testRoot(t)
	raw := rawConn(t)
	c, e := newClient(t, Options{Root: root})
	r := c.Reentrant(MutexOptions{})
	name := locktest.Name(t)
	parent := root + "/" + name
	a := lock.WithOwner(t.Context(), "host-a/batch-1")
	b := lock.WithOwner(t.Context(), "host-a/batch-2")

	outer := locktest.MustAcquire(t, func(_ context.Context, n string) (*ReentrantLease, error) { return r.Acquire(a, n) }, name)
	if got := nodeData(t, raw, parent); got != "host-a/batch-1" {
		t.Errorf("lock node data %q, want the owner", got)
	}

	sent, _ := e.counts()
	if sent == 0 {
		t.Fatal("netem counted no requests: the zero-request checks below would prove nothing")
	}
	var nested []*ReentrantLease
	for range 2 {
		l, err := r.Acquire(a, name)
		if err != nil {
			t.Fatalf("nested Acquire = %v", err)
		}
		nested = append(nested, l)
	}
	if l, err := r.TryAcquire(a, name); err != nil {
		t.Fatalf("nested TryAcquire = %v", err)
	} else {
		nested = append(nested, l)
	}
	if now, _ := e.counts(); now != sent {
		t.Errorf("the nested acquisitions sent %d requests to ZooKeeper, want none", now-sent)
	}
	for i, l := range nested {
		if l.Token() != outer.Token() || l.Lost() != outer.Lost() {
			t.Errorf("nested lease %d: token %d, want the outer grant's %d and its Lost()", i, l.Token(), outer.Token())
		}
	}

	if _, err := r.TryAcquire(b, name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Fatalf("another owner's TryAcquire = %v, want ErrNotAcquired", err)
	}
	got := make(chan *ReentrantLease, 1)
	go func() {
		l, err := locktest.Acquire(t, func(_ context.Context, n string) (*ReentrantLease, error) { return r.Acquire(b, n) }, name)
		if err != nil {
			t.Errorf("the other owner's Acquire = %v", err)
		}
		got <- l
	}()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		q := queue(t, raw, parent)
		return len(q) == 2, fmt.Sprintf("queue %v, want the owner's node and the other owner's", q)
	})

	// The other owner's waiter shares this Client (and its request count): let it finish
	// setting its watch, after which it sends nothing until the lock changes.
	for prev := -1; ; {
		now, _ := e.counts()
		if now == prev {
			break
		}
		prev = now
		time.Sleep(300 * time.Millisecond)
	}
	sent, _ = e.counts()
	for i, l := range nested {
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("release of nested lease %d = %v", i, err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("second release of nested lease %d = %v, want ErrNotHeld (and no level counted down)", i, err)
		}
	}
	if now, _ := e.counts(); now != sent {
		t.Errorf("the nested releases sent %d requests to ZooKeeper, want none", now-sent)
	}
	select {
	case l := <-got:
		t.Fatalf("the other owner got the lock (%v) while the outer acquisition still holds it", l != nil)
	default:
	}
	if q := queue(t, raw, parent); len(q) != 2 {
		t.Fatalf("queue %v after the nested releases, want the owner's node still first", q)
	}

	mustReleaseR(t, outer)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if l.Token() <= outer.Token() {
		t.Errorf("the other owner's token %d after %d", l.Token(), outer.Token())
	}
	if got := nodeData(t, raw, parent); got != "host-a/batch-2" {
		t.Errorf("lock node data %q, want the other owner", got)
	}
	mustReleaseR(t, l)
	if q := queue(t, raw, parent); len(q) != 0 {
		t.Fatalf("nodes left: %v", q)
	}
}

// An owner's second acquisition while its first still waits must not queue a second node (it
// would wait behind its own first): it waits for the first's outcome and re-enters.
func TestReentrantSameOwnerWhileWaiting(t *testing.T) {
	itest.Integration(t)
	root := testRoot(t)
	raw := rawConn(t)
	holderClient, _ := newClient(t, Options{Root: root})
	name := locktest.Name(t)
	parent := root + "/" + name
	holder := mustAcquire(t, holderClient, name)

	c, _ := newClient(t, Options{Root: root})
	r := c.Reentrant(MutexOptions{})
	a := lock.WithOwner(t.Context(), "owner-a")
	got := make(chan *ReentrantLease, 2)
	acquire := func() {
		l, err := locktest.Acquire(t, func(_ context.Context, n string) (*ReentrantLease, error) { return r.Acquire(a, n) }, name)
		if err != nil {
			t.Errorf("Acquire = %v", err)
		}
		got <- l
	}
	go acquire()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		q := queue(t, raw, parent)
		return len(q) == 2, fmt.Sprintf("queue %v, want the holder's node and the owner's", q)
	})
	if _, err := r.TryAcquire(a, name); !errors.Is(err, lock.ErrNotAcquired) {
		t.Errorf("TryAcquire while the owner's first acquisition waits = %v, want ErrNotAcquired", err)
	}
	go acquire()
	mustRelease(t, holder)
	first, second := <-got, <-got
	if first == nil || second == nil {
		t.FailNow()
	}
	if first.Token() != second.Token() {
		t.Errorf("tokens %d and %d: one owner, one grant", first.Token(), second.Token())
	}
	if q := queue(t, raw, parent); len(q) != 1 {
		t.Fatalf("queue %v, want the owner's one node", q)
	}
	mustReleaseR(t, first)
	mustReleaseR(t, second)
	if q := queue(t, raw, parent); len(q) != 0 {
		t.Fatalf("nodes left: %v", q)
	}
}

// When the session behind the grant expires, every level has lost the lock: the nested lease's
// Lost() closes with the outer one, its release says so, and the last release deletes nothing.
func TestReentrantLostReachesEveryLevel(t *testing.T) {
	itest.Integration(t)
	root := testRoot(t)
	c, e := newClient(t, Options{Root: root})
	r := c.Reentrant(MutexOptions{})
	name := locktest.Name(t)
	a := lock.WithOwner(t.Context(), "owner-a")
	outer, err := r.Acquire(a, name)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := r.Acquire(a, name)
	if err != nil {
		t.Fatal(err)
	}
	expireSession(t, e)
	select {
	case <-inner.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("the nested lease's Lost() not closed 30 s after the session expired")
	}
	if err := inner.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("nested release after the loss = %v, want ErrNotHeld", err)
	}
	if err := outer.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("outer release after the loss = %v, want ErrNotHeld", err)
	}
}

// Without an owner there is no one to re-enter as: a nested acquisition waits for itself until
// its ctx ends, as a non-re-entrant lock does.
func TestReentrantWithoutOwner(t *testing.T) {
	itest.Integration(t)
	root := testRoot(t)
	c, _ := newClient(t, Options{Root: root})
	r := c.Reentrant(MutexOptions{})
	name := locktest.Name(t)
	outer := locktest.MustAcquire(t, r.Acquire, name)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Acquire(ctx, name); !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("nested Acquire without an owner = %v, want ErrTimeout", err)
	}
	mustReleaseR(t, outer)
}

func nodeData(t *testing.T, conn *zk.Conn, parent string) string {
	t.Helper()
	q := queue(t, conn, parent)
	if len(q) == 0 {
		t.Fatalf("no lock node under %s", parent)
	}
	data, _, err := conn.Get(parent + "/" + q[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func mustReleaseR(t *testing.T, l *ReentrantLease) {
	t.Helper()
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("Release = %v", err)
	}
}
