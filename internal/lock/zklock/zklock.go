// Package zklock is a distributed mutual-exclusion lock on ZooKeeper with fencing tokens: the
// "Locks" recipe of the ZooKeeper documentation (ephemeral-sequential children, the lowest holds,
// each waiter watches only its immediate predecessor) made safe the way Apache Curator's
// InterProcessMutex is. It knows nothing of products or sales; internal/stock wraps it.
//
// What it adds over go-zookeeper's built-in zk.Lock, and why it exists:
//   - every call takes a ctx (go-zookeeper takes none: waits select on the watch and ctx.Done());
//   - protected creates: each child's name carries a GUID, so a create whose reply was lost is
//     found again by listing instead of being made twice and orphaned;
//   - the own node is deleted on every path that gives up (ctx done, session expired, any error),
//     with a fresh, bounded context and in the background if the server is unreachable;
//   - it fails fast: without a session for Options.FailAfter (100 ms), calls refuse at once with
//     lock.ErrUnavailable instead of waiting out their ctx, and recover once the session is back;
//   - Lease.Lost() reports a lost lock (session expired, disconnected too long, node deleted);
//   - Lease.Token() is the node's czxid: a fencing token that strictly increases with every grant
//     of a name, even if the lock's parent node is deleted and its sequence numbers restart;
//   - Lease.Issuer() names the ensemble's data that counted the token (ensemble.go), since a
//     wiped ensemble counts czxids from zero again, and a Client that every server refuses for
//     having seen later data forgets what it saw after a session timeout (handshake.go).
//
// For the lock zoo it also makes two variants on the same session and code: a Mutex whose waiters
// all watch the whole queue (herd.go: the naive lock, and its herd effect) and a Reentrant lock
// that an owner named in ctx takes again at once (reentrant.go: Curator's InterProcessMutex).
//
// It must never delete a node it did not create (its nodes are named by a GUID of their own grant),
// never grant a lease without a live session, and never be trusted without fencing: a holder that
// stalls past its session may still write, so the protected storage must refuse stale tokens.
//
// The Client dials ZooKeeper itself (Connect) rather than taking a caller's *zk.Conn: go-zookeeper
// drops session events once the 6-slot channel Connect returns is full, while an event callback,
// which must be installed at dial time, sees every one; and the Client must own the connection's
// logger (go-zookeeper's default prints to stdout) and its Close.
package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// ErrClosed is returned by calls on a Client after Close.
var ErrClosed = errors.New("zklock: client closed")

// Defaults of Options.
const (
	DefaultRoot           = "/seckill/locks"
	DefaultSessionTimeout = 10 * time.Second
	DefaultFailAfter      = 100 * time.Millisecond
)

// Options configures a Client. The zero value is usable.
type Options struct {
	// Root is the persistent node under which each lock name gets a parent node
	// (Root/<name>/). Default DefaultRoot.
	Root string
	// SessionTimeout is the ZooKeeper session timeout asked for. The server clamps it to its
	// min/max (by default 2 and 20 tickTime: 4 s and 40 s) without go-zookeeper telling the
	// client, so stay inside the server's range: Lost() timing relies on this value. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// FailAfter is how long the Client may be without a ZooKeeper session before it stops
	// waiting for one: from then on Acquire and TryAcquire refuse at once with an error wrapping
	// lock.ErrUnavailable, and the calls in progress give up with it, until a session is back.
	// Within it, a call waits for the session: reconnecting to another server of an ensemble
	// takes milliseconds, a server that is down takes seconds, and a buyer is better told so
	// at once than after the whole lock wait. Default DefaultFailAfter; negative: no wait at all.
	FailAfter time.Duration
	// EnsembleNode is the persistent node whose czxid, ctime and content name the data of the
	// ensemble, which every Lease reports as its Issuer: tokens of other data (a wiped or
	// replaced ensemble) are not comparable with its own. The first acquisition on data without
	// it creates it. One per ensemble, shared by every Client on it whatever its Root. Default
	// DefaultEnsembleNode.
	EnsembleNode string
	// Logger receives the Client's and go-zookeeper's messages. Default: discard.
	Logger *slog.Logger

	// test holds hooks that only this package's tests set.
	test testHooks
}

// testHooks let tests inject faults and observe steps that no ZooKeeper state reveals.
type testHooks struct {
	dialer      zk.Dialer
	keepZxid    bool                           // never forget the last zxid (handshake.go): the control of its test
	beforeWatch func(pred string)              // after listing the children, before watching pred
	watchFired  func(pred string, ev zk.Event) // the watch on pred delivered ev
	recovered   func(found string)             // a create with unknown outcome was resolved by GUID
}

