package zklock

import (
	"encoding/binary"
	"net"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"
)

// A ZooKeeper server refuses a client that has seen a later zxid than its own last one: the
// client's connect request carries the last zxid it saw, and a server behind it closes the
// connection before it even looks at the session, so that a client never reads older data than
// it has read before (a lagging follower; the client tries the next server). After the
// ensemble's data was wiped (or restored from a backup) every server is behind for good, and
// go-zookeeper, which forgets the zxid only when a server says the session expired, never hears
// that: it retries for ever, and every lock call refuses with no session, long after ZooKeeper is
// back.
//
// So the Client watches its handshakes: a TCP connection that closes before the session is
// established is a refusal. Once it has been without a session for longer than the session
// timeout, and been refused meanwhile, it sends its next connect request with zxid 0. The
// server then looks at the session, says it expired (new data knows none of the old), and
// go-zookeeper starts a new session, forgetting the old zxid. The wait is what keeps ZooKeeper's
// guarantee where it matters: after a session timeout the old session is over anyway (its leases
// were reported lost long before, after the grace), and a lagging follower refuses for moments,
// not for a whole session timeout while others serve. If the old session is still alive on the
// server (every server was down and came back with its sessions), forgetting the zxid only skips
// the check, and the session goes on.

// countRefusalLocked follows a non-session event's state: a connection made (Connected) that
// is lost (Disconnected) before a session is established is counted as refused. c.mu is held.
func (c *Client) countRefusalLocked(state zk.State) {
	switch state {
	case zk.StateConnected:
		c.handshaking = true
	case zk.StateDisconnected:
		if c.handshaking {
			c.refusals++
		}
		c.handshaking = false
	}
}

// forgetZxid reports whether the next connect request should claim zxid 0: without a session for
// longer than the session timeout, and refused by a server meanwhile.
func (c *Client) forgetZxid() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.hooks.keepZxid && !c.isUp && c.refusals > 0 && !c.downAt.IsZero() && time.Since(c.downAt) > c.timeout
}

// handshakeConn is a connection to a server as go-zookeeper uses it: its first write is the
// connect request (length, protocol version, last zxid seen, timeout, session id, password),
// written whole.
type handshakeConn struct {
	net.Conn
	c     *Client
	wrote bool // only go-zookeeper's writing goroutine touches it
}

// lastZxidAt is where the connect request holds the last zxid seen: after the length prefix and
// the protocol version.
const lastZxidAt = 8

func (h *handshakeConn) Write(b []byte) (int, error) {
	if h.wrote || len(b) < lastZxidAt+8 {
		return h.Conn.Write(b)
	}
	h.wrote = true
	if zxid := binary.BigEndian.Uint64(b[lastZxidAt:]); zxid != 0 && h.c.forgetZxid() {
		h.c.log.Warn("ZooKeeper refuses this client, without a session for longer than the session timeout: if the client saw later data than the servers have (wiped or restored), it never gets one; asking for a session as a new client",
			"last_zxid", zxid, "server", h.RemoteAddr().String())
		b = slices.Clone(b)
		binary.BigEndian.PutUint64(b[lastZxidAt:], 0)
	}
	return h.Conn.Write(b)
}
