//go:build linux

package viewers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The reactor holds the event streams of a crowd the way wrk holds its connections: a few
// goroutines, each with an epoll instance and its share of the sockets, reading a socket once
// when it has data. A goroutine per stream costs two read system calls per event (Go's netpoller
// reads until "nothing yet", then parks the goroutine) and two wakes; thousands of them shared
// the replicas' two cores, so the crowd's own cost came off the sale it measured (issue #28:
// 0.34 cores for 5,000 streams, more than the replicas' side of them). The reactor reads each
// event with one system call and wakes no goroutine for it.
//
// It speaks the same protocol as viewer.stream: GET /api/v1/events?product_id=N with
// Last-Event-ID after a drop, the stream's retry (1–3 s, jittered, when it set none), the next
// target after a connection that fails or is refused (Retry-After waited out), a stream silent
// for StreamSilence dropped; and it records the same Reads, events and figures.

const reactorTick = 50 * time.Millisecond // how often connections due are started and silences checked

// reactorGather is how long a reactor lets events gather after it has read a batch that did not
// fill its buffer, before it asks epoll again: each wait then returns the sockets that received
// meanwhile, tens at a time, instead of waking for each event as it comes (a replica's streams
// write at moments spread over their period). A viewer's lag is measured up to this much late:
// the figures err on the slow side, never the fast one.
const reactorGather = 5 * time.Millisecond

// rconn is one viewer's stream in a reactor.
type rconn struct {
	v    *viewer
	sse  *SSEReader
	fd   int // -1 between connections
	host string

	phase     int       // connecting, sent (reading the head), body
	t0        time.Time // when the connection began
	next      time.Time // when to connect again (fd -1)
	lastRead  time.Time
	head      []byte
	read      Read // the connection's Read, recorded at its first event (or its end)
	first     bool
	comments  int
	chunk     int // bytes of the current chunk still to read; -1: a size line is next; -2: its CRLF
	chunkLine []byte
	connected bool
}

const (
	phaseConnecting = iota
	phaseHead
	phaseBody
)

type reactor struct {
	crowd *Crowd
	epfd  int
	conns map[int]*rconn // by fd
	all   []*rconn
	buf   []byte
	addrs map[string]*syscall.SockaddrInet4
}

// startReactors starts the stream viewers on reactors, when this system has them; false sends
// the crowd to a goroutine per viewer.
func (c *Crowd) startReactors(ctx context.Context) (bool, error) {
	addrs := map[string]*syscall.SockaddrInet4{}
	for _, h := range c.hosts {
		a, err := net.ResolveTCPAddr("tcp4", h)
		if err != nil || a.IP.To4() == nil {
			return false, nil // not an IPv4 address: the goroutines' dialer copes
		}
		sa := &syscall.SockaddrInet4{Port: a.Port}
		copy(sa.Addr[:], a.IP.To4())
		addrs[h] = sa
	}
	n := 2
	rs := make([]*reactor, n)
	for i := range rs {
		epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			for _, r := range rs[:i] {
				syscall.Close(r.epfd)
			}
			return false, fmt.Errorf("viewers: epoll: %w", err)
		}
		own := map[string]*syscall.SockaddrInet4{} // a Sockaddr is written by each Connect: one set per reactor
		for h, a := range addrs {
			own[h] = &syscall.SockaddrInet4{Port: a.Port, Addr: a.Addr}
		}
		rs[i] = &reactor{crowd: c, epfd: epfd, conns: map[int]*rconn{}, buf: make([]byte, 64<<10), addrs: own}
	}
	now := c.cfg.Now()
	for i, v := range c.viewers {
		v.events = map[string]int{}
		rc := &rconn{v: v, sse: NewSSEReader(strings.NewReader("")), fd: -1,
			next: now.Add(v.jitter(time.Second, 0, 1))} // viewers arrive within a second
		rs[i%n].all = append(rs[i%n].all, rc)
	}
	for _, r := range rs {
		c.wg.Go(func() { r.run(ctx) })
	}
	return true, nil
}

func (r *reactor) run(ctx context.Context) {
	defer syscall.Close(r.epfd)
	defer func() {
		for _, rc := range r.all {
			r.end(rc, nil, true)
		}
	}()
	events := make([]syscall.EpollEvent, 256)
	lastTick := time.Time{}
	for ctx.Err() == nil {
		if now := r.crowd.cfg.Now(); now.Sub(lastTick) >= reactorTick {
			lastTick = now
			r.tick(ctx, now)
		}
		n, err := syscall.EpollWait(r.epfd, events, int(reactorTick/time.Millisecond))
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return
		}
		for _, ev := range events[:max(n, 0)] {
			if rc := r.conns[int(ev.Fd)]; rc != nil {
				r.ready(ctx, rc, ev.Events)
			}
		}
		if n > 0 && n < len(events) {
			time.Sleep(reactorGather)
		}
	}
}

