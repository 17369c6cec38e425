// Package viewers is the crowd that watches a sale, for the load test and the bench: viewers
// that poll the public reads as an open storefront does (the product, its stats, now and then
// the list, revalidating with If-None-Match), or hold the event stream as a browser's EventSource
// does (reconnecting with Last-Event-ID after a drop); and what they saw, made into figures: the
// reads by status and latency, the events, and how late each viewer learnt of the units sold.
//
// Viewers only read, never buy, and never decide a verdict: the caller does, from a Summary.
package viewers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
)

// Mode is how viewers watch.
type Mode string

// The modes.
const (
	Poll   Mode = "poll"   // GET the product and its stats about once a second, the list every few
	Stream Mode = "stream" // hold GET /api/v1/events?product_id=N
)

// ParseMode reads a -view flag.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Poll, Stream:
		return m, nil
	}
	return "", fmt.Errorf("view mode %q: want poll or stream", s)
}

// Config is one crowd.
type Config struct {
	Mode  Mode
	Count int
	// Targets are base URLs (http://host:port); viewer i starts on Targets[i mod n] and moves to
	// the next when it cannot connect, as a load balancer would send it elsewhere.
	Targets   []string
	ProductID int64
	// PollEvery is a polling viewer's period [1s], jittered by ±15 % as the storefront's is.
	PollEvery time.Duration
	// ListEvery is how often a polling viewer also reads the list [5s]: a load-test product is
	// unlisted, so the list alone would not show it, but the storefront reads it.
	ListEvery time.Duration
	// OwnAddresses makes each viewer connect from a loopback address of its own (127.1.x.y), as
	// each browser is a client of its own to the server's per-client limits.
	OwnAddresses bool
	// Goroutines holds each stream in a goroutine of its own, reading with net's netpoller, instead
	// of the reactors (Linux, IPv4 targets), which read every socket of their share once per event:
	// for comparing the two, and the only way elsewhere.
	Goroutines bool
	// Timeout bounds one poll [10s]; a stream silent for StreamSilence [45s: three of the
	// server's 15 s pings] counts as dropped.
	Timeout       time.Duration
	StreamSilence time.Duration
	// Now is the clock [time.Now].
	Now func() time.Time
}

