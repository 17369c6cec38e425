package zklock

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
)

const hint = "start the services with `make services`"

// netem sits between one Client and ZooKeeper as the Client's dialer. It records the session
// credentials from each connect response (go-zookeeper keeps the password unexported), cuts the
// network on demand, and drops one lock-node create's request or reply.
type netem struct {
	mu          sync.Mutex
	cut         bool
	conns       []*emConn
	sid         int64
	passwd      []byte
	dropRequest bool // the next lock-node create never reaches the server
	dropReply   bool // the next lock-node create is made, but its reply is lost
	dropXid     int32
	dropping    bool
	faults      int // faults injected so far
	// requests counts the requests sent, pings aside; notifications the watch events received.
	requests, notifications int
}

var errInjected = errors.New("netem: injected fault")

func (e *netem) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	e.mu.Lock()
	cut := e.cut
	e.mu.Unlock()
	if cut {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("netem: network cut")}
	}
	nc, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	c := &emConn{Conn: nc, e: e}
	e.mu.Lock()
	e.conns = append(e.conns, c)
	e.mu.Unlock()
	return c, nil
}

// cutNetwork closes the Client's connections and refuses new ones until heal.
func (e *netem) cutNetwork() {
	e.mu.Lock()
	e.cut = true
	conns := e.conns
	e.conns = nil
	e.mu.Unlock()
	for _, c := range conns {
		c.Conn.Close()
	}
}

func (e *netem) heal() {
	e.mu.Lock()
	e.cut = false
	e.mu.Unlock()
}

func (e *netem) session() (int64, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sid, bytes.Clone(e.passwd)
}

// counts returns the requests the Client has sent (pings aside) and the watch events it received.
func (e *netem) counts() (requests, notifications int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests, e.notifications
}

func (e *netem) injected() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.faults
}

// emConn is one connection through netem. go-zookeeper writes each request with one Write and
// reads from one goroutine, so Write sees whole packets and Read can work packet by packet.
type emConn struct {
	net.Conn
	e            *netem
	wroteConnect bool // touched only by the writing goroutine
	readConnect  bool // touched only by the reading goroutine
	rbuf         []byte
}

const (
	opCreate = 1
	opPing   = 11
	// xidWatchEvent is the xid of the packets that carry watch events.
	xidWatchEvent = -1
)

func (c *emConn) Write(b []byte) (int, error) {
	if !c.wroteConnect { // the connect request has no request header
		c.wroteConnect = true
		return c.Conn.Write(b)
	}
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) != opPing {
		c.e.mu.Lock()
		c.e.requests++
		c.e.mu.Unlock()
	}
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[8:12])) == opCreate && bytes.Contains(b, []byte(seqMarker)) {
		e := c.e
		e.mu.Lock()
		switch {
		case e.dropRequest:
			e.dropRequest = false
			e.faults++
			e.mu.Unlock()
			c.Conn.Close()
			return 0, &net.OpError{Op: "write", Net: "tcp", Err: errInjected}
		case e.dropReply:
			e.dropReply = false
			e.dropXid = int32(binary.BigEndian.Uint32(b[4:8]))
			e.dropping = true
		}
		e.mu.Unlock()
	}
	return c.Conn.Write(b)
}

func (c *emConn) Read(p []byte) (int, error) {
	if len(c.rbuf) == 0 {
		pkt, err := c.readPacket()
		if err != nil {
			return 0, err
		}
		c.rbuf = pkt
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

func (c *emConn) readPacket() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c.Conn, hdr[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c.Conn, body); err != nil {
		return nil, err
	}
	e := c.e
	if !c.readConnect {
		// ConnectResponse: protocolVersion int32, timeOut int32, sessionId int64, passwd buffer.
		c.readConnect = true
		if len(body) >= 20 {
			sid := int64(binary.BigEndian.Uint64(body[8:16]))
			if n := int(binary.BigEndian.Uint32(body[16:20])); sid != 0 && len(body) >= 20+n {
				e.mu.Lock()
				e.sid, e.passwd = sid, bytes.Clone(body[20:20+n])
				e.mu.Unlock()
			}
		}
	} else if len(body) >= 4 {
		xid := int32(binary.BigEndian.Uint32(body[:4]))
		e.mu.Lock()
		if xid == xidWatchEvent {
			e.notifications++
		}
		drop := e.dropping && xid == e.dropXid
		if drop {
			e.dropping = false
			e.faults++
		}
		e.mu.Unlock()
		if drop {
			c.Conn.Close()
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: errInjected}
		}
	}
	return append(hdr[:], body...), nil
}

