package web_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/seckill-go/seckill-go/internal/apptest"
)

// request is one request a tab sent, as DevTools reported it.
type request struct {
	method, path string
	at           time.Time
}

// requests records every request a tab sends.
type requests struct {
	mu  sync.Mutex
	all []request
}

func watchRequests(t *testing.T, ctx context.Context) *requests {
	t.Helper()
	r := &requests{}
	ctx, stop := context.WithCancel(ctx)
	sent := chromedp.Events(ctx, network.RequestWillBeSent) // subscribes now, before the tab navigates
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev, err := range sent {
			if err != nil {
				return
			}
			u, err := url.Parse(ev.Request.URL)
			if err != nil {
				continue
			}
			r.mu.Lock()
			r.all = append(r.all, request{method: ev.Request.Method, path: u.Path, at: time.Now()})
			r.mu.Unlock()
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	return r
}

// mark returns how many requests were seen so far: since(mark, …) counts those sent after.
func (r *requests) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// since returns the requests sent from mark on whose path is of a kind.
func (r *requests) since(mark int, kind func(path string) bool) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.all[mark:] {
		if kind(q.path) {
			out = append(out, q)
		}
	}
	return out
}

// The kinds of requests: the product list and a product's reads (its stats among them), which
// only a polling page sends, its stats alone, and the event stream.
func isProductRead(path string) bool {
	return path == "/api/v1/products" || strings.HasPrefix(path, "/api/v1/products/")
}
func isStats(path string) bool {
	return strings.HasPrefix(path, "/api/v1/products/") && strings.HasSuffix(path, "/stats")
}
func isStream(path string) bool { return path == "/api/v1/events" }

// refuseStreams answers every request of the tab for the event stream as a server over its
// stream limit does (503, Retry-After, the API's JSON error), through the DevTools Fetch domain,
// until the returned function is called. It counts the requests refused in refused.
func refuseStreams(t *testing.T, ctx context.Context, refused *atomic.Int32) (stop func()) {
	t.Helper()
	return refuseRequests(t, ctx, "*/api/v1/events*", refusal{status: 503, code: "unavailable",
		message: "too many event streams on this replica", retryAfter: "20"}, refused)
}

// refusal is an error answer of the API: its status, code, message and Retry-After (if any).
type refusal struct {
	status                    int64
	code, message, retryAfter string
}

// refuseRequests answers every request of the tab whose URL matches pattern (DevTools' wildcards)
// with the refusal, as the API would (its JSON error, no-store), through the DevTools Fetch
// domain, until the returned function is called; the request never reaches the server. It counts
// the requests refused in refused. One pattern at a time per tab.
func refuseRequests(t *testing.T, ctx context.Context, pattern string, r refusal, refused *atomic.Int32) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	headers := []*fetch.HeaderEntry{
		{Name: "Content-Type", Value: "application/json; charset=utf-8"},
		{Name: "Cache-Control", Value: "no-store"},
	}
	if r.retryAfter != "" {
		headers = append(headers, &fetch.HeaderEntry{Name: "Retry-After", Value: r.retryAfter})
	}
	body := fmt.Appendf(nil, `{"error":{"code":%q,"message":%q}}`, r.code, r.message)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			refused.Add(1)
			if _, err := chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID: ev.RequestID, ResponseCode: r.status, ResponseHeaders: headers, Body: body,
			}); err != nil && ctx.Err() == nil {
				t.Errorf("refuse %s: %v", ev.Request.URL, err)
			}
		}
	})
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: pattern}},
	}); err != nil {
		t.Fatalf("intercept %s: %v", pattern, err)
	}
	return func() {
		if _, err := chromedp.Call(ctx, fetch.Disable, cdp.Empty{}); err != nil {
			t.Errorf("stop intercepting %s: %v", pattern, err)
		}
		cancel()
		wg.Wait()
	}
}

