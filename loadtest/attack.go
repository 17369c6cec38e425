package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
)

// attempt is one planned request: buyer b's try number n, with its Idempotency-Key.
type attempt struct {
	buyer  int
	n      int
	user   string
	target string // replica base URL
	key    string
	token  string // the buyer's token, when the replicas verify buyers (-buyer-jwt-key)
}

// answer is what one request got.
type answer struct {
	attempt
	sent     time.Time
	latency  time.Duration
	status   int // 0: no answer (transport error)
	code     string
	orderID  string
	replayed bool
	err      string
}

// outcome names an answer for the report: the API's code (sale.Code) where it has one. A 502 or
// 504 without one comes from a proxy in front of the replicas (nginx) that lost the replica's
// answer: for the buyer, a transport error.
func (a answer) outcome() string {
	switch code := sale.Code(a.code); {
	case a.status == http.StatusAccepted && a.replayed:
		return "replayed" // a 202 with Idempotent-Replayed: the first answer again
	case a.status == http.StatusAccepted:
		return string(sale.CodeAccepted)
	case a.status == 0 || a.lostByProxy():
		return "transport_error"
	case code == sale.CodeSoldOut || code == sale.CodeLimitReached || code == sale.CodeRateLimited || code == sale.CodeUnavailable,
		code == sale.CodeUnconfirmed: // redis-lua's replicas did not confirm in time: settled by a retry with the key
		return a.code
	}
	return "other"
}

// lostByProxy reports a proxy's 502 or 504: the replica's answer, if any, never came through.
func (a answer) lostByProxy() bool {
	return (a.status == http.StatusBadGateway || a.status == http.StatusGatewayTimeout) && a.code == ""
}

// definitive reports whether the answer settles the attempt: a transport error or a 5xx leaves
// it unknown whether the purchase committed.
func (a answer) definitive() bool {
	return a.status != 0 && a.status < 500 && a.status != http.StatusTooManyRequests
}

// runAll measures the yardsticks, then attacks each strategy in turn.
func runAll(ctx context.Context, db *sql.DB, o *runOptions, say func(string, ...any)) (*Report, error) {
	now := time.Now()
	rep := &Report{
		RunID:     now.UTC().Format("20060102-150405"),
		StartedAt: now.UTC(),
		Machine:   yardstick.Machine(),
		Targets:   o.targets,
		Settings: Settings{Stock: o.stock, Buyers: o.buyers, Attempts: o.attempts, Rate: o.rate,
			Workers: o.workers, MaxDuration: o.maxDuration, Chaos: o.chaos.mode, Pay: o.pay.share},
		Passed: true,
	}
	if o.view.counts != nil {
		rep.Settings.Viewers, rep.Settings.View, rep.Settings.ViewerTargets = o.view.counts, string(o.view.mode), o.view.targets
	}
	admin := &adminClient{appapi.New(o.adminURL, o.adminToken)}
	rep.Topology = topologyOf(ctx, admin)
	if o.baselineFor > 0 {
		ys, err := measureYardsticks(ctx, &o.options, say)
		if err != nil {
			return nil, err
		}
		rep.Yardsticks = ys
	}
	for _, st := range o.strategies {
		for _, n := range crowdRuns(o.view) {
			sr, err := attackStrategy(ctx, db, o, admin, rep.RunID, st, n, say)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st, err)
			}
			if ys := rep.Yardsticks; ys != nil {
				sr.AcceptedPerR = ratioOf(sr.AcceptedPerSec, ys.R.RowsPerSec)
				sr.SoldOutPerGin = ratioOf(sr.SoldOutPerSec, ys.BareGin.RequestsPerSec)
			}
			if sr.Verdict == "FAIL" {
				rep.Passed = false
			}
			rep.Strategies = append(rep.Strategies, *sr)
			say("%s: %s — %d requests, %d accepted, %.0f req/s, %s", sr.Label(), sr.Verdict, sr.Requests, sr.Accepted,
				sr.RequestsPerSec, strings.Join(sr.Violations, "; "))
		}
	}
	relateToNoViewers(rep.Strategies)
	return rep, nil
}

