// Package stampede runs the storefront's demo load burst: N simulated buyers, each with a user id
// of its own, make one purchase each (with an Idempotency-Key, retried on an ambiguous answer)
// through the public HTTP API of every replica, round robin, and the progress is counted as they
// go.
//
// It is an HTTP client of the public API and nothing more: it must never touch the database, the
// stock or a lock directly, so that what a stampede shows is what any buyer would get.
package stampede

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// The errors of the package. Each but ErrBusy wraps the sale error of the same meaning, so that
// it has the same code (sale.CodeOf) and the same HTTP status.
var (
	// ErrBusy means a stampede already runs on this replica.
	ErrBusy = errors.New("a stampede is already running on this replica; wait for it to finish")
	// ErrUnknown means no stampede has this id (or it finished long ago).
	ErrUnknown = fmt.Errorf("no such stampede: %w", sale.ErrNotFound)
	// ErrInvalidPlan means the plan can never run as given (too few or too many buyers).
	ErrInvalidPlan = fmt.Errorf("invalid stampede: %w", sale.ErrInvalid)
	// ErrStopped means the runner has stopped: the server is shutting down.
	ErrStopped = fmt.Errorf("stampedes are not accepted now, the server is stopping: %w", sale.ErrUnavailable)
	// ErrUnavailable means the shared progress board could not be read. Board implementations
	// wrap it.
	ErrUnavailable = fmt.Errorf("stampede progress board: %w", sale.ErrUnavailable)
)

// Progress is where a stampede stands. The counters add up: Sent buyers have started,
// Accepted+SoldOut+LimitReached+RejectedOther+Errors of them have their final answer.
type Progress struct {
	ID        string
	ProductID int64
	Buyers    int
	// Targets are the base URLs the buyers are spread over.
	Targets []string
	Sent    int
	// Retries counts the purchases sent again after an ambiguous answer (no answer, 429, 502,
	// 503, 504), with the same Idempotency-Key: the buyers made Sent+Retries requests in all.
	Retries int
	// Accepted buyers got a 202; SoldOut and LimitReached a 409 with that code; RejectedOther any
	// other answer (403, 429 or 503 after the retries...); Errors no answer at all.
	Accepted      int
	SoldOut       int
	LimitReached  int
	RejectedOther int
	Errors        int
	Running       bool
	StartedAt     time.Time
	// FinishedAt is zero while the stampede runs.
	FinishedAt time.Time
}

// Done returns how many buyers have their final answer.
func (p Progress) Done() int {
	return p.Accepted + p.SoldOut + p.LimitReached + p.RejectedOther + p.Errors
}

// Board shares the progress of stampedes between replicas, so that any replica behind the load
// balancer can answer for a stampede another one runs. Get returns ErrUnknown for an id it does
// not hold, and an error wrapping ErrUnavailable when it cannot tell.
type Board interface {
	Put(ctx context.Context, p Progress) error
	Get(ctx context.Context, id string) (Progress, error)
}

// Options configures a Runner.
type Options struct {
	// Targets are the base URLs of the replicas, such as http://127.0.0.1:8081; required.
	Targets []string
	// MaxBuyers bounds Plan.Buyers [5000].
	MaxBuyers int
	// Concurrency is how many buyers are in flight at once [64].
	Concurrency int
	// Attempts is how many times a buyer sends its purchase when the answer is ambiguous (no
	// answer, 429, 502, 503, 504) [3].
	Attempts int
	// Client sends the purchases; the default has a transport of its own and a 15 s timeout.
	Client *http.Client
	// Board is optional: without one, only this replica can report its stampedes.
	Board Board
	// PublishEvery is how often a running stampede's progress goes to the Board [250 ms].
	PublishEvery time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Token, if set, gives each buyer's bearer token, sent with its purchases: the replicas verify
	// buyer tokens (SECKILL_BUYER_JWT_*), so a buyer must prove its user id as a real one would.
	Token func(userID string) (string, error)
}

// Plan is one stampede to run.
type Plan struct {
	ProductID int64
	Buyers    int
	// Prepare, if set, runs before the first buyer, once the runner is reserved for this plan
	// (the admin's reset of the product goes here, so that a refused stampede resets nothing).
	// Its error is returned by Start as it is.
	Prepare func(ctx context.Context) error
}

// Runner runs at most one stampede at a time on this replica, in a goroutine it owns.
type Runner struct {
	log     *slog.Logger
	targets []string
	max     int
	conc    int
	tries   int
	client  *http.Client
	board   Board
	every   time.Duration
	now     func() time.Time
	token   func(userID string) (string, error)

	// base is the context every stampede runs under; Run cancels it (stop) when its own context
	// ends, then waits for them (wg).
	base context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	reserved bool
	runs     map[string]*run
	order    []string // ids in start order, to forget the oldest
}

// keepRuns is how many finished stampedes a replica remembers without a Board.
const keepRuns = 16

