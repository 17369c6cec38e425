package zoo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock/redisnaive"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/faults"
	"github.com/seckill-go/seckill-go/loadtest/internal/proof"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// The lock zoo (-zoo, what `make zoo` runs) puts every strategy through the same load and the
// same faults, one strategy at a time, on the local stack of `make up`, and writes one matrix:
// how fast each sells (a ratio to R), what its lock costs (waits, wasted tries, wake-ups per
// grant), and what each fault does to it, judged against what the write-ups say it should.
//
// The faults happen inside the critical section, where the write-ups place them, through the
// replicas' holder-* failpoints (SECKILL_TEST_FAILPOINT, internal/app/failpoint.go), each fired
// by a trigger file named for the strategy:
//
//	pause  the process holding the lock stops (SIGSTOP) for -zoo-pause, longer than the lock's
//	       lease (SECKILL_LOCK_TTL) and ZooKeeper session (SECKILL_ZK_SESSION_TIMEOUT), which the
//	       run sets shorter than make up's: the stop-the-world pause of the fencing argument
//	kill     the process holding the lock is SIGKILLed, then restarted
//	restart  the holder waits in its critical section for -zoo-hold, shorter than the lease,
//	         while the servers the lock lives on restart empty (SIGKILL, start): the lock zoo's
//	         locks without persistence, Redlock's servers and Memcached
//
// The restart needs the lock's servers from scripts/services.sh (it stops and starts them by
// name), which is what make up and make zoo run against.

// zooFaults are the faults of the matrix, in its column order (the registry's).
var zooFaults = func() []string {
	out := make([]string, len(sale.Faults))
	for i, f := range sale.Faults {
		out[i] = string(f)
	}
	return out
}()

// The outcomes a matrix cell can show.
const (
	outcomePass      = string(sale.OutcomePass)      // no unit oversold or left unsold, the sale went on
	outcomeOversold  = string(sale.OutcomeOversold)  // more units sold than the sale had
	outcomeUndersold = string(sale.OutcomeUndersold) // buyers refused (sold_out) while units remained
	outcomeStall     = string(sale.OutcomeStall)     // the sale stopped and did not go on by itself
	outcomeFail      = "FAIL"                        // an invariant broke in another way (the violations say which)
)

// zooSpec is what the matrix expects of a strategy (the outcome of its load and of each fault,
// from the strategy registry, sale.Catalog) and what the harness does for it. A fault it has no
// entry for does not apply (the strategy has no lock to hold: mysql's conditional UPDATE,
// redis-lua's script, the optimistic writes, none).
type zooSpec struct {
	load   string
	faults map[string]string
	zooHarness
}

// zooHarness is what the zoo does for a strategy beyond a load and a fault: the harness's side,
// not the domain's.
type zooHarness struct {
	// unstall, for a strategy whose fault is meant to stall it, is what an operator does to let
	// the sale go on (the naive lock table: delete the dead holder's row).
	unstall func(ctx context.Context, z *zooEnv, productID int64) (string, error)
	// restart is what the restart fault does to the lock's servers (scripts/services.sh names).
	restart serverRestart
}

// serverRestart is the restart fault of one lock: the servers stopped before the step's load,
// so that a holder holds the lock on the others only, and the servers restarted empty while it
// holds the lock; the stopped ones start again with them.
type serverRestart struct {
	down, restart []string
}

// zooHarnesses are the harness's pieces, by strategy; every key is a strategy of the registry
// whose expectations need it (a STALL needs an unstall, a restart fault its servers).
var zooHarnesses = map[sale.Strategy]zooHarness{
	sale.StrategyMySQLLockTableNaive: {unstall: deleteLockRow},
	// redis-setnx's kill fires between SETNX and EXPIRE (the app's holder-kill failpoint runs
	// there first): the key never expires and the sale stalls until deleted.
	sale.StrategyRedisSetnx: {unstall: deleteSetnxKey},
	// Kleppmann's scenario: the holder has the lock on servers 1, 2 and 3 (4 and 5 are down), 2
	// and 3 restart empty and 4 and 5 come back, and another replica wins 2, 3, 4, 5.
	sale.StrategyRedlock:   {restart: serverRestart{down: []string{"redlock4", "redlock5"}, restart: []string{"redlock2", "redlock3"}}},
	sale.StrategyMemcached: {restart: serverRestart{restart: []string{"memcached"}}},
}

