package sale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// BatchDeductor takes units for several purchases of one product at once: one lock acquisition
// (if the strategy has a lock) and one transaction for the whole batch.
//
// DeductBatch decides every reservation of batch — all of one product and one epoch, each of a
// different user, in arrival order — and returns one error per reservation: nil when its units
// were taken and its reservation committed, or ErrSoldOut, ErrAlreadyPurchased,
// ErrIdempotencyKeyInUse. When fewer units are left than the batch asks for, the earliest
// reservations that fit get them, exactly as if they had come one after another. A non-nil
// second result refuses the whole batch and means nothing of it was written (ErrNotFound,
// ErrSaleChanged, ErrLockTimeout, ErrFenced, an error wrapping ErrUnavailable, a context error).
type BatchDeductor interface {
	DeductBatch(ctx context.Context, batch []Reservation) ([]error, error)
}

// CombinerOptions tunes a Combiner.
type CombinerOptions struct {
	// Max is the most purchases in one batch; 1 turns combining off: every purchase runs its own
	// DeductBatch at once, concurrently, the textbook one-buyer-per-transaction way.
	Max int
	// Linger is how long a batch waits for more purchases before it runs; 0 takes only what
	// queued up while the product's previous batch ran.
	Linger time.Duration
	// Inflight is how many batches of one product may run at once in this replica [1]. With 2,
	// a batch inserts its reservations while the previous one waits for its commit; but the
	// queue is then split between smaller batches, and on a machine whose CPU is the limit that
	// costs more than the overlap gains (docs/performance.md).
	Inflight int
	// Queue is the most purchases of one product waiting here; beyond it a purchase gets ErrBusy
	// at once (back-pressure rather than a queue without end) [16 × Max].
	Queue int
	// Timeout bounds one batch, lock wait included. A purchase that joined a batch waits for
	// its outcome even if its own request ends first, so that its answer is never a guess.
	Timeout time.Duration
	// Observe, if set, is told the size and duration of every batch (metrics).
	Observe func(size int, took time.Duration)
}

// Combiner is a Deductor that serves the purchases of one product that arrive while a deduction
// of that product is under way as one batch (group commit): one lock acquisition, one
// transaction and one stock write for the whole batch, each buyer answered exactly.
//
// Per product and replica at most Inflight batches run at a time; purchases that arrive meanwhile
// queue up and form the next batch. Two purchases of one user are never in batches at the same
// time: the later one waits, and is answered from the first one's outcome (the user holds a
// reservation now, or its Idempotency-Key was just used) or, if the first was refused, decided
// in a batch of its own.
type Combiner struct {
	d    BatchDeductor
	opts CombinerOptions

	mu     sync.Mutex
	queues map[int64]*queue
	closed bool
	wg     sync.WaitGroup
}

var _ Deductor = (*Combiner)(nil)

type queue struct {
	waiting []*pending
	running int            // batches of the product under way
	busy    map[string]int // users with a purchase in a batch under way
}

// pending is one purchase waiting in a queue, or in a running batch.
type pending struct {
	ctx  context.Context
	r    Reservation
	done chan error // buffered: the batch never waits for the buyer
}

// NewCombiner returns a Combiner over d.
func NewCombiner(d BatchDeductor, o CombinerOptions) (*Combiner, error) {
	switch {
	case d == nil:
		return nil, errors.New("sale: combiner needs a BatchDeductor")
	case o.Max < 1:
		return nil, errors.New("sale: combiner batch size must be at least 1")
	case o.Linger < 0 || o.Timeout <= 0:
		return nil, errors.New("sale: combiner needs a positive timeout and a linger of at least 0")
	}
	if o.Queue <= 0 {
		o.Queue = 16 * o.Max
	}
	if o.Inflight <= 0 {
		o.Inflight = 1
	}
	return &Combiner{d: d, opts: o, queues: map[int64]*queue{}}, nil
}

// Deduct queues r with the other purchases of its product and returns its outcome.
func (c *Combiner) Deduct(ctx context.Context, r Reservation) error {
	if c.opts.Max == 1 {
		return c.alone(ctx, r)
	}
	p := &pending{ctx: ctx, r: r, done: make(chan error, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return fmt.Errorf("%w: shutting down", ErrUnavailable)
	}
	q := c.queues[r.ProductID]
	if q == nil {
		q = &queue{busy: map[string]int{}}
		c.queues[r.ProductID] = q
	}
	if len(q.waiting) >= c.opts.Queue {
		c.mu.Unlock()
		return ErrBusy
	}
	q.waiting = append(q.waiting, p)
	if q.running < c.opts.Inflight {
		q.running++
		c.wg.Add(1)
		go c.drain(r.ProductID, q)
	}
	c.mu.Unlock()

	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
	}
	// The buyer went away. Still waiting: leave the queue, nothing was deducted. Already in a
	// batch: its outcome is decided by the batch, so wait for it and tell the truth.
	c.mu.Lock()
	for i, w := range q.waiting {
		if w == p {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			c.mu.Unlock()
			return ctx.Err()
		}
	}
	c.mu.Unlock()
	return <-p.done
}

// alone runs one purchase as a batch of its own, in the caller's goroutine.
func (c *Combiner) alone(ctx context.Context, r Reservation) error {
	start := time.Now()
	errs, err := c.d.DeductBatch(ctx, []Reservation{r})
	if c.opts.Observe != nil {
		c.opts.Observe(1, time.Since(start))
	}
	if err != nil {
		return err
	}
	return errs[0]
}

