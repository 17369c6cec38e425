package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
)

// tally counts what the buyers were told, by their final answer.
type tally struct {
	Purchases  map[string]int // "202", "409 sold_out", "no answer", …
	Pays       map[string]int // "200", "402 payment_declined", "gave up", …
	Skipped    int            // ticks with every buyer slot busy: the stack fell behind the pace
	Unanswered int            // purchases with no final answer after their retries
}

// maxInFlight bounds the purchases and payments waiting for an answer at once.
const maxInFlight = 256

// load sells until ctx ends, at o.rate purchases a second spread over the strategies' current
// sales, and pays a share of what it bought. It returns once every purchase and payment it
// started has its answer.
func (s *soak) load(ctx context.Context, round int) {
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.o.rate))
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		strategy := s.o.strategies[n%len(s.o.strategies)]
		target := s.o.replicas[n%len(s.o.replicas)]
		s.mu.Lock()
		product := s.current[strategy]
		s.mu.Unlock()
		select {
		case slots <- struct{}{}:
		default:
			s.count(func(t *tally) { t.Skipped++ })
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			// Answers are awaited past ctx: a purchase sent is settled, never abandoned.
			s.buy(context.WithoutCancel(ctx), target, product, fmt.Sprintf("soak-%s-%d-%d", s.runID, round, n), &wg)
		})
	}
}

func (s *soak) count(f func(*tally)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.tally)
}

// buy purchases one unit for user at the replica target, retrying with the same Idempotency-Key on no answer, 429 and
// 5xx as a client would, and pays for it in a share of the 202s.
func (s *soak) buy(ctx context.Context, target string, product int64, user string, wg *sync.WaitGroup) {
	body := map[string]any{"user_id": user, "quantity": 1}
	path := fmt.Sprintf("/api/v1/products/%d/purchase", product)
	var outcome string
	for attempt := range 8 {
		status, code, out, err := s.post(ctx, target+path, user, body)
		outcome = answerOf(status, code, err)
		if err == nil && status != http.StatusTooManyRequests && status < 500 {
			if status == http.StatusAccepted {
				s.wasAccepted(ctx, target, product, user, out, wg)
			}
			s.count(func(t *tally) { t.Purchases[outcome]++ })
			return
		}
		sleep(ctx, time.Duration(attempt+1)*200*time.Millisecond)
	}
	s.count(func(t *tally) { t.Purchases["no final answer: "+outcome]++; t.Unanswered++ })
}

func (s *soak) wasAccepted(ctx context.Context, target string, product int64, user string, out map[string]any, wg *sync.WaitGroup) {
	id, _ := out["order_id"].(string)
	s.mu.Lock()
	s.accepted[id] = product
	s.mu.Unlock()
	if id == "" || rand.Float64() >= s.o.payShare {
		return
	}
	wg.Go(func() { s.pay(ctx, target, id, user) })
}