// specOf is what the matrix expects of st: the registry's expectations, the harness's pieces. A
// strategy the registry lacks is expected to FAIL.
func specOf(st sale.Strategy) zooSpec {
	info, ok := st.Info()
	if !ok {
		return zooSpec{load: outcomeFail}
	}
	spec := zooSpec{load: string(info.Load), zooHarness: zooHarnesses[st]}
	if len(info.Faults) > 0 {
		spec.faults = make(map[string]string, len(info.Faults))
		for f, o := range info.Faults {
			spec.faults[string(f)] = string(o)
		}
	}
	return spec
}

// ZooReport is the matrix and the runs behind it.
type ZooReport struct {
	RunID      string             `json:"run_id"`
	StartedAt  time.Time          `json:"started_at"`
	Machine    string             `json:"machine"`
	Targets    []string           `json:"targets"`
	Settings   ZooSettings        `json:"settings"`
	Yardsticks *attack.Yardsticks `json:"yardsticks"`
	Rows       []ZooRow           `json:"rows"`
	Passed     bool               `json:"passed"`
	Took       float64            `json:"took_seconds"`
}

// ZooSettings are the run's knobs, for the report.
type ZooSettings struct {
	Stock      int           `json:"stock"`
	Buyers     int           `json:"buyers"`
	Workers    int           `json:"workers"`
	Pause      time.Duration `json:"pause"`
	LockTTL    time.Duration `json:"lock_ttl"`
	ZKSession  time.Duration `json:"zk_session"`
	Step       time.Duration `json:"step"`
	StepRate   int           `json:"step_rate"`
	FaultAfter time.Duration `json:"fault_after"`
	// Faults are the faults played; none: the loads alone.
	Faults []string `json:"faults"`
}

// ZooRow is one strategy's line of the matrix.
type ZooRow struct {
	Strategy string `json:"strategy"`
	Family   string `json:"family"`
	Safe     bool   `json:"safe"`
	Summary  string `json:"summary"`
	// Load is the strategy under the plain load: its verdict and figures.
	Load ZooCell `json:"load"`
	// AcceptedPerSec is units sold per second until the sale sold out; AcceptedPerR its ratio to R.
	AcceptedPerSec float64 `json:"accepted_per_sec"`
	AcceptedPerR   float64 `json:"accepted_per_r"`
	// LockWait is the wait for the lock (or the row lock) of the load's deductions, from the
	// replicas' seckill_lock_wait_seconds: p50 and p99 in ms; zero when the strategy takes none.
	LockWaitP50 float64 `json:"lock_wait_p50_ms"`
	LockWaitP99 float64 `json:"lock_wait_p99_ms"`
	// Grants are the load's won tries (seckill_lock_attempts_total{result="won"}); WastedPerGrant
	// the lost ones per grant, WakeupsPerGrant the waiters woken per grant (-1: not counted).
	Grants          float64 `json:"grants"`
	WastedPerGrant  float64 `json:"wasted_per_grant"`
	WakeupsPerGrant float64 `json:"wakeups_per_grant"`
	// Faults are the fault steps, by fault; absent where the fault does not apply.
	Faults map[string]ZooCell `json:"faults"`
	Passed bool               `json:"passed"`
}

// ZooCell is one outcome of the matrix: what was seen, what the write-ups say should be, and the
// numbers behind it.
type ZooCell struct {
	Outcome  string `json:"outcome"`
	Expected string `json:"expected"`
	// Detail gives the numbers: units, 429s and 503s, the longest time without a sale.
	Detail     string                 `json:"detail"`
	Violations []string               `json:"violations,omitempty"`
	Report     *attack.StrategyReport `json:"report,omitempty"`
}

// ok says whether the cell is what the write-ups say.
func (c ZooCell) ok() bool { return c.Outcome == c.Expected }

// zooEnv arms the replicas and fires the failpoints.
type zooEnv struct {
	*faults.Env
	zoo zooOptions
	db  *sql.DB
}

// trigger is the trigger file of fault for strategy.
func (z *zooEnv) trigger(fault, strategy string) string {
	return filepath.Join(z.zoo.dir, "holder-"+fault+"."+strategy)
}