// tick starts the connections that are due and drops the streams silent for too long.
func (r *reactor) tick(ctx context.Context, now time.Time) {
	cfg := &r.crowd.cfg
	for _, rc := range r.all {
		switch {
		case rc.fd < 0 && !now.Before(rc.next):
			r.connect(rc, now)
		case rc.fd >= 0 && rc.phase != phaseBody && now.Sub(rc.t0) > cfg.Timeout:
			r.fail(rc, now, errors.New("i/o timeout"))
		case rc.fd >= 0 && rc.phase == phaseBody && now.Sub(rc.lastRead) > cfg.StreamSilence:
			r.end(rc, errors.New("read: i/o timeout"), ctx.Err() != nil)
		}
	}
}

// connect opens viewer rc's next connection (non-blocking; ready finishes it).
func (r *reactor) connect(rc *rconn, now time.Time) {
	v := rc.v
	rc.host = v.crowd.hosts[v.target]
	rc.t0, rc.phase, rc.head = now, phaseConnecting, rc.head[:0]
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		r.refused(rc, now, err)
		return
	}
	if v.crowd.cfg.OwnAddresses {
		la := localAddr(v.i)
		sa := &syscall.SockaddrInet4{}
		copy(sa.Addr[:], la.IP.To4())
		if err := syscall.Bind(fd, sa); err != nil {
			syscall.Close(fd)
			r.refused(rc, now, err)
			return
		}
	}
	if err := syscall.Connect(fd, r.addrs[rc.host]); err != nil && !errors.Is(err, syscall.EINPROGRESS) {
		syscall.Close(fd)
		r.refused(rc, now, err)
		return
	}
	rc.fd = fd
	r.conns[fd] = rc
	ev := syscall.EpollEvent{Events: syscall.EPOLLOUT | syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	if err := syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		r.fail(rc, now, err)
	}
}

// ready handles what epoll says of rc's socket.
func (r *reactor) ready(ctx context.Context, rc *rconn, events uint32) {
	now := r.crowd.cfg.Now()
	if rc.phase == phaseConnecting {
		if errno, err := syscall.GetsockoptInt(rc.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || errno != 0 {
			if err == nil {
				err = syscall.Errno(errno)
			}
			r.fail(rc, now, err)
			return
		}
		if events&syscall.EPOLLOUT == 0 {
			return
		}
		if err := r.send(rc); err != nil {
			r.fail(rc, now, err)
			return
		}
		rc.phase = phaseHead
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(rc.fd)}
		if err := syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_MOD, rc.fd, &ev); err != nil {
			r.fail(rc, now, err)
		}
		return
	}
	n, err := syscall.Read(rc.fd, r.buf)
	switch {
	case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
		return
	case err != nil:
		r.lost(ctx, rc, now, err)
		return
	case n == 0:
		r.lost(ctx, rc, now, io.EOF)
		return
	}
	rc.lastRead = now
	if rc.phase == phaseHead {
		r.headBytes(ctx, rc, now, r.buf[:n])
		return
	}
	if err := r.body(rc, now, r.buf[:n]); err != nil {
		r.end(rc, err, ctx.Err() != nil)
	}
}

// lost ends a connection whose socket failed or closed: before the head, a failed connection;
// after, the stream's end.
func (r *reactor) lost(ctx context.Context, rc *rconn, now time.Time, err error) {
	if rc.phase == phaseBody {
		r.end(rc, err, ctx.Err() != nil)
		return
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	r.fail(rc, now, err)
}

// send writes the request (a few hundred bytes into an empty send buffer: one write).
func (r *reactor) send(rc *rconn) error {
	var b strings.Builder
	b.WriteString("GET " + r.crowd.paths.events + " HTTP/1.1\r\nHost: " + rc.host +
		"\r\nUser-Agent: seckill-loadtest-viewer\r\nAccept: text/event-stream\r\nCache-Control: no-cache\r\n")
	if id := rc.sse.LastEventID(); id != "" {
		b.WriteString("Last-Event-ID: " + id + "\r\n")
	}
	b.WriteString("\r\n")
	n, err := syscall.Write(rc.fd, []byte(b.String()))
	if err == nil && n < b.Len() {
		err = io.ErrShortWrite
	}
	return err
}

// headBytes gathers the answer's head; once whole, a 200 event stream goes on to the body, any
// other answer is a refusal.
func (r *reactor) headBytes(ctx context.Context, rc *rconn, now time.Time, p []byte) {
	rc.head = append(rc.head, p...)
	end := bytes.Index(rc.head, []byte("\r\n\r\n"))
	if end < 0 {
		if len(rc.head) > 64<<10 {
			r.fail(rc, now, errors.New("answer head over 64 KiB"))
		}
		return
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(rc.head[:end+4])), nil)
	if err != nil {
		r.fail(rc, now, err)
		return
	}
	rest := rc.head[end+4:]
	v := rc.v
	rc.read = Read{At: now, Latency: now.Sub(rc.t0), Status: res.StatusCode, Kind: KindStream}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		v.reads = append(v.reads, rc.read)
		v.fail("%s: %d %s %s", rc.host, res.StatusCode, res.Header.Get("Content-Type"), strings.TrimSpace(string(rest[:min(len(rest), 200)])))
		wait := time.Duration(0)
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			wait = time.Duration(s)*time.Second + v.jitter(time.Second, 0, 1)
		}
		r.closeConn(rc)
		v.target = (v.target + 1) % len(v.crowd.hosts)
		r.again(rc, now, wait)
		return
	}
	if !strings.EqualFold(res.Header.Get("Transfer-Encoding"), "chunked") && len(res.TransferEncoding) == 0 {
		r.fail(rc, now, errors.New("an event stream not chunked"))
		return
	}
	rc.phase, rc.first, rc.chunk, rc.chunkLine, rc.connected = phaseBody, true, -1, rc.chunkLine[:0], true
	rc.comments = rc.sse.Comments()
	rc.sse.Continue(strings.NewReader(""))
	v.crowd.connected.Add(1)
	if err := r.body(rc, now, rest); err != nil {
		r.end(rc, err, ctx.Err() != nil)
	}
}