// attackStrategy runs the whole cycle for one strategy: product, attack, settle, drain, audit, and
// with -pay the payment phase (paymentPhase). With -viewers a crowd of viewers of that size
// (none for 0) watches from before the attack until the sale is drained, and MySQL's counters are
// read around the attack.
func attackStrategy(ctx context.Context, db *sql.DB, o *runOptions, admin *adminClient, runID, strategy string, crowd crowdRun, say func(string, ...any)) (*StrategyReport, error) {
	pid, err := admin.saleProduct(ctx, productName(strategy, crowd, o.view.mode), strategy, o.stock)
	if err != nil {
		return nil, err
	}
	label := crowd.label(strategy, o.view.mode)
	say("%s: product %d, %d units, %d buyers × %d attempts over %d replicas", label, pid, o.stock, o.buyers, o.attempts, len(o.targets))
	var w *watch
	if o.view.counts != nil {
		if w, err = startWatch(ctx, o, pid, crowd.count, say); err != nil {
			return nil, err
		}
		defer w.stop()
		w.attackBegins(ctx, db)
	}
	plan := planAttempts(&o.options, runID, buyerTag(strategy, crowd))
	answers, events, err := attack(ctx, &o.options, pid, plan, say)
	if err != nil {
		return nil, err
	}
	var (
		rates    *MySQLRates
		cpu      *yardstick.CPUShare
		programs []yardstick.ProgramCPU
	)
	if w != nil {
		rates, cpu, programs = w.attackEnded(ctx, db)
	}
	settled, stuck := settle(ctx, &o.options, pid, answers)
	say("%s: %d answers, %d settled after the attack; waiting for the order queue", label, len(answers), len(settled))
	sr, err := judge(ctx, db, &o.options, strategy, pid, answers, settled, events, nil)
	if err != nil {
		return nil, err
	}
	if w != nil {
		vr, violations := w.finish(ctx, sr, answers)
		vr.MySQL, vr.CPU, vr.Programs, vr.Round = rates, cpu, programs, crowd.round
		sr.Viewers = vr
		sr.Violations = append(sr.Violations, violations...)
	}
	if o.pay.share > 0 {
		if err := paymentPhase(ctx, db, &o.options, o.pay, runID, sr, answers, settled, say); err != nil {
			return nil, err
		}
	}
	sr.account(len(plan), stuck)
	return sr, nil
}

// buyerTag names an attack's buyers (planAttempts): the strategy, and the crowd when there is
// one, so that two attacks of one run never share a buyer or an Idempotency-Key.
func buyerTag(strategy string, crowd crowdRun) string {
	switch {
	case crowd.round > 1:
		return fmt.Sprintf("%s-v%d-r%d", strategy, crowd.count, crowd.round)
	case crowd.count > 0:
		return fmt.Sprintf("%s-v%d", strategy, crowd.count)
	}
	return strategy
}

// account adds to sr's verdict that every planned request was answered and every unknown outcome
// settled: planned requests, and unknown purchases that settle gave up on.
func (sr *StrategyReport) account(planned int, stuck []answer) {
	if sr.Requests != planned {
		sr.Violations = append(sr.Violations, fmt.Sprintf("%d requests planned, %d answered", planned, sr.Requests))
	}
	if v := stuckViolation(stuck); v != "" {
		sr.Violations = append(sr.Violations, v)
	}
	sr.Verdict, sr.Violations = verdict(sr.Strategy, sr.Oversold, sr.Violations)
}

// planAttempts lays out every request: buyer i on replica i mod n; try 1 and its retry carry one
// key, try 3 a second key (a second purchase, which the per-user limit must refuse). A buyer's
// tries sit next to each other, so at full speed they race.
func planAttempts(o *options, runID, tag string) []attempt {
	plan := make([]attempt, 0, o.buyers*o.attempts)
	for b := range o.buyers {
		user := fmt.Sprintf("lt%s-%s-%d", strings.ReplaceAll(runID, "-", ""), tag, b)
		target := o.targets[b%len(o.targets)]
		for n := 1; n <= o.attempts; n++ {
			key := user + "-k1"
			if n == 3 {
				key = user + "-k2"
			}
			plan = append(plan, attempt{buyer: b, n: n, user: user, target: target, key: key, token: o.buyerToken(user)})
		}
	}
	return plan
}

