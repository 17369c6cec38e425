package httpapi

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// The event stream (GET /api/v1/events): Server-Sent Events of the board's changes, so that a
// viewer is told when the stock moves instead of asking every second. Each stream is a goroutine
// that sleeps on the current snapshot's Changed channel and, when it closes, writes what changed
// since its last write at its next slot: a moment of its own in every StreamConfig.MinGap.
// However fast the stock moves, a viewer costs one write per period, the streams of a replica
// write evenly spread over it, and every event's bytes were rendered once by the board.
// The protocol is in docs/read-path.md.

// StreamConfig limits the event streams of a replica.
type StreamConfig struct {
	// Max is the most streams open at once on the replica [10,000]; beyond, 503.
	Max int
	// PerClient is the most streams open at once per client address [8]; beyond, 429. The
	// clients of Config.RateExempt are not counted.
	PerClient int
	// Heartbeat is how long a stream may stay silent before a comment is sent [15 s]: proxies and
	// clients see a live connection, and a dead one is found by the failing write.
	Heartbeat time.Duration
	// MinGap is the period of a stream's writes of changes [700 ms]: each stream writes what
	// changed at most once per period, at a phase of its own, drawn when it opens. Each write is
	// a system call per viewer (and as much again for the viewer's side), the largest cost of a
	// crowd of streams. A change reaches a viewer within a board refresh plus one period.
	MinGap time.Duration
}

func (c *StreamConfig) defaults() {
	if c.Max <= 0 {
		c.Max = 10_000
	}
	if c.PerClient <= 0 {
		c.PerClient = 8
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = 15 * time.Second
	}
	if c.MinGap <= 0 {
		c.MinGap = 700 * time.Millisecond
	}
}

// StreamMetrics counts the event streams.
type StreamMetrics interface {
	// StreamOpened and StreamClosed keep the count of open streams.
	StreamOpened()
	StreamClosed()
	// StreamRefused counts a stream refused by a limit: "replica" or "client".
	StreamRefused(limit string)
	// StreamWritten counts one write of events events to a stream.
	StreamWritten(events int)
}

// streams counts the open streams, for the limits.
type streams struct {
	cfg      StreamConfig
	exempt   []netip.Prefix
	closing  <-chan struct{}
	metrics  StreamMetrics
	mu       sync.Mutex
	open     int
	byClient map[string]int
}

var (
	errStreamsFull   = errors.New("this replica holds as many event streams as it may; retry on another or later")
	errClientStreams = errors.New("too many event streams from this address; close one first")
)

// acquire takes a stream's place for client, or returns why not.
func (s *streams) acquire(client string) error {
	counted := !isExempt(client, s.exempt)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.open >= s.cfg.Max:
		s.metrics.StreamRefused("replica")
		return errStreamsFull
	case counted && s.byClient[client] >= s.cfg.PerClient:
		s.metrics.StreamRefused("client")
		return errClientStreams
	}
	s.open++
	if counted {
		s.byClient[client]++
	}
	s.metrics.StreamOpened()
	return nil
}

func (s *streams) release(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if n := s.byClient[client]; n > 1 {
		s.byClient[client] = n - 1
	} else {
		delete(s.byClient, client)
	}
	s.metrics.StreamClosed()
}

var (
	eventStreamType = []string{"text/event-stream; charset=utf-8"}
	noBuffering     = []string{"no"}
	pingComment     = []byte(": ping\n\n")
	// streamWriteTimeout drops a viewer that takes no bytes for this long: its stream's writes
	// would otherwise pile up in the kernel for ever.
	streamWriteTimeout = 10 * time.Second
)

// events serves the event stream of the listed products, or of one (?product_id=N).
func (h *handlers) events(c *gin.Context) {
	snap, only, ok := h.streamSubject(c)
	if !ok {
		return
	}
	client := c.ClientIP()
	if err := h.streams.acquire(client); err != nil {
		refuseStream(c, err)
		return
	}
	defer h.streams.release(client)

	s := h.startStream(c, snap, only)
	s.run(c.Request.Context())
}

