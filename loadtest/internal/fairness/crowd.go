package fairness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
)

// Visitor is what one member of the crowd did and was told: the evidence the judge reads.
type Visitor struct {
	User string `json:"user"`
	Bot  bool   `json:"bot"`
	// JoinSent is when the join that got its ticket was sent; PreQueue whether it answered
	// pre_queue (the visitor joined before the sale's start).
	JoinSent time.Time `json:"join_sent"`
	PreQueue bool      `json:"pre_queue"`
	Sale     string    `json:"sale"`
	// Ticket is its place in line once known (0: never learnt; a shuffled pre-queue learns it
	// after the opening).
	Ticket int64 `json:"ticket"`
	// Tickets are every place it was told, in order, each once: more than one when it had to
	// join again (its place lost); FirstTicketAt when it first learnt one. Rejoins counts its
	// joins after the room answered not_joined.
	Tickets       []int64   `json:"tickets,omitempty"`
	FirstTicketAt time.Time `json:"first_ticket_at"`
	Rejoins       int       `json:"rejoins,omitempty"`
	// Unanswered counts its requests that got no answer at all (a replica gone), each of which
	// moved it to the next replica.
	Unanswered int `json:"unanswered,omitempty"`
	// ETA is the first estimated wait it was given and ETAAt when; ETAAtJoin whether the join
	// gave it (a shuffled pre-queue's does not: no place is drawn yet).
	ETA       time.Duration `json:"eta"`
	ETAAt     time.Time     `json:"eta_at"`
	ETAAtJoin bool          `json:"eta_at_join"`
	// LastWaiting is when it was last told it was not admitted yet; AdmittedSeen when it was
	// first told it was, and AdmittedSecond the second of its admission on the room's clock (its
	// pass's expiry less the session; 0: never admitted).
	LastWaiting    time.Time `json:"last_waiting"`
	AdmittedSeen   time.Time `json:"admitted_seen"`
	AdmittedSecond int64     `json:"admitted_second"`
	// Purchases are every purchase it sent, fouls included.
	Purchases []Purchase `json:"purchases,omitempty"`
	// Outcome is how its visit ended: bought, sold_out (its purchase came too late),
	// queue_sold_out (the queue said so before its turn), or what stopped it.
	Outcome string `json:"outcome"`
}

// Purchase is one purchase a visitor sent and its answer.
type Purchase struct {
	// Foul is "" for a purchase with the visitor's own pass, else how it cheats: no_pass,
	// forged_pass or foreign_pass (another bot's).
	Foul    string `json:"foul,omitempty"`
	Key     string `json:"key"`
	Status  int    `json:"status"` // 0: no answer
	Code    string `json:"code,omitempty"`
	OrderID string `json:"order_id,omitempty"`
	// At is when it was sent.
	At time.Time `json:"at"`
}

// Admitted reports whether the visitor was let in.
func (v *Visitor) Admitted() bool { return v.AdmittedSecond != 0 }

// ticketAnswer is the queue's Ticket (docs/api.md).
type ticketAnswer struct {
	Sale          string `json:"sale"`
	State         string `json:"state"`
	Ticket        int64  `json:"ticket"`
	ETASeconds    *int64 `json:"eta_seconds"`
	PollAfterMS   int64  `json:"poll_after_ms"`
	Pass          string `json:"pass"`
	PassExpiresAt string `json:"pass_expires_at"`
	Error         struct {
		Code string `json:"code"`
	} `json:"error"`
	OrderID string `json:"order_id"`
}

// sale is one sale the crowd visits.
type sale struct {
	productID int64
	targets   []string
	opens     time.Time // queue_opens_at
	starts    time.Time // sale_starts_at
	session   time.Duration
	deadline  time.Time
}

// crowd is the visitors of one sale and the bots' ring of passes.
type crowd struct {
	s    sale
	o    crowdOptions
	ring sync.Map // bot user -> its latest pass
	bots []string
	sale atomic.Value // the sale id the first join was told (string)
}

// saleID is the sale id the crowd was told, "" before the first join.
func (cr *crowd) saleID() string {
	s, _ := cr.sale.Load().(string)
	return s
}

// visit sends the request build makes (one of the generated client's builders, api/client) and
// decodes the answer; status 0 is no answer.
func visit(ctx context.Context, c *http.Client, build func() (*http.Request, error)) (int, ticketAnswer, time.Duration) {
	var t ticketAnswer
	req, err := build()
	if err != nil {
		return 0, t, 0
	}
	res, err := c.Do(req.WithContext(ctx))
	if err != nil {
		return 0, t, 0
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 16<<10))
	_ = json.Unmarshal(data, &t)
	retry := time.Duration(0)
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
		retry = time.Duration(s) * time.Second
	}
	return res.StatusCode, t, retry
}