func (c *Config) defaults() error {
	if c.PollEvery <= 0 {
		c.PollEvery = time.Second
	}
	if c.ListEvery <= 0 {
		c.ListEvery = 5 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.StreamSilence <= 0 {
		c.StreamSilence = 45 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	switch {
	case c.Count < 0:
		return errors.New("viewers: a negative count")
	case c.Count > 0 && len(c.Targets) == 0:
		return errors.New("viewers: no target")
	case c.ProductID <= 0:
		return errors.New("viewers: no product")
	}
	for _, t := range c.Targets {
		if _, err := hostOf(t); err != nil {
			return err
		}
	}
	return nil
}

// apiPaths are the paths (and queries) the viewers read, as the generated client (api/client)
// writes them: the viewers speak HTTP/1.1 on their own connections, for their CPU.
type apiPaths struct {
	product, list, events string
}

func pathsOf(productID int64) (apiPaths, error) {
	const server = "http://viewers.invalid/" // the path alone is kept
	product, err := client.NewGetProductRequest(server, productID, nil)
	if err != nil {
		return apiPaths{}, err
	}
	list, err := client.NewListProductsRequest(server, nil)
	if err != nil {
		return apiPaths{}, err
	}
	events, err := client.NewStreamEventsRequest(server, &client.StreamEventsParams{ProductID: &productID})
	if err != nil {
		return apiPaths{}, err
	}
	return apiPaths{product: product.URL.RequestURI(), list: list.URL.RequestURI(), events: events.URL.RequestURI()}, nil
}

// Crowd is Config.Count viewers watching, each in a goroutine of its own, until Stop.
type Crowd struct {
	cfg     Config
	hosts   []string
	paths   apiPaths
	viewers []*viewer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started time.Time
	stopped sync.Once
	result  *Result

	connected atomic.Int64 // streams open now; polling viewers answered at least once
	soldOut   atomic.Int64 // viewers that have read the sale sold out
}

// Start starts the viewers. A polling viewer's first read comes within one period, a stream
// viewer's connection within a second (tabs are opened at random moments).
func Start(ctx context.Context, cfg Config) (*Crowd, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	paths, err := pathsOf(cfg.ProductID)
	if err != nil {
		return nil, err
	}
	c := &Crowd{cfg: cfg, started: cfg.Now(), paths: paths}
	for _, t := range cfg.Targets {
		h, _ := hostOf(t)
		c.hosts = append(c.hosts, h)
	}
	ctx, c.cancel = context.WithCancel(ctx)
	seed := uint64(time.Now().UnixNano())
	for i := range cfg.Count {
		v := &viewer{crowd: c, i: i, target: i % len(c.hosts), rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		v.low.Store(math.MaxInt64)
		if cfg.OwnAddresses {
			v.conn.dialer.LocalAddr = localAddr(i)
		}
		c.viewers = append(c.viewers, v)
	}
	if cfg.Mode == Stream && !cfg.Goroutines && cfg.Count > 0 {
		ok, err := c.startReactors(ctx)
		if err != nil {
			c.cancel()
			return nil, err
		}
		if ok {
			return c, nil
		}
	}
	for _, v := range c.viewers {
		c.wg.Go(func() {
			defer v.conn.close()
			if cfg.Mode == Stream {
				v.stream(ctx)
			} else {
				v.poll(ctx)
			}
		})
	}
	return c, nil
}

// Connected is how many stream viewers hold a stream now, or how many polling viewers have had
// an answer.
func (c *Crowd) Connected() int { return int(c.connected.Load()) }

// SoldOutSeen is how many viewers have read the sale sold out.
func (c *Crowd) SoldOutSeen() int { return int(c.soldOut.Load()) }

// Count is the crowd's size.
func (c *Crowd) Count() int { return len(c.viewers) }

// EveryoneReadAtMost reports whether every viewer has read a stock of at most stock.
func (c *Crowd) EveryoneReadAtMost(stock int) bool {
	for _, v := range c.viewers {
		if v.low.Load() > int64(stock) {
			return false
		}
	}
	return true
}

// WaitConnected waits until every viewer is connected (Connected), ctx ends or timeout passes,
// and returns how many are.
func (c *Crowd) WaitConnected(ctx context.Context, timeout time.Duration) int {
	deadline := time.Now().Add(timeout)
	for c.Connected() < len(c.viewers) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	return c.Connected()
}

// WaitSoldOut waits until every viewer has read the sale sold out, ctx ends or timeout passes,
// and reports whether all have.
func (c *Crowd) WaitSoldOut(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for c.SoldOutSeen() < len(c.viewers) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	return c.SoldOutSeen() == len(c.viewers)
}

// Stop ends every viewer, waits for them, and returns what they saw; again, the same.
func (c *Crowd) Stop() *Result {
	c.stopped.Do(func() { c.result = c.stop() })
	return c.result
}

func (c *Crowd) stop() *Result {
	c.cancel()
	c.wg.Wait()
	r := &Result{Mode: c.cfg.Mode, Count: len(c.viewers), Targets: c.cfg.Targets, Started: c.started, Stopped: c.cfg.Now(),
		Events: map[string]int{}}
	failures := map[string]int{}
	for _, v := range c.viewers {
		r.Reads = append(r.Reads, v.reads...)
		r.EventTimes = append(r.EventTimes, v.eventTimes...)
		for t, n := range v.events {
			r.Events[t] += n
		}
		r.Lows = append(r.Lows, v.lows)
		r.SoldOutAt = append(r.SoldOutAt, v.soldOutAt)
		r.Drops += v.drops
		r.Comments += v.comments
		for _, f := range v.failures {
			failures[f]++
		}
	}
	r.Failures = topFailures(failures, maxFailures)
	return r
}

const maxFailures = 5

// topFailures lists the n most frequent failures, "text × count", the most frequent first.
func topFailures(counts map[string]int, n int) []string {
	texts := make([]string, 0, len(counts))
	for t := range counts {
		texts = append(texts, t)
	}
	slices.SortFunc(texts, func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	out := make([]string, 0, min(n, len(texts)))
	for _, t := range texts[:min(n, len(texts))] {
		out = append(out, fmt.Sprintf("%s × %d", t, counts[t]))
	}
	return out
}

// Read kinds.
const (
	KindProduct = "product" // GET /api/v1/products/{id}: the product and its viewer figures
	KindList    = "list"    // GET /api/v1/products
	KindStream  = "stream"  // GET /api/v1/events?product_id=N: one connection attempt
)

// Read is one answer a viewer got: a poll, or a stream's connection (its latency: until the
// first event; until the answer's head when none came).
type Read struct {
	At      time.Time     // when the answer (for a stream: its first event) came
	Latency time.Duration // from the request
	Status  int           // 0: no answer (a transport error)
	Kind    string
}

// Result is everything a crowd saw.
type Result struct {
	Mode             Mode
	Count            int
	Targets          []string
	Started, Stopped time.Time
	Reads            []Read
	Events           map[string]int // by type
	EventTimes       []time.Time    // when each event was read
	Lows             []Lows         // per viewer
	SoldOutAt        []time.Time    // per viewer; zero if it never read the sale sold out
	Drops            int            // streams that ended while the viewer watched
	Comments         int            // comment lines read (pings)
	Failures         []string       // the most frequent transport errors and unexpected answers: "text × viewers"
}

// viewer is one member of the crowd; only its goroutine touches it until Stop.
type viewer struct {
	crowd  *Crowd
	i      int
	target int
	rng    *rand.Rand
	conn   conn

	reads      []Read
	events     map[string]int
	eventTimes []time.Time
	lows       Lows
	low        atomic.Int64 // the lowest stock read so far, for EveryoneReadAtMost
	soldOutAt  time.Time
	drops      int
	comments   int
	failures   []string
}

// fail notes a failure; a viewer keeps its first few different ones.
func (v *viewer) fail(format string, args ...any) {
	f := fmt.Sprintf(format, args...)
	if len(v.failures) < 3 && !slices.Contains(v.failures, f) {
		v.failures = append(v.failures, f)
	}
}

// saw records the figures the viewer read at at.
func (v *viewer) saw(at time.Time, f figures) {
	v.lows.Saw(at, f.stock)
	if int64(f.stock) < v.low.Load() {
		v.low.Store(int64(f.stock))
	}
	if f.soldOut() {
		v.sawSoldOut(at)
	}
}

func (v *viewer) sawSoldOut(at time.Time) {
	if v.soldOutAt.IsZero() {
		v.soldOutAt = at
		v.crowd.soldOut.Add(1)
	}
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// jitter is d × a random factor in [lo, hi).
func (v *viewer) jitter(d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + (hi-lo)*v.rng.Float64()))
}

// ---------------------------------------------------------------- polling

// poll is an open storefront: the product (which carries its viewer figures) about once a
// second, revalidated with its ETag, and the list every ListEvery.
func (v *viewer) poll(ctx context.Context) {
	cfg := &v.crowd.cfg
	if !sleep(ctx, v.jitter(cfg.PollEvery, 0, 1)) {
		return
	}
	paths := []struct{ kind, path string }{
		{KindProduct, v.crowd.paths.product},
		{KindList, v.crowd.paths.list},
	}
	etags := make([]string, len(paths))
	nextList := cfg.Now().Add(v.jitter(cfg.ListEvery, 0, 1))
	answered := false
	for ctx.Err() == nil {
		for i, p := range paths {
			if p.kind == KindList {
				if cfg.Now().Before(nextList) {
					continue
				}
				nextList = nextList.Add(cfg.ListEvery)
			}
			if v.pollOnce(ctx, p.kind, p.path, &etags[i]) && !answered {
				answered = true
				v.crowd.connected.Add(1)
			}
		}
		if !sleep(ctx, onGrid(cfg.Now(), v.jitter(cfg.PollEvery, 0.85, 1.15))) {
			return
		}
	}
}

// pollGrid is the grid the pollers' wake-ups fall on: the viewers whose next poll falls within
// the same 5 ms wake together, as the reactors read their streams, instead of one at a time.
const pollGrid = 5 * time.Millisecond

// onGrid is d lengthened to end on the next multiple of pollGrid after now+d.
func onGrid(now time.Time, d time.Duration) time.Duration {
	at := now.Add(d)
	if r := time.Duration(at.UnixNano() % int64(pollGrid)); r > 0 {
		d += pollGrid - r
	}
	return d
}

// pollOnce reads one path, revalidating with *etag, and reports whether an answer came.
func (v *viewer) pollOnce(ctx context.Context, kind, path string, etag *string) bool {
	cfg := &v.crowd.cfg
	var header []string
	if *etag != "" {
		header = append(header, "If-None-Match: "+*etag)
	}
	t0 := cfg.Now()
	res, err := v.conn.get(ctx, v.crowd.hosts[v.target], path, header, t0.Add(cfg.Timeout))
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		v.reads = append(v.reads, Read{At: cfg.Now(), Latency: cfg.Now().Sub(t0), Kind: kind})
		v.fail("%s %s: %v", v.crowd.hosts[v.target], path, err)
		v.target = (v.target + 1) % len(v.crowd.hosts)
		return false
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	res.Body.Close()
	if err != nil || res.Close {
		v.conn.close()
	}
	at := cfg.Now()
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		v.reads = append(v.reads, Read{At: at, Latency: at.Sub(t0), Kind: kind})
		v.fail("%s %s: body: %v", v.crowd.hosts[v.target], path, err)
		return false
	}
	v.reads = append(v.reads, Read{At: at, Latency: at.Sub(t0), Status: res.StatusCode, Kind: kind})
	switch res.StatusCode {
	case http.StatusOK:
		*etag = res.Header.Get("ETag")
		if f, ok := productFigures(body, cfg.ProductID); ok {
			v.saw(at, f)
		}
	case http.StatusNotModified: // what the viewer read last still stands
	default:
		v.fail("%s %s: %d %s", v.crowd.hosts[v.target], path, res.StatusCode, strings.TrimSpace(string(body[:min(len(body), 200)])))
	}
	return true
}

// ---------------------------------------------------------------- streaming

// stream holds the event stream as a browser's EventSource does: after a drop it waits the
// stream's retry (1–3 s, jittered, if the server set none) and reconnects with Last-Event-ID. A
// replica that cannot be reached, or refuses the stream, is left for the next target (as a load
// balancer would send the viewer elsewhere); a refusal's Retry-After is waited out first.
func (v *viewer) stream(ctx context.Context) {
	sse := NewSSEReader(strings.NewReader(""))
	v.events = map[string]int{}
	// Viewers arrive within a second, not all in the same instant: thousands of connections
	// at once would overflow the replicas' accept queues, which no crowd of browsers does.
	if !sleep(ctx, v.jitter(time.Second, 0, 1)) {
		return
	}
	for ctx.Err() == nil {
		wait := v.streamOnce(ctx, sse)
		if wait <= 0 {
			wait = sse.Retry()
		}
		if wait <= 0 {
			wait = v.jitter(time.Second, 1, 3)
		}
		if !sleep(ctx, wait) {
			return
		}
	}
}

// streamOnce connects once and reads events until the stream ends; it returns how long to wait
// before the next connection (0: the stream's retry).
func (v *viewer) streamOnce(ctx context.Context, sse *SSEReader) time.Duration {
	cfg := &v.crowd.cfg
	host := v.crowd.hosts[v.target]
	path := v.crowd.paths.events
	header := []string{"Accept: text/event-stream", "Cache-Control: no-cache"}
	if id := sse.LastEventID(); id != "" {
		header = append(header, "Last-Event-ID: "+id)
	}
	t0 := cfg.Now()
	res, err := v.conn.get(ctx, host, path, header, t0.Add(cfg.Timeout))
	if err != nil {
		if ctx.Err() == nil {
			v.reads = append(v.reads, Read{At: cfg.Now(), Latency: cfg.Now().Sub(t0), Kind: KindStream})
			v.fail("%s: connect: %v", host, err)
			v.target = (v.target + 1) % len(v.crowd.hosts)
		}
		return 0
	}
	// The stream is read to its end: the connection is not reused.
	defer v.conn.close()
	read := Read{At: cfg.Now(), Latency: cfg.Now().Sub(t0), Status: res.StatusCode, Kind: KindStream}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		res.Body.Close()
		v.reads = append(v.reads, read)
		v.fail("%s: %d %s %s", host, res.StatusCode, res.Header.Get("Content-Type"), strings.TrimSpace(string(body[:min(len(body), 200)])))
		// A replica that refuses (full, or this client over its limit there) is left for the next.
		v.target = (v.target + 1) % len(v.crowd.hosts)
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			return time.Duration(s)*time.Second + v.jitter(time.Second, 0, 1)
		}
		return 0
	}
	v.crowd.connected.Add(1)
	defer v.crowd.connected.Add(-1)
	now := cfg.Now()
	_ = v.conn.nc.SetDeadline(now.Add(cfg.StreamSilence))
	sse.Continue(&silenceReader{r: res.Body, nc: v.conn.nc, silence: cfg.StreamSilence, now: cfg.Now, last: now})
	comments := sse.Comments()
	first := true
	for {
		typ, data, err := sse.NextView()
		now := cfg.Now()
		if err != nil {
			if first {
				v.reads = append(v.reads, read)
			}
			v.comments += sse.Comments() - comments
			if ctx.Err() == nil {
				v.drops++
				if !errors.Is(err, io.EOF) {
					v.fail("%s: stream: %v", host, err)
				}
			}
			return 0
		}
		if first {
			first = false
			read.At, read.Latency = now, now.Sub(t0)
			v.reads = append(v.reads, read)
		}
		v.events[typ]++
		v.eventTimes = append(v.eventTimes, now)
		if f, ok := eventFigures(data, cfg.ProductID); ok {
			v.saw(now, f)
		}
		if typ == "sold_out" {
			v.sawSoldOut(now)
		}
	}
}
