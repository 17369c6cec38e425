package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The policies: how a buyer picks a bucket, and what "sold out" means.
const (
	// policyPinned: the buyer's bucket only; "sold out" when it is empty.
	policyPinned = "pinned"
	// policyProbe: the buyer's bucket, then the next ones in turn until one has a unit or all
	// are empty.
	policyProbe = "probe"
	// policySummary: probe, skipping the buckets that this replica has seen empty (an
	// in-memory flag per bucket, true for good because stock only goes down within a sale, as the
	// replicas' sold-out bound of the project); a buyer whose replica has seen every bucket
	// empty is refused without a call.
	policySummary = "summary"
	// policyRebalance: the buyer's bucket; when it is empty, read every bucket and move half of
	// the fullest one's units into it, then take again.
	policyRebalance = "rebalance"
)

var allPolicies = []string{policyPinned, policyProbe, policySummary, policyRebalance}

// The arrivals: how buyers spread over the buckets.
const (
	// arrivalUniform: home bucket = FNV-1a(user id) mod K.
	arrivalUniform = "uniform"
	// arrivalSkewed: home bucket drawn from a Zipf law over the K buckets (bucket b with
	// weight 1/(b+1)^s), as when buckets are picked by something uneven: the replica or the
	// region a buyer lands on, or a hash of a skewed key.
	arrivalSkewed = "skewed"
)

var allArrivals = []string{arrivalUniform, arrivalSkewed}

// tailConfig is one tail run.
type tailConfig struct {
	Policy   string
	Arrival  string
	K        int
	Units    int
	Buyers   int
	Workers  int
	Replicas int // replicas whose in-memory empty flags the summary policy keeps apart
	Skew     float64
	Seed     uint64
	Blind    bool // the negative control: a sale decremented without the condition
}

// TailRow is what one tail run sold, refused and cost.
type TailRow struct {
	Backend string `json:"backend"`
	Policy  string `json:"policy"`
	Arrival string `json:"arrival"`
	K       int    `json:"k"`
	Units   int    `json:"units"`
	Buyers  int    `json:"buyers"`
	Workers int    `json:"workers"`
	// Sold counts the buyers told they got a unit; StoreSold is the units the buckets lost
	// (units − Σ left): the two must agree and neither may exceed Units.
	Sold      int   `json:"sold"`
	StoreSold int64 `json:"store_sold"`
	// Undersell is the units left in the buckets when every buyer is done.
	Undersell int64 `json:"undersell"`
	Refused   int   `json:"refused"`
	// FalseSoldOuts counts the buyers refused while some bucket still held a unit: a lower bound,
	// those refused before the last winner's call began (stock only goes down, so that unit was
	// there), or every refused buyer when units were left at the end.
	FalseSoldOuts int `json:"false_sold_outs"`
	// Calls are the calls to the store: takes, moves and reads; CallsWinners those of the buyers
	// who got a unit (Sold of them are their first), CallsRefused those of the others (0 each
	// when refused from memory).
	Calls        int `json:"calls"`
	CallsWinners int `json:"calls_winners"`
	CallsRefused int `json:"calls_refused"`
	MaxCalls     int `json:"max_calls_one_buyer"`
	// RefusedFromMemory counts the buyers refused without a call (summary).
	RefusedFromMemory int `json:"refused_from_memory"`
	// Moves counts the rebalancing moves; GaveUp the buyers rebalance refused after 2K rounds.
	Moves  int `json:"moves,omitempty"`
	GaveUp int `json:"gave_up,omitempty"`
	// Demand is the buyers per home bucket; LeftByBucket the units left in each at the end.
	Demand       []int   `json:"demand"`
	LeftByBucket []int64 `json:"left_by_bucket"`
	Seconds      float64 `json:"seconds"`
	// Problems are broken invariants: an oversell, a disagreement between the buyers' count and
	// the store's.
	Problems []string `json:"problems,omitempty"`
}

// homes returns each buyer's home bucket.
func homes(c tailConfig) []int {
	h := make([]int, c.Buyers)
	switch c.Arrival {
	case arrivalSkewed:
		cum := make([]float64, c.K)
		total := 0.0
		for b := range c.K {
			total += 1 / math.Pow(float64(b+1), c.Skew)
			cum[b] = total
		}
		r := rand.New(rand.NewPCG(c.Seed, 0x6275636b657473))
		for i := range h {
			x := r.Float64() * total
			b := 0
			for b < c.K-1 && cum[b] <= x {
				b++
			}
			h[i] = b
		}
	default:
		for i := range h {
			f := fnv.New32a()
			f.Write([]byte("user-" + strconv.Itoa(i)))
			h[i] = int(f.Sum32() % uint32(c.K))
		}
	}
	return h
}

// split spreads units over k buckets as evenly as it goes.
func split(units, k int) []int64 {
	out := make([]int64, k)
	for b := range out {
		out[b] = int64(units / k)
		if b < units%k {
			out[b]++
		}
	}
	return out
}

// outcome is one buyer's.
type outcome struct {
	got        bool
	calls      int
	moves      int
	gaveUp     bool
	start, end time.Time
}