// join sends the visitor's join until it holds a ticket (retrying a queue not yet open every
// retry, anything else after a pause; no answer at the next target), and records it; false when
// the sale's time ran out.
func (cr *crowd) join(ctx context.Context, c *http.Client, target *string, v *Visitor, retry time.Duration) (ticketAnswer, bool) {
	for ctx.Err() == nil && time.Now().Before(cr.s.deadline) {
		sent := time.Now()
		st, t, after := visit(ctx, c, func() (*http.Request, error) {
			return client.NewJoinQueueRequest(*target, cr.s.productID, nil, client.QueueBuyer{UserID: &v.User})
		})
		switch {
		case st == 0:
			cr.failover(v, target)
			sleep(ctx, retry)
		case st == http.StatusOK:
			v.JoinSent, v.PreQueue, v.Sale = sent, t.State == "pre_queue", t.Sale
			cr.sale.CompareAndSwap(nil, t.Sale)
			cr.note(v, t, true)
			return t, true
		case st == http.StatusForbidden && t.Error.Code == "queue_not_open":
			sleep(ctx, retry)
		default:
			sleep(ctx, max(after, 200*time.Millisecond))
		}
	}
	v.Outcome = "join_timeout"
	return ticketAnswer{}, false
}

// failover moves a visitor whose target did not answer to the next one, as a load balancer
// would: a replica killed under it.
func (cr *crowd) failover(v *Visitor, target *string) {
	v.Unanswered++
	i := slices.Index(cr.s.targets, *target)
	*target = cr.s.targets[(i+1)%len(cr.s.targets)]
}

// maxRejoins is how often a visitor joins again after the room forgot it (not_joined).
const maxRejoins = 3

// rejoin joins again a visitor the room no longer knows (a Redis failover lost its join): at
// the back of the line, as the storefront does.
func (cr *crowd) rejoin(ctx context.Context, c *http.Client, target *string, v *Visitor, retry time.Duration) (ticketAnswer, bool) {
	if v.Rejoins >= maxRejoins {
		v.Outcome = "not_joined"
		return ticketAnswer{}, false
	}
	v.Rejoins++
	return cr.join(ctx, c, target, v, retry)
}

// note records what a join or a poll told the visitor: its place, its first ETA, and its
// admission.
func (cr *crowd) note(v *Visitor, t ticketAnswer, atJoin bool) {
	now := time.Now()
	if t.Ticket > 0 {
		v.Ticket = t.Ticket
		if len(v.Tickets) == 0 {
			v.FirstTicketAt = now
		}
		if len(v.Tickets) == 0 || v.Tickets[len(v.Tickets)-1] != t.Ticket {
			v.Tickets = append(v.Tickets, t.Ticket)
		}
	}
	if t.ETASeconds != nil && v.ETAAt.IsZero() {
		v.ETA, v.ETAAt, v.ETAAtJoin = time.Duration(*t.ETASeconds)*time.Second, now, atJoin
	}
	switch t.State {
	case "admitted":
		if v.AdmittedSecond == 0 {
			v.AdmittedSeen = now
			if exp, err := time.Parse(time.RFC3339, t.PassExpiresAt); err == nil {
				v.AdmittedSecond = exp.Add(-cr.s.session).Unix()
			}
		}
	case "pre_queue", "waiting":
		v.LastWaiting = now
	}
}

// honest is a buyer: one connection, at its arrival time it joins once, polls at the cadence
// its ticket suggests, and once admitted thinks, then buys once with its pass.
func (cr *crowd) honest(ctx context.Context, v *Visitor, target string, arrive, think time.Duration, rng *rand.Rand) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}}
	defer c.CloseIdleConnections()
	sleep(ctx, time.Until(cr.s.opens.Add(arrive)))
	t, ok := cr.join(ctx, c, &target, v, 200*time.Millisecond)
	for ok {
		switch t.State {
		case "admitted":
			sleep(ctx, think)
			cr.buyOnce(ctx, c, &target, v, t.Pass)
			return
		case "pre_queue", "waiting":
			wait := time.Duration(t.PollAfterMS) * time.Millisecond
			sleep(ctx, time.Duration(float64(max(wait, 200*time.Millisecond))*(0.9+0.2*rng.Float64())))
			t, ok = cr.poll(ctx, c, &target, v, 300*time.Millisecond)
		case "not_joined":
			t, ok = cr.rejoin(ctx, c, &target, v, 200*time.Millisecond)
		case "sold_out":
			v.Outcome = "queue_sold_out"
			return
		default:
			v.Outcome = t.State
			return
		}
	}
}