// armReplica restarts replica n (gracefully) with the holder failpoints armed and the short lease
// and session the pause must outlast.
func (z *zooEnv) armReplica(ctx context.Context, n int, restart bool) error {
	if restart && z.Alive(ctx, n) {
		if err := z.Replica(ctx, "term", strconv.Itoa(n)); err != nil {
			return err
		}
	}
	env := []string{
		"SECKILL_TEST_FAILPOINT=holder-kill:" + filepath.Join(z.zoo.dir, "holder-kill") +
			",holder-pause@" + z.zoo.pause.String() + ":" + filepath.Join(z.zoo.dir, "holder-pause") +
			",holder-hold@" + z.zoo.hold.String() + ":" + filepath.Join(z.zoo.dir, "holder-hold"),
		"SECKILL_LOCK_TTL=" + z.zoo.lockTTL.String(),
		"SECKILL_ZK_SESSION_TIMEOUT=" + z.zoo.session.String(),
		"SECKILL_ALLOW_UNSAFE_STRATEGIES=true",
	}
	if err := z.Script(ctx, env, z.Options.Fault.ReplicaScript, "start", strconv.Itoa(n)); err != nil {
		return err
	}
	z.Armed[n] = true
	return nil
}

// armAll restarts every replica of the stack armed (armReplica).
func (z *zooEnv) armAll(ctx context.Context) error {
	if err := os.MkdirAll(z.zoo.dir, 0o755); err != nil {
		return err
	}
	for n := 1; n <= z.Options.Fault.Replicas; n++ {
		z.Say("zoo: arming replica %d (holder-pause %s, holder-kill; lock TTL %s, ZooKeeper session %s)", n, z.zoo.pause, z.zoo.lockTTL, z.zoo.session)
		if err := z.armReplica(ctx, n, true); err != nil {
			return err
		}
	}
	return nil
}

// disarm restarts every replica the run armed with the stack's own settings.
func (z *zooEnv) disarm(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	var errs []error
	for n := 1; n <= z.Options.Fault.Replicas; n++ {
		if z.Alive(ctx, n) {
			errs = append(errs, z.Replica(ctx, "term", strconv.Itoa(n)))
		}
		errs = append(errs, z.Replica(ctx, "start", strconv.Itoa(n)))
	}
	return errors.Join(errs...)
}

// holderFault is the fault step of the matrix's column name for strategy st.
func (z *zooEnv) holderFault(name string, st sale.Strategy, spec zooSpec) faults.Fault {
	failpoint := name
	if name == "restart" {
		failpoint = "hold"
	}
	trigger := z.trigger(failpoint, string(st))
	fire := func(ctx context.Context) error { return z.fire(ctx, trigger, st) }
	switch name {
	case "pause":
		return z.pauseFault(st, fire)
	case "restart":
		return z.restartFault(st, spec.restart, fire)
	}
	return z.killFault(st, spec.unstall, fire)
}

// fire creates trigger and waits until a holder of st has taken it (removed it), for 15 s at
// most; a trigger no holder took is removed, so that it cannot fire later.
func (z *zooEnv) fire(ctx context.Context, trigger string, st sale.Strategy) error {
	if err := os.MkdirAll(z.zoo.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(trigger); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	os.Remove(trigger) // it must not fire later
	return fmt.Errorf("no %s holder reached its critical section within 15 s", st)
}

// pauseFault is the pause step of strategy st: fire stops the holder's process (SIGSTOP) for
// -zoo-pause, after which it wakes by itself.
func (z *zooEnv) pauseFault(st sale.Strategy, fire func(context.Context) error) faults.Fault {
	return faults.Fault{
		Name: "pause", What: fmt.Sprintf("the replica holding the %s lock stops (SIGSTOP) for %s", st, z.zoo.pause),
		Inject: func(ctx context.Context, e *faults.Env) error { return fire(ctx) },
		Restore: func(ctx context.Context, e *faults.Env) error {
			// The paused process wakes by itself; the fault is undone when it has.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(z.zoo.pause):
				return nil
			}
		},
	}
}

