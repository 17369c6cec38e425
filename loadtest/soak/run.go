package main

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// report is a run's outcome: what it did, what the gauges did, what the audit found.
type report struct {
	Run, Commit             string
	Started, WarmEnd, Ended time.Time
	Options                 map[string]string
	Tally                   tally
	Viewers                 viewerTally
	Orders                  map[string]int // the run's orders by status
	Products                int
	Samples                 []sample
	Growth                  []growth
	Violations              []string // the audit's, by product
	Missing                 int      // purchases answered 202 without their order
	Failures                []string
	Pass                    bool
}

func (s *soak) run(ctx context.Context) (*report, error) {
	o := s.o
	s.current, s.accepted = map[string]int64{}, map[string]int64{}
	s.tally = tally{Purchases: map[string]int{}, Pays: map[string]int{}}
	rep := &report{Run: s.runID, Commit: cli.GitCommit(ctx), Options: map[string]string{
		"for": o.duration.String(), "warmup": o.warmup.String(), "sample": o.sampleEvery.String(), "sale-every": o.salePeriod.String(),
		"rate": fmt.Sprint(o.rate), "strategies": strings.Join(o.strategies, ","), "pay": fmt.Sprint(o.payShare),
		"viewers": fmt.Sprint(o.viewers), "base": o.base, "replicas": strings.Join(o.replicas, ","),
	}}
	loadCtx, stop := context.WithCancel(ctx)
	defer stop()
	first := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.sales(loadCtx, first) })
	if err := <-first; err != nil {
		stop()
		wg.Wait()
		return nil, fmt.Errorf("open the first sales (is the stack up? make up): %w", err)
	}
	rep.Started = time.Now()
	rep.WarmEnd = rep.Started.Add(o.warmup)
	s.say("soak %s: %s at %.0f purchases/s over %s, %d viewers; warm-up %s; sampling every %s",
		s.runID, o.duration, o.rate, strings.Join(o.strategies, ", "), o.viewers, o.warmup, o.sampleEvery)
	wg.Go(func() { s.load(loadCtx) })
	wg.Go(func() { rep.Viewers = s.crowd(loadCtx) })
	s.sample(ctx, rep.Started.Add(o.duration))
	rep.Ended = time.Now()
	stop()
	s.say("load stopped; waiting for the last answers")
	wg.Wait()
	if ctx.Err() != nil {
		return nil, cli.Failure("interrupted")
	}
	rep.Tally, rep.Samples, rep.Products = s.tally, s.samples, len(s.products)
	s.judge(ctx, rep)
	return rep, nil
}

// sample reads the gauges every o.sampleEvery until until, and prints a line a minute.
func (s *soak) sample(ctx context.Context, until time.Time) {
	t := time.NewTicker(s.o.sampleEvery)
	defer t.Stop()
	lastSaid := time.Now()
	for {
		now := time.Now()
		got, err := s.sampler.take(ctx, now)
		s.mu.Lock()
		if err != nil {
			s.sampleErrs = append(s.sampleErrs, now.Format(time.TimeOnly)+" "+err.Error())
		}
		s.samples = append(s.samples, got...)
		accepted, skipped := s.tally.Purchases["202"], s.tally.Skipped
		s.mu.Unlock()
		if now.Sub(lastSaid) >= time.Minute && len(got) > 0 {
			lastSaid = now
			s.say("%s in: %d accepted, %d ticks skipped; %s", now.Sub(until.Add(-s.o.duration)).Round(time.Second), accepted, skipped, summary(got))
		}
		if !now.Before(until) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// summary is one line of the gauges of a round of samples: each replica's heap and goroutines.
func summary(got []sample) string {
	var parts []string
	for _, s := range got {
		if s.Source == "mysql" {
			parts = append(parts, "MySQL "+format(mysqlThreads, s.Values[mysqlThreads])+" threads")
			continue
		}
		parts = append(parts, fmt.Sprintf("%s heap %s, %s goroutines", strings.TrimPrefix(s.Source, "http://"), format(heap, s.Values[heap]), format(goroutines, s.Values[goroutines])))
	}
	return strings.Join(parts, "; ")
}

// judge waits for the order queue to drain, audits every product of the run, checks every 202
// is an order, judges the gauges' growth, and sets the verdict.
func (s *soak) judge(ctx context.Context, rep *report) {
	fail := func(format string, args ...any) { rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...)) }
	if len(s.sampleErrs) > 0 {
		fail("%d samples could not be read (first: %s)", len(s.sampleErrs), s.sampleErrs[0])
	}
	growth, err := judgeGrowth(rep.Samples, rep.WarmEnd, rep.Ended)
	if err != nil {
		fail("growth: %v", err)
	}
	rep.Growth = growth
	for _, g := range growth {
		if !g.OK {
			fail("grew past its bound: %s", g)
		}
	}
	if rep.Tally.Unanswered > 0 {
		fail("%d purchases without a final answer after their retries", rep.Tally.Unanswered)
	}
	s.say("waiting for the order queue to drain, then auditing %d products", len(s.products))
	for _, id := range s.products {
		f, err := drained(ctx, s.db, id, 2*time.Minute)
		if err != nil {
			fail("product %d: %v", id, err)
			continue
		}
		for _, v := range f.Violations(true) {
			rep.Violations = append(rep.Violations, fmt.Sprintf("product %d: %s", id, v))
		}
	}
	if len(rep.Violations) > 0 {
		fail("the audit found %d violations (first: %s)", len(rep.Violations), rep.Violations[0])
	}
	missing, orders, err := s.ordersOf(ctx)
	if err != nil {
		fail("reading the orders: %v", err)
	}
	rep.Missing, rep.Orders = missing, orders
	if missing > 0 {
		fail("%d purchases answered 202 have no order", missing)
	}
	rep.Pass = len(rep.Failures) == 0
}

// drained waits until the product's order queue has drained (every reservation published and an
// order), at most timeout, and returns its facts.
func drained(ctx context.Context, db *sql.DB, id int64, timeout time.Duration) (audit.Facts, error) {
	deadline := time.Now().Add(timeout)
	for {
		f, err := audit.Load(ctx, db, id)
		if err == nil && f.Drained() {
			return f, nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return f, err
			}
			return f, fmt.Errorf("not drained after %s: %d reservations, %d orders, %d unpublished", timeout, f.Reservations, f.Orders, f.Unpublished)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// ordersOf counts the purchases answered 202 that have no order, and the run's orders by status.
func (s *soak) ordersOf(ctx context.Context) (missing int, byStatus map[string]int, err error) {
	ids := slices.Sorted(maps.Keys(s.accepted))
	found := 0
	for chunk := range slices.Chunk(ids, 500) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := "SELECT COUNT(*) FROM orders WHERE order_id IN (?" + strings.Repeat(",?", len(chunk)-1) + ")"
		var n int
		if err := s.db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return 0, nil, err
		}
		found += n
	}
	byStatus = map[string]int{}
	if len(s.products) == 0 {
		return len(ids) - found, byStatus, nil
	}
	args := make([]any, len(s.products))
	for i, id := range s.products {
		args[i] = id
	}
	rows, err := s.db.QueryContext(ctx, "SELECT status, COUNT(*) FROM orders WHERE product_id IN (?"+strings.Repeat(",?", len(args)-1)+") GROUP BY status", args...)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return 0, nil, err
		}
		byStatus[st] = n
	}
	return len(ids) - found, byStatus, rows.Err()
}