// drain runs batches of the product until nothing it can take is queued. Up to Inflight drains
// of one product run at once.
func (c *Combiner) drain(productID int64, q *queue) {
	defer c.wg.Done()
	for {
		if c.opts.Linger > 0 {
			c.linger(q)
		}
		c.mu.Lock()
		batch := c.take(q)
		if len(batch) == 0 {
			// What is left (if anything) waits for a user's batch under way; that batch's drain
			// takes it afterwards.
			q.running--
			if q.running == 0 && len(q.waiting) == 0 {
				delete(c.queues, productID)
			}
			c.mu.Unlock()
			return
		}
		for _, p := range batch {
			q.busy[p.r.UserID]++
		}
		c.mu.Unlock()
		errs := c.run(batch)
		c.mu.Lock()
		for _, p := range batch {
			if q.busy[p.r.UserID]--; q.busy[p.r.UserID] == 0 {
				delete(q.busy, p.r.UserID)
			}
		}
		c.settleSameUser(q, batch, errs)
		c.mu.Unlock()
		for i, p := range batch {
			p.done <- errs[i]
		}
	}
}

// linger waits up to Linger for the queue to fill a batch.
func (c *Combiner) linger(q *queue) {
	deadline := time.Now().Add(c.opts.Linger)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		full := len(q.waiting) >= c.opts.Max
		c.mu.Unlock()
		if full {
			return
		}
		time.Sleep(min(time.Until(deadline), c.opts.Linger/4+time.Microsecond))
	}
}

// take removes the next batch from the queue: up to Max purchases of distinct users, in arrival
// order, none of a user with a purchase in a batch under way. The others stay queued, in their
// place. Purchases whose buyer went away are answered and dropped. c.mu is held.
func (c *Combiner) take(q *queue) []*pending {
	var batch []*pending
	users := map[string]bool{}
	rest := q.waiting[:0]
	for _, p := range q.waiting {
		switch {
		case p.ctx.Err() != nil:
			p.done <- p.ctx.Err()
		case len(batch) < c.opts.Max && !users[p.r.UserID] && q.busy[p.r.UserID] == 0:
			users[p.r.UserID] = true
			batch = append(batch, p)
		default:
			rest = append(rest, p)
		}
	}
	clear(q.waiting[len(rest):])
	q.waiting = rest
	return batch
}

// run deducts one batch; a batch-wide error becomes every purchase's error. The batch runs with
// its first buyer's context values (its trace, when tracing is on) but never its cancellation
// or deadline: a buyer who goes away must not abort the others' batch.
func (c *Combiner) run(batch []*pending) []error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), c.opts.Timeout)
	defer cancel()
	rs := make([]Reservation, len(batch))
	for i, p := range batch {
		rs[i] = p.r
	}
	start := time.Now()
	errs, err := c.deductSafely(ctx, rs)
	if c.opts.Observe != nil {
		c.opts.Observe(len(rs), time.Since(start))
	}
	if err == nil && len(errs) != len(rs) {
		err = fmt.Errorf("sale: BatchDeductor answered %d of %d purchases", len(errs), len(rs))
	}
	if err != nil {
		errs = make([]error, len(rs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

// deductSafely keeps a panicking deductor from taking the process down with the buyers of a
// whole batch waiting: they get an error, and the panic is reported through it.
func (c *Combiner) deductSafely(ctx context.Context, rs []Reservation) (errs []error, err error) {
	defer func() {
		if v := recover(); v != nil {
			errs, err = nil, fmt.Errorf("sale: deduction panicked: %v", v)
		}
	}()
	return c.d.DeductBatch(ctx, rs)
}

// settleSameUser answers the queued purchases whose user just had a purchase of this product
// accepted in batch: with the same Idempotency-Key it is a retry of that purchase
// (ErrIdempotencyKeyInUse, with that purchase's receipt, which the Service replays); otherwise a
// second purchase (ErrAlreadyPurchased). Those whose user's purchase was refused stay queued for
// the next batch, where they are decided on their own. c.mu is held.
func (c *Combiner) settleSameUser(q *queue, batch []*pending, errs []error) {
	if len(q.waiting) == 0 {
		return // nobody queued behind the batch (the common case): no map to build
	}
	accepted := map[string]*Reservation{} // user → the accepted purchase
	for i, p := range batch {
		if errs[i] == nil {
			accepted[p.r.UserID] = &p.r
		}
	}
	if len(accepted) == 0 {
		return
	}
	rest := q.waiting[:0]
	for _, p := range q.waiting {
		a, ok := accepted[p.r.UserID]
		switch {
		case !ok:
			rest = append(rest, p)
		case p.r.IdempotencyKey != "" && p.r.IdempotencyKey == a.IdempotencyKey:
			p.done <- KeyInUse(a.Receipt)
		default:
			p.done <- ErrAlreadyPurchased
		}
	}
	clear(q.waiting[len(rest):])
	q.waiting = rest
}

// Queued returns how many purchases wait for a batch (those in a running batch not counted).
func (c *Combiner) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, q := range c.queues {
		n += len(q.waiting)
	}
	return n
}

// Close refuses new purchases and waits for the batches under way and the purchases already
// queued to be decided.
func (c *Combiner) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}
