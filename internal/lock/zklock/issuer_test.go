package zklock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// TestLeaseIssuer: every lease names the ensemble's data that counted its token, the same for
// every grant and every Client on that data, whatever the lock variant; the first acquisition
// creates the ensemble node. Deleting the node (what an operator does after restoring a backup)
// gives the next grants a new issuer, while the tokens go on increasing: the same data. The
// ensemble node is the test's own, so deleting it disturbs nobody else on the shared ZooKeeper.
func TestLeaseIssuer(t *testing.T) {
	root := testRoot(t)
	node := root + "-ensemble"
	conn := rawConn(t)
	t.Cleanup(func() { _ = conn.Delete(node, -1) })
	o := Options{Root: root, EnsembleNode: node}
	a, _ := newClient(t, o)
	b, _ := newClient(t, o)

	first := mustAcquire(t, a, "issuer")
	issuer := first.Issuer()
	if issuer == "" {
		t.Fatal("a lease without an issuer")
	}
	if _, _, err := conn.Get(node); err != nil {
		t.Fatalf("the ensemble node after the first grant: %v", err)
	}
	mustRelease(t, first)

	var last uint64 = first.Token()
	grants := []struct {
		name    string
		acquire func() (lock.Lease, error)
	}{
		{"same client", func() (lock.Lease, error) { return a.Acquire(t.Context(), "issuer") }},
		{"other client", func() (lock.Lease, error) { return b.Acquire(t.Context(), "issuer") }},
		{"herd", func() (lock.Lease, error) { return b.Mutex(MutexOptions{Herd: true}).Acquire(t.Context(), "issuer") }},
		{"reentrant", func() (lock.Lease, error) { return a.Reentrant(MutexOptions{}).Acquire(t.Context(), "issuer") }},
	}
	for _, g := range grants {
		l, err := g.acquire()
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if got := lock.IssuerOf(l); got != issuer || l.Token() <= last {
			t.Errorf("%s: issuer %q token %#x, want %q and a token above %#x", g.name, got, l.Token(), issuer, last)
		}
		last = l.Token()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}

	if err := conn.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	renamed := mustAcquire(t, b, "issuer")
	defer mustRelease(t, renamed)
	if renamed.Issuer() == issuer || renamed.Issuer() == "" || renamed.Token() <= last {
		t.Fatalf("after deleting the ensemble node: issuer %q (was %q), token %#x (last %#x); want a new issuer, tokens still increasing",
			renamed.Issuer(), issuer, renamed.Token(), last)
	}
	t.Logf("issuer %s → %s after the ensemble node was deleted", issuer, renamed.Issuer())
}

// TestEnsembleNodeOption: an ensemble node that is no absolute path is refused at Connect.
func TestEnsembleNodeOption(t *testing.T) {
	for _, node := range []string{"seckill/ensemble", "/seckill/ensemble/", "/seckill//ensemble", "/"} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		_, err := Connect(ctx, []string{"127.0.0.1:1"}, Options{EnsembleNode: node})
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("EnsembleNode %q: Connect = %v, want it refused", node, err)
		}
	}
}