// body decodes the chunked body's bytes p and hands their data to the stream's events.
func (r *reactor) body(rc *rconn, now time.Time, p []byte) error {
	for len(p) > 0 {
		switch {
		case rc.chunk > 0:
			n := min(rc.chunk, len(p))
			r.events(rc, now, p[:n])
			rc.chunk -= n
			p = p[n:]
			if rc.chunk == 0 {
				rc.chunk = -2
			}
		case rc.chunk == -2 || rc.chunk == -1:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				rc.chunkLine = append(rc.chunkLine, p...)
				if len(rc.chunkLine) > 1024 {
					return errors.New("chunk line over 1 KiB")
				}
				return nil
			}
			line := bytes.TrimRight(append(rc.chunkLine, p[:i]...), "\r")
			rc.chunkLine = rc.chunkLine[:0]
			p = p[i+1:]
			if rc.chunk == -2 { // the CRLF after a chunk's data
				if len(line) != 0 {
					return errors.New("malformed chunk end")
				}
				rc.chunk = -1
				continue
			}
			size, _, _ := bytes.Cut(line, []byte(";"))
			n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
			switch {
			case err != nil || n < 0:
				return fmt.Errorf("malformed chunk size %q", line)
			case n == 0:
				return io.EOF // the stream's end
			}
			rc.chunk = int(n)
		}
	}
	return nil
}

// events feeds the stream's bytes to its SSE reader and records each event as viewer.stream does.
func (r *reactor) events(rc *rconn, now time.Time, p []byte) {
	v := rc.v
	rc.sse.Feed(p, func(typ string, data []byte) {
		if rc.first {
			rc.first = false
			rc.read.At, rc.read.Latency = now, now.Sub(rc.t0)
			v.reads = append(v.reads, rc.read)
		}
		v.events[typ]++
		v.eventTimes = append(v.eventTimes, now)
		if f, ok := eventFigures(data, r.crowd.cfg.ProductID); ok {
			v.saw(now, f)
		}
		if typ == "sold_out" {
			v.sawSoldOut(now)
		}
	})
}

// end closes a stream that was read: its end (err, io.EOF for a clean one) is a drop unless the
// crowd stops; the viewer comes back after the stream's retry.
func (r *reactor) end(rc *rconn, err error, stopping bool) {
	if rc.fd < 0 {
		return
	}
	v := rc.v
	now := r.crowd.cfg.Now()
	if rc.phase == phaseBody {
		if rc.first {
			v.reads = append(v.reads, rc.read)
		}
		v.comments += rc.sse.Comments() - rc.comments
		if !stopping {
			v.drops++
			if err != nil && !errors.Is(err, io.EOF) {
				v.fail("%s: stream: %v", rc.host, err)
			}
		}
	}
	r.closeConn(rc)
	r.again(rc, now, 0)
}

// fail ends a connection that never became a stream: its Read has no answer, and the viewer
// tries the next target.
func (r *reactor) fail(rc *rconn, now time.Time, err error) {
	r.closeConn(rc)
	r.refused(rc, now, err)
}

func (r *reactor) refused(rc *rconn, now time.Time, err error) {
	v := rc.v
	v.reads = append(v.reads, Read{At: now, Latency: now.Sub(rc.t0), Kind: KindStream})
	v.fail("%s: connect: %v", rc.host, err)
	v.target = (v.target + 1) % len(v.crowd.hosts)
	r.again(rc, now, 0)
}

// again schedules rc's next connection after wait, or the stream's retry, or 1–3 s.
func (r *reactor) again(rc *rconn, now time.Time, wait time.Duration) {
	if wait <= 0 {
		wait = rc.sse.Retry()
	}
	if wait <= 0 {
		wait = rc.v.jitter(time.Second, 1, 3)
	}
	rc.next = now.Add(wait)
}

func (r *reactor) closeConn(rc *rconn) {
	if rc.fd < 0 {
		return
	}
	if rc.connected {
		rc.connected = false
		rc.v.crowd.connected.Add(-1)
	}
	delete(r.conns, rc.fd)
	_ = syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_DEL, rc.fd, nil)
	syscall.Close(rc.fd)
	rc.fd = -1
}