// attack sends the plan with vegeta and returns every answer, and the chaos events.
func attack(ctx context.Context, o *options, productID int64, plan []attempt, say func(string, ...any)) ([]answer, []Event, error) {
	var next atomic.Int64
	targeter := func(t *vegeta.Target) error {
		i := next.Add(1) - 1
		if i >= int64(len(plan)) {
			return vegeta.ErrNoTargets
		}
		a := plan[i]
		body, _ := json.Marshal(map[string]any{"user_id": a.user, "quantity": 1})
		t.Method = http.MethodPost
		t.URL = fmt.Sprintf("%s/api/v1/products/%d/purchase?lt=%d", a.target, productID, i)
		t.Body = body
		t.Header = http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {a.key}}
		if a.token != "" {
			t.Header["Authorization"] = []string{"Bearer " + a.token}
		}
		return nil
	}
	attacker := newAttacker(o)
	var pacer vegeta.Pacer = vegeta.ConstantPacer{Freq: o.rate, Per: time.Second}
	if o.burstEvery > 0 {
		pacer = burstPacer{every: o.burstEvery, perBurst: max(1, int(float64(o.rate)*o.burstEvery.Seconds()))}
	}

	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var events []Event
	start := time.Now()
	chaosDone := make(chan []Event, 1)
	if o.during != nil {
		go func() { chaosDone <- o.during(actx, start, say) }()
	} else {
		chaosDone <- nil
	}

	answers := make([]answer, 0, len(plan))
	results := attacker.Attack(targeter, pacer, o.maxDuration, "seckill")
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

// burstPacer sends perBurst requests at once at the start of every period of every: the mean
// rate of a ConstantPacer, in bursts. The fault run paces the unsafe control so, for its race to
// show (smooth, one at a time, its read-check-write seldom overlaps another and need not oversell).
type burstPacer struct {
	every    time.Duration
	perBurst int
}

// Pace lets the burst of the current period go at once, then waits for the next period.
func (p burstPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	period := elapsed / p.every
	if hits < uint64(period+1)*uint64(p.perBurst) {
		return 0, false
	}
	return (period+1)*p.every - elapsed, false
}

// Rate is the mean rate, per second.
func (p burstPacer) Rate(time.Duration) float64 { return float64(p.perBurst) / p.every.Seconds() }

// newAttacker is vegeta as every attack of the harness uses it: o.workers requests in flight
// on as many keep-alive HTTP/1.1 connections.
func newAttacker(o *options) *vegeta.Attacker {
	return vegeta.NewAttacker(
		vegeta.Workers(uint64(o.workers)), vegeta.MaxWorkers(uint64(o.workers)),
		vegeta.Connections(o.workers), vegeta.KeepAlive(true),
		vegeta.Timeout(30*time.Second), vegeta.MaxBody(4096), vegeta.HTTP2(false),
	)
}

// toAnswer maps a vegeta result back to its planned attempt through the lt query parameter.
func toAnswer(res *vegeta.Result, plan []attempt) (answer, bool) {
	u, err := url.Parse(res.URL)
	if err != nil {
		return answer{}, false
	}
	i, err := strconv.Atoi(u.Query().Get("lt"))
	if err != nil || i < 0 || i >= len(plan) {
		return answer{}, false
	}
	a := answer{attempt: plan[i], sent: res.Timestamp, latency: res.Latency, status: int(res.Code), err: res.Error}
	a.decode(res.Body, res.Headers.Get("Idempotent-Replayed") == "true")
	return a, true
}

func (a *answer) decode(body []byte, replayed bool) {
	var b struct {
		OrderID string `json:"order_id"`
		Error   struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) == nil {
		a.orderID, a.code = b.OrderID, b.Error.Code
	}
	a.replayed = replayed
}

// settleTries is how many times settle sends one purchase before it gives up.
const settleTries = 30

