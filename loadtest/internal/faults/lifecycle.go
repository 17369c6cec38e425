package faults

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/payphase"
)

// The lifecycle audit of a chaos step: the order events (paid, expired, cancelled) go from their
// outbox through the lifecycle topic into the tallies, a path the orders' audit does not look at.
// A broker that comes back from a fault with its lifecycle partitions garbled, or its groups'
// offsets past the log's end, keeps every order right and stops the tallies for good: this is
// what makes such a step fail.

// lifecyclePayers is how many 202s of each strategy a broker step pays once its load has ended,
// so that the lifecycle topic carries events written after the broker came back, whatever else
// happens to be expiring.
const lifecyclePayers = 3

// brokerFaults are the steps whose broker fault the lifecycle must come back from.
var brokerFaults = map[string]bool{"kafka": true, "broker-kill": true}

// auditLifecycle pays a few of the step's orders if its fault is the broker's, then waits up to
// o.drainTimeout for every order event published since began (the database's clock) to be
// tallied, and adds to step what it saw: an event, or a violation.
func auditLifecycle(ctx context.Context, db *sql.DB, o *Options, step *StepReport, f Fault, results []stepLoad, began string, start time.Time, say func(string, ...any)) error {
	note := func(what string) {
		step.Events = append(step.Events, attack.Event{T: time.Since(start).Seconds(), What: what})
		say("chaos: %s", what)
	}
	if brokerFaults[f.Name] {
		paid, tried := 0, 0
		client := payphase.PayClient(&o.Options)
		for _, r := range results {
			ws := payphase.WinnersOf(r.answers, nil)
			for _, w := range ws[:min(lifecyclePayers, len(ws))] {
				tried++
				if payphase.PayOne(ctx, client, o.Targets, w).Outcome == "paid" {
					paid++
				}
			}
		}
		note(fmt.Sprintf("lifecycle: paid %d of %d orders after the broker came back, for their events to reach the tallies", paid, tried))
	}
	published, behind, waited, err := lifecycleCaughtUp(ctx, db, began, o.DrainTimeout)
	if err != nil {
		return err
	}
	if behind > 0 {
		step.Violations = append(step.Violations, fmt.Sprintf(
			"the lifecycle did not catch up: %d of the %d order events published during the step were not tallied within %s",
			behind, published, o.DrainTimeout))
		return nil
	}
	note(fmt.Sprintf("lifecycle: %d order events published during the step, every one tallied (%.1f s after the load)", published, waited.Seconds()))
	return nil
}

// lifecycleCaughtUp waits up to timeout for every order event published since began to be
// consumed into the tallies. It returns how many were published, how many were still not
// consumed when it stopped, and how long it waited.
func lifecycleCaughtUp(ctx context.Context, db *sql.DB, began string, timeout time.Duration) (published, behind int, waited time.Duration, err error) {
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err = db.QueryRowContext(ctx, `
			SELECT COUNT(*), COALESCE(SUM(c.event_id IS NULL), 0)
			FROM order_events e LEFT JOIN order_events_consumed c ON c.event_id = e.id
			WHERE e.published_at >= ?`, began).Scan(&published, &behind)
		if err != nil {
			if ctx.Err() != nil {
				return published, behind, time.Since(t0), nil // timed out: behind is the last count
			}
			return 0, 0, 0, fmt.Errorf("lifecycle audit: %w", err)
		}
		if behind == 0 {
			return published, 0, time.Since(t0), nil
		}
		select {
		case <-ctx.Done():
			return published, behind, time.Since(t0), nil
		case <-time.After(payphase.PollEvery):
		}
	}
}

// dbNow is the database's clock, which stamps published_at, as the database writes it (the
// audit's DSN does not parse times).
func dbNow(ctx context.Context, db *sql.DB) (string, error) {
	var now string
	if err := db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&now); err != nil {
		return now, fmt.Errorf("the database's clock: %w", err)
	}
	return now, nil
}