// Client acquires locks on one ZooKeeper session (renewed transparently by go-zookeeper after an
// expiry; leases of the expired session are lost). It is safe for concurrent use.
type Client struct {
	conn *zk.Conn
	log  *slog.Logger
	root string
	// ensembleNode names the data of the ensemble (Options.EnsembleNode, ensemble.go).
	ensembleNode string
	timeout      time.Duration // session timeout asked for
	grace        time.Duration // disconnection after which leases are reported lost
	failAft      time.Duration // disconnection after which calls refuse (Options.FailAfter)
	acl          []zk.ACL
	hooks        testHooks

	mu     sync.Mutex
	sess   *session      // the current session; nil before the first
	up     chan struct{} // closed while a session is established
	isUp   bool
	downAt time.Time // when the session was last seen disconnected; zero while up
	// unreachable is closed once the Client has been without a session for failAft; a session
	// coming back installs an open one for the next outage.
	unreachable chan struct{}
	closed      bool
	// handshaking is set while a TCP connection waits for the server's answer to its connect
	// request; refusals counts the connections closed in that state since the last session
	// (handshake.go).
	handshaking bool
	refusals    int

	kick      chan struct{} // wakes the monitor after a session event
	done      chan struct{} // closed by Close
	bg        context.Context
	cancelBg  context.CancelFunc
	wg        sync.WaitGroup // every goroutine the Client starts
	closeOnce sync.Once
}

// session is one ZooKeeper session as the Client sees it. gone is closed once leases of this
// session can no longer be trusted; why says why.
type session struct {
	id   int64
	gone chan struct{}
	once sync.Once
	why  string // written once, before gone is closed
	// expired, written once before gone is closed, says the server ended the session (expired,
	// or replaced by another): its nodes are gone. Otherwise they may still exist.
	expired bool
}

func newSession(id int64) *session { return &session{id: id, gone: make(chan struct{})} }

func (s *session) end(why string) { s.endAs(why, false) }

// expire ends the session as one the server no longer has.
func (s *session) expire(why string) { s.endAs(why, true) }

func (s *session) endAs(why string, expired bool) {
	s.once.Do(func() {
		s.why, s.expired = why, expired
		close(s.gone)
	})
}

// serverDropped reports whether the session ended because the server no longer has it.
func (s *session) serverDropped() bool {
	select {
	case <-s.gone:
		return s.expired
	default:
		return false
	}
}

func (s *session) ended() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// resolved returns o with its defaults filled in (FailAfter < 0 becomes 0: fail at once), or why
// it is invalid.
func (o Options) resolved() (Options, error) {
	o.Root = cmp.Or(o.Root, DefaultRoot)
	if !validPath(o.Root) {
		return o, fmt.Errorf("zklock: root %q must be an absolute ZooKeeper path without a trailing slash", o.Root)
	}
	o.EnsembleNode = cmp.Or(o.EnsembleNode, DefaultEnsembleNode)
	if !validPath(o.EnsembleNode) {
		return o, fmt.Errorf("zklock: ensemble node %q must be an absolute ZooKeeper path without a trailing slash", o.EnsembleNode)
	}
	o.SessionTimeout = cmp.Or(o.SessionTimeout, DefaultSessionTimeout)
	if o.SessionTimeout < time.Second {
		return o, fmt.Errorf("zklock: session timeout %s is below 1s", o.SessionTimeout)
	}
	switch {
	case o.FailAfter == 0:
		o.FailAfter = DefaultFailAfter
	case o.FailAfter < 0:
		o.FailAfter = 0
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// Connect dials the ZooKeeper ensemble and waits, until ctx ends, for the first session. Close
// the Client when done: that closes the session, which deletes every node the Client holds.
func Connect(ctx context.Context, servers []string, opts Options) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("zklock: no ZooKeeper servers")
	}
	o, err := opts.resolved()
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	timeout := o.SessionTimeout
	c := &Client{
		log:          o.Logger.With("component", "zklock"),
		root:         o.Root,
		ensembleNode: o.EnsembleNode,
		timeout:      timeout,
		// go-zookeeper declares the connection dead after 2/3 of the session timeout without a
		// packet; the server expires the session a full timeout after the last packet it got.
		// So when the client sees the disconnection, at least a third of the timeout is left
		// before the server can expire the session and grant the lock to someone else.
		grace:       timeout / 3,
		failAft:     o.FailAfter,
		acl:         zk.WorldACL(zk.PermAll),
		hooks:       o.test,
		up:          make(chan struct{}),
		unreachable: make(chan struct{}),
		kick:        make(chan struct{}, 1),
		done:        make(chan struct{}),
		bg:          bg,
		cancelBg:    cancel,
	}
	dial := o.test.dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		nc, err := dial(network, addr, timeout)
		if err != nil {
			return nil, err
		}
		return &handshakeConn{Conn: nc, c: c}, nil
	}
	// onEvent reads c.conn under c.mu; holding it here makes an event that arrives before
	// zk.Connect returns wait for the assignment.
	c.mu.Lock()
	conn, _, err := zk.Connect(servers, timeout,
		zk.WithDialer(dialer),
		zk.WithLogger(zkLogger{c.log}),
		zk.WithLogInfo(false), // session transitions are logged by onEvent
		zk.WithEventCallback(c.onEvent),
	)
	c.conn = conn
	c.mu.Unlock()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	c.goOwned(c.monitor)
	if err := c.Ping(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("zklock: connect %v: %w", servers, err)
	}
	return c, nil
}

