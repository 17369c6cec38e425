package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
)

// Attempt is one planned request: buyer b's try number n, with its Idempotency-Key.
type Attempt struct {
	Buyer  int
	n      int
	User   string
	target string // replica base URL
	key    string
	Token  string // the buyer's token, when the replicas verify buyers (-buyer-jwt-key)
}

// Answer is what one request got.
type Answer struct {
	Attempt
	Sent     time.Time
	Latency  time.Duration
	Status   int // 0: no answer (transport error)
	Code     string
	OrderID  string
	Replayed bool
	err      string
}

// Outcome names an answer for the report: the API's code (sale.Code) where it has one. A 502 or
// 504 without one comes from a proxy in front of the replicas (nginx) that lost the replica's
// answer: for the buyer, a transport error.
func (a Answer) Outcome() string {
	switch code := sale.Code(a.Code); {
	case a.Status == http.StatusAccepted && a.Replayed:
		return "replayed" // a 202 with Idempotent-Replayed: the first answer again
	case a.Status == http.StatusAccepted:
		return string(sale.CodeAccepted)
	case a.Status == 0 || a.LostByProxy():
		return "transport_error"
	case code == sale.CodeSoldOut || code == sale.CodeLimitReached || code == sale.CodeRateLimited || code == sale.CodeUnavailable,
		code == sale.CodeUnconfirmed: // redis-lua's replicas did not confirm in time: settled by a retry with the key
		return a.Code
	}
	return "other"
}

// LostByProxy reports a proxy's 502 or 504: the replica's answer, if any, never came through.
func (a Answer) LostByProxy() bool {
	return (a.Status == http.StatusBadGateway || a.Status == http.StatusGatewayTimeout) && a.Code == ""
}

// definitive reports whether the answer settles the attempt: a transport error or a 5xx leaves
// it unknown whether the purchase committed.
func (a Answer) definitive() bool {
	return a.Status != 0 && a.Status < 500 && a.Status != http.StatusTooManyRequests
}

// Account adds to sr's verdict that every planned request was answered and every unknown outcome
// settled: planned requests, and unknown purchases that settle gave up on.
func (sr *StrategyReport) Account(planned int, stuck []Answer) {
	if sr.Requests != planned {
		sr.Violations = append(sr.Violations, fmt.Sprintf("%d requests planned, %d answered", planned, sr.Requests))
	}
	if v := StuckViolation(stuck); v != "" {
		sr.Violations = append(sr.Violations, v)
	}
	sr.Verdict, sr.Violations = Verdict(sr.Strategy, sr.Oversold, sr.Violations)
}

// PlanAttempts lays out every request: buyer i on replica i mod n; try 1 and its retry carry one
// key, try 3 a second key (a second purchase, which the per-user limit must refuse). A buyer's
// tries sit next to each other, so at full speed they race.
func PlanAttempts(o *Options, runID, tag string) []Attempt {
	plan := make([]Attempt, 0, o.Buyers*o.Attempts)
	for b := range o.Buyers {
		user := fmt.Sprintf("lt%s-%s-%d", strings.ReplaceAll(runID, "-", ""), tag, b)
		target := o.Targets[b%len(o.Targets)]
		for n := 1; n <= o.Attempts; n++ {
			key := user + "-k1"
			if n == 3 {
				key = user + "-k2"
			}
			plan = append(plan, Attempt{Buyer: b, n: n, User: user, target: target, key: key, Token: o.buyerToken(user)})
		}
	}
	return plan
}

