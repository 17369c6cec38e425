package proof

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/payphase"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Run measures the yardsticks, then attacks each strategy in turn.
func Run(ctx context.Context, db *sql.DB, o *Options, say func(string, ...any)) (*attack.Report, error) {
	now := time.Now()
	rep := &attack.Report{
		RunID:     now.UTC().Format("20060102-150405"),
		StartedAt: now.UTC(),
		Machine:   yardstick.Machine(),
		Targets:   o.Targets,
		Settings: attack.Settings{Stock: o.Stock, Buyers: o.Buyers, Attempts: o.Attempts, Rate: o.Rate,
			Workers: o.Workers, MaxDuration: o.MaxDuration, Chaos: o.chaos.mode, Pay: o.pay.Share},
		Passed: true,
	}
	if o.view.counts != nil {
		rep.Settings.Viewers, rep.Settings.View, rep.Settings.ViewerTargets = o.view.counts, string(o.view.mode), o.view.targets
	}
	admin := o.Admin()
	rep.Topology = attack.TopologyOf(ctx, admin)
	if o.BaselineFor > 0 {
		ys, err := attack.MeasureYardsticks(ctx, &o.Options, say)
		if err != nil {
			return nil, err
		}
		rep.Yardsticks = ys
	}
	for _, st := range o.Strategies {
		for _, n := range crowdRuns(o.view) {
			sr, err := AttackStrategy(ctx, db, o, admin, rep.RunID, st, n, say)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st, err)
			}
			if ys := rep.Yardsticks; ys != nil {
				sr.AcceptedPerR = attack.RatioOf(sr.AcceptedPerSec, ys.R.RowsPerSec)
				sr.SoldOutPerGin = attack.RatioOf(sr.SoldOutPerSec, ys.BareGin.RequestsPerSec)
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

// AttackStrategy runs the whole cycle for one strategy: product, attack, settle, drain, audit, and
// with -pay the payment phase (payphase.Run). With -viewers a crowd of viewers of that size
// (none for 0) watches from before the attack until the sale is drained, and MySQL's counters are
// read around the attack.
func AttackStrategy(ctx context.Context, db *sql.DB, o *Options, admin *attack.AdminClient, runID, strategy string, crowd CrowdRun, say func(string, ...any)) (*attack.StrategyReport, error) {
	pid, err := admin.SaleProduct(ctx, productName(strategy, crowd, o.view.mode), strategy, o.Stock)
	if err != nil {
		return nil, err
	}
	label := crowd.label(strategy, o.view.mode)
	say("%s: product %d, %d units, %d buyers × %d attempts over %d replicas", label, pid, o.Stock, o.Buyers, o.Attempts, len(o.Targets))
	var w *watch
	if o.view.counts != nil {
		if w, err = startWatch(ctx, o, pid, crowd.count, say); err != nil {
			return nil, err
		}
		defer w.stop()
		w.attackBegins(ctx, db)
	}
	plan := attack.PlanAttempts(&o.Options, runID, buyerTag(strategy, crowd))
	answers, events, err := attack.Attack(ctx, &o.Options, pid, plan, say)
	if err != nil {
		return nil, err
	}
	var (
		rates    *attack.MySQLRates
		cpu      *yardstick.CPUShare
		programs []yardstick.ProgramCPU
	)
	if w != nil {
		rates, cpu, programs = w.attackEnded(ctx, db)
	}
	settled, stuck := attack.Settle(ctx, &o.Options, pid, answers)
	say("%s: %d answers, %d settled after the attack; waiting for the order queue", label, len(answers), len(settled))
	sr, err := attack.Judge(ctx, db, &o.Options, strategy, pid, answers, settled, events, nil)
	if err != nil {
		return nil, err
	}
	if w != nil {
		vr, violations := w.finish(ctx, sr, answers)
		vr.MySQL, vr.CPU, vr.Programs, vr.Round = rates, cpu, programs, crowd.round
		sr.Viewers = vr
		sr.Violations = append(sr.Violations, violations...)
	}
	if o.pay.Share > 0 {
		if err := payphase.Run(ctx, db, &o.Options, o.pay, runID, sr, answers, settled, say); err != nil {
			return nil, err
		}
	}
	sr.Account(len(plan), stuck)
	return sr, nil
}

// buyerTag names an attack's buyers (planAttempts): the strategy, and the crowd when there is
// one, so that two attacks of one run never share a buyer or an Idempotency-Key.
func buyerTag(strategy string, crowd CrowdRun) string {
	switch {
	case crowd.round > 1:
		return fmt.Sprintf("%s-v%d-r%d", strategy, crowd.count, crowd.round)
	case crowd.count > 0:
		return fmt.Sprintf("%s-v%d", strategy, crowd.count)
	}
	return strategy
}
