package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	_ "github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/audit"
)

// screenshotDir is where the test leaves its screenshots: $SECKILL_SCREENSHOT_DIR, or
// web/testdata/screenshots (git-ignored).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SECKILL_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("testdata", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromiumPath returns Debian's chromium, or fails the test saying how to install it. Under -short
// the test is skipped: it needs the browser and the services.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("browser end-to-end test: needs chromium and the services")
	}
	path := os.Getenv("SECKILL_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("chromium is required for the storefront test and was not found at %s: "+
			"install it with scripts/chromium.sh (apt-get install -y --no-install-recommends chromium), "+
			"or point SECKILL_CHROMIUM at a Chrome/Chromium binary", path)
	}
	return path
}

// productIDs maps the name of every product on the storefront's list to its id.
func productIDs(t *testing.T, base string) map[string]int64 {
	t.Helper()
	r := apptest.Client{URL: base}.MustDo(t, "GET", "/api/v1/products", nil, nil)
	var body struct {
		Products []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"products"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, p := range body.Products {
		out[p.Name] = p.ID
	}
	return out
}

// strategy is one stock strategy as GET /api/v1/strategies describes it.
type strategy struct {
	Name    string `json:"name"`
	Family  string `json:"family"`
	Safe    bool   `json:"safe"`
	Served  bool   `json:"served"`
	Summary string `json:"summary"`
}

// strategyCatalog returns the server's catalog of strategies, in its order.
func strategyCatalog(t *testing.T, base string) []strategy {
	t.Helper()
	r := apptest.Client{URL: base}.MustDo(t, "GET", "/api/v1/strategies", nil, nil)
	var body struct {
		Strategies []strategy `json:"strategies"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil || r.Status != 200 || len(body.Strategies) == 0 {
		t.Fatalf("GET /api/v1/strategies = %d %s (%v)", r.Status, r.Raw, err)
	}
	return body.Strategies
}

// console collects what a tab writes to its console: calls of the console API, uncaught
// exceptions and browser log entries (failed requests among them).
type console struct {
	mu   sync.Mutex
	all  []string
	errs []string
}

func watchConsole(t *testing.T, ctx context.Context, tab string) *console {
	t.Helper()
	c := &console{}
	// Cancelling this context ends the subscription only; the tab lives on until its own
	// context is cancelled.
	ctx, stop := context.WithCancel(ctx)
	msgs := chromedp.Console(ctx) // subscribes now, before the tab navigates
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			line := fmt.Sprintf("[%s] %s (%s:%d)", tab, m, m.URL, m.Line+1)
			c.mu.Lock()
			c.all = append(c.all, line)
			if m.Type == chromedp.ConsoleError || m.IsException() {
				c.errs = append(c.errs, line)
			}
			c.mu.Unlock()
		}
	})
	t.Cleanup(func() { stop(); wg.Wait() })
	return c
}

// check fails the test for each console error, but those that contain one of expected: the
// browser logs every refused request as an error (a declined payment's 402 among them).
func (c *console) check(t *testing.T, expected ...string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.all {
		t.Log("console:", l)
	}
	var errs []string
	for _, e := range c.errs {
		if !slices.ContainsFunc(expected, func(x string) bool { return strings.Contains(e, x) }) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		t.Errorf("the page logged %d console errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// page drives one tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is truthy. An expression that throws (an element
// it reads is not drawn yet) is not true yet: the page is still on its way.
func (p page) waitJS(what, expr string, timeout time.Duration) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool]("(() => { try { return !!("+expr+"); } catch (e) { return false; } })()",
		chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil {
		p.t.Fatalf("waiting for %s (%s): %v\nthe page shows:\n%s", what, expr, err, p.text("main"))
	}
}

// eval returns the string the expression evaluates to, awaiting it if it is a promise.
func (p page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (p page) text(sel string) string {
	q, _ := json.Marshal(sel)
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(document.querySelector(%s) || {innerText: "(nothing matches)"}).innerText`, q)))
	if err != nil {
		return "(" + err.Error() + ")"
	}
	return v
}

func (p page) screenshot(dir, name string, full bool) {
	p.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	buf, err := chromedp.Run(p.ctx, shot)
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// reducedMotion emulates prefers-reduced-motion: reduce.
func reducedMotion() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: "reduce"}},
		})
		return err
	})
}