// Attack sends the plan with vegeta and returns every answer, and the chaos events.
func Attack(ctx context.Context, o *Options, productID int64, plan []Attempt, say func(string, ...any)) ([]Answer, []Event, error) {
	urls, err := purchaseURLs(o.Targets, productID)
	if err != nil {
		return nil, nil, err
	}
	one := 1
	var next atomic.Int64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= int64(len(plan)) {
			return vegeta.ErrNoTargets
		}
		a := plan[i]
		body, err := json.Marshal(client.PurchaseRequest{UserID: &a.User, Quantity: &one})
		if err != nil {
			return err
		}
		t.Method = http.MethodPost
		t.URL = urls[a.target] + "?lt=" + strconv.FormatInt(i, 10) // the answer's attempt (toAnswer)
		t.Body = body
		t.Header = http.Header{}
		client.SetPurchaseHeader(t.Header, client.PurchaseParams{IdempotencyKey: &a.key})
		if a.Token != "" {
			t.Header.Set("Authorization", "Bearer "+a.Token)
		}
		return nil
	}
	attacker := newAttacker(o)
	var pacer vegeta.Pacer = vegeta.ConstantPacer{Freq: o.Rate, Per: time.Second}
	if o.BurstEvery > 0 {
		pacer = BurstPacer{Every: o.BurstEvery, PerBurst: max(1, int(float64(o.Rate)*o.BurstEvery.Seconds()))}
	}

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var events []Event
	start := time.Now()
	chaosDone := make(chan []Event, 1)
	if o.During != nil {
		go func() { chaosDone <- o.During(actx, start, say) }()
	} else {
		chaosDone <- nil
	}

	answers := make([]Answer, 0, len(plan))
	results := attacker.Attack(targeter, pacer, o.MaxDuration, "seckill")
	for res := range results {
		if ctx.Err() != nil {
			attacker.Stop()
		}
		a, ok := toAnswer(res, plan)
		if ok {
			answers = append(answers, a)
		}
	}
	cancel() // the attack is over: a kill not yet done is not done
	events = <-chaosDone
	return answers, events, ctx.Err()
}

// purchaseURLs returns the URL of the product's purchase at each target, as the generated client
// writes it (api/client.PurchaseURL).
func purchaseURLs(targets []string, productID int64) (map[string]string, error) {
	urls := make(map[string]string, len(targets))
	for _, t := range targets {
		u, err := client.PurchaseURL(t, productID)
		if err != nil {
			return nil, fmt.Errorf("target %q: %w", t, err)
		}
		urls[t] = u
	}
	return urls, nil
}

// BurstPacer sends perBurst requests at once at the start of every period of every: the mean
// rate of a ConstantPacer, in bursts. The fault run paces the unsafe control so, for its race to
// show (smooth, one at a time, its read-check-write seldom overlaps another and need not oversell).
type BurstPacer struct {
	Every    time.Duration
	PerBurst int
}

// Pace lets the burst of the current period go at once, then waits for the next period.
func (p BurstPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	period := elapsed / p.Every
	if hits < uint64(period+1)*uint64(p.PerBurst) {
		return 0, false
	}
	return (period+1)*p.Every - elapsed, false
}

// Rate is the mean rate, per second.
func (p BurstPacer) Rate(time.Duration) float64 { return float64(p.PerBurst) / p.Every.Seconds() }

// newAttacker is vegeta as every attack of the harness uses it: o.workers requests in flight
// on as many keep-alive HTTP/1.1 connections.
func newAttacker(o *Options) *vegeta.Attacker {
	return vegeta.NewAttacker(
		vegeta.Workers(uint64(o.Workers)), vegeta.MaxWorkers(uint64(o.Workers)),
		vegeta.Connections(o.Workers), vegeta.KeepAlive(true),
		vegeta.Timeout(30*time.Second), vegeta.MaxBody(4096), vegeta.HTTP2(false),
	)
}

// toAnswer maps a vegeta result back to its planned attempt through the lt query parameter.
func toAnswer(res *vegeta.Result, plan []Attempt) (Answer, bool) {
	u, err := url.Parse(res.URL)
	if err != nil {
		return Answer{}, false
	}
	i, err := strconv.Atoi(u.Query().Get("lt"))
	if err != nil || i < 0 || i >= len(plan) {
		return Answer{}, false
	}
	a := Answer{Attempt: plan[i], Sent: res.Timestamp, Latency: res.Latency, Status: int(res.Code), err: res.Error}
	a.decode(res.Body, res.Headers.Get("Idempotent-Replayed") == "true")
	return a, true
}

