package faults

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// The fault run (-faults, what `make chaos` runs) puts the local stack of `make up` under a paced
// load and breaks one thing at a time: each fault is a step with products of its own, one per
// strategy, attacked at once. After each step it settles every unknown answer, waits for the
// order queue to drain and audits every product, and says how long the buyers took to be
// served again once the broken thing was back.

// Fault is one thing done to the stack during a step.
type Fault struct {
	// Name names the fault on the command line (-faults) and in the report.
	Name string
	// What says what the step does, for the report.
	What string
	// Prepare runs before the step's load begins, unmeasured (nil: nothing to prepare).
	Prepare func(ctx context.Context, e *Env) error
	// Inject breaks it and returns once it is broken.
	Inject func(ctx context.Context, e *Env) error
	// outage says the broken thing stays away for -fault-for before restore begins; otherwise
	// restore follows inject at once (a crashed replica is restarted as soon as it is gone).
	outage bool
	// Restore puts it back and returns once it serves again.
	Restore func(ctx context.Context, e *Env) error
	// AfterLoad, if set, runs when the step's load has ended, before its unknown answers are
	// settled: what an operator does about a fault that does not heal by itself (the lock zoo's
	// dead holder of a lock without expiry). It returns what it did, for the step's events.
	AfterLoad func(ctx context.Context, e *Env) (string, error)
	// unnoticed says the buyers must not notice the fault at all: no 5xx, no lost answer.
	unnoticed bool
	// failFast names the strategy that must answer 503 within failFastWithin while the fault lasts.
	failFast string
	// needs names a strategy without which the fault cannot happen (a persister's failpoint needs
	// redis-lua purchases to persist): the run skips the fault when it does not attack that one.
	needs string
	// topology names the replicated service the fault needs ("redis", "zk": topofaults.go): the
	// run skips it on a stack without one.
	topology string
}

// failFastWithin bounds every 503 a fail-fast strategy answers to a request sent while its lock
// service is away (stopped, not yet started again): a third of the lock wait (SECKILL_LOCK_WAIT,
// 3 s), which a strategy that waits for its lock service instead of failing fast answers after;
// far above the milliseconds expected, for the machine may be busy (the report shows the figures).
// Requests sent while the service is being stopped are not held to it: a server that is shutting
// down may keep a connection open without answering, which no client can tell from a slow answer
// until the connection closes.
const failFastWithin = time.Second

// faultNames lists the faults in the order `-faults all` runs them.
var faultNames = []string{"redis", "redis-kill", "redis-flush", "zk", "mysql", "mariadb-kill", "kafka", "broker-kill", "kill", "term", "consumer",
	failpointPersisterBefore, failpointPersisterAfter, "redis-failover", "redis-lua-failover", "zk-leader"}

// The test failpoints of the replicas (SECKILL_TEST_FAILPOINT), each fired by a trigger file of
// its name, in the directory of -failpoint-trigger (the consumer's): a fault of the same name.
const (
	failpointConsumer        = "consumer-after-commit"
	failpointPersisterBefore = "persister-before-commit"
	failpointPersisterAfter  = "persister-after-commit"
)

var failpoints = []string{failpointConsumer, failpointPersisterBefore, failpointPersisterAfter}

// luaStrategy is the strategy whose accepted purchases live in Redis until a persister writes
// them to MySQL.
const luaStrategy = "redis-lua"

// Env is what the faults act through: the scripts of the local stack, and the replicas.
type Env struct {
	// Options are the run's (the zoo's steps make theirs).
	Options *Options
	// Say prints a progress line.
	Say func(string, ...any)
	// Armed are the replicas started by this run with the consumer failpoint armed.
	Armed map[int]bool
	// Died is the replica the consumer failpoint killed, for restore.
	Died int
	// detail is what the last fault saw, for its event (termWatched's times).
	detail string
	// killed is the service the last topology fault SIGKILLed, and whoLeads the services.sh
	// command that names who serves in its place (topofaults.go).
	killed   string
	whoLeads []string
	// Products are the step's, by strategy.
	Products map[string]int64
	// lostMay are, by strategy, the order ids the step's fault may have destroyed (redis-flush:
	// redis-lua's stream when Redis was emptied).
	lostMay map[string]map[string]bool
}

// Script runs the stack's script at path with args, env added to the environment.
func (e *Env) Script(ctx context.Context, env []string, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return nil
}

// Services runs the services script (stop NAME, start NAME…).
func (e *Env) Services(ctx context.Context, args ...string) error {
	return e.Script(ctx, nil, e.Options.Fault.servicesScript, args...)
}

// Replica runs the replica script (kill N, term N, alive N, start N).
func (e *Env) Replica(ctx context.Context, args ...string) error {
	return e.Script(ctx, nil, e.Options.Fault.ReplicaScript, args...)
}