// expireSession ends the session of the Client behind e the way the server ends a session whose
// client stayed away: it cuts the Client off, attaches to the session with its id and password
// from another connection, closes it there (the server deletes its ephemeral nodes at once), and
// lets the Client reconnect, which then learns that its session expired. Curator's test
// utilities kill sessions the same way; it takes milliseconds instead of a session timeout.
func expireSession(tb testing.TB, e *netem) {
	tb.Helper()
	e.cutNetwork()
	defer e.heal()
	sid, passwd := e.session()
	if sid == 0 {
		tb.Fatal("expireSession: no session recorded")
	}
	nc, err := net.DialTimeout("tcp", itest.ZKServers[0], 5*time.Second)
	if err != nil {
		tb.Fatalf("expireSession: dial: %v", err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))

	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd, readOnly.
	var req bytes.Buffer
	for _, v := range []any{int32(0), int64(0), int32(10000), sid, int32(len(passwd)), passwd, false} {
		_ = binary.Write(&req, binary.BigEndian, v)
	}
	resp := roundTrip(tb, nc, req.Bytes())
	if len(resp) < 16 || binary.BigEndian.Uint64(resp[8:16]) == 0 {
		tb.Fatalf("expireSession: server refused to attach to session %s", sessionHex(sid))
	}
	// closeSession: xid, type -11. Reply header: xid, zxid, err.
	var closeReq bytes.Buffer
	_ = binary.Write(&closeReq, binary.BigEndian, []int32{1, -11})
	resp = roundTrip(tb, nc, closeReq.Bytes())
	if len(resp) < 16 || binary.BigEndian.Uint32(resp[12:16]) != 0 {
		tb.Fatalf("expireSession: closeSession failed: % x", resp)
	}
}

func roundTrip(tb testing.TB, nc net.Conn, body []byte) []byte {
	tb.Helper()
	pkt := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := nc.Write(append(pkt, body...)); err != nil {
		tb.Fatalf("expireSession: write: %v", err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		tb.Fatalf("expireSession: read: %v", err)
	}
	resp := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(nc, resp); err != nil {
		tb.Fatalf("expireSession: read: %v", err)
	}
	return resp
}

// newClient connects a Client through a netem of its own and closes it when the test ends.
func newClient(tb testing.TB, o Options) (*Client, *netem) {
	tb.Helper()
	itest.Integration(tb)
	e := &netem{}
	o.test.dialer = e.dial
	if o.Logger == nil {
		o.Logger = itest.Logger()
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 15*time.Second)
	defer cancel()
	c, err := Connect(ctx, itest.ZKServers, o)
	if err != nil {
		tb.Fatalf("%v (%s)", err, hint)
	}
	tb.Cleanup(c.Close)
	return c, e
}

// rawConn is a plain go-zookeeper connection for looking at and meddling with the tree.
func rawConn(tb testing.TB) *zk.Conn {
	tb.Helper()
	itest.Integration(tb)
	conn, _, err := zk.Connect(itest.ZKServers, 10*time.Second,
		zk.WithLogger(zkLogger{itest.Logger()}), zk.WithLogInfo(false))
	if err != nil {
		tb.Fatalf("zk.Connect: %v", err)
	}
	tb.Cleanup(conn.Close)
	itest.Eventually(tb, 15*time.Second, func() (bool, string) {
		return conn.State() == zk.StateHasSession, fmt.Sprintf("no ZooKeeper session (%s)", hint)
	})
	return conn
}

// testRoot returns a root of this test's own and deletes its tree when the test ends.
func testRoot(tb testing.TB) string {
	tb.Helper()
	root := "/seckill-test/zklock-" + itest.Suffix(10)
	conn := rawConn(tb)
	tb.Cleanup(func() {
		if err := deleteTree(conn, root); err != nil && !errors.Is(err, zk.ErrNoNode) {
			tb.Logf("delete %s: %v", root, err)
		}
	})
	return root
}

func deleteTree(conn *zk.Conn, p string) error {
	children, _, err := conn.Children(p)
	if err != nil {
		return err
	}
	for _, child := range children {
		if err := deleteTree(conn, p+"/"+child); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return conn.Delete(p, -1)
}

// queue lists parent's lock nodes in grant order.
func queue(tb testing.TB, conn *zk.Conn, parent string) []string {
	tb.Helper()
	// conn's server may be a follower of an ensemble that has not applied another session's
	// latest writes yet (ZooKeeper orders each session's view, not reads across sessions): SYNC
	// makes it catch up with the leader first (make test-topology saw a deleted node listed).
	if _, err := conn.Sync(parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
		tb.Fatalf("sync %s: %v", parent, err)
	}
	children, _, err := conn.Children(parent)
	if err != nil {
		tb.Fatalf("list %s: %v", parent, err)
	}
	return sortQueue(children)
}

// fakeNode makes a lock node under parent as another process would, from conn's session.
func fakeNode(tb testing.TB, conn *zk.Conn, parent string) string {
	tb.Helper()
	if _, err := conn.Create(path.Dir(parent), nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		tb.Fatal(err)
	}
	if _, err := conn.Create(parent, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		tb.Fatal(err)
	}
	guid, err := newGUID()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := conn.Create(parent+"/"+protectedPrefix+guid+seqMarker, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func mustAcquire(tb testing.TB, c *Client, name string) *Lease {
	tb.Helper()
	return locktest.MustAcquire(tb, c.Acquire, name)
}

func mustRelease(tb testing.TB, l *Lease) {
	tb.Helper()
	if err := l.Release(tb.Context()); err != nil {
		tb.Fatalf("Release(%s) = %v", l.path, err)
	}
}