// New returns a Runner, which accepts stampedes at once; Run must run to stop them at shutdown.
func New(log *slog.Logger, o Options) (*Runner, error) {
	if log == nil {
		return nil, errors.New("stampede: a logger is required")
	}
	if len(o.Targets) == 0 {
		return nil, errors.New("stampede: at least one target is required")
	}
	targets := make([]string, len(o.Targets))
	for i, t := range o.Targets {
		targets[i] = strings.TrimRight(t, "/")
	}
	if _, err := purchaseURLs(targets, 1); err != nil {
		return nil, err
	}
	if o.MaxBuyers <= 0 {
		o.MaxBuyers = 5000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Client == nil {
		o.Client = &http.Client{
			Timeout:   15 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency, IdleConnTimeout: 30 * time.Second},
		}
	}
	if o.PublishEvery <= 0 {
		o.PublishEvery = 250 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	base, stop := context.WithCancel(context.Background())
	return &Runner{
		base:    base,
		stop:    stop,
		log:     log,
		targets: targets,
		max:     o.MaxBuyers,
		conc:    o.Concurrency,
		tries:   o.Attempts,
		client:  o.Client,
		board:   o.Board,
		every:   o.PublishEvery,
		now:     o.Now,
		token:   o.Token,
		runs:    map[string]*run{},
	}, nil
}

// Targets returns the base URLs the buyers are spread over.
func (r *Runner) Targets() []string { return append([]string(nil), r.targets...) }

// MaxBuyers returns the largest Plan.Buyers accepted.
func (r *Runner) MaxBuyers() int { return r.max }

// Run waits until ctx ends, then refuses new stampedes, stops the running one and waits for it.
func (r *Runner) Run(ctx context.Context) error {
	<-ctx.Done()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.stop()
	r.wg.Wait()
	return nil
}

// Start reserves the runner, runs p.Prepare and starts the stampede in the background. It returns
// ErrBusy while another stampede runs here, ErrStopped once Run has ended, an error wrapping
// ErrInvalidPlan for a bad plan, or Prepare's error.
func (r *Runner) Start(ctx context.Context, p Plan) (Progress, error) {
	if p.Buyers < 1 || p.Buyers > r.max {
		return Progress{}, fmt.Errorf("%w: buyers must be between 1 and %d", ErrInvalidPlan, r.max)
	}
	if p.ProductID <= 0 {
		return Progress{}, fmt.Errorf("%w: product id must be positive", ErrInvalidPlan)
	}
	urls, err := purchaseURLs(r.targets, p.ProductID) // New has checked the targets
	if err != nil {
		return Progress{}, err
	}
	if err := r.reserve(); err != nil {
		return Progress{}, err
	}
	if p.Prepare != nil {
		if err := p.Prepare(ctx); err != nil {
			r.release()
			return Progress{}, err
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved = false
	if r.closed {
		return Progress{}, ErrStopped
	}
	st := newRun(newID(), p, r.targets, urls, r.now())
	r.remember(st)
	runCtx, cancel := context.WithCancel(r.base)
	r.wg.Add(1) // under mu and not closed: Run's Wait cannot have started
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.execute(runCtx, st)
	}()
	r.log.Info("stampede started", "stampede_id", st.id, "product_id", p.ProductID, "buyers", p.Buyers, "targets", r.targets)
	return st.snapshot(), nil
}

func (r *Runner) reserve() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrStopped
	}
	if r.reserved {
		return ErrBusy
	}
	for _, st := range r.runs {
		if st.running() {
			return ErrBusy
		}
	}
	r.reserved = true
	return nil
}

func (r *Runner) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reserved = false
}

// remember keeps st, forgetting the oldest finished stampede beyond keepRuns. Called with mu held.
func (r *Runner) remember(st *run) {
	r.runs[st.id] = st
	r.order = append(r.order, st.id)
	for len(r.order) > keepRuns {
		old := r.order[0]
		if r.runs[old].running() {
			break
		}
		delete(r.runs, old)
		r.order = r.order[1:]
	}
}

// Progress returns the progress of the stampede id: from this replica if it runs or ran it here,
// else from the Board.
func (r *Runner) Progress(ctx context.Context, id string) (Progress, error) {
	if !validID(id) {
		return Progress{}, ErrUnknown
	}
	r.mu.Lock()
	st, ok := r.runs[id]
	r.mu.Unlock()
	if ok {
		return st.snapshot(), nil
	}
	if r.board == nil {
		return Progress{}, ErrUnknown
	}
	return r.board.Get(ctx, id)
}

// idLen is the length of a stampede id: hex digits of 48 random bits.
const idLen = 12

func newID() string {
	var b [idLen / 2]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validID(id string) bool {
	if len(id) != idLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !('0' <= id[i] && id[i] <= '9' || 'a' <= id[i] && id[i] <= 'f') {
			return false
		}
	}
	return true
}
