// Command screenshot takes docs/jaeger-trace.png: the trace of one purchase in Jaeger's UI, from
// the local stack of `make up TRACING=jaeger TRACING_SAMPLE=1` (make jaeger-screenshot runs it).
// It creates a product of its own through the operations server, buys one unit of it through the
// storefront's nginx, waits until Jaeger's query API holds the purchase's trace (the server span
// of POST /api/v1/products/{id}/purchase for that id, with its seckill.deduct), opens the trace's
// page in headless chromium and saves a screenshot of it.
//
// It reads and writes nothing else; it never changes the stack's settings: a stack that samples
// 1 % of the requests (TRACING_SAMPLE unset) is told so when the trace does not come.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "screenshot:", err)
		os.Exit(1)
	}
}

type options struct {
	store, ops, jaeger string
	token, strategy    string
	out, chromium      string
	width, height      int
	wait               time.Duration
	until              string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o := options{}
	fs := flag.NewFlagSet("screenshot", flag.ContinueOnError)
	fs.StringVar(&o.store, "store", "http://127.0.0.1:8080", "the storefront's nginx (the purchase goes there)")
	fs.StringVar(&o.ops, "ops", "http://127.0.0.1:8079", "the operations server (the product is created there)")
	fs.StringVar(&o.jaeger, "jaeger", "http://127.0.0.1:16686", "Jaeger's UI and query API")
	token := getenv("SECKILL_ADMIN_TOKEN")
	if token == "" {
		token = "dev-admin-token"
	}
	fs.StringVar(&o.token, "admin-token", token, "admin bearer token")
	fs.StringVar(&o.strategy, "strategy", "mysql", "strategy of the product bought")
	fs.StringVar(&o.out, "out", "docs/jaeger-trace.png", "where the screenshot goes")
	fs.StringVar(&o.chromium, "chromium", "/usr/bin/chromium", "the browser (scripts/chromium.sh installs it)")
	fs.IntVar(&o.width, "width", 1440, "window width")
	fs.IntVar(&o.height, "height", 900, "window height")
	fs.StringVar(&o.until, "until", "seckill.consumer.process", "the span that completes a purchase's trace (the consumer's, which handles its order): wait for it to reach Jaeger too; empty: the first spans found do")
	fs.DurationVar(&o.wait, "wait", 30*time.Second, "longest wait for the trace to reach Jaeger (the replicas' exporter batches for up to 5 s)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	id, err := createProduct(ctx, o)
	if err != nil {
		return err
	}
	start := time.Now().Add(-time.Second)
	if err := purchase(ctx, o, id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "bought one unit of product %d (%s); waiting for its trace in %s\n", id, o.strategy, o.jaeger)
	tr, err := waitTrace(ctx, o, id, start)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "trace %s: %d spans (%s)\n", tr.TraceID, len(tr.Spans), strings.Join(tr.operations(), ", "))
	if err := shoot(ctx, o, tr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "screenshot: %s (%s/trace/%s)\n", o.out, o.jaeger, tr.TraceID)
	return nil
}

