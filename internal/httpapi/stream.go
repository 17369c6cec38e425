package httpapi

import (
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
// since its last write, at most once per StreamConfig.MinGap: however fast the stock moves, a
// viewer costs a few writes a second, and every event's bytes were rendered once by the board.
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
	// MinGap is the least time between two writes of one stream [400 ms]: each write is a
	// system call per viewer, the largest cost of a crowd of streams, and a viewer gains little
	// from more than two updates a second. Below the board's refresh (500 ms), it holds back only
	// the changes the change feed brings between two refreshes.
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
		c.MinGap = 400 * time.Millisecond
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
	var only int64
	if q, ok := c.GetQuery("product_id"); ok {
		id, ok := parseID(q)
		if !ok {
			h.respondError(c, errProductID("product_id"))
			return
		}
		only = id
	}
	snap, ok := h.snapshot(c)
	if !ok {
		return
	}
	if _, ok := snap.Item(only); only != 0 && !ok {
		h.respondError(c, sale.ErrNotFound)
		return
	}
	client := c.ClientIP()
	if err := h.streams.acquire(client); err != nil {
		status, code, wait := http.StatusServiceUnavailable, sale.CodeUnavailable, "2"
		if errors.Is(err, errClientStreams) {
			status, code, wait = http.StatusTooManyRequests, sale.CodeRateLimited, "10"
		}
		c.Writer.Header()["Retry-After"] = []string{wait}
		abortJSON(c, status, string(code), err.Error())
		return
	}
	defer h.streams.release(client)

	w := c.Writer
	hd := w.Header()
	hd["Content-Type"] = eventStreamType
	hd["X-Accel-Buffering"] = noBuffering // nginx: pass each event on at once
	// The writes renew their deadline: the server's WriteTimeout, counted from the request, would
	// cut every stream at the same age.
	rc := http.NewResponseController(w)
	c.Status(http.StatusOK)

	// The first write: how long a client waits before reconnecting (random, so that the viewers
	// of a replica that goes away do not all come back in the same instant), then either what
	// changed since the client's Last-Event-ID or everything.
	buf := make([]byte, 0, 4096)
	buf = append(buf, "retry: "...)
	buf = strconv.AppendInt(buf, int64(1000+rand.IntN(2000)), 10)
	buf = append(buf, "\n\n"...)
	if since, ok := resumeFrom(c.Request.Header["Last-Event-Id"], snap); ok {
		buf, _ = appendChanges(buf, snap, since, only)
	} else {
		buf = appendSnapshot(buf, snap, only)
	}
	ctx := c.Request.Context()
	var (
		lastWrite, deadline time.Time
		last                = snap.Seq
		changed             = snap.Changed() // nil while a gap timer is armed: it writes then
		gap                 = time.NewTimer(time.Hour)
	)
	gap.Stop()
	defer gap.Stop()
	jitter := func() time.Duration {
		if half := h.streams.cfg.MinGap / 2; half > 0 {
			return rand.N(half)
		}
		return 0
	}
	write := func(b []byte, events int) bool {
		now := time.Now()
		if deadline.Sub(now) < streamWriteTimeout/2 { // renewed once in a while, not per write
			deadline = now.Add(streamWriteTimeout)
			_ = rc.SetWriteDeadline(deadline)
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		lastWrite = now
		h.streams.metrics.StreamWritten(events)
		return true
	}
	// catchUp writes what changed since the last write, from the current snapshot.
	catchUp := func() bool {
		snap = h.board.Snapshot()
		var n int
		buf, n = appendChanges(buf[:0], snap, last, only)
		last, changed = snap.Seq, snap.Changed()
		return n == 0 || write(buf, n)
	}
	if !write(buf, 1) {
		return
	}
	// Checked twice per heartbeat: a stream is never silent much longer than one.
	beat := time.NewTicker(h.streams.cfg.Heartbeat / 2)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.streams.closing:
			return
		case <-beat.C:
			if time.Since(lastWrite) >= h.streams.cfg.Heartbeat/2 && !write(pingComment, 0) {
				return
			}
		case <-changed:
			// The change waits for the gap since the last write to pass, and so do the ones after
			// it: then one write carries them all. And for a moment of the stream's own: every
			// stream of the replica wakes on the same snapshot, and written all at once they would
			// hold the replica's CPU for tens of milliseconds, purchases queued behind them.
			changed = nil
			gap.Reset(max(time.Until(lastWrite.Add(h.streams.cfg.MinGap)), 0) + jitter())
		case <-gap.C:
			if !catchUp() {
				return
			}
		}
	}
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
