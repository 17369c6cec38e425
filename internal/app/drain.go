package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// drain is the HTTP side of a graceful stop, in front of the handler. Once it begins, /readyz
// answers 503 at once (without running the dependency checks) and every answer closes its
// connection, so that a load balancer's idle keep-alive connections to this process go away one
// by one as it uses them; wait then lets the requests still arriving on such connections in.
//
// A load balancer that only checks passively (nginx without the commercial health checks) stops
// sending work to a process when a connection to it is refused, which is why runProcess closes
// the listener first: a refused connect is retried on another replica even for a POST, because
// nothing was sent. A request sent on a kept-alive connection that the server closes at that
// very moment is not, and the client sees a 502; answering on such connections with
// "Connection: close" instead of closing them idle is what keeps that window shut.
type drain struct {
	next     http.Handler
	draining atomic.Bool
	last     atomic.Int64 // UnixNano of the last request that began
}

func newDrain(next http.Handler) *drain { return &drain{next: next} }

func (d *drain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.last.Store(time.Now().UnixNano())
	if d.draining.Load() {
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/readyz" {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error":{"code":"`+string(sale.CodeUnavailable)+`","message":"not ready: shutting down"}}`)
			return
		}
	}
	d.next.ServeHTTP(w, r)
}

// begin starts the drain: from now on /readyz answers 503 and every answer closes its connection.
func (d *drain) begin() {
	d.last.Store(time.Now().UnixNano())
	d.draining.Store(true)
}

// wait returns once no request has begun for quiet, after at most limit, or when ctx ends.
func (d *drain) wait(ctx context.Context, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		idle := time.Since(time.Unix(0, d.last.Load()))
		left := time.Until(deadline)
		if idle >= quiet || left <= 0 {
			return
		}
		t := time.NewTimer(min(quiet-idle, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Shutdown's drain: how long no request may have begun before the server shuts down, and the
// longest the drain waits for that.
const (
	drainQuiet = 250 * time.Millisecond
	drainLimit = 3 * time.Second
)

// closeOnceListener is a listener that runProcess may close before http.Server.Shutdown does:
// its Close closes once, and later calls return what the first returned.
type closeOnceListener struct {
	net.Listener
	once sync.Once
	err  error
}

func (l *closeOnceListener) Close() error {
	l.once.Do(func() { l.err = l.Listener.Close() })
	return l.err
}