// runTail sells c.Units units in c.K buckets of be to c.Buyers buyers, c.Workers at a time, with
// c.Policy, and counts what it sold, refused and cost.
func runTail(ctx context.Context, be backend, c tailConfig) (TailRow, error) {
	row := TailRow{Backend: be.Name(), Policy: c.Policy, Arrival: c.Arrival, K: c.K, Units: c.Units, Buyers: c.Buyers, Workers: c.Workers}
	s, err := be.NewSale(ctx, split(c.Units, c.K), c.Blind)
	if err != nil {
		return row, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.Delete(dctx)
	}()
	home := homes(c)
	row.Demand = make([]int, c.K)
	for _, b := range home {
		row.Demand[b]++
	}
	leftCalls := 1 // MySQL reads every bucket in one query
	if be.Name() == "redis" {
		leftCalls = c.K // one GET per bucket: in a cluster each lives in its own slot
	}
	empty := make([][]atomic.Bool, max(1, c.Replicas))
	for r := range empty {
		empty[r] = make([]atomic.Bool, c.K)
	}
	b := &buyer{s: s, k: c.K, policy: c.Policy, leftCalls: leftCalls}

	out := make([]outcome, c.Buyers)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	for range max(1, c.Workers) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= c.Buyers {
					return
				}
				o := &out[i]
				o.start = time.Now()
				err := b.buy(ctx, home[i], empty[i%len(empty)], o)
				o.end = time.Now()
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("buyer %d: %w", i, err); cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	row.Seconds = time.Since(began).Seconds()
	if firstErr != nil {
		return row, firstErr
	}
	if err := ctx.Err(); err != nil {
		return row, err
	}
	if row.LeftByBucket, err = s.Left(ctx); err != nil {
		return row, err
	}
	tally(&row, out)
	return row, nil
}

// tally counts the outcomes into row, whose LeftByBucket is read, and checks the invariants.
func tally(row *TailRow, out []outcome) {
	var lastWinnerStart time.Time
	for _, o := range out {
		row.Calls += o.calls
		row.MaxCalls = max(row.MaxCalls, o.calls)
		row.Moves += o.moves
		if o.gaveUp {
			row.GaveUp++
		}
		if o.got {
			row.Sold++
			row.CallsWinners += o.calls
			if o.start.After(lastWinnerStart) {
				lastWinnerStart = o.start
			}
			continue
		}
		row.Refused++
		row.CallsRefused += o.calls
		if o.calls == 0 {
			row.RefusedFromMemory++
		}
	}
	var left int64
	for _, l := range row.LeftByBucket {
		left += l
	}
	row.StoreSold = int64(row.Units) - left
	row.Undersell = max(0, left)
	for _, o := range out {
		if !o.got && (row.Undersell > 0 || o.end.Before(lastWinnerStart)) {
			row.FalseSoldOuts++
		}
	}
	row.Problems = check(row.Units, row.Sold, row.LeftByBucket)
}

// check returns the broken invariants of a sale of units units, after which sold buyers were told
// they got one and the buckets hold left: no oversell, and the buyers' count agrees with the store.
func check(units, sold int, left []int64) []string {
	var problems []string
	var sum int64
	for b, l := range left {
		sum += l
		if l < 0 {
			problems = append(problems, fmt.Sprintf("bucket %d holds %d units: decremented below zero", b, l))
		}
	}
	storeSold := int64(units) - sum
	if sold > units || storeSold > int64(units) {
		problems = append(problems, fmt.Sprintf("oversold: %d buyers told they got a unit, the buckets lost %d, of %d units", sold, storeSold, units))
	}
	if int64(sold) != storeSold {
		problems = append(problems, fmt.Sprintf("%d buyers told they got a unit, but the buckets lost %d", sold, storeSold))
	}
	return problems
}

// buyer runs a policy on one sale.
type buyer struct {
	s         sale
	k         int
	policy    string
	leftCalls int
}

// buy decides one buyer whose home bucket is home; empty are the flags of the buyer's replica.
func (b *buyer) buy(ctx context.Context, home int, empty []atomic.Bool, o *outcome) error {
	take := func(bucket int) (bool, error) {
		o.calls++
		return b.s.Take(ctx, bucket)
	}
	var err error
	switch b.policy {
	case policyPinned:
		o.got, err = take(home)
	case policyProbe:
		for j := 0; j < b.k && !o.got && err == nil; j++ {
			o.got, err = take((home + j) % b.k)
		}
	case policySummary:
		for j := 0; j < b.k && !o.got && err == nil; j++ {
			bucket := (home + j) % b.k
			if empty[bucket].Load() {
				continue
			}
			if o.got, err = take(bucket); err == nil && !o.got {
				empty[bucket].Store(true)
			}
		}
	case policyRebalance:
		err = b.rebalance(ctx, home, o, take)
	default:
		err = fmt.Errorf("unknown policy %q", b.policy)
	}
	return err
}

// rebalance takes from home; when it is empty, moves half the fullest bucket's units into it and
// takes again, for 2K rounds at the most (others may empty it first).
func (b *buyer) rebalance(ctx context.Context, home int, o *outcome, take func(int) (bool, error)) error {
	var err error
	if o.got, err = take(home); o.got || err != nil {
		return err
	}
	for range 2 * b.k {
		left, err := b.s.Left(ctx)
		o.calls += b.leftCalls
		if err != nil {
			return err
		}
		full := 0
		for i, l := range left {
			if l > left[full] {
				full = i
			}
		}
		if left[full] <= 0 {
			return nil // every bucket empty: sold out
		}
		if full != home {
			moved, calls, err := b.s.Move(ctx, full, home, (left[full]+1)/2)
			o.calls += calls
			if err != nil {
				return err
			}
			if moved {
				o.moves++
			}
		}
		if o.got, err = take(home); o.got || err != nil {
			return err
		}
	}
	o.gaveUp = true
	return nil
}
