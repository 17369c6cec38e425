package stampede

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// outcome is a buyer's final answer.
type outcome int

const (
	outcomeAccepted outcome = iota
	outcomeSoldOut
	outcomeLimitReached
	outcomeRejected
	outcomeError
	numOutcomes
)

// classify turns one purchase answer into an outcome: the status, the API's error code, or the
// transport error when there was no answer.
func classify(status int, code client.ErrorCode, err error) outcome {
	switch {
	case err != nil:
		return outcomeError
	case status == http.StatusAccepted:
		return outcomeAccepted
	case status == http.StatusConflict && code == client.ErrorCode(sale.CodeSoldOut):
		return outcomeSoldOut
	case status == http.StatusConflict && code == client.ErrorCode(sale.CodeLimitReached):
		return outcomeLimitReached
	}
	return outcomeRejected
}

// retryable reports whether an answer leaves the purchase's fate open, so that the buyer sends it
// again with the same Idempotency-Key: no answer (the purchase may have committed), or a
// temporary refusal that deducted nothing.
func retryable(status int, err error) bool {
	if err != nil {
		return !errors.Is(err, context.Canceled)
	}
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// run is one stampede's state, shared by its buyers and read by Progress.
type run struct {
	id        string
	productID int64
	buyers    int
	targets   []string
	urls      []string // the purchase's URL at each target (client.PurchaseURL)
	startedAt time.Time

	next     atomic.Int64 // index of the next buyer to start
	sent     atomic.Int64
	retries  atomic.Int64
	outcomes [numOutcomes]atomic.Int64

	mu         sync.Mutex
	finishedAt time.Time
	finished   bool
}

// newRun returns the state of plan p over targets, whose purchase URLs of p's product are urls.
func newRun(id string, p Plan, targets, urls []string, now time.Time) *run {
	return &run{id: id, productID: p.ProductID, buyers: p.Buyers, targets: targets, urls: urls, startedAt: now.UTC()}
}

// purchaseURLs returns the URL of product id's purchase at each target.
func purchaseURLs(targets []string, id int64) ([]string, error) {
	urls := make([]string, len(targets))
	for i, t := range targets {
		u, err := client.PurchaseURL(t, id)
		if err != nil {
			return nil, fmt.Errorf("stampede: the purchase's URL at %q: %w", t, err)
		}
		urls[i] = u
	}
	return urls, nil
}

func (st *run) count(o outcome) { st.outcomes[o].Add(1) }

func (st *run) finish(now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.finished = true
	st.finishedAt = now.UTC()
}

func (st *run) running() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.finished
}

func (st *run) snapshot() Progress {
	st.mu.Lock()
	finished, finishedAt := st.finished, st.finishedAt
	st.mu.Unlock()
	return Progress{
		ID:            st.id,
		ProductID:     st.productID,
		Buyers:        st.buyers,
		Targets:       append([]string(nil), st.targets...),
		Sent:          int(st.sent.Load()),
		Retries:       int(st.retries.Load()),
		Accepted:      int(st.outcomes[outcomeAccepted].Load()),
		SoldOut:       int(st.outcomes[outcomeSoldOut].Load()),
		LimitReached:  int(st.outcomes[outcomeLimitReached].Load()),
		RejectedOther: int(st.outcomes[outcomeRejected].Load()),
		Errors:        int(st.outcomes[outcomeError].Load()),
		Running:       !finished,
		StartedAt:     st.startedAt,
		FinishedAt:    finishedAt,
	}
}

// execute runs the buyers, Concurrency at a time, publishing the progress as it goes; it returns
// when every buyer has its answer or ctx ends.
func (r *Runner) execute(ctx context.Context, st *run) {
	publishCtx, stopPublishing := context.WithCancel(ctx)
	var publisher sync.WaitGroup
	publisher.Go(func() { r.publishLoop(publishCtx, st) })

	var buyers sync.WaitGroup
	for range min(r.conc, st.buyers) {
		buyers.Go(func() {
			for ctx.Err() == nil {
				i := int(st.next.Add(1) - 1)
				if i >= st.buyers {
					return
				}
				st.sent.Add(1)
				st.count(r.buy(ctx, st, i))
			}
		})
	}
	buyers.Wait()
	stopPublishing()
	publisher.Wait()

	st.finish(r.now())
	p := st.snapshot()
	finalCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	r.publish(finalCtx, p)
	r.log.Info("stampede finished", "stampede_id", p.ID, "product_id", p.ProductID, "buyers", p.Buyers,
		"sent", p.Sent, "retries", p.Retries, "accepted", p.Accepted, "sold_out", p.SoldOut, "limit_reached", p.LimitReached,
		"rejected_other", p.RejectedOther, "errors", p.Errors, "took", p.FinishedAt.Sub(p.StartedAt),
		"stopped", ctx.Err() != nil)
}

func (r *Runner) publishLoop(ctx context.Context, st *run) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		r.publish(ctx, st.snapshot())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (r *Runner) publish(ctx context.Context, p Progress) {
	if r.board == nil {
		return
	}
	if err := r.board.Put(ctx, p); err != nil && ctx.Err() == nil {
		r.log.Debug("stampede progress not published", "stampede_id", p.ID, "err", err)
	}
}

// buy is simulated buyer i: one purchase, sent to target i mod len(targets), and sent again with
// the same Idempotency-Key to the next target while its answer is ambiguous (retryable), r.tries
// times in all, after buyerBackoff's waits.
func (r *Runner) buy(ctx context.Context, st *run, i int) outcome {
	user := "stampede-" + st.id + "-" + strconv.Itoa(i)
	o := outcomeError // what a purchase sent on an ended ctx would get, should none be sent
	sent := 0
	_ = retry.Do(ctx, buyerBackoff(r.tries), func(ctx context.Context) error {
		if sent > 0 {
			st.retries.Add(1)
		}
		url := st.urls[(i+sent)%len(st.urls)]
		sent++
		status, code, err := r.purchase(ctx, url, user)
		if o = classify(status, code, err); retryable(status, err) {
			return retry.RetryableError(errAmbiguous)
		}
		return nil
	})
	return o
}

// errAmbiguous is what buy tells retry.Do of an answer it sends again; the answer itself is the
// outcome buy keeps.
var errAmbiguous = errors.New("stampede: ambiguous answer")

// buyerBackoff is a buyer's wait before it sends a purchase again: 100 ms after the first
// attempt, 200 ms after the second, and so on, for tries attempts in all.
func buyerBackoff(tries int) retry.Backoff {
	var waits time.Duration
	return retry.WithMaxRetries(uint64(max(tries-1, 0)), retry.BackoffFunc(func() (time.Duration, bool) {
		waits++
		return waits * 100 * time.Millisecond, false
	}))
}

// purchase sends one purchase to url (a target's, client.PurchaseURL) and returns its status
// and error code. It is the generated client's purchase by the lean way (api/client/purchase.go):
// the buyers share the machine's cores with the replicas they load.
func (r *Runner) purchase(ctx context.Context, url, user string) (int, client.ErrorCode, error) {
	one := 1
	req, err := client.NewLeanPurchase(ctx, url, client.PurchaseParams{IdempotencyKey: &user}, client.PurchaseRequest{UserID: &user, Quantity: &one})
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("X-Request-ID", user)
	if r.token != nil {
		tok, err := r.token(user)
		if err != nil {
			return 0, "", err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	res, err := r.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	a, _ := client.ReadPurchaseAnswer(res) // a body that is no JSON (an empty 429, a proxy's page) has no code
	return res.StatusCode, a.Error.Code, nil
}