// call sends a JSON request and decodes a JSON answer of status want into out (if not nil).
func call(ctx context.Context, method, url, token string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%w (is the stack up? make up TRACING=jaeger TRACING_SAMPLE=1)", err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, res.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// createProduct puts a product of the screenshot's own on sale, unlisted, so that the purchase
// is the only one of it.
func createProduct(ctx context.Context, o options) (int64, error) {
	var p struct {
		ID int64 `json:"id"`
	}
	name := "jaeger screenshot " + time.Now().UTC().Format("20060102-150405")
	body := map[string]any{"name": name, "price_cents": 100, "stock": 10, "strategy": o.strategy, "per_user_limit": 1, "listed": false}
	if err := call(ctx, http.MethodPost, o.ops+"/api/v1/admin/products", o.token, body, http.StatusCreated, &p); err != nil {
		return 0, fmt.Errorf("create a product: %w", err)
	}
	return p.ID, nil
}

func purchase(ctx context.Context, o options, id int64) error {
	body := map[string]any{"user_id": fmt.Sprintf("jaeger-shot-%d", time.Now().UnixNano()), "quantity": 1}
	if err := call(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/products/%d/purchase", o.store, id), "", body, http.StatusAccepted, nil); err != nil {
		return fmt.Errorf("purchase: %w", err)
	}
	return nil
}

// trace is the part of Jaeger's query API answer (GET /api/traces) the command reads.
type trace struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		OperationName string `json:"operationName"`
		Tags          []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"tags"`
	} `json:"spans"`
}

func (t trace) operations() []string {
	var ops []string
	for _, s := range t.Spans {
		ops = append(ops, s.OperationName)
	}
	return ops
}

// isPurchaseOf says whether the trace is the purchase of product id: one of its spans has a tag
// whose value is that purchase's path, and one is seckill.deduct.
func (t trace) isPurchaseOf(id int64) bool {
	path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
	var hasPath, hasDeduct bool
	for _, s := range t.Spans {
		hasDeduct = hasDeduct || s.OperationName == "seckill.deduct"
		for _, tag := range s.Tags {
			if v, ok := tag.Value.(string); ok && strings.HasSuffix(v, path) {
				hasPath = true
			}
		}
	}
	return hasPath && hasDeduct
}

// waitTrace polls Jaeger's query API for the traces of service seckill since start until one is
// the purchase of product id, and holds o.until's span: the relay and the consumer export theirs
// after the purchase's own.
func waitTrace(ctx context.Context, o options, id int64, start time.Time) (trace, error) {
	deadline := time.Now().Add(o.wait)
	for {
		q := url.Values{
			"service": {"seckill"},
			"start":   {strconv.FormatInt(start.UnixMicro(), 10)},
			"end":     {strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)},
			"limit":   {"200"},
		}
		var res struct {
			Data []trace `json:"data"`
		}
		err := call(ctx, http.MethodGet, o.jaeger+"/api/traces?"+q.Encode(), "", nil, http.StatusOK, &res)
		if err == nil {
			for _, t := range res.Data {
				if t.isPurchaseOf(id) && (o.until == "" || slices.Contains(t.operations(), o.until)) {
					return t, nil
				}
			}
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("no trace of the purchase of product %d in %s after %s: do the replicas trace every request? (make down && make up TRACING=jaeger TRACING_SAMPLE=1)", id, o.jaeger, o.wait)
			}
			return trace{}, err
		}
		select {
		case <-ctx.Done():
			return trace{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// shoot opens the trace's page in headless chromium, waits until it shows the deduction's span,
// and saves the screenshot.
func shoot(ctx context.Context, o options, tr trace) error {
	dir, err := os.MkdirTemp("", "jaeger-shot-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(o.chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(dir), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(o.width, o.height))...)
	defer cancelAlloc()
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	tab, cancel := context.WithTimeout(browserCtx, 90*time.Second)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.EmulateViewport(int64(o.width), int64(o.height)), chromedp.Navigate(o.jaeger+"/trace/"+tr.TraceID)); err != nil {
		return fmt.Errorf("open the trace: %w", err)
	}
	// The page draws the span rows after it fetched the trace: wait for the deduction's name.
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.body.innerText.includes("seckill.deduct")`,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		text, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.innerText.slice(0, 300)`))
		if strings.Contains(text, "placeholder") {
			return errors.New("Jaeger serves its placeholder page, not the UI: it runs without the UI's assets (scripts/jaeger.sh ui DIR, then make down && make up TRACING=jaeger TRACING_SAMPLE=1; docs/stacks.md, Tracing)")
		}
		return fmt.Errorf("waiting for the trace's spans on the page: %w; it shows: %q", err, text)
	}
	// Open the deduction's details (its attributes) below its row, as a reader would.
	opened, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => {
		const row = [...document.querySelectorAll(".span-name")].find(e => e.innerText.includes("seckill.deduct"));
		if (!row) return false;
		row.click();
		return true;
	})()`))
	if err != nil || !opened {
		fmt.Fprintln(os.Stderr, "screenshot: could not open seckill.deduct's details; the screenshot shows the rows only")
	}
	time.Sleep(time.Second) // the timeline's bars and the details settle after the rows
	buf, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if len(buf) == 0 {
		return errors.New("screenshot: empty")
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	return os.WriteFile(o.out, buf, 0o644)
}
