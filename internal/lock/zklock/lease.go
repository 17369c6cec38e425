package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Lease is one grant of a lock: the own ephemeral node while it is the lowest of its name.
type Lease struct {
	c     *Client
	name  string
	path  string
	token uint64
	// issuer is the identity of the ensemble's data that counted token (ensemble.go).
	issuer string
	sess   *session
	// wakeups is how many times a watch woke the waiter before this grant (the herd's cost).
	wakeups int

	lost     chan struct{}
	lostOnce sync.Once

	stop     chan struct{} // closed by Release to end watch
	stopped  chan struct{} // closed when watch has returned
	mu       sync.Mutex
	released bool
}

// Token returns the fencing token of this grant: the czxid of the lock node. zxids are ordered
// across the whole ensemble, so tokens strictly increase with every grant of a name, also after
// its parent node was deleted and the sequence numbers restarted.
func (l *Lease) Token() uint64 { return l.token }

// Issuer returns the identity of the ensemble's data that counted the token (Options.EnsembleNode):
// a token compares only with tokens of the same issuer. A wiped ensemble, or one whose ensemble
// node was deleted, issues tokens under a new identity, which may be lower than the old ones.
func (l *Lease) Issuer() string { return l.issuer }

// Lost returns a channel that is closed, once, when the lease can no longer be trusted: the
// session expired, the connection has been down for a third of the session timeout (after
// which the server may expire the session at any moment and grant the lock to someone else),
// the node was deleted, or the Client was closed. A Lost lease whose session survives a short
// disconnection still holds its node; Release deletes it.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release deletes the own node. It returns an error wrapping lock.ErrNotHeld if the node is gone
// already (session expired, deleted, Client closed) or on a second call; it never touches another
// holder's node. If ctx ends before the server confirms, or ZooKeeper has been unreachable for
// Options.FailAfter, the delete goes on in the background (until the server answers again) and
// Release returns an error wrapping ctx.Err() or lock.ErrUnavailable.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	released := l.released
	l.released = true
	l.mu.Unlock()
	if released {
		return fmt.Errorf("zklock: release %q: %w (released before)", l.name, lock.ErrNotHeld)
	}
	close(l.stop)
	<-l.stopped
	if l.sess.serverDropped() {
		// The server deleted the node with its session; nothing to ask it.
		return fmt.Errorf("zklock: release %q: %w (%s)", l.name, lock.ErrNotHeld, l.sess.why)
	}

	attempts := 0
	err := l.c.retry(ctx, func() error {
		attempts++
		return l.c.conn.Delete(l.path, -1) // -1: the GUID in the path makes it this grant's node
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		// After an attempt whose outcome was unknown, a missing node on the same session means
		// that attempt deleted it.
		if attempts > 1 && l.c.conn.SessionID() == l.sess.id {
			return nil
		}
		return fmt.Errorf("zklock: release %q: %w", l.name, lock.ErrNotHeld)
	case errors.Is(err, ErrClosed):
		return fmt.Errorf("zklock: release %q: %w (%w)", l.name, lock.ErrNotHeld, ErrClosed)
	case ctx.Err() != nil || errors.Is(err, lock.ErrUnavailable):
		// The node stays while its session does: it must go once ZooKeeper answers again.
		l.c.goOwned(func() { l.c.deleteNode("", "", l.path) })
		return fmt.Errorf("zklock: release %q: deleting in the background: %w", l.name, err)
	}
	return fmt.Errorf("zklock: release %q: %w", l.name, err)
}

// watch closes lost when the own node goes away or the session can no longer be trusted, until
// Release stops it. ch is the data watch set on the node when it was granted.
func (l *Lease) watch(ch <-chan zk.Event) {
	defer close(l.stopped)
	for {
		select {
		case ev := <-ch:
			if ev.Type != zk.EventNodeDataChanged {
				l.markLost(fmt.Sprintf("%s: %s", ev.Type, errOrNone(ev.Err)))
				return
			}
			// Someone wrote to the node: it still exists; watch it again.
			var err error
			if _, _, ch, err = l.c.conn.GetW(l.path); err != nil {
				l.markLost("re-watching the node: " + err.Error())
				return
			}
		case <-l.sess.gone:
			l.markLost(l.sess.why)
			return
		case <-l.stop:
			return
		}
	}
}

func (l *Lease) markLost(reason string) {
	l.lostOnce.Do(func() {
		close(l.lost)
		l.c.log.Warn("lock lease lost", "lock", l.name, "node", l.path, "token", l.token, "reason", reason)
	})
}

func errOrNone(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