// streamSubject reads what a stream is of: the current snapshot, and the one product asked for
// (?product_id=N), or 0 for every listed product. It answers the request itself, and returns
// false, when the id is malformed or unknown or the board has not loaded yet.
func (h *handlers) streamSubject(c *gin.Context) (snap *board.Snapshot, only int64, ok bool) {
	if q, ok := c.GetQuery("product_id"); ok {
		id, ok := parseID(q)
		if !ok {
			h.respondError(c, errProductID("product_id"))
			return nil, 0, false
		}
		only = id
	}
	snap, ok = h.snapshot(c)
	if !ok {
		return nil, 0, false
	}
	if _, ok := snap.Item(only); only != 0 && !ok {
		h.respondError(c, sale.ErrNotFound)
		return nil, 0, false
	}
	return snap, only, true
}

// refuseStream answers a stream that a limit refused (err, from streams.acquire): 429 for the
// client's own limit, 503 for the replica's, each with the wait before trying again.
func refuseStream(c *gin.Context, err error) {
	status, code, wait := http.StatusServiceUnavailable, sale.CodeUnavailable, "2"
	if errors.Is(err, errClientStreams) {
		status, code, wait = http.StatusTooManyRequests, sale.CodeRateLimited, "10"
	}
	c.Writer.Header()["Retry-After"] = []string{wait}
	abortJSON(c, status, string(code), err.Error())
}

// eventStream is one open event stream: where it writes, what it last sent (the sequence of the
// snapshot it was last brought up to) and when, and the change it waits for.
type eventStream struct {
	streams *streams
	board   Board
	w       gin.ResponseWriter
	rc      *http.ResponseController
	only    int64
	buf     []byte
	last    uint64
	changed <-chan struct{} // nil while the slot timer is armed: it writes then
	// lastWrite is when the stream was last written to; deadline, the write deadline set then.
	lastWrite, deadline time.Time
	// slot0 is one of the stream's slots: they fall every MinGap from it.
	slot0 time.Time
}

// startStream answers the request with the stream's headers and prepares its first write: how
// long a client waits before reconnecting (random, so that the viewers of a replica that goes
// away do not all come back in the same instant), then either what changed since the client's
// Last-Event-ID or everything.
func (h *handlers) startStream(c *gin.Context, snap *board.Snapshot, only int64) *eventStream {
	w := c.Writer
	hd := w.Header()
	hd["Content-Type"] = eventStreamType
	hd["X-Accel-Buffering"] = noBuffering // nginx: pass each event on at once
	s := &eventStream{
		streams: h.streams,
		board:   h.board,
		w:       w,
		// The writes renew their deadline: the server's WriteTimeout, counted from the request,
		// would cut every stream at the same age.
		rc:      http.NewResponseController(w),
		only:    only,
		last:    snap.Seq,
		changed: snap.Changed(),
		slot0:   time.Now().Add(rand.N(h.streams.cfg.MinGap)),
	}
	c.Status(http.StatusOK)

	buf := make([]byte, 0, 4096)
	buf = append(buf, "retry: "...)
	buf = strconv.AppendInt(buf, int64(1000+rand.IntN(2000)), 10)
	buf = append(buf, "\n\n"...)
	if since, ok := resumeFrom(c.Request.Header["Last-Event-Id"], snap); ok {
		buf, _ = appendChanges(buf, snap, since, only)
	} else {
		buf = appendSnapshot(buf, snap, only)
	}
	s.buf = buf
	return s
}

// run writes the stream's first events, then the changes as they come, and a comment when the
// stream has been silent for half a heartbeat, until the request ends, the replica begins to shut
// down or a write fails.
func (s *eventStream) run(ctx context.Context) {
	slot := time.NewTimer(time.Hour)
	slot.Stop()
	defer slot.Stop()
	if !s.write(s.buf, 1) {
		return
	}
	cfg := s.streams.cfg
	// Checked twice per heartbeat: a stream is never silent much longer than one.
	beat := time.NewTicker(cfg.Heartbeat / 2)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.streams.closing:
			return
		case <-beat.C:
			if time.Since(s.lastWrite) >= cfg.Heartbeat/2 && !s.write(pingComment, 0) {
				return
			}
		case <-s.changed:
			// The change waits for the stream's next slot, and so do the ones after it: then one
			// write carries them all. Every stream of the replica wakes on the same snapshot;
			// written all at once they would hold the replica's CPU for tens of milliseconds,
			// purchases queued behind them, where at their slots they are spread over the period.
			s.changed = nil
			slot.Reset(s.untilSlot(time.Now()))
		case <-slot.C:
			if !s.catchUp() {
				return
			}
		}
	}
}