// poll asks the visitor's place until an answer comes (retrying after pause; no answer at the
// next target), and records it.
func (cr *crowd) poll(ctx context.Context, c *http.Client, target *string, v *Visitor, pause time.Duration) (ticketAnswer, bool) {
	for ctx.Err() == nil && time.Now().Before(cr.s.deadline) {
		st, t, after := visit(ctx, c, func() (*http.Request, error) {
			return client.NewQueueStatusRequest(*target, cr.s.productID, &client.QueueStatusParams{UserID: &v.User})
		})
		if st == http.StatusOK {
			cr.note(v, t, false)
			return t, true
		}
		if st == 0 {
			cr.failover(v, target)
		}
		sleep(ctx, max(after, pause))
	}
	if v.Outcome == "" {
		v.Outcome = "unfinished"
	}
	return ticketAnswer{}, false
}

// buyOnce is the honest purchase: one Idempotency-Key, retried on no answer, 429 and 5xx after
// the wait asked; a pass that expired meanwhile is fetched again.
func (cr *crowd) buyOnce(ctx context.Context, c *http.Client, target *string, v *Visitor, pass string) {
	key := v.User + "-k1"
	for try := 0; try < 30 && ctx.Err() == nil && time.Now().Before(cr.s.deadline); try++ {
		p := cr.purchase(ctx, c, *target, v.User, key, pass, "")
		v.Purchases = append(v.Purchases, p)
		switch {
		case p.Status == http.StatusAccepted:
			v.Outcome = "bought"
			return
		case p.Status == http.StatusConflict:
			v.Outcome = p.Code
			return
		case p.Status == http.StatusForbidden && p.Code == "admission_pass_expired":
			t, ok := cr.poll(ctx, c, target, v, 300*time.Millisecond)
			if !ok || t.Pass == "" {
				v.Outcome = "pass_expired"
				return
			}
			pass = t.Pass
		case p.Status == 0:
			cr.failover(v, target)
			sleep(ctx, 300*time.Millisecond)
		case p.Status == http.StatusTooManyRequests || p.Status >= 500:
			sleep(ctx, 300*time.Millisecond)
		default:
			v.Outcome = fmt.Sprintf("refused %d %s", p.Status, p.Code)
			return
		}
	}
	v.Outcome = "unfinished"
}

// purchase sends one purchase of one unit with the pass ("" for none) and says what it got.
func (cr *crowd) purchase(ctx context.Context, c *http.Client, target, user, key, pass, foul string) Purchase {
	params := client.PurchaseParams{IdempotencyKey: &key}
	if pass != "" {
		params.AdmissionPass = &pass
	}
	one := 1
	sent := time.Now()
	st, t, _ := visit(ctx, c, func() (*http.Request, error) {
		return client.NewPurchaseRequest(target, cr.s.productID, &params, client.PurchaseRequest{UserID: &user, Quantity: &one})
	})
	return Purchase{Foul: foul, Key: key, Status: st, Code: t.Error.Code, OrderID: t.OrderID, At: sent}
}

// The most fouls a bot sends of each kind: enough to see each refused, few enough that they do
// not crowd out the honest buyers' polls.
const foulsPerKind = 2

// bot is a fast buyer: several connections over every replica, no think time; it joins the
// moment the queue opens, tries the purchase without a pass, with a forged one and with another
// bot's while it waits, polls hard, and once admitted fires its purchase from every connection
// at once until one answers, then tries a second purchase with a new key.
func (cr *crowd) bot(ctx context.Context, v *Visitor, first int) {
	targets := cr.s.targets
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxConnsPerHost: cr.o.botConns, MaxIdleConnsPerHost: cr.o.botConns}}
	defer c.CloseIdleConnections()
	sleep(ctx, time.Until(cr.s.opens))
	target := targets[first%len(targets)]
	t, ok := cr.join(ctx, c, &target, v, 10*time.Millisecond)
	fouls := map[string]int{}
	foul := func(kind, pass string) {
		// Before the sale starts the window refuses every purchase: that tests no pass.
		if fouls[kind] >= foulsPerKind || time.Now().Before(cr.s.starts) {
			return
		}
		fouls[kind]++
		key := fmt.Sprintf("%s-%s-%d", v.User, kind, fouls[kind])
		v.Purchases = append(v.Purchases, cr.purchase(ctx, c, targets[(first+fouls[kind])%len(targets)], v.User, key, pass, kind))
	}
	for i := first; ok; i++ {
		switch t.State {
		case "admitted":
			cr.ring.Store(v.User, t.Pass)
			cr.buyHard(ctx, c, v, t.Pass, i)
			// Admitted or not, a purchase without its pass buys nothing.
			foul("no_pass", "")
			foul("forged_pass", forgedPass)
			if p, ok := cr.foreignPass(v.User); ok {
				foul("foreign_pass", p)
			}
			return
		case "pre_queue", "waiting":
			foul("no_pass", "")
			foul("forged_pass", forgedPass)
			if p, ok := cr.foreignPass(v.User); ok {
				foul("foreign_pass", p)
			}
			sleep(ctx, cr.o.botPoll)
			target = targets[i%len(targets)]
			t, ok = cr.poll(ctx, c, &target, v, 20*time.Millisecond)
		case "not_joined":
			t, ok = cr.rejoin(ctx, c, &target, v, 10*time.Millisecond)
		case "sold_out":
			v.Outcome = "queue_sold_out"
			return
		default:
			v.Outcome = t.State
			return
		}
	}
}