// settle re-sends, with the same Idempotency-Key, every attempt whose answer left it unknown
// whether the purchase committed (no answer, 5xx, 429), until a replica gives a definitive one:
// the buyers a real client would retry. Their answers complete what the buyers were told;
// stuck holds the last answer of each purchase it gave up on after settleTries.
func settle(ctx context.Context, o *options, productID int64, answers []answer) (settled, stuck []answer) {
	decided := map[string]bool{} // buyer/key pairs with a definitive answer
	for _, a := range answers {
		if a.definitive() {
			decided[a.key] = true
		}
	}
	var open []attempt
	seen := map[string]bool{}
	for _, a := range answers {
		if !decided[a.key] && !seen[a.key] {
			seen[a.key] = true
			open = append(open, a.attempt)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, at := range open {
		var a answer
		for try := range settleTries {
			target := o.targets[(at.buyer+try)%len(o.targets)]
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

// stuckViolation says how many purchases settle gave up on and what their last answers were
// (status, code or transport error, counted), or "" if none.
func stuckViolation(stuck []answer) string {
	if len(stuck) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, a := range stuck {
		why := fmt.Sprintf("%d %s", a.status, a.code)
		if a.status == 0 {
			why = "no answer: " + a.err
		}
		counts[strings.TrimSpace(why)]++
	}
	whys := make([]string, 0, len(counts))
	for why, n := range counts {
		whys = append(whys, fmt.Sprintf("%s ×%d", why, n))
	}
	slices.Sort(whys)
	return fmt.Sprintf("%d purchases still of unknown outcome after %d retries each (last answers: %s)", len(stuck), settleTries, strings.Join(whys, "; "))
}

func post(ctx context.Context, client *http.Client, target string, productID int64, at attempt) answer {
	body, _ := json.Marshal(map[string]any{"user_id": at.user, "quantity": 1})
	a := answer{attempt: at, sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/v1/products/%d/purchase", target, productID), bytes.NewReader(body))
	if err != nil {
		a.err = err.Error()
		return a
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", at.key)
	if at.token != "" {
		req.Header.Set("Authorization", "Bearer "+at.token)
	}
	res, err := client.Do(req)
	a.latency = time.Since(a.sent)
	if err != nil {
		a.err = err.Error()
		return a
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	a.status = res.StatusCode
	a.decode(data, res.Header.Get("Idempotent-Replayed") == "true")
	return a
}

// adminClient talks to the admin API.
type adminClient struct{ *appapi.Client }

// saleProduct puts the product called name on sale now for an hour with stock units and the
// strategy: it resets the product if one of that name exists (clearing its reservations and
// orders) and creates it otherwise. Reusing names keeps the storefront from filling up with one
// product per run.
func (c *adminClient) saleProduct(ctx context.Context, name, strategy string, stock int) (int64, error) {
	id, err := c.findProduct(ctx, name)
	if err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	body := map[string]any{
		"stock": stock, "strategy": strategy,
		"sale_starts_at": now.Add(-time.Second).Format(time.RFC3339), "sale_ends_at": now.Add(time.Hour).Format(time.RFC3339),
	}
	path, want := fmt.Sprintf("/api/v1/admin/products/%d/reset", id), http.StatusOK
	if id == 0 {
		// Not listed: the storefront shows the shop's sales, not the load test's.
		body["name"], body["price_cents"], body["per_user_limit"], body["listed"] = name, 100, 1, false
		path, want = "/api/v1/admin/products", http.StatusCreated
	}
	var p struct {
		ID int64 `json:"id"`
	}
	if err := c.Call(ctx, http.MethodPost, path, body, want, &p); err != nil {
		return 0, err
	}
	if p.ID == 0 {
		return 0, errors.New("put product on sale: the answer has no id")
	}
	return p.ID, nil
}

// findProduct returns the id of the first product called name, or 0. It reads the admin list,
// which has the unlisted products too.
func (c *adminClient) findProduct(ctx context.Context, name string) (int64, error) {
	var list struct {
		Products []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"products"`
	}
	if err := c.Call(ctx, http.MethodGet, "/api/v1/admin/products", nil, http.StatusOK, &list); err != nil {
		return 0, err
	}
	for _, p := range list.Products {
		if p.Name == name {
			return p.ID, nil
		}
	}
	return 0, nil
}
