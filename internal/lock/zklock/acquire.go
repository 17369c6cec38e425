package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/lock"
)

const (
	// A child is named protectedPrefix + GUID + seqMarker + the sequence number ZooKeeper
	// appends, as Curator's protected mode names them.
	protectedPrefix = "_c_"
	seqMarker       = "-lock-"

	// cleanupWait is how long a giving-up call waits for its node to be deleted before it
	// returns and leaves the delete to the background.
	cleanupWait = time.Second
)

// errVanished: the own node disappeared while waiting, which happens when the session expired.
var errVanished = errors.New("own lock node vanished (session expired?)")

// Acquire blocks until it holds the lock name, ctx ends (an error wrapping both lock.ErrTimeout
// and ctx.Err(), or lock.ErrUnavailable and ctx.Err() if the Client had no session then), or
// ZooKeeper fails. It fails fast while ZooKeeper cannot be reached: once the Client has been
// without a session for Options.FailAfter, Acquire refuses at once, and a call in progress gives
// up, with an error wrapping lock.ErrUnavailable; it recovers by itself when the session is back.
// A single ZooKeeper round trip cannot be interrupted (the client library takes no ctx), but each
// is bounded by the connection's own timeouts; waiting for the predecessor honours ctx at once.
// On every error the own node is deleted (in the background while ZooKeeper is unreachable).
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	return c.acquire(ctx, name, true, how{})
}

// TryAcquire takes the lock name if it is free and returns an error wrapping lock.ErrNotAcquired,
// leaving no node behind, if someone else holds it or waits for it.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return c.acquire(ctx, name, false, how{})
}

// how is how one acquisition waits (Mutex: predecessor or herd, and who is told of its wakes)
// and what it writes in its node (Reentrant: the owner).
type how struct {
	herd   bool
	onWake func()
	onLook func(won bool)
	data   []byte
}

func (h how) wake() {
	if h.onWake != nil {
		h.onWake()
	}
}

func (h how) look(won bool) {
	if h.onLook != nil {
		h.onLook(won)
	}
}

func (c *Client) acquire(ctx context.Context, name string, wait bool, h how) (*Lease, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	if err := c.awaitSession(ctx, false); err != nil {
		return nil, c.acquireErr(ctx, name, err)
	}
	parent := c.root + "/" + name
	guid, err := newGUID()
	if err != nil {
		return nil, err
	}
	path, maybeCreated, err := c.create(ctx, parent, guid, h.data)
	if err == nil {
		var lease *Lease
		if lease, err = c.wait(ctx, name, parent, path, wait, h); err == nil {
			return lease, nil
		}
	}
	if path != "" || maybeCreated {
		c.abandon(parent, guid, path)
	}
	return nil, c.acquireErr(ctx, name, err)
}