// forgedPass is a pass nobody signed: a JWT of the pass's shape with a signature of zeros.
const forgedPass = "eyJhbGciOiJFZERTQSIsInR5cCI6IndhaXRyb29tK2p3dCJ9." +
	"eyJzdWIiOiJib3QiLCJzYWxlIjoiMS4xIiwiaWF0IjoxNzAwMDAwMDAwLCJleHAiOjQxMDAwMDAwMDB9." +
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

// foreignPass is another bot's pass, if any bot was admitted.
func (cr *crowd) foreignPass(user string) (string, bool) {
	for _, b := range cr.bots {
		if b == user {
			continue
		}
		if p, ok := cr.ring.Load(b); ok {
			return p.(string), true
		}
	}
	return "", false
}

// buyHard fires the bot's purchase (one key) from botConns connections at once, over the
// replicas, again and again without a pause until one answers definitively; after a 202 it
// tries a second purchase with a new key, which the per-user limit must refuse.
func (cr *crowd) buyHard(ctx context.Context, c *http.Client, v *Visitor, pass string, first int) {
	targets := cr.s.targets
	key := v.User + "-k1"
	for try := 0; try < 60 && ctx.Err() == nil && time.Now().Before(cr.s.deadline); try++ {
		burst := make([]Purchase, cr.o.botConns)
		var wg sync.WaitGroup
		for j := range burst {
			wg.Go(func() { burst[j] = cr.purchase(ctx, c, targets[(first+try+j)%len(targets)], v.User, key, pass, "") })
		}
		wg.Wait()
		v.Purchases = append(v.Purchases, burst...)
		done := ""
		for _, p := range burst {
			switch {
			case p.Status == http.StatusAccepted:
				done = "bought"
			case p.Status == http.StatusConflict && done == "":
				done = p.Code
			case p.Status == http.StatusForbidden && done == "":
				done = "refused " + p.Code
			}
		}
		if done == "bought" {
			v.Purchases = append(v.Purchases, cr.purchase(ctx, c, targets[first%len(targets)], v.User, v.User+"-k2", pass, ""))
		}
		if done != "" {
			v.Outcome = done
			return
		}
		sleep(ctx, 20*time.Millisecond)
	}
	v.Outcome = "unfinished"
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// play runs the crowd of one sale: size visitors, the first nBots of them bots, honest arrivals
// drawn from rng over arrival, and returns every visitor once all are done or the sale's
// deadline passed.
func (cr *crowd) play(ctx context.Context, users []string, nBots int, arrival time.Duration, rng *rand.Rand) []*Visitor {
	visitors := make([]*Visitor, len(users))
	cr.bots = users[:nBots]
	ctx, cancel := context.WithDeadline(ctx, cr.s.deadline.Add(5*time.Second))
	defer cancel()
	var wg sync.WaitGroup
	for i, u := range users {
		v := &Visitor{User: u, Bot: i < nBots}
		visitors[i] = v
		if v.Bot {
			wg.Go(func() { cr.bot(ctx, v, i) })
			continue
		}
		arrive := time.Duration(rng.Int64N(int64(arrival) + 1))
		think := cr.o.thinkMin + time.Duration(rng.Int64N(int64(cr.o.thinkMax-cr.o.thinkMin)+1))
		prng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		target := cr.s.targets[i%len(cr.s.targets)]
		wg.Go(func() { cr.honest(ctx, v, target, arrive, think, prng) })
	}
	wg.Wait()
	for _, v := range visitors {
		if v.Outcome == "" {
			v.Outcome = "unfinished"
		}
	}
	return visitors
}
