package web_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// waitingRoom is the admission rule of a waiting-room sale letting rate buyers in per second, with
// turns (sessions) of a minute and room for everyone at once: only the rate holds the line back.
// Its buyers may go unheard for a minute before their turn, so that the buyers the test queues
// through the API, which do not poll, are not skipped.
func waitingRoom(rate float64) map[string]any {
	return map[string]any{"mode": "waiting_room", "admit_rate": rate, "max_active": 1000, "session_seconds": 60, "abandon_seconds": 60}
}

// TestStorefrontWaitingRoom drives a waiting-room sale's line in the browser against the real app
// and services. The buyer's card offers "Join the line" instead of Buy (a line not open yet says
// when it opens); joined behind eight buyers queued through the API at one admission a second,
// the page shows its place and an estimated wait, and the place goes down, the progress bar up,
// as the buyers ahead are let in; a reload keeps the place (the same ticket, asked for, not joined
// anew); then "It's your turn — buy within N s", counting down; a purchase refused for its pass is
// explained in words; the purchase with the pass is accepted and the order confirmed. On a second
// sale of one unit, with the line's polls refused (429, Retry-After: 60), the page waits as told,
// and when a buyer ahead takes the unit the sale's live stream closes the line at once: "Sold out
// — the line is closed", nothing polled. Screenshots of the queue panel are taken on a desktop.
func TestStorefrontWaitingRoom(t *testing.T) {
	chromium := chromiumPath(t)
	began := time.Now()
	seed := make([]byte, 32) // an Ed25519 seed: the replica's waiting-room key, as SECKILL_WAITROOM_KEY spells it
	if _, err := rand.Read(seed); err != nil {
		t.Fatal(err)
	}
	stack := apptest.NewStack(t)
	server := stack.Start(t, map[string]string{"SECKILL_WAITROOM_KEY": base64.StdEncoding.EncodeToString(seed),
		"SECKILL_PAYMENT_FAILURE_RATE": "0", "SECKILL_PAYMENT_WINDOW": "10m"})
	db, err := sql.Open("mysql", stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	admin := apptest.Client{URL: server.URL, Token: apptest.AdminToken}
	api := apptest.Client{URL: server.URL}
	now := time.Now().UTC().Truncate(time.Second)
	line := admin.CreateProduct(t, map[string]any{"name": "Console drop · waiting room", "price_cents": 49900, "stock": 5, "strategy": "mysql",
		"admission": waitingRoom(1)})
	laterRoom := waitingRoom(50)
	laterRoom["queue_opens_at"] = now.Add(30 * time.Minute).Format(time.RFC3339)
	later := admin.CreateProduct(t, map[string]any{"name": "Sneaker launch · line opens later", "price_cents": 17900, "stock": 50, "strategy": "redis",
		"sale_starts_at": now.Add(time.Hour).Format(time.RFC3339), "admission": laterRoom})
	open := admin.CreateProduct(t, map[string]any{"name": "Open sale · no line", "price_cents": 1999, "stock": 20, "strategy": "mysql"})
	last := admin.CreateProduct(t, map[string]any{"name": "Last unit · waiting room", "price_cents": 99900, "stock": 1, "strategy": "mysql",
		"admission": waitingRoom(0.5)})

	queuePath := func(product int64) string { return fmt.Sprintf("/api/v1/products/%d/queue", product) }
	// join queues a buyer through the API; the replica's board may learn the product a moment
	// after its creation (docs/read-path.md's staleness bound).
	join := func(t *testing.T, product int64, user string) apptest.Response {
		t.Helper()
		var r apptest.Response
		itest.Eventually(t, 5*time.Second, func() (bool, string) {
			r = api.MustDo(t, http.MethodPost, queuePath(product), map[string]any{"user_id": user}, nil)
			return r.Status == http.StatusOK, r.Raw
		})
		return r
	}
	isQueue := func(product int64) func(string) bool {
		return func(path string) bool { return path == queuePath(product) }
	}

	dir := screenshotDir(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("hide-scrollbars", true), chromedp.WindowSize(1440, 900))...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	con := watchConsole(t, browserCtx, "buyer")
	sent := watchRequests(t, browserCtx)
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(browserCtx, 3*time.Minute)
	defer cancel()

	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	c := card(line)
	panel := c + " .queue"

	step("a waiting-room sale offers its line", func(t *testing.T) {
		p := page{t, ctx}
		p.do("open the storefront", chromedp.EmulateViewport(1440, 900), reducedMotion(), chromedp.Navigate(server.URL+"/"))
		p.waitJS("four cards, the line open to join", fmt.Sprintf(`document.querySelectorAll('.card').length === 4 &&
			!document.querySelector('%s .btn-buy').disabled`, c), 15*time.Second)
		for _, tc := range []struct {
			card, button, note string
			disabled           bool
		}{
			{card(line), "Join the line", "Waiting room · lets in 1 buyer a second", false},
			{card(later), "Line opens in 29:", "Waiting room · lets in 50 buyers a second", true},
			{card(open), "Buy now", "", false},
			{card(last), "Join the line", "Waiting room · lets in one buyer every 2 s", false},
		} {
			button, note := p.text(tc.card+" .btn-buy"), p.eval(fmt.Sprintf(`(() => { const n = document.querySelector('%s .admission-note');
				return n.hidden ? '' : n.textContent; })()`, tc.card))
			disabled := p.eval(fmt.Sprintf(`String(document.querySelector('%s .btn-buy').disabled)`, tc.card)) == "true"
			if !strings.HasPrefix(button, tc.button) || note != tc.note || disabled != tc.disabled {
				t.Errorf("card %s: button %q (disabled %t), note %q; want %q… (disabled %t), %q", tc.card, button, disabled, note, tc.button, tc.disabled, tc.note)
			}
		}
		if got := p.text(card(later) + " .countdown"); !strings.HasPrefix(got, "Line opens at ") {
			t.Errorf("the sale whose line opens later says %q", got)
		}
		if !p.hidden(panel) {
			t.Errorf("the queue panel shows before the buyer joined: %q", p.text(panel))
		}
	})

	// Eight buyers queue through the API first; the page's buyer joins behind them.
	var ticket, firstPlace int
	step("joined behind eight, the place shows with an estimated wait", func(t *testing.T) {
		p := page{t, ctx}
		for i := 1; i <= 8; i++ {
			if r := join(t, line, fmt.Sprint("ahead-", i)); r.Num("ticket") != i {
				t.Fatalf("ahead-%d joins: %s; want ticket %d", i, r.Raw, i)
			}
		}
		p.do("join the line", chromedp.Click(chromedp.CSS(c+" .btn-buy")))
		p.waitJS("the buyer's place in the line", fmt.Sprintf(`(() => { const q = document.querySelector('%s');
			return !q.hidden && q.dataset.state === 'waiting' && q.dataset.position !== ''; })()`, panel), 10*time.Second)
		ticket, _ = strconv.Atoi(p.eval(fmt.Sprintf(`document.querySelector('%s').dataset.ticket`, panel)))
		firstPlace, _ = strconv.Atoi(p.eval(fmt.Sprintf(`document.querySelector('%s').dataset.position`, panel)))
		text := p.text(panel + " .queue-line")
		m := regexp.MustCompile(`^You are number (\d+) in line — about \d+ s$`).FindStringSubmatch(text)
		if ticket != 9 || firstPlace < 2 || firstPlace > 9 || m == nil || m[1] != strconv.Itoa(firstPlace) {
			t.Errorf("joined behind eight: ticket %d, place %d, the panel says %q", ticket, firstPlace, text)
		}
		if button, disabled := p.text(c+" .btn-buy"), p.eval(fmt.Sprintf(`String(document.querySelector('%s .btn-buy').disabled)`, c)); button != "Waiting for your turn…" || disabled != "true" {
			t.Errorf("in line, the button says %q (disabled %s)", button, disabled)
		}
	})

	step("the place goes down as the buyers ahead are let in", func(t *testing.T) {
		p := page{t, ctx}
		p.waitJS("a smaller place, a longer progress bar", fmt.Sprintf(`(() => { const q = document.querySelector('%s');
			return q.dataset.state === 'waiting' && Number(q.dataset.position) < %d &&
				q.querySelector('.queue-line').textContent.startsWith('You are number ' + q.dataset.position + ' in line') &&
				Number(q.querySelector('.queue-bar').getAttribute('aria-valuenow')) > 0; })()`, panel, firstPlace), 15*time.Second)
		p.screenshot(dir, "storefront-queue.png", false)
	})

	step("a reload keeps the place", func(t *testing.T) {
		p := page{t, ctx}
		mark := sent.mark()
		p.do("reload", chromedp.Reload())
		p.waitJS("the same ticket after the reload", fmt.Sprintf(`(() => { const q = document.querySelector('%s');
			return !!q && !q.hidden && q.dataset.ticket === '%d' && (q.dataset.state === 'waiting' || q.dataset.state === 'admitted'); })()`, panel, ticket), 15*time.Second)
		for _, r := range sent.since(mark, isQueue(line)) {
			if r.method != http.MethodGet {
				t.Errorf("after the reload the page sent %s %s: the remembered place is asked for, not joined anew", r.method, r.path)
			}
		}
	})

	step("its turn comes: buy within a countdown", func(t *testing.T) {
		p := page{t, ctx}
		p.waitJS("the buyer's turn", fmt.Sprintf(`(() => { const q = document.querySelector('%s');
			return q.dataset.state === 'admitted' && !document.querySelector('%s .btn-buy').disabled; })()`, panel, c), 20*time.Second)
		turn := p.text(panel + " .queue-line")
		if !regexp.MustCompile(`^It's your turn — buy within ([45]\d|60) s$`).MatchString(turn) {
			t.Errorf("admitted, the panel says %q; want a turn of about a minute", turn)
		}
		if got := p.text(c + " .btn-buy"); got != "Buy now" {
			t.Errorf("admitted, the button says %q", got)
		}
		p.waitJS("the turn counting down", fmt.Sprintf(`document.querySelector('%s .queue-line').textContent !== %q`, panel, turn), 5*time.Second)
		p.screenshot(dir, "storefront-queue-turn.png", false)
	})

	step("a refused pass is explained, then the pass buys", func(t *testing.T) {
		p := page{t, ctx}
		var refused atomic.Int32
		stop := refuseRequests(t, ctx, fmt.Sprintf("*/api/v1/products/%d/purchase", line), refusal{status: 403, code: "admission_pass_expired",
			message: "the admission pass expired: its session is over, join the queue again"}, &refused)
		p.do("buy", chromedp.Click(chromedp.CSS(c+" .btn-buy")))
		p.waitJS("the refusal in words", fmt.Sprintf(`document.querySelector('%s .error').textContent.startsWith('Your turn ended before the purchase reached the shop.')`, c), 10*time.Second)
		stop()
		if refused.Load() != 1 {
			t.Fatalf("%d purchases refused, want 1", refused.Load())
		}
		// The page asked the line where the buyer stands: still in their turn, with a pass.
		p.waitJS("still the buyer's turn", fmt.Sprintf(`document.querySelector('%s').dataset.state === 'admitted' &&
			!document.querySelector('%s .btn-buy').disabled`, panel, c), 10*time.Second)
		p.do("buy again", chromedp.Click(chromedp.CSS(c+" .btn-buy")))
		p.waitJS("the order confirmed, the line left", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="confirmed"]') &&
			document.querySelector('%s').hidden && document.querySelector('%s .error').textContent === ''`, c, panel, c), 30*time.Second)
		buyer := p.text("#buyer-id")
		var reservations int
		if err := db.QueryRow(`SELECT COUNT(*) FROM reservations WHERE product_id = ? AND user_id = ?`, line, buyer).Scan(&reservations); err != nil {
			t.Fatal(err)
		}
		if reservations != 1 {
			t.Errorf("%s holds %d reservations of the waiting-room sale, want 1", buyer, reservations)
		}
		if got := p.eval(`localStorage.getItem('seckill.queues') || ''`); strings.Contains(got, `"`+strconv.FormatInt(line, 10)+`"`) {
			t.Errorf("after the purchase the page still remembers the line: %s", got)
		}
	})

	step("sold out reaches the line at once, through the stream", func(t *testing.T) {
		p := page{t, ctx}
		cl := card(last)
		lastPanel := cl + " .queue"
		first := join(t, last, "early-0")
		for i := 1; i <= 5; i++ {
			join(t, last, fmt.Sprint("early-", i))
		}
		p.do("join the last unit's line", chromedp.Click(chromedp.CSS(cl+" .btn-buy")))
		p.waitJS("the buyer in the last unit's line", fmt.Sprintf(`document.querySelector('%s').dataset.state === 'waiting'`, lastPanel), 10*time.Second)

		// The line's route refuses the page from now on, as a busy server would: the page waits
		// the Retry-After, keeps its place, and says so.
		var refused atomic.Int32
		mark := sent.mark()
		stop := refuseRequests(t, ctx, "*"+queuePath(last)+"*", refusal{status: 429, code: "rate_limited",
			message: "too many requests from this client", retryAfter: "60"}, &refused)
		defer stop()
		itest.Eventually(t, 10*time.Second, func() (bool, string) { return refused.Load() > 0, "no poll of the line was sent" })
		p.waitJS("the wait explained", fmt.Sprintf(`document.querySelector('%s .queue-note').textContent.includes('Checking your place again in 60 s')`, lastPanel), 5*time.Second)

		// early-0, first in line, is let in and takes the unit.
		var in apptest.Response
		itest.Eventually(t, 10*time.Second, func() (bool, string) {
			in = api.MustDo(t, http.MethodGet, queuePath(last)+"?user_id=early-0", nil, nil)
			return in.Str("state") == "admitted", in.Raw
		})
		if first.Num("ticket") != 1 {
			t.Fatalf("early-0 joined with %s", first.Raw)
		}
		if r := api.MustDo(t, http.MethodPost, fmt.Sprintf("/api/v1/products/%d/purchase", last), map[string]any{"user_id": "early-0"},
			map[string]string{"Admission-Pass": in.Str("pass"), "Idempotency-Key": "queue-test-early-0"}); r.Status != http.StatusAccepted {
			t.Fatalf("early-0 buys the last unit with its pass: %d %s", r.Status, r.Raw)
		}
		p.waitJS("the line closed: sold out", fmt.Sprintf(`(() => { const q = document.querySelector('%s');
			return q.dataset.state === 'sold_out' && q.dataset.polling === 'false' &&
				q.querySelector('.queue-line').textContent === 'Sold out — the line is closed' &&
				document.querySelector('%s .btn-buy').textContent === 'Sold out'; })()`, lastPanel, cl), 10*time.Second)
		// Told to wait 60 s, the page sent no poll since the one refused: the stream closed the line.
		if polls := sent.since(mark, isQueue(last)); len(polls) != 1 || refused.Load() != 1 {
			t.Errorf("the page asked the line %d times (%d refused) after the first refusal with Retry-After: 60, want once", len(polls), refused.Load())
		}
		p.screenshot(dir, "storefront-queue-sold-out.png", false)
	})

	step("the line's words", func(t *testing.T) {
		p := page{t, ctx}
		for _, code := range []string{"admission_pass_required", "admission_pass_invalid", "admission_pass_expired"} {
			if msg := p.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.purchaseMessage({code: %q, message: 'x'}))`, code)); msg == "" || strings.Contains(msg, "The purchase failed") {
				t.Errorf("no message for %s: %q", code, msg)
			}
		}
		for _, code := range []string{"queue_not_open", "no_waiting_room", "sale_ended", "not_found", "rate_limited", "unavailable", "network", "unauthorized"} {
			if msg := p.eval(fmt.Sprintf(`import('/static/messages.js').then((m) => m.queueMessage({code: %q, message: 'x'}))`, code)); msg == "" || strings.Contains(msg, "Joining the line failed") {
				t.Errorf("no line message for %s: %q", code, msg)
			}
		}
		if got := p.eval(`import('/static/format.js').then((f) => [f.formatWait(0.2), f.formatWait(40), f.formatWait(89), f.formatWait(150), f.formatWait(3900),
			f.formatAdmitRate(1), f.formatAdmitRate(0.5), f.formatAdmitRate(1500)].join(' | '))`); got != "1 s | 40 s | 89 s | 3 min | 1 h 5 min | 1 buyer a second | one buyer every 2 s | 1,500 buyers a second" {
			t.Errorf("the line's formats: %s", got)
		}
	})

	// The browser logs the refusals the test made up (429 and 403); nothing else.
	con.check(t, "status of 429", "status of 403")
	t.Logf("waiting-room test took %s", time.Since(began).Round(time.Millisecond))
}

// hidden reports whether the element sel matches is absent or hidden.
func (p page) hidden(sel string) bool {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return String(!e || e.hidden); })()`, sel)) == "true"
}