// decode reads a purchase's answer into a, in the generated types; a body that is no JSON (a
// proxy's page) leaves the order and code empty.
func (a *Answer) decode(body []byte, replayed bool) {
	b, _ := client.DecodePurchaseAnswer(body) // the zero answer on an error
	a.take(b, replayed)
}

func (a *Answer) take(b client.PurchaseAnswer, replayed bool) {
	a.OrderID, a.Code, a.Replayed = b.OrderID, string(b.Error.Code), replayed
}

// SettleTries is how many times settle sends one purchase before it gives up.
const SettleTries = 30

// Settle re-sends, with the same Idempotency-Key, every attempt whose answer left it unknown
// whether the purchase committed (no answer, 5xx, 429), until a replica gives a definitive one:
// the buyers a real client would retry. Their answers complete what the buyers were told;
// stuck holds the last answer of each purchase it gave up on after settleTries.
func Settle(ctx context.Context, o *Options, productID int64, answers []Answer) (settled, stuck []Answer) {
	decided := map[string]bool{} // buyer/key pairs with a definitive answer
	for _, a := range answers {
		if a.definitive() {
			decided[a.key] = true
		}
	}
	var open []Attempt
	seen := map[string]bool{}
	for _, a := range answers {
		if !decided[a.key] && !seen[a.key] {
			seen[a.key] = true
			open = append(open, a.Attempt)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, at := range open {
		var a Answer
		for try := range SettleTries {
			target := o.Targets[(at.Buyer+try)%len(o.Targets)]
			if a = post(ctx, client, target, productID, at); a.definitive() || ctx.Err() != nil {
				settled = append(settled, a)
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !a.definitive() && ctx.Err() == nil {
			stuck = append(stuck, a)
		}
	}
	return settled, stuck
}

// StuckViolation says how many purchases settle gave up on and what their last answers were
// (status, code or transport error, counted), or "" if none.
func StuckViolation(stuck []Answer) string {
	if len(stuck) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, a := range stuck {
		why := fmt.Sprintf("%d %s", a.Status, a.Code)
		if a.Status == 0 {
			why = "no answer: " + a.err
		}
		counts[strings.TrimSpace(why)]++
	}
	whys := make([]string, 0, len(counts))
	for why, n := range counts {
		whys = append(whys, fmt.Sprintf("%s ×%d", why, n))
	}
	slices.Sort(whys)
	return fmt.Sprintf("%d purchases still of unknown outcome after %d retries each (last answers: %s)", len(stuck), SettleTries, strings.Join(whys, "; "))
}

// post sends attempt at's purchase to target through api/client's lean purchase.
func post(ctx context.Context, c *http.Client, target string, productID int64, at Attempt) Answer {
	a := Answer{Attempt: at, Sent: time.Now()}
	url, err := client.PurchaseURL(target, productID)
	if err != nil {
		a.err = err.Error()
		return a
	}
	one := 1
	req, err := client.NewLeanPurchase(ctx, url, client.PurchaseParams{IdempotencyKey: &at.key}, client.PurchaseRequest{UserID: &at.User, Quantity: &one})
	if err != nil {
		a.err = err.Error()
		return a
	}
	if at.Token != "" {
		req.Header.Set("Authorization", "Bearer "+at.Token)
	}
	res, err := c.Do(req)
	a.Latency = time.Since(a.Sent)
	if err != nil {
		a.err = err.Error()
		return a
	}
	a.Status = res.StatusCode
	b, _ := client.ReadPurchaseAnswer(res) // the zero answer on an error
	a.take(b, res.Header.Get("Idempotent-Replayed") == "true")
	return a
}

// AdminClient talks to the admin API.
type AdminClient struct{ *appapi.Client }

// Admin returns the client of o's admin API.
func (o *Options) Admin() *AdminClient { return &AdminClient{appapi.New(o.AdminURL, o.AdminToken)} }

// SaleProduct puts the product called name on sale for an hour with stock units and the strategy:
// it resets the product if one of that name exists (clearing its reservations and orders) and
// creates it otherwise, with the sale opening a second or two later, and returns once it has
// opened. Reusing names keeps the storefront from filling up with one product per run.
//
// Not open at once: the replica that resets the product tells the others over the change feed,
// and a purchase that reaches another replica before the message does meets the product's old
// sale there (sold out, say): a fresh-clone CI run saw one buyer told sold_out that way. An
// operator resets a sale before it opens, as here.
func (c *AdminClient) SaleProduct(ctx context.Context, name, strategy string, stock int) (int64, error) {
	now := time.Now().UTC().Truncate(time.Second)
	starts, ends := now.Add(2*time.Second), now.Add(time.Hour)
	id, err := c.PutOnSale(ctx, name, client.Reset{Stock: stock, Strategy: &strategy, SaleStartsAt: &starts, SaleEndsAt: &ends})
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(time.Until(starts)):
	}
	return id, nil
}

// PutOnSale resets the product called name with sale if one of that name exists, and creates
// it with sale's fields otherwise (an unlisted product of price 100, one per buyer), and returns
// its id.
func (c *AdminClient) PutOnSale(ctx context.Context, name string, sale client.Reset) (int64, error) {
	id, err := c.FindProduct(ctx, name)
	if err != nil {
		return 0, err
	}
	var p *client.Product
	if id != 0 {
		rsp, err := c.API().AdminResetProductWithResponse(ctx, id, sale)
		if err != nil {
			return 0, err
		}
		if err := appapi.Want(rsp.HTTPResponse, rsp.Body, http.StatusOK); err != nil {
			return 0, err
		}
		p = rsp.JSON200
	} else {
		return c.CreateSale(ctx, name, sale)
	}
	if p == nil || p.ID == 0 {
		return 0, fmt.Errorf("put %q on sale: the answer has no id", name)
	}
	return p.ID, nil
}

// CreateSale creates a product called name with sale's fields (an unlisted product of price
// 100, one per buyer) and returns its id. Unlike PutOnSale, it does not look for one of that
// name first (a read of every product).
func (c *AdminClient) CreateSale(ctx context.Context, name string, sale client.Reset) (int64, error) {
	// Not listed: the storefront shows the shop's sales, not the load test's.
	one, listed := 1, false
	rsp, err := c.API().AdminCreateProductWithResponse(ctx, client.NewProduct{
		Name: &name, PriceCents: 100, PerUserLimit: &one, Listed: &listed,
		Stock: sale.Stock, Strategy: sale.Strategy, SaleStartsAt: sale.SaleStartsAt, SaleEndsAt: sale.SaleEndsAt, Admission: sale.Admission,
	})
	if err != nil {
		return 0, err
	}
	if err := appapi.Want(rsp.HTTPResponse, rsp.Body, http.StatusCreated); err != nil {
		return 0, err
	}
	if rsp.JSON201 == nil || rsp.JSON201.ID == 0 {
		return 0, fmt.Errorf("create %q: the answer has no id", name)
	}
	return rsp.JSON201.ID, nil
}

// FindProduct returns the id of the first product called name, or 0. It reads the admin list,
// which has the unlisted products too.
func (c *AdminClient) FindProduct(ctx context.Context, name string) (int64, error) {
	rsp, err := c.API().AdminListProductsWithResponse(ctx)
	if err != nil {
		return 0, err
	}
	if err := appapi.Want(rsp.HTTPResponse, rsp.Body, http.StatusOK); err != nil {
		return 0, err
	}
	if rsp.JSON200 == nil {
		return 0, fmt.Errorf("the admin's list of products: an answer that is no JSON: %q", rsp.Body)
	}
	for _, p := range rsp.JSON200.Products {
		if p.Name == name {
			return p.ID, nil
		}
	}
	return 0, nil
}