// pay pays order id a moment after it was accepted, waiting for the order queue to make it an
// order (404, then 409 order_not_confirmed, until then).
func (s *soak) pay(ctx context.Context, target, id, user string) {
	sleep(ctx, time.Duration(rand.Int64N(int64(3*time.Second))))
	deadline := time.Now().Add(time.Minute)
	outcome := "gave up"
	for time.Now().Before(deadline) {
		status, code, _, err := s.post(ctx, target+"/api/v1/orders/"+id+"/pay", "pay-"+id, map[string]any{"user_id": user})
		outcome = answerOf(status, code, err)
		if err == nil && status < 500 && !retryPay(status, code) {
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	s.count(func(t *tally) { t.Pays[outcome]++ })
}

// retryPay says a payment answered status and code is tried again shortly: the purchase is still
// on its way to being an order (404, 409 order_not_confirmed), or the client is asked to slow down.
func retryPay(status int, code string) bool {
	return status == http.StatusNotFound || status == http.StatusTooManyRequests ||
		status == http.StatusConflict && code == "order_not_confirmed"
}

// post sends body as JSON to url with an Idempotency-Key and returns the answer's status, error code and
// JSON object.
func (s *soak) post(ctx context.Context, url, key string, body any) (int, string, map[string]any, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, "", nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := s.buyers.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	if err != nil {
		return 0, "", nil, err
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	code := ""
	if e, ok := out["error"].(map[string]any); ok {
		code, _ = e["code"].(string)
	}
	return res.StatusCode, code, out, nil
}

// answerOf names an answer for the tally: "202", "409 sold_out", "no answer".
func answerOf(status int, code string, err error) string {
	switch {
	case err != nil:
		return "no answer"
	case code != "":
		return strconv.Itoa(status) + " " + code
	}
	return strconv.Itoa(status)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sales opens a new sale per strategy now and every o.salePeriod until ctx ends, each stocked to
// sell out near the end of its period at the pace, and points the load at it once every replica
// shows it. The first round's error is returned at once (the stack is not up); later ones are
// reported and the load stays on the previous sale.
func (s *soak) sales(ctx context.Context, round int, first chan<- error) {
	perStrategy := s.o.rate / float64(len(s.o.strategies))
	stock := int(math.Max(10, 0.9*perStrategy*s.o.salePeriod.Seconds()))
	for ; ; round++ {
		err := s.openSales(ctx, round, stock)
		if first != nil {
			first <- err
			first = nil
		} else if err != nil && ctx.Err() == nil {
			s.say("sale round %d: %v (the load stays on the previous sales)", round, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.o.salePeriod):
		}
	}
}

func (s *soak) openSales(ctx context.Context, round, stock int) error {
	now := time.Now().UTC()
	for _, strategy := range s.o.strategies {
		body := map[string]any{
			"name": fmt.Sprintf("soak %s %s #%d", s.runID, strategy, round), "price_cents": 100, "per_user_limit": 1, "listed": false,
			"stock": stock, "strategy": strategy,
			"sale_starts_at": now.Add(-time.Second).Format(time.RFC3339), "sale_ends_at": now.Add(24 * time.Hour).Format(time.RFC3339),
		}
		var p struct {
			ID int64 `json:"id"`
		}
		if err := s.admin.Call(ctx, http.MethodPost, "/api/v1/admin/products", body, http.StatusCreated, &p); err != nil {
			return err
		}
		if missing := appapi.WaitVisible(ctx, s.o.replicas, p.ID, 10*time.Second); len(missing) > 0 {
			return fmt.Errorf("product %d not shown by %v after 10 s", p.ID, missing)
		}
		s.mu.Lock()
		s.current[strategy] = p.ID
		s.products = append(s.products, p.ID)
		s.mu.Unlock()
	}
	return nil
}

// crowd keeps o.viewers stream viewers on the first strategy's current sale, moving them to each
// new one (a crowd closes and reconnects), until ctx ends; it returns what they saw in total.
func (s *soak) crowd(ctx context.Context) viewerTally {
	var vt viewerTally
	if s.o.viewers == 0 {
		return vt
	}
	for ctx.Err() == nil {
		s.mu.Lock()
		product := s.current[s.o.strategies[0]]
		s.mu.Unlock()
		c, err := viewers.Start(ctx, viewers.Config{Mode: viewers.Stream, Count: s.o.viewers, Targets: s.o.replicas, ProductID: product})
		if err != nil {
			vt.Failures = append(vt.Failures, err.Error())
			return vt
		}
		for ctx.Err() == nil {
			sleep(ctx, time.Second)
			s.mu.Lock()
			moved := s.current[s.o.strategies[0]] != product
			s.mu.Unlock()
			if moved {
				break
			}
		}
		vt.add(c.Stop())
	}
	return vt
}

// viewerTally sums the crowds of a run.
type viewerTally struct {
	Crowds, Events, Drops int
	Failures              []string
}

func (v *viewerTally) merge(o viewerTally) {
	v.Crowds, v.Events, v.Drops = v.Crowds+o.Crowds, v.Events+o.Events, v.Drops+o.Drops
	v.Failures = append(v.Failures, o.Failures[:min(len(o.Failures), max(0, 10-len(v.Failures)))]...)
}

func (v *viewerTally) add(r *viewers.Result) {
	v.Crowds++
	v.Events += len(r.EventTimes)
	v.Drops += r.Drops
	if len(v.Failures) < 10 {
		v.Failures = append(v.Failures, r.Failures...)
	}
}