// TestStorefrontStream: the storefront follows the server's event stream, and polls nothing
// while it works; refused the stream (503, as a replica over its limit answers), it polls as
// before; once the stream is back, it stops polling again. The purchases are made by the test
// through the API, never by the page, so that whatever the card shows came to the page by the
// stream or by its polls; the requests the tab sent (DevTools' network events) say which.
func TestStorefrontStream(t *testing.T) {
	chromium := chromiumPath(t)
	stack := apptest.NewStack(t)
	server := stack.Start(t, nil)
	admin := apptest.Client{URL: server.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "Watched by the crowd", "price_cents": 500, "stock": 3})
	c := card(product)

	bought := 0
	buy := func(t *testing.T) {
		t.Helper()
		bought++
		r := apptest.Client{URL: server.URL}.MustDo(t, "POST", fmt.Sprintf("/api/v1/products/%d/purchase", product),
			map[string]any{"user_id": fmt.Sprintf("watcher-%d", bought), "quantity": 1},
			map[string]string{"Idempotency-Key": fmt.Sprintf("stream-test-%d", bought)})
		if r.Status != 202 {
			t.Fatalf("purchase %d: %d %s", bought, r.Status, r.Raw)
		}
	}
	reset := func(t *testing.T) {
		t.Helper()
		if r := admin.MustDo(t, "POST", fmt.Sprintf("/api/v1/admin/products/%d/reset", product), map[string]any{"stock": 3}, nil); r.Status != 200 {
			t.Fatalf("reset: %d %s", r.Status, r.Raw)
		}
	}
	// sell sells the three units one by one, the card following each, down to sold out.
	sell := func(t *testing.T, p page) {
		t.Helper()
		for left := 2; left >= 0; left-- {
			buy(t)
			p.waitJS(fmt.Sprintf("%d units left on the card", left), fmt.Sprintf(`(() => { const c = document.querySelector('%s');
				return c.querySelector('.stock-text').textContent === '%d of 3 left' && c.querySelector('[data-stat="stock"]').textContent === '%d'; })()`,
				c, left, left), 10*time.Second)
		}
		p.waitJS("sold out", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			return c.dataset.phase === 'soldout' && c.querySelector('.pill').textContent === 'Sold out' &&
			c.querySelector('.btn-buy').disabled && c.querySelector('.btn-buy').textContent === 'Sold out'; })()`, c), 5*time.Second)
	}
	feedIs := func(mode string) string {
		return fmt.Sprintf(`document.getElementById('products').dataset.feed === %q && !!document.querySelector('%s')`, mode, c)
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true), chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	con := watchConsole(t, browserCtx, "viewer")
	sent := watchRequests(t, browserCtx)
	ctx, cancel := context.WithTimeout(browserCtx, 3*time.Minute)
	defer cancel()

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	step("the card follows the stream, and nothing is polled", func(t *testing.T) {
		p := page{t, ctx}
		p.do("open the storefront", chromedp.Navigate(server.URL+"/"))
		p.waitJS("the card, fed by the stream", feedIs("stream")+fmt.Sprintf(` && document.querySelector('%s .stock-text').textContent === '3 of 3 left'`, c), 15*time.Second)
		sell(t, p)
		time.Sleep(2 * time.Second) // two polling periods: a page that polls is seen polling
		if polls := sent.since(0, isProductRead); len(polls) > 0 {
			t.Errorf("with the stream up, the page sent %d product reads, the first %s", len(polls), polls[0].path)
		}
		if streams := sent.since(0, isStream); len(streams) != 1 {
			t.Errorf("the page opened the event stream %d times, want once", len(streams))
		}
		// No poll feeds the server clock estimate: the page's probes (GET /healthz) pin it down to
		// the round trip, as the polls did, and the footer says so.
		p.waitJS("the server clock estimated within 100 ms", `(() => { const m = /±(\d+) ms/.exec(document.getElementById('clock-status').textContent);
			return !!m && Number(m[1]) < 100; })()`, 20*time.Second)
		if n := len(sent.since(0, func(path string) bool { return path == "/healthz" })); n < 2 {
			t.Errorf("the page probed the server clock %d times", n)
		}
		// Without the admin token, the exact audit is not shown: a note says whose it is.
		if got := p.eval(fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			return c.querySelector('.audit').hidden + ' ' + !c.querySelector('.audit-note').hidden; })()`, c)); got != "true true" {
			t.Errorf("without the admin token, the audit hidden and its note shown: %s", got)
		}
	})

	var refused atomic.Int32
	var refusedAt int
	step("refused the stream, the card follows by polling", func(t *testing.T) {
		p := page{t, ctx}
		stop := refuseStreams(t, ctx, &refused)
		defer stop()
		refusedAt = sent.mark()
		began := time.Now()
		p.do("reload", chromedp.Reload())
		p.waitJS("the card, fed by polling", feedIs("polling"), 15*time.Second)
		reset(t)
		p.waitJS("the reset product on the card", fmt.Sprintf(`document.querySelector('%s .stock-text').textContent === '3 of 3 left'`, c), 10*time.Second)
		sell(t, p)
		if n := len(sent.since(refusedAt, isProductRead)); n < 3 {
			t.Errorf("refused the stream, the page sent %d product reads, want a list a second", n)
		}
		// The list carries every card's viewer figures: no card asks for its own.
		if n := len(sent.since(refusedAt, isStats)); n != 0 {
			t.Errorf("refused the stream, the page read a card's stats %d times, want none (the list carries them)", n)
		}
		// Retried after a back-off of 15-30 s, not at once: the page does not hammer a server
		// that turns it away.
		streams := sent.since(refusedAt, isStream)
		if len(streams) == 0 || refused.Load() == 0 {
			t.Fatalf("%d stream requests, %d refused", len(streams), refused.Load())
		}
		for i := 1; i < len(streams); i++ {
			if gap := streams[i].at.Sub(streams[i-1].at); gap < 14*time.Second {
				t.Errorf("the stream was asked for again %s after it was refused", gap)
			}
		}
		t.Logf("%d stream requests refused in %s of polling", len(streams), time.Since(began).Round(time.Millisecond))
	})

	step("the stream back, polling stops", func(t *testing.T) {
		p := page{t, ctx}
		p.waitJS("the stream back", feedIs("stream"), 35*time.Second)
		mark := sent.mark()
		reset(t)
		p.waitJS("the reset product on the card", fmt.Sprintf(`document.querySelector('%s .stock-text').textContent === '3 of 3 left'`, c), 10*time.Second)
		buy(t)
		p.waitJS("the purchase on the card", fmt.Sprintf(`document.querySelector('%s .stock-text').textContent === '2 of 3 left'`, c), 10*time.Second)
		time.Sleep(2 * time.Second)
		if polls := sent.since(mark, isProductRead); len(polls) > 0 {
			t.Errorf("with the stream back, the page sent %d product reads, the first %s", len(polls), polls[0].path)
		}
	})

	// The browser logs the refused streams; nothing else.
	con.check(t, "/api/v1/events")
}
