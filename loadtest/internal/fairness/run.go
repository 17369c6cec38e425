package fairness

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Report is one waiting-room run: every strategy's sales, one per variant.
type Report struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Commit    string    `json:"commit"`
	Machine   string    `json:"machine"`
	Targets   []string  `json:"targets"`
	Settings  Settings  `json:"settings"`
	Sales     []Sale    `json:"sales"`
	Took      float64   `json:"took_seconds"`
	// Passed is false when a safe strategy's audit failed, the unsafe control did not oversell,
	// or any room check failed.
	Passed bool `json:"passed"`
}

// Settings are the knobs of the run.
type Settings struct {
	Crowd          int     `json:"crowd"`
	Bots           int     `json:"bots"`
	Stock          int     `json:"stock"`
	AdmitRate      float64 `json:"admit_rate"`
	MaxActive      int     `json:"max_active"`
	SessionSeconds int     `json:"session_seconds"`
	AbandonSeconds int     `json:"abandon_seconds"`
	PreQueue       string  `json:"pre_queue"`
	ArriveAfter    string  `json:"arrive_after"`
	Think          string  `json:"think"`
	BotPoll        string  `json:"bot_poll"`
	BotConns       int     `json:"bot_conns"`
	Tick           string  `json:"room_tick"`
	Seed           int64   `json:"seed"`
	Fault          string  `json:"room_fault,omitempty"`
	FaultAt        string  `json:"room_fault_at,omitempty"`
	FaultFor       string  `json:"room_fault_for,omitempty"`
}

// Sale is one strategy's sale behind one variant of the room: the room's judgement and the audit.
type Sale struct {
	Strategy  string    `json:"strategy"`
	Variant   string    `json:"variant"`
	ProductID int64     `json:"product_id"`
	SaleID    string    `json:"sale_id"`
	Judgement Judgement `json:"judgement"`
	// Facts are the database's after the order queue drained; Oversold the units beyond the
	// stock (the database's, or the 202s'); Audit PASS, FAIL or OVERSOLD (attack.Verdict).
	Facts      audit.Facts `json:"facts"`
	Oversold   int         `json:"oversold"`
	Audit      string      `json:"audit"`
	Violations []string    `json:"violations,omitempty"`
	// Verdict is PASS when the audit is what the strategy must show (PASS, or OVERSOLD for the
	// control) and every room check passed; FAIL otherwise.
	Verdict string `json:"verdict"`
}

// Run plays every strategy of o behind every variant, one sale each, and judges them.
func Run(ctx context.Context, db *sql.DB, o *Options, say func(string, ...any)) (*Report, error) {
	began := time.Now()
	seed := o.crowd.seed
	if !o.crowd.seedGiven {
		seed = began.UnixNano()
	}
	rep := &Report{
		RunID: "wr-" + began.UTC().Format("20060102-150405"), StartedAt: began.UTC(), Commit: cli.GitCommit(ctx),
		Machine: yardstick.Machine(), Targets: o.Targets, Settings: o.settings(seed), Passed: true,
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	admin := o.Admin()
	for _, st := range o.Strategies {
		for _, variant := range o.room.variants {
			s, err := o.playSale(ctx, db, admin, rep.RunID, st, variant, rng, say)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", st, variant, err)
			}
			say("%s · %s: %s (audit %s; bots %d of %d units for %.0f%% of the crowd, bound %.1f; order %v; rate max %d/s of %.4g; ETA p50 %.0f%%)",
				st, variant, s.Verdict, s.Audit, s.Judgement.Fairness.BotsUnits, s.Judgement.Fairness.Units, 100*s.Judgement.Fairness.CrowdShare,
				s.Judgement.Fairness.Lottery.Bound, s.Judgement.Order.Passed, s.Judgement.Rate.Max, o.room.admitRate, 100*s.Judgement.ETA.P50)
			rep.Sales = append(rep.Sales, *s)
			rep.Passed = rep.Passed && s.Verdict == "PASS"
		}
	}
	rep.Took = time.Since(began).Seconds()
	return rep, nil
}