// trigger is the trigger file of failpoint name.
func (e *Env) trigger(name string) string {
	if name == failpointConsumer {
		return e.Options.Fault.failpointTrigger
	}
	return filepath.Join(filepath.Dir(e.Options.Fault.failpointTrigger), name)
}

// startArmed starts replica n with every failpoint armed on its trigger file: each inert until
// its fault creates that file.
func (e *Env) startArmed(ctx context.Context, n int) error {
	specs := make([]string, len(failpoints))
	for i, name := range failpoints {
		specs[i] = name + ":" + e.trigger(name)
	}
	if err := e.Script(ctx, []string{"SECKILL_TEST_FAILPOINT=" + strings.Join(specs, ",")},
		e.Options.Fault.ReplicaScript, "start", strconv.Itoa(n)); err != nil {
		return err
	}
	e.Armed[n] = true
	return nil
}

// Alive reports whether the replica script finds replica n alive.
func (e *Env) Alive(ctx context.Context, n int) bool {
	return exec.CommandContext(ctx, e.Options.Fault.ReplicaScript, "alive", strconv.Itoa(n)).Run() == nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// serviceFault stops one backing service (scripts/services.sh stop) and starts it again.
func serviceFault(name, service, what, failFast string) Fault {
	return Fault{
		Name: name, What: what, outage: true, failFast: failFast,
		Inject:  func(ctx context.Context, e *Env) error { return e.Services(ctx, "stop", service) },
		Restore: func(ctx context.Context, e *Env) error { return e.Services(ctx, "start", service) },
	}
}

// crashFault SIGKILLs one backing service (scripts/services.sh kill) and starts it again.
func crashFault(name, service, what string) Fault {
	return Fault{
		Name: name, What: what, outage: true,
		Inject:  func(ctx context.Context, e *Env) error { return e.Services(ctx, "kill", service) },
		Restore: func(ctx context.Context, e *Env) error { return e.Services(ctx, "start", service) },
	}
}

// faultsByName are the faults -faults knows.
func faultsByName(o *Options) map[string]Fault {
	kill, term := strconv.Itoa(o.Fault.killReplica), strconv.Itoa(o.Fault.termReplica)
	all := topologyFaults()
	for name, f := range map[string]Fault{
		"redis": serviceFault("redis", "redis", "Redis stopped (SHUTDOWN NOSAVE: no snapshot; its append-only file is flushed and replayed), started again", "redis"),
		"redis-kill": {
			Name: "redis-kill", What: "Redis SIGKILLed (a crash: it keeps what its append-only file had on disk, with appendfsync always every write it answered), started again",
			outage: true, failFast: "redis",
			Inject: func(ctx context.Context, e *Env) error {
				if n, ok := e.luaStreamLen(ctx); ok {
					e.detail = fmt.Sprintf("%d redis-lua stream entries (batches of purchases) not yet in MySQL, a moment before", n)
				}
				return e.Services(ctx, "kill", "redis")
			},
			Restore: func(ctx context.Context, e *Env) error { return e.Services(ctx, "start", "redis") },
		},
		"redis-flush": {
			Name: "redis-flush", What: "Redis emptied (FLUSHALL, as a failover to an empty replica): the locks' fence counters, the sales' states and " +
				"the redis-lua purchases not yet persisted are lost; a sale's state is rebuilt from MySQL at its next purchase. " +
				"redis-lua's purchases then only in its stream are lost (the known gap): each must be among them",
			Inject:  flushRedis,
			Restore: func(context.Context, *Env) error { return nil },
		},
		"zk":    serviceFault("zk", "zookeeper", "ZooKeeper stopped, started again from its data directory", "zk"),
		"mysql": serviceFault("mysql", "mariadb", "MariaDB shut down cleanly, started again", ""),
		"mariadb-kill": crashFault("mariadb-kill", "mariadb", "MariaDB SIGKILLed mid-burst (a crash: InnoDB recovers what it committed from its redo log, "+
			"synced at every commit), started again"),
		"kafka": serviceFault("kafka", "kafka", "the Kafka broker stopped, started again from its data directory", ""),
		// broker-kill: the lifecycle audit (lifecycle.go) pays a few orders after it and wants
		// their events tallied — the dev broker once came back from it with its lifecycle topic
		// garbled (cmd/devbroker's persistAutoCreated).
		"broker-kill": crashFault("broker-kill", "kafka", "the Kafka broker SIGKILLed mid-burst (a crash: it keeps what it had written to its data directory; "+
			"nothing it acknowledged was only in its memory), started again from it"),
		"kill": {
			Name: "kill", What: "replica " + kill + " SIGKILLed (a crash), restarted at once",
			Inject: func(ctx context.Context, e *Env) error { return e.Replica(ctx, "kill", kill) },
			Restore: func(ctx context.Context, e *Env) error {
				return e.startArmed(ctx, o.Fault.killReplica)
			},
		},
		"term": {
			Name: "term", What: "replica " + term + " SIGTERMed (a deployment): unready at once, drained, exited; restarted", unnoticed: true,
			Inject: func(ctx context.Context, e *Env) error { return e.termWatched(ctx, o.Fault.termReplica) },
			Restore: func(ctx context.Context, e *Env) error {
				return e.startArmed(ctx, o.Fault.termReplica)
			},
		},
		"consumer": {
			Name: "consumer", What: "the replica whose order consumer commits next is SIGKILLed between its database commit and its offset commit (SECKILL_TEST_FAILPOINT), restarted",
			Prepare: armAll,
			Inject:  fireConsumerFailpoint,
			Restore: func(ctx context.Context, e *Env) error {
				if e.Died == 0 {
					return errors.New("no replica died: nothing to restart")
				}
				return e.startArmed(ctx, e.Died)
			},
		},
		failpointPersisterBefore: persisterFault(failpointPersisterBefore, "the replica whose redis-lua persister writes next is SIGKILLed between its read of the stream "+
			"and its MySQL commit (SECKILL_TEST_FAILPOINT): its entries stay pending, then are written by it restarted or by another after SECKILL_PERSIST_CLAIM_AFTER; restarted"),
		failpointPersisterAfter: persisterFault(failpointPersisterAfter, "the replica whose redis-lua persister writes next is SIGKILLed between its MySQL commit "+
			"and its XACK+XDEL (SECKILL_TEST_FAILPOINT): its entries stay pending, are written again and found written; restarted"),
	} {
		all[name] = f
	}
	return all
}

// persisterFault fires the persister failpoint name in whichever armed replica persists next.
func persisterFault(name, what string) Fault {
	return Fault{
		Name: name, What: what, needs: luaStrategy,
		Prepare: armAll,
		Inject:  func(ctx context.Context, e *Env) error { return fireFailpoint(ctx, e, name) },
		Restore: func(ctx context.Context, e *Env) error {
			if e.Died == 0 {
				return errors.New("no replica died: nothing to restart")
			}
			return e.startArmed(ctx, e.Died)
		},
	}
}

// luaStreamLen returns how many entries the step's redis-lua stream holds (batches of accepted
// purchases not yet in MySQL), false when the step has no redis-lua product or Redis does not say.
func (e *Env) luaStreamLen(ctx context.Context) (int64, bool) {
	pid, lua := e.Products[luaStrategy]
	dsn, err := mysql.ParseDSN(e.Options.MysqlDSN)
	if !lua || err != nil {
		return 0, false
	}
	rdb := redisconn.Open(e.Options.Fault.Redis, redis.UniversalOptions{})
	defer rdb.Close()
	n, err := rdb.XLen(ctx, redislua.KeysFor(dsn.DBName, pid).Stream).Result()
	return n, err == nil
}

// streamOrderIDs are the order ids of a redis-lua stream's reservations (its returns left out).
func streamOrderIDs(entries []redis.XMessage) map[string]bool {
	ids := map[string]bool{}
	for _, m := range entries {
		for _, id := range redislua.OrderIDs(m) {
			ids[id] = true
		}
	}
	return ids
}

// flushRedis empties Redis and, in the same transaction, reads the step's redis-lua stream: its
// entries are the accepted purchases not yet in MySQL, the most the flush may lose.
func flushRedis(ctx context.Context, e *Env) error {
	dsn, err := mysql.ParseDSN(e.Options.MysqlDSN)
	if err != nil {
		return err
	}
	rdb := redisconn.Open(e.Options.Fault.Redis, redis.UniversalOptions{})
	defer rdb.Close()
	var entries *redis.XMessageSliceCmd
	pid, lua := e.Products[luaStrategy]
	stream := redislua.KeysFor(dsn.DBName, pid).Stream // the app's namespace is its database's name
	// On a cluster each master flushes its own keys; the stream's read goes in the transaction
	// of the master that holds it.
	err = redisconn.ForEachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		// A cluster master that does not own the stream's slot answers MOVED: not the holder.
		holds := lua && node.Exists(ctx, stream).Val() == 1
		_, err := node.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
			if holds {
				entries = pipe.XRange(ctx, stream, "-", "+")
			}
			pipe.FlushAll(ctx)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	if lua && entries == nil {
		entries = &redis.XMessageSliceCmd{}
	}
	if lua {
		lostMay := streamOrderIDs(entries.Val())
		e.lostMay = map[string]map[string]bool{luaStrategy: lostMay}
		e.detail = fmt.Sprintf("%d redis-lua purchases were in the stream, not yet in MySQL", len(lostMay))
	}
	return nil
}

// unreadyWithin is how soon a replica sent SIGTERM must stop saying it is ready (/readyz 200).
const unreadyWithin = time.Second

// termWatched SIGTERMs replica n (replica.sh term, which waits for it to exit) and meanwhile
// polls its /readyz: it must stop answering 200 within unreadyWithin of the signal, long before it
// exits. It notes the times, from the script's start: when it signalled, when the replica was
// unready, when it had exited.
func (e *Env) termWatched(ctx context.Context, n int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", 8080+n)
	client := &http.Client{Timeout: time.Second}
	// ready says whether the replica says it is ready; one too busy to answer within the client's
	// timeout says nothing, and is asked again. A refused connection is a no.
	ready := func() (yes, known bool) {
		res, err := client.Get(url)
		var nerr net.Error
		if errors.As(err, &nerr) && nerr.Timeout() {
			return false, false
		}
		if err != nil {
			return false, true
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK, true
	}
	readyNow := func() bool { yes, known := ready(); return yes || !known }
	deadline := time.Now().Add(10 * time.Second)
	for yes, _ := ready(); !yes; yes, _ = ready() { // a replica restarted by the last step may still be getting ready
		if time.Now().After(deadline) {
			return fmt.Errorf("replica %d is not ready before its SIGTERM (its /readyz for 10 s)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	done, sent := make(chan error, 1), make(chan time.Time, 1)
	go func() { done <- e.termSignalled(ctx, n, sent) }()
	var unreadyAt time.Time
	for unreadyAt.IsZero() {
		select {
		case err := <-done:
			return errors.Join(err, fmt.Errorf("replica %d exited after %.2f s still saying it was ready", n, time.Since(start).Seconds()))
		case <-time.After(5 * time.Millisecond):
		}
		if !readyNow() {
			unreadyAt = time.Now()
		}
	}
	// The script says it signals before it does: its line may be read a moment after the replica
	// went unready, never long after.
	signalled := start
	select {
	case signalled = <-sent:
	case <-time.After(time.Second):
	}
	unready := max(0, unreadyAt.Sub(signalled))
	err := <-done
	e.detail = fmt.Sprintf("signalled after %d ms, unready %d ms later, exited after %.2f s",
		signalled.Sub(start).Milliseconds(), unready.Milliseconds(), time.Since(start).Seconds())
	if err == nil && unready > unreadyWithin {
		err = fmt.Errorf("replica %d said it was ready %s after its SIGTERM (want under %s)", n, unready.Round(time.Millisecond), unreadyWithin)
	}
	return err
}

// termSignalled runs replica.sh term n and sends on sent the moment the script says it signals
// the replica ("stopping replica-N", logged right before its kill -TERM): the script's own start
// (bash, its libraries, the checks of the pid file) takes from tens of milliseconds to over a
// second on a busy machine, and is no part of how fast the replica answers its SIGTERM.
func (e *Env) termSignalled(ctx context.Context, n int, sent chan<- time.Time) error {
	cmd := exec.CommandContext(ctx, e.Options.Fault.ReplicaScript, "term", strconv.Itoa(n))
	var out bytes.Buffer // written by exec's copying goroutine until Wait returns
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	marker := fmt.Sprintf("stopping replica-%d ", n)
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		if strings.Contains(sc.Text(), marker) {
			select {
			case sent <- time.Now():
			default:
			}
		}
		log.WriteString(sc.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s term %d: %w: %s", e.Options.Fault.ReplicaScript, n, err, lastLines(out.String()+log.String(), 5))
	}
	return nil
}

// armAll restarts, one at a time and gracefully, every replica this run has not started with the
// consumer failpoint armed: whichever consumer holds the step's partitions must be able to fire.
func armAll(ctx context.Context, e *Env) error {
	for n := 1; n <= e.Options.Fault.Replicas; n++ {
		if e.Armed[n] {
			continue
		}
		e.Say("chaos: arming replica %d's consumer failpoint (SIGTERM, restart)", n)
		if err := e.Replica(ctx, "term", strconv.Itoa(n)); err != nil {
			return err
		}
		if err := e.startArmed(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// fireConsumerFailpoint creates the consumer failpoint's trigger file and waits for the replica
// whose consumer commits a batch next to kill itself.
func fireConsumerFailpoint(ctx context.Context, e *Env) error {
	return fireFailpoint(ctx, e, failpointConsumer)
}

// fireFailpoint creates failpoint name's trigger file and waits for the armed replica that
// reaches that point next to kill itself.
func fireFailpoint(ctx context.Context, e *Env, name string) error {
	trigger := e.trigger(name)
	if err := os.MkdirAll(filepath.Dir(trigger), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		return err
	}
	defer os.Remove(trigger) // if it did not fire, it must not fire later
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for n := 1; n <= e.Options.Fault.Replicas; n++ {
			if !e.Alive(ctx, n) {
				e.Died = n
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the %s failpoint did not fire within 30 s (no replica died)", name)
}

// faultTimes are the moments of a step's fault, zero where it did not get that far.
type faultTimes struct {
	inject, down, restore, up time.Time
}

// Run is the fault run: one step per fault, in order, and its report.
func Run(ctx context.Context, db *sql.DB, o *Options, say func(string, ...any)) (*ChaosReport, error) {
	now := time.Now()
	rep := &ChaosReport{
		RunID: now.UTC().Format("20060102-150405"), StartedAt: now.UTC(), Machine: yardstick.Machine(),
		Targets: o.Targets, Strategies: o.Strategies, Rate: o.Rate, Step: o.Fault.StepFor, FaultAfter: o.Fault.After,
		FaultFor: o.Fault.stopFor, Passed: true,
	}
	env := &Env{Options: o, Say: say, Armed: map[int]bool{}}
	admin := o.Admin()
	rep.Topology = attack.TopologyOf(ctx, admin)
	all := faultsByName(o)
	defer func() {
		if err := env.putBack(ctx); err != nil {
			say("chaos: COULD NOT PUT THE STACK BACK (run scripts/services.sh up, make up): %v", err)
		}
	}()
	sales := map[int64]string{} // every step's sales, for the running audit's check at the end
	for _, name := range o.Fault.names {
		if f := all[name]; f.needs != "" && !slices.Contains(o.Strategies, f.needs) {
			say("%s: skipped: it needs the %s strategy, which this run does not attack", name, f.needs)
			continue
		}
		if why := topologySkip(o, all[name]); why != "" {
			say("%s: skipped: %s", name, why)
			continue
		}
		step, err := RunStep(ctx, db, o, admin, env, all[name], rep.RunID, say)
		if err != nil {
			return nil, fmt.Errorf("fault %s: %w", name, err)
		}
		if step.Verdict != "PASS" {
			rep.Passed = false
		}
		rep.Steps = append(rep.Steps, *step)
		for st, id := range env.Products {
			sales[id] = st
		}
		say("%s: %s — %d requests, %d × 503, %d lost answers, recovered after %s; %s", name, step.Verdict,
			step.Requests, step.Unavailable, step.TransportErrors, attack.Seconds(step.RecoverySeconds), strings.Join(step.Violations, "; "))
	}
	if len(sales) > 0 {
		ra := checkRunningAudit(ctx, o.AdminURL, sales)
		rep.RunningAudit = &ra
		rep.Passed = rep.Passed && ra.Passed
		say("running audit: %s — %d sales checked, %d never, %d of a safe strategy drifted, the control's oversell seen in %d of %d (after %s)",
			passWord(ra.Passed), ra.Sales, len(ra.Missing), len(ra.Drifted), ra.ControlOversold, ra.ControlSales, ra.Waited)
	}
	return rep, nil
}

// stepLoad is one strategy's share of a step's load: its answers, the requests planned, and why
// the attack stopped short, if it did.
type stepLoad struct {
	answers []attack.Answer
	planned int
	err     error
}

// stepOptions returns the options of one strategy's load in a step: -rate shared among the
// strategies, buyers for -step at that rate, and half as many units.
func stepOptions(o *Options) *attack.Options {
	perStrategy := o.Options
	perStrategy.Rate = max(1, o.Rate/len(o.Strategies))
	perStrategy.Buyers = max(2, int(float64(perStrategy.Rate)*o.Fault.StepFor.Seconds())/o.Attempts)
	// Half as many units as buyers: without the fault the product would sell out mid-step, so
	// units are left when the broken thing comes back, and every unit is sold by the end.
	perStrategy.Stock = max(1, perStrategy.Buyers/2)
	perStrategy.During = nil
	return &perStrategy
}

// stepProducts puts a product of stock units on sale for each strategy of o, for fault f's step.
func stepProducts(ctx context.Context, admin *attack.AdminClient, o *Options, f Fault, stock int) (map[string]int64, error) {
	products := map[string]int64{}
	for _, strategy := range o.Strategies {
		pid, err := admin.SaleProduct(ctx, "loadtest · chaos · "+f.Name+" · "+strategy, strategy, stock)
		if err != nil {
			return nil, err
		}
		products[strategy] = pid
	}
	return products, nil
}

// RunStep runs one fault's step: products, the load with the fault in it, settling, the audit.
func RunStep(ctx context.Context, db *sql.DB, o *Options, admin *attack.AdminClient, env *Env, f Fault, runID string, say func(string, ...any)) (*StepReport, error) {
	st := stepOptions(o)
	products, err := stepProducts(ctx, admin, o, f, st.Stock)
	if err != nil {
		return nil, err
	}
	env.Died, env.detail, env.Products, env.lostMay = 0, "", products, nil
	if f.Prepare != nil {
		if err := f.Prepare(ctx, env); err != nil {
			return nil, err
		}
	}
	began, err := dbNow(ctx, db)
	if err != nil {
		return nil, err
	}
	say("%s: %s; %d units and %d buyers × %d per strategy (%s), %d req/s for %s", f.Name, f.What,
		st.Stock, st.Buyers, o.Attempts, strings.Join(o.Strategies, ", "), o.Rate, o.Fault.StepFor)

	results := make([]stepLoad, len(o.Strategies))
	start := time.Now()
	var wg sync.WaitGroup
	for i, strategy := range o.Strategies {
		so := *st
		if strategy == attack.UnsafeStrategy {
			so.BurstEvery = controlBurst
		}
		wg.Go(func() {
			plan := attack.PlanAttempts(&so, runID+f.Name, strategy)
			answers, _, err := attack.Attack(ctx, &so, products[strategy], plan, say)
			results[i] = stepLoad{answers, len(plan), err}
		})
	}
	times, events, faultErr, restoreErr := injectFault(ctx, o, env, f, start, say)
	if restoreErr != nil {
		wg.Wait()
		return nil, fmt.Errorf("could not undo the fault: %w", restoreErr)
	}
	var caughtUp map[string]float64
	if !times.up.IsZero() {
		caughtUp = ordersCaughtUp(ctx, db, products, times.up, o.DrainTimeout)
	}
	wg.Wait()
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
	}
	if f.AfterLoad != nil {
		what, err := f.AfterLoad(ctx, env)
		if err != nil {
			return nil, fmt.Errorf("after the load: %w", err)
		}
		events = append(events, attack.Event{T: time.Since(start).Seconds(), What: what})
		say("chaos: %s", what)
	}

	step := &StepReport{Fault: f.Name, What: f.What, Events: events}
	if faultErr != nil {
		step.Violations = append(step.Violations, "the fault could not be played out: "+faultErr.Error())
	}
	all, err := judgeStepLoads(ctx, db, st, env, step, products, results, times, caughtUp, say)
	if err != nil {
		return nil, err
	}
	if err := auditLifecycle(ctx, db, o, step, f, results, began, start, say); err != nil {
		return nil, err
	}
	step.summarize(all, times, start, f)
	return step, nil
}

// judgeStepLoads settles and judges each strategy's load of step (st are the strategies' options,
// caughtUp when each one's orders caught up after the fault), adding them to step; it returns all
// the step's answers.
func judgeStepLoads(ctx context.Context, db *sql.DB, st *attack.Options, env *Env, step *StepReport, products map[string]int64, results []stepLoad, times faultTimes, caughtUp map[string]float64, say func(string, ...any)) ([]attack.Answer, error) {
	var all []attack.Answer
	for i, strategy := range st.Strategies {
		settled, stuck := attack.Settle(ctx, st, products[strategy], results[i].answers)
		say("%s · %s: %d answers, %d settled after the attack; waiting for the order queue", step.Fault, strategy, len(results[i].answers), len(settled))
		sr, err := attack.Judge(ctx, db, st, strategy, products[strategy], results[i].answers, settled, nil, env.lostMay[strategy])
		if err != nil {
			return nil, err
		}
		sr.Account(results[i].planned, stuck)
		step.Strategies = append(step.Strategies, *sr)
		ss := step.judgeStrategy(sr, results[i].answers, times)
		if lostMay, ok := env.lostMay[strategy]; ok {
			ss.Lossy, ss.InReach = true, len(lostMay)
		}
		ss.CaughtUpSeconds = -1
		if c, ok := caughtUp[strategy]; ok {
			ss.CaughtUpSeconds = c
		}
		all = append(all, results[i].answers...)
	}
	return all, nil
}

// injectFault plays f out during the load that began at start: it waits -fault-after, injects the
// fault, holds it -fault-for if it is an outage, and restores it. Once begun, it runs to the end
// even if ctx ends (an interrupted run must not leave a service stopped); what it did is in the
// events, timed from start.
func injectFault(ctx context.Context, o *Options, e *Env, f Fault, start time.Time, say func(string, ...any)) (t faultTimes, events []attack.Event, injectErr, restoreErr error) {
	note := func(what string) {
		events = append(events, attack.Event{T: time.Since(start).Seconds(), What: what})
		say("chaos: %s", what)
	}
	select {
	case <-ctx.Done():
		return t, nil, ctx.Err(), nil
	case <-time.After(o.Fault.After):
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	t.inject = time.Now()
	err := f.Inject(fctx, e)
	t.down = time.Now()
	if err != nil {
		note("inject failed: " + err.Error())
	} else {
		detail := e.detail
		if e.Died != 0 {
			detail = fmt.Sprintf("replica %d died", e.Died)
		}
		if detail != "" {
			detail = " (" + detail + ")"
		}
		note(fmt.Sprintf("%s: broken after %.2f s%s", f.Name, t.down.Sub(t.inject).Seconds(), detail))
	}
	if f.outage && err == nil {
		select {
		case <-ctx.Done(): // restore at once
		case <-time.After(o.Fault.stopFor):
		}
	}
	t.restore = time.Now()
	if rerr := f.Restore(fctx, e); rerr != nil {
		note("restore failed: " + rerr.Error())
		return t, events, err, rerr
	}
	t.up = time.Now()
	note(fmt.Sprintf("%s: back after %.2f s", f.Name, t.up.Sub(t.restore).Seconds()))
	return t, events, err, nil
}

// putBack leaves the stack as the run found it, whatever ended the run: every backing service
// answering (services.sh up restarts one the run stopped, a MariaDB or Redis as it ran) and every
// replica running (started again if a fault left it down).
func (e *Env) putBack(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
	defer cancel()
	errs := []error{e.Services(ctx, "up")}
	for n := 1; n <= e.Options.Fault.Replicas; n++ {
		if !e.Alive(ctx, n) {
			e.Say("chaos: replica %d is down: starting it again", n)
			errs = append(errs, e.Replica(ctx, "start", strconv.Itoa(n)))
		}
	}
	return errors.Join(errs...)
}

// judgeStrategy adds one strategy's figures to the step: its lost answers and 503s, and how long
// after the fault was undone the strategy accepted a purchase again.
func (s *StepReport) judgeStrategy(sr *attack.StrategyReport, answers []attack.Answer, t faultTimes) *StepStrategy {
	ss := StepStrategy{Strategy: sr.Strategy, Verdict: sr.Verdict, Requests: sr.Requests, Accepted: sr.Accepted, Lost: sr.Lost,
		Lossy: sr.Lost > 0, RateLimited: sr.Status[http.StatusTooManyRequests]}
	var firstAfter time.Time
	var away []time.Duration // the 503s of requests sent while the broken thing was away
	for _, a := range answers {
		switch {
		case a.Status == 503:
			ss.Unavailable++
			if !t.down.IsZero() && !a.Sent.Before(t.down) && (t.restore.IsZero() || a.Sent.Before(t.restore)) {
				away = append(away, a.Latency)
			}
		case a.Outcome() == "transport_error":
			ss.TransportErrors++
		}
		if a.Status >= 500 || a.Status == 0 {
			ss.affected = true
		}
		if !t.up.IsZero() && !a.Sent.Before(t.up) {
			ss.sentAfter = true
		}
		if !t.up.IsZero() && a.Outcome() == "accepted" && !a.Sent.Before(t.up) && (firstAfter.IsZero() || a.Sent.Before(firstAfter)) {
			firstAfter = a.Sent
		}
	}
	ss.NoSaleSeconds, ss.TailSeconds, ss.LeftAfterLoad = NoSale(answers, sr.Facts.InitialStock)
	ss.RecoverySeconds = -1
	// A strategy that sold every unit before the fault was undone (redis-lua goes on selling while
	// MySQL is away) has nothing left to recover to.
	ss.SoldOutInFault = ss.affected && !t.up.IsZero() && firstAfter.IsZero() && sr.Facts.InitialStock > 0 && sr.Facts.Stock == 0
	if ss.affected && !firstAfter.IsZero() {
		ss.RecoverySeconds = firstAfter.Sub(t.up).Seconds()
	}
	ss.Latency503 = sr.Latency["unavailable"]
	ss.Latency503Away = yardstick.Percentiles(away)
	if sr.Verdict == "FAIL" { // the unsafe control's OVERSOLD is its pass: its violations are the evidence
		for _, v := range sr.Violations {
			s.Violations = append(s.Violations, sr.Strategy+": "+v)
		}
	}
	s.PerStrategy = append(s.PerStrategy, ss)
	return &s.PerStrategy[len(s.PerStrategy)-1]
}

// NoSale measures a load's stalls by the arrival of its answers: the longest time between two
// acceptances (from the first one on), and, when fewer than stock units were accepted, the time
// from the last acceptance (or the first answer) to the last answer; and the units left.
func NoSale(answers []attack.Answer, stock int) (longest, tail float64, left int) {
	var times []time.Time
	var first, end time.Time
	seen := map[string]bool{}
	for _, a := range answers {
		at := a.Sent.Add(a.Latency)
		if at.After(end) {
			end = at
		}
		if first.IsZero() || a.Sent.Before(first) {
			first = a.Sent
		}
		if a.Outcome() == string(sale.CodeAccepted) && !seen[a.OrderID] {
			seen[a.OrderID] = true
			times = append(times, at)
		}
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i := 1; i < len(times); i++ {
		longest = max(longest, times[i].Sub(times[i-1]).Seconds())
	}
	left = max(0, stock-len(times))
	if left > 0 && !end.IsZero() {
		last := first
		if len(times) > 0 {
			last = times[len(times)-1]
		}
		tail = end.Sub(last).Seconds()
		longest = max(longest, tail)
	}
	return longest, tail, left
}

// controlBurst is how the fault run paces the unsafe control: its share of the rate in bursts
// this far apart (burstPacer).
const controlBurst = 500 * time.Millisecond

// ordersCaughtUp polls, from up (the fault undone), until every reservation made by then of each
// product has its order, or until timeout, and returns per strategy the seconds from up until
// then; a strategy whose orders did not catch up within timeout is absent. It marks "by then" with
// the highest reservation id at its first read, so it needs no clock of the database's.
func ordersCaughtUp(ctx context.Context, db *sql.DB, products map[string]int64, up time.Time, timeout time.Duration) map[string]float64 {
	out := map[string]float64{}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	highest := map[string]int64{}
	for strategy, pid := range products {
		var id sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT MAX(id) FROM reservations WHERE product_id = ?`, pid).Scan(&id); err != nil {
			return out
		}
		highest[strategy] = id.Int64
	}
	for len(highest) > 0 {
		for strategy, id := range highest {
			var waiting int
			err := db.QueryRowContext(ctx, `
				SELECT COUNT(*) FROM reservations r LEFT JOIN orders o ON o.reservation_id = r.id
				WHERE r.product_id = ? AND r.id <= ? AND o.id IS NULL`, products[strategy], id).Scan(&waiting)
			if err != nil && ctx.Err() != nil {
				return out
			}
			if err == nil && waiting == 0 {
				out[strategy] = time.Since(up).Seconds()
				delete(highest, strategy)
			}
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(50 * time.Millisecond):
		}
	}
	return out
}

// summarize sets the step's totals and verdict.
func (s *StepReport) summarize(all []attack.Answer, t faultTimes, start time.Time, f Fault) {
	s.RecoverySeconds, s.CaughtUpSeconds = -1, -1
	for _, ss := range s.PerStrategy {
		s.Requests += ss.Requests
		s.Unavailable += ss.Unavailable
		s.RateLimited += ss.RateLimited
		s.TransportErrors += ss.TransportErrors
		if ss.RecoverySeconds > s.RecoverySeconds {
			s.RecoverySeconds = ss.RecoverySeconds
		}
		s.CaughtUpSeconds = max(s.CaughtUpSeconds, ss.CaughtUpSeconds)
		if ss.CaughtUpSeconds < 0 && !t.up.IsZero() {
			s.Violations = append(s.Violations, fmt.Sprintf("%s: the orders did not catch up within the drain timeout", ss.Strategy))
		}
		switch {
		case !ss.affected || t.up.IsZero() || ss.RecoverySeconds >= 0 || ss.SoldOutInFault:
		case !ss.sentAfter:
			s.Violations = append(s.Violations, fmt.Sprintf("%s: the load ended before the fault was undone, so recovery was not seen (a longer -step)", ss.Strategy))
		default:
			s.Violations = append(s.Violations, fmt.Sprintf("%s: no purchase accepted after the fault was undone", ss.Strategy))
		}
	}
	for _, a := range all {
		if a.Status >= 500 && a.Status != 503 && !a.LostByProxy() {
			s.Other5xx++
		}
	}
	if !t.inject.IsZero() && !t.up.IsZero() {
		s.OutageSeconds = t.up.Sub(t.inject).Seconds()
		s.InjectAt = t.inject.Sub(start).Seconds()
		s.RestoredSeconds = t.up.Sub(t.restore).Seconds()
	}
	if f.unnoticed && (s.Unavailable+s.TransportErrors+s.Other5xx) > 0 {
		s.Violations = append(s.Violations, fmt.Sprintf("the buyers noticed: %d × 503, %d lost answers, %d other 5xx (want none)",
			s.Unavailable, s.TransportErrors, s.Other5xx))
	}
	if f.failFast != "" {
		for _, ss := range s.PerStrategy {
			if ss.Strategy != f.failFast {
				continue
			}
			switch {
			case ss.Latency503Away.Count == 0:
				s.Violations = append(s.Violations, ss.Strategy+": no 503 while its lock service was away")
			case time.Duration(ss.Latency503Away.Max*float64(time.Millisecond)) > failFastWithin:
				s.Violations = append(s.Violations, fmt.Sprintf("%s: 503s while its lock service was away are not fast: p99 %.1f ms, max %.1f ms (want every one under %s)",
					ss.Strategy, ss.Latency503Away.P99, ss.Latency503Away.Max, failFastWithin))
			}
		}
	}
	s.Verdict = "PASS"
	if len(s.Violations) > 0 {
		s.Verdict = "FAIL"
	}
}

// knownBreaking are faults -faults runs only by name, never in all: each breaks the stack for
// what follows it, for a reason that is not the app's and is written down where it is defined.
// None today.
var knownBreaking []string

// parseFaults reads -faults: a comma-separated list of faultNames (or knownBreaking), or all.
func parseFaults(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		switch name = strings.TrimSpace(name); {
		case name == "":
		case name == "all":
			out = append(out, faultNames...)
		case slices.Contains(faultNames, name), slices.Contains(knownBreaking, name):
			out = append(out, name)
		default:
			return nil, fmt.Errorf("-faults: unknown fault %q (known: %s, all; by name only: %s)", name, strings.Join(faultNames, ", "), strings.Join(knownBreaking, ", "))
		}
	}
	return out, nil
}
