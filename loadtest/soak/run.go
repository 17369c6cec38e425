package main

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
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
	// Idle are the replicas' samples at rest after the warm-up and after the run (settle).
	Idle       [2][]sample
	Growth     []growth
	Violations []string // the audit's, by product
	Missing    int      // purchases answered 202 without their order
	Failures   []string
	Pass       bool
}

// run is the warm-up's load, a rest, the judged load, a rest; the gauges are sampled throughout,
// and at each rest once the replicas have let go of every connection (settle).
func (s *soak) run(ctx context.Context) (*report, error) {
	o := s.o
	s.current, s.accepted = map[string]int64{}, map[string]int64{}
	s.tally = tally{Purchases: map[string]int{}, Pays: map[string]int{}}
	rep := &report{Run: s.runID, Commit: cli.GitCommit(ctx), Options: map[string]string{
		"for": o.duration.String(), "warmup": o.warmup.String(), "sample": o.sampleEvery.String(), "sale-every": o.salePeriod.String(),
		"rate": fmt.Sprint(o.rate), "strategies": strings.Join(o.strategies, ","), "pay": fmt.Sprint(o.payShare),
		"viewers": fmt.Sprint(o.viewers), "replicas": strings.Join(o.replicas, ","),
	}}
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); s.sample(sampleCtx) }()
	defer func() { stopSampling(); <-sampled }()

	rep.Started = time.Now()
	s.say("soak %s: %s at %.0f purchases/s over %s, %d viewers; warm-up %s; sampling every %s",
		s.runID, o.duration, o.rate, strings.Join(o.strategies, ", "), o.viewers, o.warmup, o.sampleEvery)
	if err := s.phase(ctx, rep, o.warmup, 0); err != nil {
		return nil, err
	}
	s.say("warm-up over; resting until the replicas let go of their connections")
	rep.Idle[0] = s.settle(ctx)
	rep.WarmEnd = time.Now()
	if err := s.phase(ctx, rep, o.duration-o.warmup, 1000); err != nil {
		return nil, err
	}
	rep.Ended = time.Now()
	s.say("load over; resting again")
	rep.Idle[1] = s.settle(ctx)
	if ctx.Err() != nil {
		return nil, cli.Failure("interrupted")
	}
	stopSampling()
	<-sampled
	rep.Tally, rep.Samples, rep.Products = s.tally, s.samples, len(s.products)
	s.judge(ctx, rep)
	return rep, nil
}

// phase runs the load for d: sales (numbered from round), purchases, payments and the viewers,
// then waits for every answer.
func (s *soak) phase(ctx context.Context, rep *report, d time.Duration, round int) error {
	loadCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	first := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { s.sales(loadCtx, round, first) })
	if err := <-first; err != nil {
		stop()
		wg.Wait()
		return fmt.Errorf("open the sales (is the stack up? make up): %w", err)
	}
	wg.Go(func() { s.load(loadCtx, round) })
	var vt viewerTally
	wg.Go(func() { vt = s.crowd(loadCtx) })
	wg.Wait()
	rep.Viewers.merge(vt)
	if ctx.Err() != nil {
		return cli.Failure("interrupted")
	}
	return nil
}

// settleMax bounds a rest: a replica still letting go of connections after it is not at rest.
const settleMax = 30 * time.Second

// settle closes every idle connection of the soak's clients and samples the replicas every
// second until none of them has fewer goroutines than at the sample before, three times running:
// then every request and stream has ended and every connection is closed. It returns that sample.
func (s *soak) settle(ctx context.Context) []sample {
	s.buyers.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections() // the admin calls' and WaitVisible's
	deadline := time.Now().Add(settleMax)
	var last []sample
	calm := 0
	for calm < 3 && time.Now().Before(deadline) && ctx.Err() == nil {
		sleep(ctx, time.Second)
		got, err := s.sampler.take(ctx, time.Now())
		if err != nil {
			continue
		}
		got = got[:len(got)-1] // the replicas only: MySQL's threads are the whole server's
		calm++
		for i := range got {
			if last == nil || got[i].Values[goroutines] < last[i].Values[goroutines] {
				calm = 0
			}
		}
		last = got
	}
	return last
}

// sample reads the gauges every o.sampleEvery until ctx ends, and prints a line a minute.
func (s *soak) sample(ctx context.Context) {
	t := time.NewTicker(s.o.sampleEvery)
	defer t.Stop()
	start, lastSaid := time.Now(), time.Now()
	for {
		now := time.Now()
		got, err := s.sampler.take(ctx, now)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if err != nil {
			s.sampleErrs = append(s.sampleErrs, now.Format(time.TimeOnly)+" "+err.Error())
		}
		s.samples = append(s.samples, got...)
		accepted, skipped := s.tally.Purchases["202"], s.tally.Skipped
		s.mu.Unlock()
		if now.Sub(lastSaid) >= time.Minute && len(got) > 0 {
			lastSaid = now
			s.say("%s in: %d accepted, %d ticks skipped; %s", now.Sub(start).Round(time.Second), accepted, skipped, summary(got))
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
	idle, err := judgeIdle(rep.Idle[0], rep.Idle[1])
	if err != nil {
		fail("at rest: %v", err)
	}
	rep.Growth = append(growth, idle...)
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
	if n := orders["refused"]; n > 0 {
		fail("%d purchases answered 202 were refused by MySQL afterwards (a Redis state that went backwards)", n)
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