// hasSession reports whether the Client has a ZooKeeper session now.
func (c *Client) hasSession() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.isUp
}

// errNoSession is why calls refuse while the Client has been without a session for FailAfter.
var errNoSession = fmt.Errorf("%w: no ZooKeeper session", lock.ErrUnavailable)

// awaitSession returns nil at once while the Client has a session. Without one, it waits for the
// session to come back until the Client has been without one for FailAfter, and then returns
// an error wrapping lock.ErrUnavailable, or, if patient, for as long as it takes; ctx ending
// first returns ctx.Err().
func (c *Client) awaitSession(ctx context.Context, patient bool) error {
	c.mu.Lock()
	up, unreachable, isUp, closed := c.up, c.unreachable, c.isUp, c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case isUp:
		return nil
	case patient:
		unreachable = nil
	}
	select {
	case <-up:
		if patient {
			// Background cleanup is in no hurry: let go-zookeeper re-send the watches of the
			// reconnected session before replies arrive (see reconnectSettle).
			return sleepCtx(ctx, c.done, reconnectSettle)
		}
		return nil
	case <-unreachable:
		return errNoSession
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return ErrClosed
	}
}

// reconnectSettle is how long background cleanup waits after a session comes back before it
// sends a request. go-zookeeper v1.0.4 re-sends a reconnected session's watches while its
// receive loop already runs, and both touch Conn.lastZxid without a lock (go-zookeeper/zk#35):
// a reply arriving in that instant is a data race. Buyers' calls cannot wait for it; cleanup can.
const reconnectSettle = 250 * time.Millisecond

// sleepCtx waits for d; it returns ctx.Err() or ErrClosed if either ends first.
func sleepCtx(ctx context.Context, done <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-done:
		return ErrClosed
	}
}

// unreachableCh returns the channel that closes once the Client has been without a session for
// FailAfter: closed already during such an outage, or the one the next outage will close.
func (c *Client) unreachableCh() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.unreachable
}

// Ping waits until the Client has a ZooKeeper session or ctx ends. It returns at once while the
// session is established, so it serves as a readiness check.
func (c *Client) Ping(ctx context.Context) error {
	c.mu.Lock()
	up, closed := c.up, c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	select {
	case <-up:
		return nil
	case <-c.done:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("zklock: no ZooKeeper session: %w", ctx.Err())
	}
}

// Close closes the session, which makes the server delete every node of this Client, marks every
// lease lost and waits for the Client's goroutines. Calls after Close return ErrClosed.
func (c *Client) Close() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		sess := c.sess
		c.mu.Unlock()
		close(c.done)
		c.cancelBg()
		if sess != nil {
			sess.end("client closed")
		}
		c.conn.Close()
		c.wg.Wait()
	})
}

// Locker returns c as a lock.Locker.
func (c *Client) Locker() lock.Locker { return lock.Adapt[*Lease](c) }

var _ lock.Issued = (*Lease)(nil)

// goOwned runs f on a goroutine that Close waits for; it returns false, running nothing, once
// the Client is closed.
func (c *Client) goOwned(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// currentSession returns the session leases are granted on now, or nil if there is none.
func (c *Client) currentSession() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil || !c.isUp || c.sess.ended() {
		return nil
	}
	return c.sess
}