// untilSlot is the wait from now until the stream's next slot (none when now is one).
func untilSlot(slot0, now time.Time, period time.Duration) time.Duration {
	since := now.Sub(slot0) % period
	if since < 0 {
		since += period
	}
	if since == 0 {
		return 0
	}
	return period - since
}

func (s *eventStream) untilSlot(now time.Time) time.Duration {
	return untilSlot(s.slot0, now, s.streams.cfg.MinGap)
}

// write sends b, events events, and reports whether it reached the client's connection.
func (s *eventStream) write(b []byte, events int) bool {
	now := time.Now()
	if s.deadline.Sub(now) < streamWriteTimeout/2 { // renewed once in a while, not per write
		s.deadline = now.Add(streamWriteTimeout)
		_ = s.rc.SetWriteDeadline(s.deadline)
	}
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	if err := s.rc.Flush(); err != nil {
		return false
	}
	s.lastWrite = now
	s.streams.metrics.StreamWritten(events)
	return true
}

// catchUp writes what changed since the last write, from the current snapshot, and waits for
// that snapshot's next change.
func (s *eventStream) catchUp() bool {
	snap := s.board.Snapshot()
	var n int
	s.buf, n = appendChanges(s.buf[:0], snap, s.last, s.only)
	s.last, s.changed = snap.Seq, snap.Changed()
	return n == 0 || s.write(s.buf, n)
}

// resumeFrom reads a Last-Event-ID ("<board>.<seq>") and returns its sequence when it is of
// snap's board and not ahead of it: the changes since can then be sent instead of everything.
func resumeFrom(values []string, snap *board.Snapshot) (uint64, bool) {
	if len(values) == 0 {
		return 0, false
	}
	b, seq, ok := strings.Cut(values[0], ".")
	if !ok || b != snap.Board {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	if err != nil || n > snap.Seq {
		return 0, false
	}
	return n, true
}

// follows reports whether a stream of only (0: the listed products) carries it.
func follows(it *board.Item, only int64) bool {
	if only != 0 {
		return it.Product.ID == only
	}
	return it.Product.Listed
}

// appendSnapshot appends the snapshot event: every product the stream follows.
func appendSnapshot(buf []byte, snap *board.Snapshot, only int64) []byte {
	buf = appendID(buf, snap.Board, snap.Seq)
	buf = append(buf, "event: snapshot\ndata: {\"items\":["...)
	first := true
	add := func(it *board.Item) {
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, it.Rendered.(*rendered).data...)
	}
	if only != 0 {
		if it, ok := snap.Item(only); ok {
			add(it)
		}
	} else {
		for _, it := range snap.Listed() {
			add(it)
		}
	}
	return append(buf, "]}\n\n"...)
}

// appendChanges appends an event for every product the stream follows that changed after
// sequence since, and returns how many.
func appendChanges(buf []byte, snap *board.Snapshot, since uint64, only int64) ([]byte, int) {
	n := 0
	for _, it := range snap.Since(since) {
		if !follows(it, only) {
			continue
		}
		buf = appendID(buf, snap.Board, it.Seq)
		buf = append(buf, it.Rendered.(*rendered).event...)
		n++
	}
	return buf, n
}

func appendID(buf []byte, boardID string, seq uint64) []byte {
	buf = append(buf, "id: "...)
	buf = append(buf, boardID...)
	buf = append(buf, '.')
	buf = strconv.AppendUint(buf, seq, 10)
	return append(buf, '\n')
}

type nopStreamMetrics struct{}

func (nopStreamMetrics) StreamOpened()            {}
func (nopStreamMetrics) StreamClosed()            {}
func (nopStreamMetrics) StreamRefused(string)     {}
func (nopStreamMetrics) StreamWritten(events int) {}