// setField sets a form field's value as a person would, with the input and change events.
func setField(id, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const f = document.getElementById(%q); f.value = %q;
		f.dispatchEvent(new Event('input', {bubbles: true})); f.dispatchEvent(new Event('change', {bubbles: true})); })()`, id, value))
}

func clearField(id string) chromedp.Action[chromedp.Void] { return setField(id, "") }

func card(id int64) string { return fmt.Sprintf(`.card[data-product-id="%d"]`, id) }

// TestStorefront drives the storefront in Debian's headless chromium against three replicas
// started in this process, one step (subtest) per thing the page must do: the seeded sales show, a
// sale opens on its countdown and the buyer buys (once, however many clicks) and sees the order
// confirmed and the stock go down, pays it with the Pay button within its countdown and sees it
// paid, a second buyer sees the last unit sold out, every API error
// code has a human message, the cards and the drawer describe the strategies as GET
// /api/v1/strategies does (the drawer offering the served ones), the demo drawer runs a stampede with the unsafe strategy (OVERSOLD, as
// the database says) and with mysql (PASS), the page logs no console error, and screenshots are
// taken at desktop and phone sizes. The steps share the stack and the browser and build on each
// other's page, so the first one that fails ends the test.
func TestStorefront(t *testing.T) {
	chromium := chromiumPath(t)
	began := time.Now()
	// No declined payment by chance (the simulated provider declines 5 % by default), and the
	// production window, whatever the test stack's default: no order expires during the test, so
	// the stampedes' verdicts count every unit sold (TestStorefrontPaymentWindow lets them expire).
	s, urls := apptest.Cluster(t, 3, map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true",
		"SECKILL_PAYMENT_FAILURE_RATE": "0", "SECKILL_PAYMENT_WINDOW": "10m"})
	base := urls[0]
	db, err := sql.Open("mysql", s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	seedCtx, cancelSeed := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSeed()
	if err := app.Run(seedCtx, []string{"seed"}, s.Getenv(map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true"}),
		io.Discard, io.Discard, app.Options{}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	soonOpens := time.Now().UTC().Truncate(time.Second).Add(5 * time.Second) // whole seconds, as an admin would
	admin := apptest.Client{URL: base, Token: apptest.AdminToken}
	soon := admin.CreateProduct(t, map[string]any{
		"name": "Lightning deal · opens in seconds", "price_cents": 2499, "stock": 5, "strategy": "redis",
		"sale_starts_at": soonOpens.Format(time.RFC3339),
	})
	last := admin.CreateProduct(t, map[string]any{"name": "Last one · signed poster", "price_cents": 14900, "stock": 1, "strategy": "zk"})
	t.Logf("stack up and seeded in %s", time.Since(began).Round(time.Millisecond))
	// The seed wrote to MySQL behind the replicas' backs: their boards list its sales at their
	// next refresh (docs/read-path.md's staleness bound), after the products made above.
	var opensLater, mysqlProduct, noneProduct int64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ids := productIDs(t, base)
		opensLater, mysqlProduct, noneProduct = ids["Demo sale · opens soon"], ids["Demo sale · mysql strategy"], ids["Demo sale · none strategy"]
		if opensLater != 0 && mysqlProduct != 0 && noneProduct != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the seed, the products listed are %v", ids)
		}
	}
	// The strategies the cluster serves, as the storefront reads them: one seeded sale each.
	catalog := strategyCatalog(t, base)
	var served []strategy
	for _, s := range catalog {
		if s.Served {
			served = append(served, s)
		}
	}
	if !slices.ContainsFunc(served, func(s strategy) bool { return s.Name == "none" && !s.Safe }) ||
		!slices.ContainsFunc(served, func(s strategy) bool { return s.Name == "mysql" && s.Safe }) {
		t.Fatalf("with the unsafe strategies allowed, the served strategies are %+v", served)
	}
	cards := len(served) + 3 // and the sale that opens soon, and the two products made above

	// The browser, and the tabs of the steps: the buyer's on a desktop, a second buyer's in a
	// browser context of their own (own localStorage), a phone's.
	dir := screenshotDir(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.WindowSize(1440, 900),
		)...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	consoles := []*console{watchConsole(t, browserCtx, "desktop")}
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The whole test's bound for the desktop tab, whose steps run 90-110 s on a machine shared with
	// other builds and load tests (load average 16-25 on two cores); every step waits for its own
	// page conditions with its own, shorter, timeout.
	desktop, cancel := context.WithTimeout(browserCtx, 3*time.Minute)
	defer cancel()
	second, cancelSecond := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelSecond)
	consoles = append(consoles, watchConsole(t, second, "second buyer"))
	phone, cancelPhone := chromedp.NewContext(browserCtx)
	t.Cleanup(cancelPhone)
	consoles = append(consoles, watchConsole(t, phone, "phone"))

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}

	// One card per seeded sale (one per served strategy, none included, and one opening in 3
	// minutes) and per product made above. Reduced motion: no transition is caught half-way in a
	// screenshot (and the CSS honours it).
	step("seeded sales show", func(t *testing.T) {
		a := page{t, desktop}
		a.do("open the storefront", chromedp.EmulateViewport(1440, 900), reducedMotion(), chromedp.Navigate(base+"/"))
		a.waitJS(fmt.Sprintf("%d product cards", cards), fmt.Sprintf(`document.querySelectorAll('.card').length === %d`, cards), 15*time.Second)
		for _, want := range []string{"Demo sale · opens soon", "Lightning deal · opens in seconds", "Last one · signed poster"} {
			if !strings.Contains(a.text("#products"), want) {
				t.Errorf("no card for %q", want)
			}
		}
		laterBuy := card(opensLater) + " .btn-buy"
		if got, disabled := a.text(laterBuy), a.eval(fmt.Sprintf(`String(document.querySelector('%s').disabled)`, laterBuy)); !strings.HasPrefix(got, "Opens in 0") || disabled != "true" {
			t.Errorf("the sale opening in 3 minutes shows %q on its button (disabled %s)", got, disabled)
		}
	})

	// A seeded sale per served strategy, in the catalog's order; each card's badge names its
	// strategy, "· unsafe" for an unsafe one, styled by its family, and its note is the catalog's
	// summary of it.
	step("cards describe their strategy from the catalog", func(t *testing.T) {
		a := page{t, desktop}
		type cardFacts struct{ Strategy, Badge, Class, Note string }
		var got []cardFacts
		js := `JSON.stringify([...document.querySelectorAll('.card')].filter((c) => /^Demo sale · .* strategy$/.test(c.querySelector('.card-title').textContent))
			.map((c) => ({Strategy: c.dataset.strategy, Badge: c.querySelector('.badge').textContent, Class: c.querySelector('.badge').className,
				Note: c.querySelector('.strategy-note').hidden ? '(hidden)' : c.querySelector('.strategy-note').textContent})))`
		if err := json.Unmarshal([]byte(a.eval(js)), &got); err != nil {
			t.Fatal(err)
		}
		var want []cardFacts
		for _, s := range served {
			f := cardFacts{Strategy: s.Name, Badge: s.Name, Class: "badge badge-family-" + s.Family, Note: s.Summary}
			if !s.Safe {
				f.Badge += " · unsafe"
				f.Class += " badge-unsafe"
			}
			want = append(want, f)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the seeded sales' cards, in page order (-want +got):\n%s", diff)
		}
	})

	// A buyer identity was made up and kept; the buyer renames themself with the keyboard.
	step("buyer renames themself", func(t *testing.T) {
		a := page{t, desktop}
		generated := a.text("#buyer-id")
		if !regexp.MustCompile(`^buyer-[a-z0-9]{6}$`).MatchString(generated) || a.eval(`localStorage.getItem('seckill.buyer')`) != generated {
			t.Errorf("generated buyer %q, stored %q", generated, a.eval(`localStorage.getItem('seckill.buyer')`))
		}
		a.do("rename the buyer",
			chromedp.Click(chromedp.ID("buyer-edit")),
			chromedp.WaitVisible(chromedp.ID("buyer-input")),
			clearField("buyer-input"),
			chromedp.SendKeys(chromedp.ID("buyer-input"), "not valid!\n"))
		if hint := a.text("#buyer-hint"); !strings.Contains(hint, "Not a valid buyer name") {
			t.Errorf("an invalid buyer name shows %q", hint)
		}
		a.do("rename the buyer",
			clearField("buyer-input"),
			chromedp.SendKeys(chromedp.ID("buyer-input"), "alice-e2e\n"))
		a.waitJS("the new buyer name", `document.getElementById('buyer-id').textContent === 'alice-e2e' && localStorage.getItem('seckill.buyer') === 'alice-e2e'`, 5*time.Second)
	})

	// A second buyer, in a browser context of their own, watches the last unit.
	step("second buyer has a name of their own", func(t *testing.T) {
		b := page{t, second}
		b.do("second buyer opens the storefront", chromedp.EmulateViewport(1024, 768), chromedp.Navigate(base+"/"))
		b.waitJS("the last unit on sale", fmt.Sprintf(`(document.querySelector('%s .stock-text') || {}).textContent === '1 of 1 left'`, card(last)), 15*time.Second)
		if bob := b.text("#buyer-id"); bob == "alice-e2e" || !strings.HasPrefix(bob, "buyer-") {
			t.Errorf("second buyer is %q", bob)
		}
	})

	// Disabled with a countdown, then open; two clicks in a row buy once, with an
	// Idempotency-Key; the order goes queued → confirmed; the stock goes down. (On a machine so
	// busy that the sale opened before this point, the countdown cannot be seen here; the sale
	// opening in 3 minutes showed one above.)
	step("sale opens on its countdown and a double click buys once", func(t *testing.T) {
		a := page{t, desktop}
		buy := card(soon) + " .btn-buy"
		text, disabled := a.text(buy), a.eval(fmt.Sprintf(`String(document.querySelector('%s').disabled)`, buy))
		switch stillClosed := time.Until(soonOpens) > 500*time.Millisecond; {
		case stillClosed && (disabled != "true" || !strings.HasPrefix(text, "Opens in 00:0")):
			t.Errorf("before its start the button is %q (disabled %s)", text, disabled)
		case !stillClosed:
			t.Logf("the lightning deal opened before its countdown was looked at (button %q)", text)
		}
		a.waitJS("the sale to open", fmt.Sprintf(`!document.querySelector('%s').disabled`, buy), 15*time.Second)
		if got := a.text(buy); got != "Buy now" {
			t.Errorf("open sale button says %q", got)
		}
		disabledAfterClick := a.eval(fmt.Sprintf(`(() => { const b = document.querySelector('%s'); b.click(); const d = b.disabled; b.click(); return String(d); })()`, buy))
		if disabledAfterClick != "true" {
			t.Errorf("the buy button is not disabled right after the click")
		}
		a.waitJS("the order confirmed", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="confirmed"]')`, card(soon)), 30*time.Second)
		a.waitJS("the stock decremented", fmt.Sprintf(`document.querySelector('%s .stock-text').textContent === '4 of 5 left'`, card(soon)), 10*time.Second)
		var reservations, keys int
		if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM reservations WHERE product_id = ? AND user_id = 'alice-e2e'),
			(SELECT COUNT(*) FROM reservations WHERE product_id = ? AND user_id = 'alice-e2e' AND idem_key LIKE 'web-%')`,
			soon, soon).Scan(&reservations, &keys); err != nil {
			t.Fatal(err)
		}
		if reservations != 1 || keys != 1 {
			t.Errorf("after a double click: %d reservations and %d idempotency keys of alice-e2e, want 1 and 1", reservations, keys)
		}
		if got := a.text(buy); got != "Bought" {
			t.Errorf("after the purchase the button says %q", got)
		}
	})

	// The confirmed order waits for its payment: a Pay button and a countdown to its expires_at
	// (the default window, 10 minutes) that ticks; one click pays, with an Idempotency-Key of the
	// page's, and the order shows paid with the provider's payment id. The live panel does not
	// show the paid unit: the orders are the operators' audit, for a tab with the admin token (below).
	step("pay button with a countdown, then paid", func(t *testing.T) {
		a := page{t, desktop}
		c := card(soon)
		a.waitJS("the Pay button", fmt.Sprintf(`(() => { const p = document.querySelector('%s .pay');
			return !p.hidden && !p.querySelector('.btn-pay').disabled; })()`, c), 10*time.Second)
		countdown := a.text(c + " .pay-countdown")
		if !regexp.MustCompile(`^Pay within (09:[0-5][0-9]|10:00)$`).MatchString(countdown) {
			t.Errorf("the payment countdown says %q, want about ten minutes", countdown)
		}
		a.waitJS("the payment countdown ticking", fmt.Sprintf(`document.querySelector('%s .pay-countdown').textContent !== %q`, c, countdown), 5*time.Second)
		if got := a.text(c + " .btn-pay"); got != "Pay $24.99" {
			t.Errorf("the pay button says %q", got)
		}
		a.do("pay", chromedp.Click(chromedp.CSS(c+" .btn-pay")))
		a.waitJS("the order paid", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="paid"]') &&
			document.querySelector('%s .pay').hidden`, c, c), 15*time.Second)
		payment := a.text(c + " .payment-id")
		var status, paymentID, payKey string
		var charges int
		if err := db.QueryRow(`SELECT status, COALESCE(payment_id, ''), COALESCE(pay_key, ''),
			(SELECT COUNT(*) FROM payment_charges pc WHERE pc.order_id = o.order_id AND pc.charge_id = o.payment_id)
			FROM orders o WHERE product_id = ? AND user_id = 'alice-e2e'`, soon).Scan(&status, &paymentID, &payKey, &charges); err != nil {
			t.Fatal(err)
		}
		if status != "paid" || paymentID == "" || paymentID != payment || !strings.HasPrefix(payKey, "web-") || charges != 1 {
			t.Errorf("after paying: status %q, payment %q (the page shows %q), pay key %q, %d charges, want paid, the page's payment id, a web- key and 1 charge",
				status, paymentID, payment, payKey, charges)
		}
		if got := a.text(c + " .btn-buy"); got != "Bought" {
			t.Errorf("after paying the buy button says %q", got)
		}
		if got := a.eval(fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			return c.querySelector('.audit').hidden + ' ' + !c.querySelector('.audit-note').hidden; })()`, c)); got != "true true" {
			t.Errorf("without the admin token, the audit hidden and its note shown: %s", got)
		}
	})

	step("last unit sold out for the second buyer", func(t *testing.T) {
		a, b := page{t, desktop}, page{t, second}
		a.do("buy the last unit", chromedp.Click(chromedp.CSS(card(last)+" .btn-buy")))
		a.waitJS("the last unit's order confirmed", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="confirmed"]')`, card(last)), 30*time.Second)
		b.waitJS("sold out for the second buyer", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			return c.dataset.phase === 'soldout' && c.querySelector('.btn-buy').disabled &&
			c.querySelector('.btn-buy').textContent === 'Sold out' && c.querySelector('.pill').textContent === 'Sold out'; })()`, card(last)), 10*time.Second)
	})

	step("every error code has a message", func(t *testing.T) {
		a := page{t, desktop}
		for _, code := range []string{"sold_out", "limit_reached", "sale_not_started", "sale_ended", "rate_limited", "unavailable", "not_found", "network"} {
			msg := a.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.purchaseMessage({code: %q, message: 'x'}))`, code))
			if msg == "" || strings.Contains(msg, "The purchase failed") {
				t.Errorf("no message for %s: %q", code, msg)
			}
		}
		for _, code := range []string{"payment_declined", "order_expired", "order_cancelled", "order_already_paid", "payment_in_progress",
			"order_not_confirmed", "order_refused", "not_found", "unavailable", "network"} {
			msg := a.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.payMessage({code: %q, message: 'x'}))`, code))
			if msg == "" || strings.Contains(msg, "The payment failed") {
				t.Errorf("no payment message for %s: %q", code, msg)
			}
		}
		for _, code := range []string{"order_already_paid", "order_expired", "payment_in_progress", "order_not_confirmed", "order_refused", "not_found", "network"} {
			msg := a.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.cancelMessage({code: %q, message: 'x'}))`, code))
			if msg == "" || strings.Contains(msg, "could not be cancelled (") {
				t.Errorf("no cancel message for %s: %q", code, msg)
			}
		}
		// A retry reuses the attempt's key only where the attempt may have reached the provider.
		if got := a.eval(`import('/static/messages.js').then((m) => ['unavailable', 'network', 'payment_declined', 'order_expired']
			.map((c) => m.payRetryableCodes.has(c)).join(' '))`); got != "true true false false" {
			t.Errorf("payment codes retried with the same key: %s", got)
		}
		for _, code := range []string{"unauthorized", "stampede_running", "rate_limited"} {
			if msg := a.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.adminMessage({code: %q}))`, code)); strings.Contains(msg, "failed") {
				t.Errorf("no admin message for %s: %q", code, msg)
			}
		}
	})

	// The policy comes as a header (the page has no meta tag to drift from it), and a purchase
	// that a cross-site page could send without asking (text/plain) is refused.
	step("security headers and a text/plain purchase refused", func(t *testing.T) {
		a := page{t, desktop}
		headers := a.eval(`Promise.all(['/', '/static/app.js', '/api/v1/products'].map((p) => fetch(p).then((r) =>
			[p, r.headers.get('content-security-policy'), r.headers.get('x-content-type-options'), r.headers.get('referrer-policy')].join(' | '))))
			.then((rows) => rows.join('\n'))`)
		page := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
		want := strings.Join([]string{
			"/ | " + page + " | nosniff | no-referrer",
			"/static/app.js | " + page + " | nosniff | no-referrer",
			"/api/v1/products | default-src 'none'; frame-ancestors 'none' | nosniff | no-referrer",
		}, "\n")
		if headers != want {
			t.Errorf("security headers:\n%s\nwant:\n%s", headers, want)
		}
		// From Go: the browser would log the refusal as a console error.
		r := apptest.Client{URL: base}.MustDo(t, "POST", fmt.Sprintf("/api/v1/products/%d/purchase", mysqlProduct),
			`{"user_id":"cross-site"}`, map[string]string{"Content-Type": "text/plain;charset=UTF-8"})
		if r.Status != 415 || r.ErrorCode() != "unsupported_media_type" {
			t.Errorf("a text/plain purchase = %d %s, want 415 unsupported_media_type", r.Status, r.Raw)
		}
	})

	// A module instance of its own is fed made-up answers from a server 3.21 s ahead.
	step("server clock estimate and countdown format", func(t *testing.T) {
		a := page{t, desktop}
		clockCheck := a.eval(`Promise.all([import('/static/clock.js?test'), import('/static/format.js')]).then(([c, f]) => {
			const offset = 3210;
			let sent = Date.now() - 60000;
			for (let i = 0; i < 25; i++) {
				sent += 1618; // phases spread over the second, as probeDelay's requests are
				const received = sent + 20;
				const server = (sent + received) / 2 + offset;
				c.observeServerDate(new Date(Math.floor(server / 1000) * 1000).toUTCString(), sent, received);
			}
			const early = c.serverNowEarliest() - Date.now();
			return [Math.abs(c.offsetMs() - offset) < 80, c.uncertaintyMs() < 80, early <= offset + 1,
				f.formatCountdown(161000), f.formatCountdown(999), f.formatCountdown(3723000), f.formatCountdown(0)].join(' ');
		})`)
		if clockCheck != "true true true 02:41 00:01 1:02:03 00:00" {
			t.Errorf("clock estimate and countdown format: %s", clockCheck)
		}
	})

	// The drawer opens with focus inside, Esc closes it and gives focus back; the token is kept,
	// and the cards on screen show the exact audit (the admin stats): the unit paid above.
	step("drawer focus and admin token", func(t *testing.T) {
		a := page{t, desktop}
		a.do("open the drawer", chromedp.Click(chromedp.ID("admin-open")))
		a.waitJS("the drawer open with the token field focused", `document.getElementById('admin').open && document.activeElement.id === 'token-input'`, 5*time.Second)
		a.do("press Escape", chromedp.KeyEvent(kb.Escape))
		a.waitJS("the drawer closed, focus back on its button", `!document.getElementById('admin').open && document.activeElement.id === 'admin-open'`, 5*time.Second)
		a.do("enter the admin token",
			chromedp.Click(chromedp.ID("admin-open")),
			chromedp.SendKeys(chromedp.ID("token-input"), apptest.AdminToken+"\n"))
		a.waitJS("the token kept for the tab", fmt.Sprintf(`sessionStorage.getItem('seckill.adminToken') === %q`, apptest.AdminToken), 5*time.Second)
		a.do("bring the paid order's card on screen", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector('%s').scrollIntoView()`, card(soon))))
		a.waitJS("the paid unit in the audit", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			const v = (k) => c.querySelector('[data-stat="' + k + '"]').textContent;
			return !c.querySelector('.audit').hidden && c.querySelector('.audit-note').hidden && !c.querySelector('.live-orders').hidden &&
				v('reserved') === '1' && v('confirmed') === '1' && v('oversold') === '0' && v('paid') === '1' && v('awaiting') === '0'; })()`, card(soon)), 10*time.Second)
	})

	// The drawer's strategy select lists the catalog by family, the unsafe strategies marked and
	// styled, the ones not served disabled; the chosen strategy's summary shows under it.
	step("drawer offers the catalog's strategies", func(t *testing.T) {
		a := page{t, desktop}
		type option struct {
			Group, Value, Text string
			Disabled, Unsafe   bool
		}
		var got []option
		if err := json.Unmarshal([]byte(a.eval(`JSON.stringify([...document.querySelectorAll('#demo-strategy option')].map((o) => ({
			Group: o.parentElement.tagName === 'OPTGROUP' ? o.parentElement.label : '', Value: o.value, Text: o.textContent,
			Disabled: o.disabled, Unsafe: o.classList.contains('unsafe')})))`)), &got); err != nil {
			t.Fatal(err)
		}
		groups := map[string]string{"mysql": "MySQL", "redis": "Redis", "zookeeper": "ZooKeeper", "memcached": "Memcached", "control": "Control (no lock)"}
		var families []string // in order of first appearance: the order of the groups
		for _, s := range catalog {
			if !slices.Contains(families, s.Family) {
				families = append(families, s.Family)
			}
		}
		var want []option
		for _, f := range families {
			for _, s := range catalog {
				if s.Family != f {
					continue
				}
				o := option{Group: groups[f], Value: s.Name, Text: s.Name, Disabled: !s.Served, Unsafe: !s.Safe}
				if !s.Safe {
					o.Text += " · unsafe"
				}
				if !s.Served {
					o.Text += " (not served)"
				}
				want = append(want, o)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the strategy select (-want +got):\n%s", diff)
		}
		for _, s := range served {
			a.do("choose "+s.Name, setField("demo-strategy", s.Name))
			summary := a.eval(`(() => { const p = document.getElementById('demo-strategy-summary');
				return [p.hidden ? '(hidden)' : p.textContent, p.classList.contains('unsafe'), document.getElementById('demo-strategy').classList.contains('unsafe')].join(' | '); })()`)
			if want := fmt.Sprintf("%s | %t | %t", s.Summary, !s.Safe, !s.Safe); summary != want {
				t.Errorf("with %s chosen, the summary (text | styled unsafe | select styled unsafe) is %q, want %q", s.Name, summary, want)
			}
		}
		if s := a.eval(`document.getElementById('demo-strategy').getAttribute('aria-describedby')`); s != "demo-strategy-summary" {
			t.Errorf("the strategy select is described by %q", s)
		}
		// Before the catalog is read (a module instance of its own, never loaded), or when it cannot
		// be, the page offers no strategy: the server's registry is the only list.
		if got := a.eval(`import('/static/strategies.js?unread').then((m) => m.strategies().map((s) => s.name + (s.safe ? '' : ' · unsafe')).join(', '))`); got != "" {
			t.Errorf("the fallback strategies: %s", got)
		}
	})

	// stampede runs a stampede from the open drawer and returns its verdict.
	stampede := func(t *testing.T, product int64, strategy string) string {
		t.Helper()
		a := page{t, desktop}
		before := a.eval(`document.getElementById('race').dataset.stampedeId || ''`)
		a.do("set up a stampede",
			setField("demo-product", strconv.FormatInt(product, 10)),
			setField("demo-strategy", strategy),
			setField("demo-stock", "20"),
			setField("demo-buyers", "200"),
			chromedp.Click(chromedp.ID("demo-stampede")))
		a.waitJS("the verdict of the "+strategy+" stampede", fmt.Sprintf(`(() => { const r = document.getElementById('race');
			return r.dataset.state === 'done' && r.dataset.stampedeId !== %q; })()`, before), 45*time.Second)
		return a.text("#race-verdict")
	}
	auditOf := func(t *testing.T, product int64) audit.Facts {
		t.Helper()
		f, err := audit.Load(context.Background(), db, product)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	step("unsafe stampede gets the database verdict", func(t *testing.T) {
		verdict := stampede(t, noneProduct, "none")
		f := auditOf(t, noneProduct)
		want := "PASS — 20 sold, 0 oversold"
		if f.Oversold() > 0 {
			want = fmt.Sprintf("OVERSOLD by %d units", f.Oversold())
		}
		if verdict != want || !f.Drained() {
			t.Errorf("none stampede: verdict %q, audit %+v: want %q", verdict, f, want)
		}
		t.Logf("none stampede: %s (%d reserved of %d)", verdict, f.ReservedUnits, f.InitialStock)
	})

	// Exactly the stock sold, and the product's card says so too.
	step("mysql stampede passes", func(t *testing.T) {
		a := page{t, desktop}
		if verdict := stampede(t, mysqlProduct, "mysql"); verdict != "PASS — 20 sold, 0 oversold" {
			t.Errorf("mysql stampede verdict %q", verdict)
		}
		if v := auditOf(t, mysqlProduct).Violations(true); len(v) > 0 {
			t.Errorf("mysql stampede audit: %v", v)
		}
		if got := a.text(card(mysqlProduct) + " .verdict"); got != "PASS — 20 sold, 0 oversold" {
			t.Errorf("the mysql card's verdict says %q", got)
		}
		a.waitJS("the stampede in the per-second rates", fmt.Sprintf(`/peak [1-9]/.test(document.querySelector('%s .spark-caption').textContent)`, card(mysqlProduct)), 10*time.Second)
		a.waitJS("the mysql card's audit: none oversold", fmt.Sprintf(`document.querySelector('%s [data-stat="oversold"]').textContent === '0'`, card(mysqlProduct)), 5*time.Second)
		a.screenshot(dir, "storefront-desktop-drawer.png", false)
	})

	step("desktop screenshots", func(t *testing.T) {
		a := page{t, desktop}
		a.do("close the drawer", chromedp.Click(chromedp.ID("admin-close")))
		a.waitJS("the drawer closed", `!document.getElementById('admin').open`, 5*time.Second)
		a.screenshot(dir, "storefront-desktop.png", false)
		a.screenshot(dir, "storefront-desktop-full.png", true)
	})

	// The same page on a phone: one column, nothing wider than the screen.
	phoneScreen := chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch)
	step("phone layout", func(t *testing.T) {
		a := page{t, desktop}
		a.do("turn the page into a phone", phoneScreen, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		a.waitJS("the phone layout", `document.documentElement.clientWidth === 390 && document.documentElement.scrollWidth === 390`, 5*time.Second)
		a.screenshot(dir, "storefront-phone.png", false)
		a.screenshot(dir, "storefront-phone-full.png", true)
	})

	// A fresh page load at phone size, as a phone would make it.
	step("phone loads the page", func(t *testing.T) {
		p := page{t, phone}
		p.do("open the storefront on a phone", phoneScreen, chromedp.Navigate(base+"/"))
		p.waitJS("the cards with their stats", fmt.Sprintf(`document.querySelectorAll('.card').length === %d && document.querySelector('.card [data-stat="stock"]').textContent !== '–'`, cards), 15*time.Second)
		if w := p.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("the page is %s px wide on a 390 px screen", w)
		}
	})

	step("no console errors", func(t *testing.T) {
		for _, c := range consoles {
			c.check(t)
		}
	})
	t.Logf("storefront test took %s", time.Since(began).Round(time.Millisecond))
}

// TestStorefrontPaymentWindow drives the payment window in the browser against two instances with
// a window of seconds: one whose payments succeed, one whose simulated provider declines every
// payment. On one sale of three units, buyer A pays and sees paid (still paid after a reload);
// buyer B is declined, sees why and can pay again, but lets the window run out and sees the order
// expired and its unit back on sale; buyer C cancels (after a confirmation) and sees the unit back
// on sale too. The live panel counts each, and the database agrees.
func TestStorefrontPaymentWindow(t *testing.T) {
	chromium := chromiumPath(t)
	const window = 6 * time.Second // long enough to click in, on a busy machine; short enough to wait for
	stack := apptest.NewStack(t)
	env := map[string]string{"SECKILL_PAYMENT_WINDOW": window.String(), "SECKILL_PAYMENT_FAILURE_RATE": "0"}
	pays := stack.Start(t, env)
	env["SECKILL_PAYMENT_FAILURE_RATE"] = "1"
	declines := stack.Start(t, env)
	admin := apptest.Client{URL: pays.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "Pay or release", "price_cents": 1250, "stock": 3})
	db, err := sql.Open("mysql", stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true), chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// One browser context (own localStorage, so own buyer) per buyer.
	var consoles []*console
	tab := func(name string) page {
		ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		consoles = append(consoles, watchConsole(t, ctx, name))
		ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
		t.Cleanup(cancelTimeout)
		return page{t, ctx}
	}
	c := card(product)
	// buy opens the storefront at base and buys the unit; it returns the buyer's id once the order
	// is confirmed, with the Pay button and a countdown of at most the window.
	buy := func(p page, base string) string {
		t.Helper()
		p.do("open the storefront", chromedp.Navigate(base+"/"))
		p.waitJS("the sale open", fmt.Sprintf(`!!document.querySelector('%s .btn-buy') && !document.querySelector('%s .btn-buy').disabled`, c, c), 15*time.Second)
		p.do("buy", chromedp.Click(chromedp.CSS(c+" .btn-buy")))
		p.waitJS("the Pay button", fmt.Sprintf(`(() => { const p = document.querySelector('%s .pay');
			return !p.hidden && !p.querySelector('.btn-pay').disabled; })()`, c), 15*time.Second)
		if got := p.text(c + " .pay-countdown"); !regexp.MustCompile(`^Pay within 00:0[1-6]$`).MatchString(got) {
			t.Errorf("the payment countdown says %q, want at most %s", got, window)
		}
		return p.text("#buyer-id")
	}
	orderOf := func(user string) (status, paymentID string, returned bool) {
		t.Helper()
		if err := db.QueryRow(`SELECT status, COALESCE(payment_id, ''), returned_at IS NOT NULL FROM orders WHERE product_id = ? AND user_id = ?`,
			product, user).Scan(&status, &paymentID, &returned); err != nil {
			t.Fatalf("the order of %s: %v", user, err)
		}
		return status, paymentID, returned
	}

	a := tab("payer")
	payer := buy(a, pays.URL)
	a.do("pay", chromedp.Click(chromedp.CSS(c+" .btn-pay")))
	a.waitJS("the order paid", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="paid"]') && document.querySelector('%s .pay').hidden`, c, c), 15*time.Second)
	payment := a.text(c + " .payment-id")
	if status, id, _ := orderOf(payer); status != "paid" || id == "" || id != payment {
		t.Errorf("the payer's order is %s with payment %q; the page shows %q", status, id, payment)
	}
	a.do("reload", chromedp.Reload())
	// The status may be drawn a moment before the payment id: neither may be there yet.
	a.waitJS("the order still paid after a reload", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="paid"]') &&
		(document.querySelector('%s .payment-id') || {}).textContent === %q`, c, c, payment), 15*time.Second)

	b := tab("declined")
	late := buy(b, declines.URL)
	b.do("pay", chromedp.Click(chromedp.CSS(c+" .btn-pay")))
	b.waitJS("the decline explained, the Pay button back", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		return c.querySelector('.error').textContent.includes('declined') && c.querySelector('.btn-pay').textContent === 'Pay again' &&
		!c.querySelector('.btn-pay').disabled && c.querySelector('.order-status').dataset.status === 'confirmed'; })()`, c), 10*time.Second)
	b.waitJS("the order expired, its unit back on sale", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		const note = c.querySelector('.order-note');
		return !!c.querySelector('.order-status[data-status="expired"]') && c.querySelector('.pay').hidden &&
			!!note && note.dataset.returned === 'true' && note.textContent.includes('went back on sale') &&
			c.querySelector('.btn-buy').disabled && c.querySelector('.btn-buy').textContent === 'Not paid in time' &&
			c.querySelector('.error').textContent === ''; })()`, c), window+20*time.Second)
	if status, id, returned := orderOf(late); status != "expired" || id != "" || !returned {
		t.Errorf("the declined buyer's order is %s, payment %q, returned %t: want expired, none, returned", status, id, returned)
	}

	cc := tab("canceller")
	quitter := buy(cc, pays.URL)
	cc.do("ask to cancel", chromedp.Click(chromedp.CSS(c+" .btn-cancel-order")))
	cc.waitJS("the question, with focus on keeping the order", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		return !c.querySelector('.cancel-confirm').hidden && document.activeElement === c.querySelector('.btn-cancel-no'); })()`, c), 5*time.Second)
	cc.do("confirm", chromedp.Click(chromedp.CSS(c+" .btn-cancel-yes")))
	cc.waitJS("the order cancelled, its unit back on sale", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		const note = c.querySelector('.order-note');
		return !!c.querySelector('.order-status[data-status="cancelled"]') && c.querySelector('.pay').hidden &&
			!!note && note.dataset.returned === 'true' && c.querySelector('.btn-buy').textContent === 'Order cancelled'; })()`, c), 15*time.Second)
	if status, _, returned := orderOf(quitter); status != "cancelled" || !returned {
		t.Errorf("the cancelled order is %s, returned %t", status, returned)
	}

	// Two of the three units are back on sale, in every tab; the orders are the operators' audit:
	// no buyer's tab shows them, the payer's does once it has the admin token, each ending counted.
	for _, p := range []page{a, b, cc} {
		p.waitJS("the returned units in stock, no audit", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
			return c.querySelector('.stock-text').textContent === '2 of 3 left' && c.querySelector('[data-stat="stock"]').textContent === '2' &&
				c.querySelector('.audit').hidden && !c.querySelector('.audit-note').hidden; })()`, c), 15*time.Second)
	}
	a.do("enter the admin token",
		chromedp.Click(chromedp.ID("admin-open")),
		chromedp.SendKeys(chromedp.ID("token-input"), apptest.AdminToken+"\n"),
		chromedp.Click(chromedp.ID("admin-close")))
	a.waitJS("each ending in the audit", fmt.Sprintf(`(() => { const c = document.querySelector('%s');
		const v = (k) => c.querySelector('[data-stat="' + k + '"]').textContent;
		return !c.querySelector('.audit').hidden && !c.querySelector('.live-orders').hidden &&
			v('paid') === '1' && v('expired') === '1' && v('cancelled') === '1' && v('returned') === '2' && v('awaiting') === '0'; })()`, c), 15*time.Second)
	f, err := audit.Load(context.Background(), db, product)
	if err != nil {
		t.Fatal(err)
	}
	if v := f.Violations(true); len(v) > 0 {
		t.Errorf("audit: %v", v)
	}
	b.screenshot(screenshotDir(t), "storefront-order-expired.png", true)
	a.screenshot(screenshotDir(t), "storefront-order-paid.png", true)
	for _, c := range consoles {
		c.check(t, "status of 402") // the declined payments
	}
}