// killFault is the kill step of strategy st: fire SIGKILLs the holder's replica, which is then
// restarted armed. unstall, when st has one, frees what a dead holder left before and after the
// load.
func (z *zooEnv) killFault(st sale.Strategy, unstall func(context.Context, *zooEnv, int64) (string, error), fire func(context.Context) error) faults.Fault {
	var prepare func(ctx context.Context, e *faults.Env) error
	var afterLoad func(ctx context.Context, e *faults.Env) (string, error)
	if unstall != nil {
		// The step's product is the last run's, reset: a dead holder of that run (an interrupted
		// one) may have left its lock, which no reset removes.
		prepare = func(ctx context.Context, e *faults.Env) error {
			_, err := unstall(ctx, z, e.Products[string(st)])
			return err
		}
		afterLoad = func(ctx context.Context, e *faults.Env) (string, error) {
			return unstall(ctx, z, e.Products[string(st)])
		}
	}
	return faults.Fault{
		Name: "kill", What: fmt.Sprintf("the replica holding the %s lock is SIGKILLed, then restarted", st),
		Prepare: prepare, AfterLoad: afterLoad,
		Inject: func(ctx context.Context, e *faults.Env) error {
			if err := fire(ctx); err != nil {
				return err
			}
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				for n := 1; n <= e.Options.Fault.Replicas; n++ {
					if !e.Alive(ctx, n) {
						e.Died = n
						return nil
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			return errors.New("the holder took the trigger but no replica died")
		},
		Restore: func(ctx context.Context, e *faults.Env) error {
			if e.Died == 0 {
				return errors.New("no replica died: nothing to restart")
			}
			return z.armReplica(ctx, e.Died, false)
		},
	}
}

// restartFault is the restart step of strategy st: r.down stopped before the load; once a holder
// waits in its critical section (holder-hold), r.restart SIGKILLed and started again, empty, and
// r.down started with them, all at once, well within the hold.
func (z *zooEnv) restartFault(st sale.Strategy, r serverRestart, fire func(context.Context) error) faults.Fault {
	what := fmt.Sprintf("the %s holder waits %s in its critical section while %s restart empty", st, z.zoo.hold, strings.Join(r.restart, ", "))
	if len(r.down) > 0 {
		what += fmt.Sprintf(" and %s (down when it took the lock) come back", strings.Join(r.down, ", "))
	}
	// each runs f on every server at once.
	each := func(ctx context.Context, servers []string, f func(ctx context.Context, s string) error) error {
		errs := make([]error, len(servers))
		var wg sync.WaitGroup
		for i, s := range servers {
			wg.Go(func() { errs[i] = f(ctx, s) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	start := func(ctx context.Context, s string) error { return z.Services(ctx, "start", s) }
	return faults.Fault{
		Name: "restart", What: what,
		Prepare: func(ctx context.Context, e *faults.Env) error {
			return each(ctx, r.down, func(ctx context.Context, s string) error { return z.Services(ctx, "stop", s) })
		},
		Inject: func(ctx context.Context, e *faults.Env) error {
			if err := fire(ctx); err != nil {
				return err
			}
			err := each(ctx, r.restart, func(ctx context.Context, s string) error {
				if err := z.Services(ctx, "kill", s); err != nil {
					return err
				}
				return start(ctx, s)
			})
			return errors.Join(err, each(ctx, r.down, start))
		},
		Restore: func(ctx context.Context, e *faults.Env) error {
			// Whatever inject managed, every server runs again; the hold ends by itself.
			return each(ctx, append(slices.Clone(r.down), r.restart...), start)
		},
	}
}

// Run is the lock zoo: yardsticks, then every strategy's load and faults, and the matrix.
func Run(ctx context.Context, db *sql.DB, o *Options, say func(string, ...any)) (*ZooReport, error) {
	began := time.Now()
	rep := &ZooReport{
		RunID: began.UTC().Format("20060102-150405"), StartedAt: began.UTC(), Machine: yardstick.Machine(),
		Targets: o.Targets, Passed: true,
		Settings: ZooSettings{Stock: o.Stock, Buyers: o.Buyers, Workers: o.Workers, Pause: o.zoo.pause, LockTTL: o.zoo.lockTTL,
			ZKSession: o.zoo.session, Step: o.fault.StepFor, StepRate: o.Rate, FaultAfter: o.fault.After, Faults: o.zoo.faults},
	}
	if o.BaselineFor > 0 {
		ys, err := attack.MeasureYardsticks(ctx, &o.Options, say)
		if err != nil {
			return nil, err
		}
		rep.Yardsticks = ys
	}
	z := &zooEnv{Env: &faults.Env{Options: &faults.Options{Options: o.Options, Fault: o.fault}, Say: say, Armed: map[int]bool{}}, zoo: o.zoo, db: db}
	if len(o.zoo.faults) > 0 {
		if err := z.armAll(ctx); err != nil {
			return nil, err
		}
		defer func() {
			say("zoo: restarting the replicas with the stack's own settings")
			if err := z.disarm(ctx); err != nil {
				say("zoo: COULD NOT PUT THE REPLICAS BACK (make up): %v", err)
			}
		}()
	}
	admin := o.Admin()
	for _, name := range o.Strategies {
		row, err := zooStrategy(ctx, db, o, z, admin, rep, sale.Strategy(name), say)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rep.Passed = rep.Passed && row.Passed
		rep.Rows = append(rep.Rows, *row)
	}
	rep.Took = time.Since(began).Seconds()
	return rep, nil
}

// zooStrategy runs one row: the load, then each fault that applies.
func zooStrategy(ctx context.Context, db *sql.DB, o *Options, z *zooEnv, admin *attack.AdminClient, rep *ZooReport, st sale.Strategy, say func(string, ...any)) (*ZooRow, error) {
	info, ok := st.Info()
	if !ok {
		return nil, errors.New("not a strategy of the catalog")
	}
	spec := specOf(st)
	row := &ZooRow{Strategy: string(st), Family: info.Family, Safe: info.Safe, Summary: info.Summary, Faults: map[string]ZooCell{}, Passed: true}

	before, err := scrapeZoo(ctx, o.Targets, st)
	if err != nil {
		return nil, err
	}
	lo := proof.Options{Options: o.Options}
	lo.Rate = 0
	sr, err := proof.AttackStrategy(ctx, db, &lo, admin, rep.RunID, string(st), proof.CrowdRun{}, say)
	if err != nil {
		return nil, err
	}
	after, err := scrapeZoo(ctx, o.Targets, st)
	if err != nil {
		return nil, err
	}
	row.Load = cellOf(sr, spec.load, "")
	row.Load.Report = sr
	row.AcceptedPerSec = sr.AcceptedPerSec
	if rep.Yardsticks != nil {
		row.AcceptedPerR = attack.RatioOf(sr.AcceptedPerSec, rep.Yardsticks.R.RowsPerSec)
	}
	d := after.minus(before)
	row.LockWaitP50, row.LockWaitP99 = d.waitQuantile(0.50)*1000, d.waitQuantile(0.99)*1000
	// A lock that does not count its tries is granted once per timed wait (a few waits time
	// out, which this counts as grants: the figure is per acquisition).
	row.Grants = d.won
	if row.Grants == 0 {
		row.Grants = d.waits
	}
	row.WastedPerGrant, row.WakeupsPerGrant = -1, -1
	if d.won > 0 {
		row.WastedPerGrant = d.lost / d.won
	}
	if d.wakeups > 0 && row.Grants > 0 {
		row.WakeupsPerGrant = d.wakeups / row.Grants
	}
	say("zoo · %s · load: %s (expected %s) — %s", st, row.Load.Outcome, row.Load.Expected, row.Load.Detail)
	row.Passed = row.Load.ok()

	for _, name := range o.zoo.faults {
		want, applies := spec.faults[name]
		if !applies {
			continue
		}
		so := faults.Options{Options: o.Options, Fault: o.fault}
		so.Strategies = []string{string(st)}
		// A stalled sale answers each buyer after the whole lock wait: the step's load ends on
		// time, whatever it has sent.
		so.MaxDuration = o.fault.StepFor + 2*time.Second
		step, err := faults.RunStep(ctx, db, &so, admin, z.Env, z.holderFault(name, st, spec), rep.RunID, say)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		cell := stepCell(step, want)
		say("zoo · %s · %s: %s (expected %s) — %s", st, name, cell.Outcome, cell.Expected, cell.Detail)
		row.Faults[name] = cell
		row.Passed = row.Passed && cell.ok()
	}
	return row, nil
}

// cellOf judges one attack of a strategy: what happened to its units, and the numbers.
func cellOf(sr *attack.StrategyReport, want, extra string) ZooCell {
	c := ZooCell{Expected: want, Violations: sr.Violations}
	undersold := slices.ContainsFunc(sr.Violations, func(v string) bool { return strings.HasPrefix(v, "UNDERSOLD") })
	others := slices.DeleteFunc(slices.Clone(sr.Violations), func(v string) bool {
		return strings.HasPrefix(v, "UNDERSOLD") || v == attack.ControlMissed || strings.Contains(v, "oversold") || strings.Contains(v, "OVERSOLD")
	})
	switch {
	case sr.Oversold > 0:
		c.Outcome = outcomeOversold
	case undersold:
		c.Outcome = outcomeUndersold
	case len(others) > 0:
		c.Outcome = outcomeFail
	default:
		c.Outcome = outcomePass
	}
	f := sr.Facts
	parts := []string{fmt.Sprintf("%d of %d sold", f.InitialStock-f.Stock, f.InitialStock)}
	if sr.Oversold > 0 {
		parts = append(parts, fmt.Sprintf("%d oversold", sr.Oversold))
	}
	if f.Stock > 0 {
		parts = append(parts, fmt.Sprintf("%d left", f.Stock))
	}
	if n := sr.Status[http.StatusTooManyRequests]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d × 429", n))
	}
	if n := sr.Status[http.StatusServiceUnavailable]; n > 0 {
		parts = append(parts, fmt.Sprintf("%d × 503", n))
	}
	if extra != "" {
		parts = append(parts, extra)
	}
	c.Detail = strings.Join(parts, ", ")
	return c
}

// stallAfter is how long a strategy may go without a sale, with units left and buyers asking,
// before the matrix calls it stalled rather than slowed.
const stallAfter = 3 * time.Second

// stepCell judges a fault step of one strategy. A sale that still had units when its load ended
// and sold none in its last stallAfter, without selling again after the fault was undone, stalled;
// the step's other shortfalls (requests a stalled sale never answered, the units left) are then
// what the stall did, not findings of their own.
func stepCell(step *faults.StepReport, want string) ZooCell {
	if len(step.Strategies) != 1 || len(step.PerStrategy) != 1 {
		return ZooCell{Outcome: outcomeFail, Expected: want, Violations: []string{"a fault step of one strategy reported none or several"}}
	}
	sr, ss := &step.Strategies[0], step.PerStrategy[0]
	extra := fmt.Sprintf("longest time without a sale %.1f s", ss.NoSaleSeconds)
	if ss.RecoverySeconds >= 0 {
		extra += fmt.Sprintf(", selling again %.1f s after the fault was undone", ss.RecoverySeconds)
	}
	c := cellOf(sr, want, extra)
	c.Report = sr
	if ss.LeftAfterLoad > 0 && ss.TailSeconds >= stallAfter.Seconds() && ss.RecoverySeconds < 0 && c.Outcome != outcomeOversold {
		c.Outcome = outcomeStall
		c.Detail += fmt.Sprintf("; %d units unsold and no sale in the last %.1f s of the load", ss.LeftAfterLoad, ss.TailSeconds)
		for _, e := range step.Events {
			if strings.Contains(e.What, "by hand") {
				c.Detail += "; " + e.What
			}
		}
		return c
	}
	for _, v := range step.Violations {
		if !slices.Contains(c.Violations, v) {
			c.Violations = append(c.Violations, v)
			if c.Outcome == outcomePass {
				c.Outcome = outcomeFail
			}
		}
	}
	return c
}

// lockName is the name of productID's lock in the app's database (internal/stock's LockName).
func (z *zooEnv) lockName(ctx context.Context, productID int64) (string, error) {
	var dbName string
	if err := z.db.QueryRowContext(ctx, `SELECT DATABASE()`).Scan(&dbName); err != nil {
		return "", err
	}
	return dbName + ".product-" + strconv.FormatInt(productID, 10), nil
}

// deleteLockRow does what an operator does for a sale stalled by the naive lock table: delete
// the row the dead holder left.
func deleteLockRow(ctx context.Context, z *zooEnv, productID int64) (string, error) {
	name, err := z.lockName(ctx, productID)
	if err != nil {
		return "", err
	}
	// The naive lock's own table (internal/app's naiveLockTableName), apart from mysql-lock-table's.
	res, err := z.db.ExecContext(ctx, `DELETE FROM lock_table_naive WHERE name = ?`, name)
	if err != nil {
		return "", err
	}
	n, _ := res.RowsAffected()
	return fmt.Sprintf("the dead holder's lock row deleted by hand after the load (%d row)", n), nil
}

// deleteSetnxKey does what an operator does for a sale stalled by redis-setnx's holder that died
// between SETNX and EXPIRE: delete the key it left, which has no expiry.
func deleteSetnxKey(ctx context.Context, z *zooEnv, productID int64) (string, error) {
	name, err := z.lockName(ctx, productID)
	if err != nil {
		return "", err
	}
	rdb := redisconn.Open(z.Options.Fault.Redis, redis.UniversalOptions{})
	defer rdb.Close()
	key := redisnaive.DefaultSetNXPrefix + "{" + name + "}" // the app's SetNX.Key
	ttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		return "", err
	}
	n, err := rdb.Del(ctx, key).Result()
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "no SETNX key to delete by hand after the load", nil
	}
	expiry := "no expiry"
	if ttl >= 0 {
		expiry = "expiring in " + ttl.String()
	}
	return fmt.Sprintf("the dead holder's SETNX key (%s) deleted by hand after the load", expiry), nil
}

// zooCounters are the lock metrics of one strategy, summed over the replicas.
type zooCounters struct {
	won, lost, wakeups float64
	// waits counts the lock acquisitions that were timed, granted or not.
	waits float64
	// wait are the cumulative counts of seckill_lock_wait_seconds by upper bound.
	wait map[float64]float64
}

// minus returns c − b, counter by counter.
func (c zooCounters) minus(b zooCounters) zooCounters {
	d := zooCounters{won: c.won - b.won, lost: c.lost - b.lost, wakeups: c.wakeups - b.wakeups, waits: c.waits - b.waits, wait: map[float64]float64{}}
	for le, n := range c.wait {
		d.wait[le] = n - b.wait[le]
	}
	return d
}

// waitQuantile estimates quantile q of the lock waits, in seconds, by linear interpolation in
// the histogram's buckets (as Prometheus's histogram_quantile does); 0 without waits.
func (c zooCounters) waitQuantile(q float64) float64 {
	bounds := make([]float64, 0, len(c.wait))
	for le := range c.wait {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 || c.wait[bounds[len(bounds)-1]] <= 0 {
		return 0
	}
	total := c.wait[bounds[len(bounds)-1]]
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := c.wait[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}

// scrapeZoo reads strategy st's lock metrics from every target's /metrics and sums them.
func scrapeZoo(ctx context.Context, targets []string, st sale.Strategy) (zooCounters, error) {
	c := zooCounters{wait: map[float64]float64{}}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, t := range targets {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(t, "/")+"/metrics", nil)
		if err != nil {
			return c, err
		}
		res, err := client.Do(req)
		if err != nil {
			return c, fmt.Errorf("metrics of %s: %w", t, err)
		}
		families, err := parseMetrics(res.Body)
		res.Body.Close()
		if err != nil {
			return c, fmt.Errorf("metrics of %s: %w", t, err)
		}
		addZoo(&c, families, string(st))
	}
	return c, nil
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// label returns the value of label name of m.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func addZoo(c *zooCounters, families map[string]*dto.MetricFamily, st string) {
	for _, m := range families["seckill_lock_attempts_total"].GetMetric() {
		if label(m, "strategy") != st {
			continue
		}
		switch label(m, "result") {
		case "won":
			c.won += m.GetCounter().GetValue()
		case "lost":
			c.lost += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["seckill_lock_wakeups_total"].GetMetric() {
		if label(m, "strategy") == st {
			c.wakeups += m.GetCounter().GetValue()
		}
	}
	for _, m := range families["seckill_lock_wait_seconds"].GetMetric() {
		if label(m, "strategy") != st {
			continue
		}
		// The text format lists the +Inf bucket, which is the sample count; keep it once.
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				c.wait[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		c.wait[math.Inf(1)] += float64(h.GetSampleCount())
		c.waits += float64(h.GetSampleCount())
	}
}