// acquireErr is the error of an acquisition of name that failed with err.
func (c *Client) acquireErr(ctx context.Context, name string, err error) error {
	switch {
	case errors.Is(err, lock.ErrNotAcquired):
		return fmt.Errorf("zklock: try acquire %q: %w", name, err)
	case errors.Is(err, ErrClosed) || c.isClosed():
		return fmt.Errorf("zklock: acquire %q: %w", name, ErrClosed)
	case errors.Is(err, lock.ErrUnavailable):
		return fmt.Errorf("zklock: acquire %q: %w", name, err)
	case ctx.Err() != nil && !c.hasSession():
		return fmt.Errorf("zklock: acquire %q: %w: %w", name, lock.ErrUnavailable, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("zklock: acquire %q: %w: %w", name, lock.ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("zklock: acquire %q: %w", name, err)
}

// create makes this acquisition's ephemeral-sequential child of parent, holding data, and
// returns its path.
// When a create fails without telling whether the server made the node (the connection broke
// before the reply), it lists parent and looks for the GUID instead of creating a second node;
// maybeCreated then tells the caller that a node of this GUID may exist even if create fails.
func (c *Client) create(ctx context.Context, parent, guid string, data []byte) (path string, maybeCreated bool, err error) {
	prefix := parent + "/" + protectedPrefix + guid + seqMarker
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return "", maybeCreated, err
		}
		if attempt > 1 {
			if err := c.awaitSession(ctx, false); err != nil {
				return "", maybeCreated, err
			}
		}
		if attempt > 10 {
			return "", maybeCreated, fmt.Errorf("create lock node: giving up after %d attempts: %w", attempt-1, err)
		}
		path, err = c.conn.Create(prefix, data, zk.FlagEphemeral|zk.FlagSequence, c.acl)
		switch {
		case err == nil:
			return path, true, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := c.ensurePath(ctx, parent); err != nil {
				return "", maybeCreated, err
			}
		case errors.Is(err, zk.ErrSessionExpired):
			// A node made by the expired session is gone with it: create again.
		case transient(err):
			maybeCreated = true
			found, ferr := c.findByGUID(ctx, parent, guid, false)
			if c.hooks.recovered != nil && ferr == nil {
				c.hooks.recovered(found)
			}
			if ferr != nil {
				return "", true, ferr
			}
			if found != "" {
				return found, true, nil
			}
		default:
			return "", maybeCreated, fmt.Errorf("create lock node: %w", err)
		}
	}
}

// ensurePath creates path and its ancestors as persistent nodes. Racing creators are fine.
func (c *Client) ensurePath(ctx context.Context, path string) error {
	for i := 1; i <= len(path); i++ {
		if i < len(path) && path[i] != '/' {
			continue
		}
		p := path[:i]
		err := c.retry(ctx, func() error {
			_, err := c.conn.Create(p, nil, zk.FlagPersistent, c.acl)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// findByGUID returns the path of parent's child created with guid, or "" if there is none. A
// patient search waits out an outage (retryThrough); the other fails fast (retry).
func (c *Client) findByGUID(ctx context.Context, parent, guid string, patient bool) (string, error) {
	var children []string
	err := c.retryOp(ctx, patient, func() (err error) {
		children, _, err = c.conn.Children(parent)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("list %s: %w", parent, err)
	}
	for _, child := range children {
		if strings.HasPrefix(child, protectedPrefix+guid+seqMarker) {
			return parent + "/" + child, nil
		}
	}
	return "", nil
}

// wait turns the own node at path into a lease once it is the lowest child of parent. A waiter
// watches only its immediate predecessor, so a release wakes one waiter, not the herd. The watch
// is set with getData, not exists, as Curator does: exists on a node that has just vanished
// would leave a watch for its re-creation registered forever, getData leaves none.
//
// In herd mode (h.herd, see herd.go) the listing itself sets the watch, on the list of children:
// any change wakes the waiter, which lists again. Only the watch differs; the queue, the grant
// and the token are the same.
func (c *Client) wait(ctx context.Context, name, parent, path string, wait bool, h how) (*Lease, error) {
	own := path[len(parent)+1:]
	// The read of the own node that a grant needs does not depend on the listing: send both at
	// once (go-zookeeper pipelines requests on one connection), so that an uncontended acquire
	// costs two round trips, as zk.Lock's does, instead of three.
	read := make(chan ownNode, 1)
	if !c.goOwned(func() {
		var r ownNode
		_, r.stat, r.watch, r.err = c.conn.GetW(path)
		read <- r
	}) {
		return nil, ErrClosed
	}
	// The ensemble's identity, the lease's Issuer, is read beside them for the same reason.
	ident, ok := c.readIdentity(ctx)
	if !ok {
		return nil, ErrClosed
	}
	wakes := 0 // how many times a watch woke this waiter
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var children []string
		// herd: the watch on the list of children. After the grant it stays set until the next
		// change (the own release at the latest) fires it into its buffered channel, unread.
		var changed <-chan zk.Event
		err := c.retry(ctx, func() (err error) {
			if h.herd && wait {
				children, _, changed, err = c.conn.ChildrenW(parent)
			} else {
				children, _, err = c.conn.Children(parent)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", parent, err)
		}
		queue := sortQueue(children)
		i := slices.Index(queue, own)
		switch {
		case i < 0:
			return nil, fmt.Errorf("%s: %w", path, errVanished)
		case i == 0:
			h.look(true)
			return c.grant(ctx, name, path, read, ident, wakes)
		case !wait:
			h.look(false)
			return nil, lock.ErrNotAcquired
		}
		h.look(false)
		watched, watch := parent, changed
		if !h.herd {
			watched = parent + "/" + queue[i-1]
			if c.hooks.beforeWatch != nil {
				c.hooks.beforeWatch(watched)
			}
			err = c.retry(ctx, func() (err error) {
				_, _, watch, err = c.conn.GetW(watched)
				return err
			})
			if errors.Is(err, zk.ErrNoNode) {
				continue // the predecessor left between the listing and the watch: look again
			}
			if err != nil {
				return nil, fmt.Errorf("watch %s: %w", watched, err)
			}
		}
		if err := c.awaitWatch(ctx, watched, watch); err != nil {
			return nil, err
		}
		wakes++
		h.wake()
	}
}

// awaitWatch sleeps until watch, set on watched, fires: the waiter then looks at the queue again.
// It returns an error instead when the watch is dropped, ctx ends, the session is lost or the
// client closes: a waiter must not sleep on a watch that can no longer fire.
func (c *Client) awaitWatch(ctx context.Context, watched string, watch <-chan zk.Event) error {
	select {
	case ev := <-watch:
		if c.hooks.watchFired != nil {
			c.hooks.watchFired(watched, ev)
		}
		if ev.Type == zk.EventNotWatching {
			return fmt.Errorf("watch %s: %w", watched, ev.Err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.unreachableCh():
		// No grant can come without a session; the queue position is given up with the
		// node, so that the caller hears of the outage now, not when its wait runs out.
		return fmt.Errorf("watch %s: %w", watched, errNoSession)
	case <-c.done:
		return ErrClosed
	}
}

// ownNode is a read of the own node: its Stat (czxid, owner) and a data watch on it.
type ownNode struct {
	stat  *zk.Stat
	watch <-chan zk.Event
	err   error
}

// grant makes the lease of the own node at path from its czxid, the fencing token, the identity
// of the ensemble's data, the token's issuer, and the watch that reports the node's deletion.
// read delivers the read made while listing; it is made again if it failed or its watch has
// fired since. ident delivers the identity read beside it. wakes is how often the waiter was
// woken before.
func (c *Client) grant(ctx context.Context, name, path string, read <-chan ownNode, ident <-chan identRead, wakes int) (*Lease, error) {
	var r ownNode
	select {
	case r = <-read:
	case <-c.unreachableCh():
		return nil, fmt.Errorf("read %s: %w", path, errNoSession)
	case <-c.done:
		return nil, ErrClosed
	}
	stat, watch, err := r.stat, r.watch, r.err
	fresh := err == nil
	if fresh {
		select {
		case <-watch:
			fresh = false
		default:
		}
	}
	if !fresh {
		err = c.retry(ctx, func() (err error) {
			_, stat, watch, err = c.conn.GetW(path)
			return err
		})
	}
	if errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("%s: %w", path, errVanished)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var id identRead
	select {
	case id = <-ident:
	case <-c.unreachableCh():
		return nil, fmt.Errorf("ensemble identity: %w", errNoSession)
	case <-c.done:
		return nil, ErrClosed
	}
	if id.err != nil {
		return nil, fmt.Errorf("ensemble identity: %w", id.err)
	}
	// Taken after both reads: a session re-established with the same id since proves that the
	// server kept the session, so the node read above is still ours, and the identity was read
	// from the data that made the node (both reads were sent after its create, on this session:
	// an expired session would have been replaced, and sessions do not outlive their data).
	sess := c.currentSession()
	switch {
	case sess == nil:
		return nil, fmt.Errorf("%s: no live ZooKeeper session to grant it on", path)
	case sess.id != stat.EphemeralOwner:
		return nil, fmt.Errorf("%s: owned by session %s, not by this client's %s", path, sessionHex(stat.EphemeralOwner), sessionHex(sess.id))
	}
	l := &Lease{
		c:       c,
		name:    name,
		path:    path,
		token:   uint64(stat.Czxid),
		issuer:  id.id,
		wakeups: wakes,
		sess:    sess,
		lost:    make(chan struct{}),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if !c.goOwned(func() { l.watch(watch) }) {
		return nil, ErrClosed
	}
	return l, nil
}

// abandon deletes the node of an acquisition that gives up: path, or if the create's outcome
// was unknown, the child of parent named with guid. It waits up to cleanupWait, then leaves the
// delete to a goroutine that keeps trying long enough for the session to end otherwise. While
// ZooKeeper is unreachable it does not wait at all: the caller is failing fast.
func (c *Client) abandon(parent, guid, path string) {
	done := make(chan struct{})
	if !c.goOwned(func() {
		defer close(done)
		c.deleteNode(parent, guid, path)
	}) {
		return // closed: the session, and with it the node, is gone
	}
	t := time.NewTimer(cleanupWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		c.log.Warn("still deleting an abandoned lock node in the background", "parent", parent, "node", path)
	case <-c.unreachableCh():
		c.log.Debug("ZooKeeper unreachable: deleting an abandoned lock node in the background", "parent", parent, "node", path)
	}
}

// deleteNode deletes the own node, waiting out an outage for as long as the Client lives: no
// fixed bound is safe, for a ZooKeeper server that was down restores the sessions it had when it
// comes back, so the node outlives an outage of any length if its session does. Once a session
// is back, either it is the node's, and the delete goes through, or the node's session expired
// and took the node with it (ErrNoNode).
func (c *Client) deleteNode(parent, guid, path string) {
	ctx := c.bg
	if path == "" {
		found, err := c.findByGUID(ctx, parent, guid, true)
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				c.log.Error("could not look for an abandoned lock node; it stays until the session ends", "parent", parent, "guid", guid, "err", err)
			}
			return
		}
		if path = found; path == "" {
			return
		}
	}
	// Version -1 is safe: the GUID in the path names this acquisition's node and no other.
	err := c.retryThrough(ctx, func() error { return c.conn.Delete(path, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, ErrClosed) {
		c.log.Error("could not delete an abandoned lock node; it stays until the session ends", "node", path, "err", err)
	}
}

// sortQueue returns the lock's children (protected names only) in the order of their sequence
// numbers: the order in which the lock is granted.
func sortQueue(children []string) []string {
	type entry struct {
		seq  int64
		name string
	}
	entries := make([]entry, 0, len(children))
	for _, child := range children {
		if seq, ok := sequence(child); ok {
			entries = append(entries, entry{seq, child})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return int(min(max(a.seq-b.seq, -1), 1)) })
	queue := make([]string, len(entries))
	for i, e := range entries {
		queue[i] = e.name
	}
	return queue
}

// sequence parses the sequence number ZooKeeper appended to a child's name.
func sequence(child string) (int64, bool) {
	if !strings.HasPrefix(child, protectedPrefix) {
		return 0, false
	}
	i := strings.LastIndex(child, seqMarker)
	if i < 0 {
		return 0, false
	}
	seq, err := strconv.ParseInt(child[i+len(seqMarker):], 10, 64)
	return seq, err == nil
}

// validName accepts a lock name that is one ZooKeeper path element.
func validName(name string) error {
	bad := func(why string) error { return fmt.Errorf("zklock: invalid lock name %q: %s", name, why) }
	switch {
	case name == "":
		return bad("empty")
	case name == "." || name == "..":
		return bad("a relative path element")
	case strings.Contains(name, "/"):
		return bad("contains '/'")
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	case strings.ContainsFunc(name, refused):
		return bad("contains a character ZooKeeper refuses")
	}
	return nil
}

// refused reports the characters ZooKeeper's server refuses in a path. It checks UTF-16 units,
// so every character beyond U+FFFF (a surrogate pair) is refused too.
func refused(r rune) bool {
	return unicode.IsControl(r) || (r >= 0xD800 && r <= 0xF8FF) || r >= 0xFFF0
}

func newGUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("zklock: guid: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