func (o *Options) settings(seed int64) Settings {
	return Settings{
		Crowd: o.crowd.size, Bots: o.bots(), Stock: o.Stock, AdmitRate: o.room.admitRate, MaxActive: o.maxActive(),
		SessionSeconds: int(o.room.session.Seconds()), AbandonSeconds: int(o.room.abandon.Seconds()),
		PreQueue: o.room.preQueue.String(), ArriveAfter: o.crowd.after.String(),
		Think: o.crowd.thinkMin.String() + "–" + o.crowd.thinkMax.String(), BotPoll: o.crowd.botPoll.String(),
		BotConns: o.crowd.botConns, Tick: o.room.tick.String(), Seed: seed,
		Fault: o.room.fault, FaultAt: map[bool]string{true: o.room.faultAt.String()}[o.room.fault != ""],
		FaultFor: map[bool]string{true: o.room.faultFor.String()}[o.room.fault == FaultKill],
	}
}

// maxActive is the sale's max_active: high enough that the rate alone bounds admission (the
// sessions of a whole crowd at once), so that the ETA's throughput is the rate.
func (o *Options) maxActive() int {
	return max(o.crowd.size, int(math.Ceil(o.room.admitRate*o.room.session.Seconds()))+1)
}

// playSale puts the strategy's product of the variant on sale behind a waiting room, sends the
// crowd, waits for the order queue and judges both sides.
func (o *Options) playSale(ctx context.Context, db *sql.DB, admin *attack.AdminClient, runID, strategy, variant string, rng *rand.Rand, say func(string, ...any)) (*Sale, error) {
	opens := time.Now().Add(o.room.lead).Truncate(time.Second).Add(time.Second)
	starts := opens.Add(o.room.preQueue)
	name := fmt.Sprintf("loadtest · waiting room · %s · %s", strategy, variant)
	id, err := o.saleWaitingRoom(ctx, admin, name, strategy, variant, opens, starts)
	if err != nil {
		return nil, err
	}
	if missing := appapi.WaitVisible(ctx, o.Targets, id, time.Until(opens)); len(missing) > 0 {
		return nil, fmt.Errorf("product %d not visible on %s before its queue opened", id, strings.Join(missing, ", "))
	}
	say("%s · %s: product %d, queue opens %s, sale starts %s; %d visitors (%d bots)", strategy, variant, id,
		opens.Format("15:04:05"), starts.Format("15:04:05"), o.crowd.size, o.bots())
	cr := &crowd{s: sale{productID: id, targets: o.Targets, opens: opens, starts: starts, session: o.room.session,
		deadline: starts.Add(o.crowd.after + o.crowd.timeout)}, o: o.crowd}
	users := make([]string, o.crowd.size)
	tag := strings.ReplaceAll(strings.TrimPrefix(runID, "wr-"), "-", "")
	for i := range users {
		kind := "h"
		if i < o.bots() {
			kind = "b"
		}
		users[i] = fmt.Sprintf("wr%s-%s-%s-%s%d", tag, shortName(strategy), variant[:1], kind, i)
	}
	// The fault strikes while the crowd waits; what it killed of the backing services is started
	// again once the crowd is done.
	var fault *FaultJudgement
	var faulted sync.WaitGroup
	f := &roomFault{kind: o.room.fault, down: o.room.faultFor, dsn: o.MysqlDSN, services: "scripts/services.sh", replicas: "scripts/replica.sh"}
	if f.kind != "" {
		faulted.Go(func() {
			fj := f.play(ctx, starts.Add(o.room.faultAt), cr.saleID, say)
			fault = &fj
		})
	}
	visitors := cr.play(ctx, users, o.bots(), o.room.preQueue+o.crowd.after, rng)
	faulted.Wait()
	if fault != nil {
		f.afterCrowd(context.WithoutCancel(ctx), fault)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	j := JudgeRoom(visitors, variant, o.room.admitRate, o.room.tick, len(o.Targets), starts)
	if fault != nil {
		fj := judgeFault(visitors, *fault)
		j.Fault = &fj
	}
	s := &Sale{Strategy: strategy, Variant: variant, ProductID: id, Judgement: j}
	for _, v := range visitors {
		if v.Sale != "" {
			s.SaleID = v.Sale
			break
		}
	}
	if err := o.auditSale(ctx, db, s); err != nil {
		return nil, err
	}
	return s, nil
}

// shortName shortens a strategy's name for the buyers' ids (at most 64 characters).
func shortName(st string) string {
	st = strings.ReplaceAll(st, "-", "")
	return st[:min(len(st), 8)]
}

// saleWaitingRoom resets (or creates) the product called name with a waiting room whose queue
// opens at opens and whose sale starts at starts, and returns its id.
func (o *Options) saleWaitingRoom(ctx context.Context, admin *attack.AdminClient, name, strategy, variant string, opens, starts time.Time) (int64, error) {
	// The API takes whole seconds.
	starts, ends, opens := starts.UTC().Truncate(time.Second), starts.Add(time.Hour).UTC().Truncate(time.Second), opens.UTC().Truncate(time.Second)
	maxActive, session, abandon, shuffle := o.maxActive(), int(o.room.session.Seconds()), int(o.room.abandon.Seconds()), variant == VariantShuffle
	return admin.PutOnSale(ctx, name, client.Reset{
		Stock: o.Stock, Strategy: &strategy, SaleStartsAt: &starts, SaleEndsAt: &ends,
		Admission: &client.Admission{
			Mode: client.WaitingRoom, AdmitRate: &o.room.admitRate, MaxActive: &maxActive,
			SessionSeconds: &session, AbandonSeconds: &abandon, QueueOpensAt: &opens, Shuffle: &shuffle,
		},
	})
}

// auditSale waits for the sale's order queue to drain and judges the database's side as the
// attack does (attack.DbViolations, attack.Verdict), with the room's answers' violations; the
// sale's verdict adds the room's checks.
func (o *Options) auditSale(ctx context.Context, db *sql.DB, s *Sale) error {
	j := &s.Judgement
	facts, drained, err := attack.WaitDrained(ctx, db, s.ProductID, len(j.Accepted), o.DrainTimeout)
	if err != nil {
		return err
	}
	missing, unexpected, err := audit.CompareAccepted(ctx, db, s.ProductID, j.Accepted)
	if err != nil {
		return err
	}
	s.Facts = facts
	s.Oversold = max(facts.Oversold(), len(j.Accepted)-facts.Refused-facts.InitialStock)
	v := append([]string(nil), j.Violations...)
	if len(j.Accepted) > facts.InitialStock {
		v = append(v, fmt.Sprintf("OVERSOLD: %d purchases accepted for %d units", len(j.Accepted), facts.InitialStock))
	}
	v = append(v, attack.DbViolations(attack.DbEvidence{Facts: facts, Drained: drained, Missing: missing, Unexpected: unexpected},
		s.Oversold, o.crowd.size, o.DrainTimeout)...)
	if n := j.Outcomes["unfinished"] + j.Outcomes["join_timeout"]; n > 0 {
		v = append(v, fmt.Sprintf("%d visitors did not finish within -crowd-timeout", n))
	}
	s.Audit, s.Violations = attack.Verdict(s.Strategy, s.Oversold, v)
	want := "PASS"
	if s.Strategy == attack.UnsafeStrategy {
		want = "OVERSOLD"
	}
	s.Verdict = "FAIL"
	if s.Audit == want && j.Passed() {
		s.Verdict = "PASS"
	}
	return nil
}