// onEvent runs on go-zookeeper's goroutines for every event, in order; it must not block or call
// into the connection. go-zookeeper stores the session id before it reports StateHasSession,
// from the same goroutine, so SessionID() here is the id of the session being reported.
func (c *Client) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	var logf func()
	c.mu.Lock()
	switch ev.State {
	case zk.StateHasSession:
		c.handshaking, c.refusals = false, 0
		id := c.conn.SessionID()
		if c.sess == nil || c.sess.id != id || c.sess.ended() {
			if c.sess != nil && c.sess.id != id {
				c.sess.expire("session replaced by " + sessionHex(id))
			}
			c.sess = newSession(id)
		}
		if !c.isUp {
			close(c.up)
			c.isUp = true
		}
		select {
		case <-c.unreachable:
			c.unreachable = make(chan struct{})
		default:
		}
		c.downAt = time.Time{}
		logf = func() { c.log.Info("zookeeper session established", "session", sessionHex(id), "server", ev.Server) }
	case zk.StateExpired:
		c.handshaking = false
		if c.sess != nil {
			c.sess.expire("session expired")
			old := c.sess.id
			logf = func() { c.log.Warn("zookeeper session expired: its leases are lost", "session", sessionHex(old)) }
		}
		c.markDownLocked()
	default: // Disconnected, Connecting, Connected (TCP only, no session yet)
		c.countRefusalLocked(ev.State)
		if c.isUp && !c.closed {
			logf = func() { c.log.Warn("zookeeper disconnected", "state", ev.State.String(), "server", ev.Server) }
		}
		c.markDownLocked()
	}
	c.mu.Unlock()
	if logf != nil {
		logf()
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *Client) markDownLocked() {
	if c.isUp {
		c.up = make(chan struct{})
		c.isUp = false
		c.downAt = time.Now()
	}
}

// monitor watches the time without a session. After FailAfter it declares ZooKeeper
// unreachable, so that calls refuse at once instead of waiting; after the grace it ends the
// current session's leases: the server may expire the session from then on, and a partitioned
// client would only learn of that expiry when it reconnects.
func (c *Client) monitor() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		c.mu.Lock()
		sess, downAt := c.sess, c.downAt
		var next time.Duration // until the next deadline; 0: none
		declared := false
		if !downAt.IsZero() {
			select {
			case <-c.unreachable:
			default:
				if left := c.failAft - time.Since(downAt); left > 0 {
					next = left
				} else {
					close(c.unreachable)
					declared = true
				}
			}
		}
		c.mu.Unlock()
		if declared {
			c.log.Warn("zookeeper unreachable: lock calls refuse until the session is back",
				"down_for", time.Since(downAt).Round(time.Millisecond))
		}
		if sess != nil && !sess.ended() && !downAt.IsZero() {
			if left := c.grace - time.Since(downAt); left > 0 {
				next = minPositive(next, left)
			} else {
				sess.end(fmt.Sprintf("disconnected longer than the grace of %s", c.grace))
				c.log.Warn("zookeeper disconnected longer than the lease grace: leases are lost",
					"session", sessionHex(sess.id), "grace", c.grace)
			}
		}
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-c.kick:
		case <-timer.C:
		case <-c.done:
			return
		}
	}
}

// minPositive is the smaller of a and b, where 0 means none.
func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func sessionHex(id int64) string { return fmt.Sprintf("0x%x", uint64(id)) }

// zkLogger adapts go-zookeeper's printf logging to slog. With WithLogInfo(false) only its
// warnings and errors (failed dials, terminated loops) come through.
type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) {
	l.log.Warn("zookeeper client", "detail", fmt.Sprintf(format, args...))
}

// transient reports whether err leaves the outcome of a request unknown and a retry sensible:
// the connection broke, no server answered, or the session moved.
func transient(err error) bool {
	if errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrSessionMoved) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// retry runs op until it returns nil or a non-transient error, ctx ends, the Client closes or
// ZooKeeper has been unreachable for FailAfter, backing off between attempts and sending none
// while there is no session (go-zookeeper would hold it until the next reconnect). A ctx end or
// an outage is returned wrapping both its cause and op's last error. It serves callers waiting
// for an answer; cleanup that must outlast an outage uses retryThrough.
func (c *Client) retry(ctx context.Context, op func() error) error {
	return c.retryOp(ctx, false, op)
}

// retryThrough is retry for cleanup in the background: it waits for the session to come back
// rather than giving up when ZooKeeper is unreachable, until ctx ends or the Client closes.
func (c *Client) retryThrough(ctx context.Context, op func() error) error {
	return c.retryOp(ctx, true, op)
}

func (c *Client) retryOp(ctx context.Context, patient bool, op func() error) error {
	backoff := 20 * time.Millisecond
	var last error // op's last error
	for {
		if err := c.awaitSession(ctx, patient); err != nil {
			if last == nil || errors.Is(err, ErrClosed) {
				return err
			}
			return fmt.Errorf("%w (last error: %w)", err, last)
		}
		last = op()
		if last == nil || !transient(last) {
			return last
		}
		t := time.NewTimer(backoff)
		var unreachable <-chan struct{}
		if !patient {
			unreachable = c.unreachableCh()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), last)
		case <-unreachable:
			t.Stop()
			return fmt.Errorf("%w (last error: %w)", errNoSession, last)
		case <-c.done:
			t.Stop()
			return ErrClosed
		}
		backoff = min(2*backoff, time.Second)
	}
}
