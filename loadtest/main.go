// Command loadtest is seckill-go's proof under load. For each strategy it puts a fresh product on
// sale through the admin API, sends many more buyers than units at several replicas at once
// (vegeta as a library), and then decides from evidence — the answers the buyers got and the
// database read with plain SQL — that no unit was oversold, none was lost, no buyer got more
// than the limit and every retry got its first answer. It measures this machine's own limits in
// the same run (R, one hot row's commit rate without the app, and the bare gin ceiling of the
// HTTP layer: see loadtest/internal/yardstick) and divides by them, and reports Markdown, JSON and
// an HTML page with charts.
//
// Exit status: 0 when every safe strategy passed (and the `none` control, if run, oversold as it
// must), 1 when an invariant broke, 2 on a usage or setup error.
//
//	go run ./loadtest                                   # mysql, redis, zk over the 3 local replicas
//	go run ./loadtest -strategies none                  # the negative control (server: SECKILL_ALLOW_UNSAFE_STRATEGIES=true)
//	go run ./loadtest -chaos kill                       # SIGKILL a replica mid-attack, restart it
//	go run ./loadtest -pay 0.5 -stock 100 -buyers 1000  # the payment phase (quick with SECKILL_PAYMENT_WINDOW=10s make up)
//	go run ./loadtest -faults all -targets http://127.0.0.1:8080   # the fault run of make chaos
//	go run ./loadtest -audit-only -product-id 7         # only the database audit (used by make k6)
//	go run ./loadtest -strategies mysql -workers 256 -viewers 0,250,1000              # the watched stampede, polling through nginx
//	go run ./loadtest -strategies mysql -workers 256 -viewers 0,5000 -view stream     # the same, 5,000 streams over the replicas
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

func main() {
	cli.Main("loadtest", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout) })
}

// options are the command line.
type options struct {
	targets      []string
	strategies   []string
	stock        int
	buyers       int
	attempts     int
	rate         int
	workers      int
	maxDuration  time.Duration
	drainTimeout time.Duration
	adminURL     string
	adminToken   string
	mysqlDSN     string
	outDir       string
	baselineFor  time.Duration
	chaos        string
	chaosAfter   time.Duration
	chaosReplica int
	chaosScript  string
	// The payment phase (-pay): see payment.go.
	pay        float64
	paySkip    []string
	payMaxWait time.Duration
	secondWave int
	// The fault run (-faults): see faults.go.
	faults           []string
	faultAfter       time.Duration
	burstEvery       time.Duration // set per strategy by the fault run: see burstPacer
	faultFor         time.Duration
	stepFor          time.Duration
	termReplica      int
	replicas         int
	servicesScript   string
	failpointTrigger string
	redis            redisconn.Topology // the app's, which the redis-flush fault empties
	zkServers        []string           // the app's ZooKeeper servers (SECKILL_ZK_SERVERS)
	// The lock zoo (-zoo): see zoo.go.
	zoo                              bool
	zooPause, zooLockTTL, zooSession time.Duration
	zooHold                          time.Duration
	zooDir                           string
	zooFaults                        []string
	auditOnly                        bool
	productID                        int64
	k6Summary                        string
	quiet                            bool
	// signer signs each buyer's token when the replicas verify buyer tokens; nil: user ids are
	// claims, as the app's default is.
	signer *buyer.Signer
	// tokenTTL is how long a buyer's token is valid: the whole run.
	tokenTTL time.Duration
	// view is the crowd that watches each attack (-viewers): see viewers.go.
	view viewerOptions
}

// buyerToken returns user's token, or "" when the replicas do not verify buyers. A user id of the
// plan is always valid, so signing cannot fail.
func (o *options) buyerToken(user string) string {
	if o.signer == nil {
		return ""
	}
	tok, err := o.signer.Token(user, o.tokenTTL)
	if err != nil {
		panic(fmt.Sprintf("loadtest: sign %q: %v", user, err))
	}
	return tok
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	envOr := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	o := &options{}
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	targets := fs.String("targets", "http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083", "replica base URLs, comma-separated; buyers are spread over them round-robin")
	strategies := fs.String("strategies", sale.JoinStrategies(sale.StrategiesWhere(sale.OwnSafe), ","), "strategies to attack, in order; add none for the negative control")
	fs.IntVar(&o.stock, "stock", 500, "units on sale per strategy")
	fs.IntVar(&o.buyers, "buyers", 0, "distinct buyers per strategy (default 20 × stock)")
	fs.IntVar(&o.attempts, "attempts", 3, "requests per buyer: 1 first try, 2 + a retry with the same Idempotency-Key, 3 + a second purchase with a new key")
	fs.IntVar(&o.rate, "rate", 0, "requests per second; 0 sends as fast as -workers allow")
	fs.IntVar(&o.workers, "workers", 64, "most requests in flight")
	fs.DurationVar(&o.maxDuration, "duration", 2*time.Minute, "longest attack per strategy")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 2*time.Minute, "longest wait for the order queue to drain")
	fs.StringVar(&o.adminURL, "admin", "", "base URL of the admin API (default: the first of -targets; a public load balancer may refuse it)")
	fs.StringVar(&o.adminToken, "admin-token", envOr("SECKILL_ADMIN_TOKEN", "dev-admin-token"), "admin bearer token")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", envOr("SECKILL_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/seckill"), "DSN of the app's database, for the audit; R runs on the same server, in database "+yardstick.DefaultDatabase)
	fs.StringVar(&o.outDir, "out", "loadtest/results", "where the report files go (empty: none)")
	fs.DurationVar(&o.baselineFor, "baseline", 2*time.Second, "how long each yardstick (R, bare gin) is measured, after 0.5 s of warm-up (0: skip them, and the ratios)")
	fs.StringVar(&o.chaos, "chaos", "", "kill: SIGKILL one replica during each attack and restart it")
	fs.DurationVar(&o.chaosAfter, "chaos-after", time.Second, "when in the attack the replica is killed")
	fs.IntVar(&o.chaosReplica, "chaos-replica", 2, "which local replica (N of 127.0.0.1:808N) to kill")
	fs.StringVar(&o.chaosScript, "chaos-script", "scripts/replica.sh", "script with `kill N`, `term N`, `alive N` and `start N`")
	fs.Float64Var(&o.pay, "pay", 0, "the payment phase (issue #14), 0 to 1: after the attack this share of the winners pay and the others let the payment window run out; a second wave of new buyers then buys the units that came back, and its winners pay; audited at the end (0: no payment phase). The replicas need a payment window longer than the attack and short enough to wait out: SECKILL_PAYMENT_WINDOW=10s make up")
	paySkip := fs.String("pay-skip", "", "with -pay: strategies attacked without the payment phase, comma-separated")
	fs.DurationVar(&o.payMaxWait, "pay-max-wait", 3*time.Minute, "with -pay: the longest payment window the run waits out, per strategy (make up's is 2m: it works, slowly); a longer one (the app's default is 10m) is a setup error")
	fs.IntVar(&o.secondWave, "second-wave", 0, "with -pay: buyers of the second wave (default 20 × the units that came back, at most -buyers, at least 100)")
	faults := fs.String("faults", "", "the fault run (make chaos): one step per fault, in order, each under its own paced load of every strategy: "+strings.Join(faultNames, ", ")+", or all")
	fs.DurationVar(&o.faultAfter, "fault-after", 2*time.Second, "with -faults: when in each step the fault begins")
	fs.DurationVar(&o.faultFor, "fault-for", 5*time.Second, "with -faults: how long a stopped service stays stopped")
	fs.DurationVar(&o.stepFor, "step", 20*time.Second, "with -faults: the load of one step, at -rate (default 300 req/s with -faults)")
	fs.IntVar(&o.termReplica, "term-replica", 3, "with -faults: the replica the term fault SIGTERMs (kill takes -chaos-replica)")
	fs.IntVar(&o.replicas, "replicas", 3, "with -faults: the replicas of the local stack, 1..N (the consumer fault arms them all)")
	fs.StringVar(&o.servicesScript, "services-script", "scripts/services.sh", "with -faults: script with `stop NAME` and `start NAME`")
	fs.StringVar(&o.failpointTrigger, "failpoint-trigger", ".run/chaos/consumer-after-commit", "with -faults: the consumer failpoint's trigger file (see SECKILL_TEST_FAILPOINT); the persister's are beside it")
	fs.BoolVar(&o.zoo, "zoo", false, "the lock zoo (make zoo): every strategy of -strategies (all: the whole catalog) through the same load, then the pause and kill of its lock holder where it has one; one matrix (zoo.go). Sets -stock 1000, -buyers 4000, -step 12s, -rate 200, -fault-after 2s unless given")
	fs.DurationVar(&o.zooPause, "zoo-pause", 6*time.Second, "with -zoo: how long the pause fault stops the lock holder's process; longer than -zoo-lock-ttl and -zoo-session")
	fs.DurationVar(&o.zooHold, "zoo-hold", 2*time.Second, "with -zoo: how long the restart fault keeps the lock holder in its critical section (holder-hold) while the lock's servers restart; shorter than -zoo-lock-ttl")
	fs.DurationVar(&o.zooLockTTL, "zoo-lock-ttl", 3*time.Second, "with -zoo: the replicas' SECKILL_LOCK_TTL (Redis and lock-table leases)")
	fs.DurationVar(&o.zooSession, "zoo-session", 4*time.Second, "with -zoo: the replicas' SECKILL_ZK_SESSION_TIMEOUT")
	zooFaultList := fs.String("zoo-faults", strings.Join(zooFaults, ","), "with -zoo: the faults to play, comma-separated (pause, kill, restart); empty: the loads alone, which need no replica started by make up")
	fs.StringVar(&o.zooDir, "zoo-dir", ".run/zoo", "with -zoo: where the holder failpoints' trigger files go")
	fs.BoolVar(&o.auditOnly, "audit-only", false, "only audit -product-id (drain, then check every invariant)")
	fs.Int64Var(&o.productID, "product-id", 0, "product to audit with -audit-only")
	fs.StringVar(&o.k6Summary, "k6-summary", "", "with -audit-only: a k6 summary JSON whose seckill_accepted counter must match")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	viewerCounts := fs.String("viewers", "", "crowd sizes, comma-separated (e.g. 0,250,1000): each strategy is attacked once per size, on a product of its own, watched by that many viewers from before the attack until the sale is over and drained; the report sets the sizes side by side, with accepted/s ÷ the size 0 of the same strategy, and MySQL's statements/s during each attack (empty: no viewers)")
	view := fs.String("view", string(viewers.Poll), "with -viewers: how they watch: poll (the product and its stats about once a second, the list every -list-every, revalidating with If-None-Match, as an open storefront does) or stream (GET /api/v1/events?product_id=N held, reconnecting with Last-Event-ID as EventSource does)")
	viewerTargets := fs.String("viewer-targets", "", "with -viewers: base URLs the viewers read from, comma-separated; viewer i starts on the (i mod n)-th and moves on when it cannot connect (default: poll through the public entry http://$SECKILL_LB_ADDR, 127.0.0.1:8080, where nginx's micro-cache is; stream to -targets, the replicas)")
	fs.IntVar(&o.view.rounds, "viewer-rounds", 1, "with -viewers: play the counts this many times per strategy, forwards then backwards (0,250,1000,1000,250,0,…), each attack on a product of its own, so that the machine's drift during the run weighs on every size alike; the report adds each size's medians")
	fs.DurationVar(&o.view.warmup, "viewer-warmup", 2*time.Second, "with -viewers: how long the crowd watches before the attack begins (after every stream connected)")
	fs.DurationVar(&o.view.connectFor, "viewer-connect", time.Minute, "with -viewers: the longest wait for every stream viewer to connect before the warm-up")
	fs.DurationVar(&o.view.linger, "viewer-linger", 10*time.Second, "with -viewers: the longest wait, after the drain, for every viewer to read the sold out (one that has not by then fails the run)")
	fs.DurationVar(&o.view.pollEvery, "poll-every", time.Second, "with -view poll: each viewer's period, jittered ±15 %")
	fs.DurationVar(&o.view.listEvery, "list-every", 5*time.Second, "with -view poll: how often each viewer also reads the product list")
	fs.BoolVar(&o.view.ownAddrs, "viewer-own-addrs", true, "with -viewers: each viewer connects from a loopback address of its own (127.1.x.y), as each browser is a client of its own to per-client limits")
	buyerKey := fs.String("buyer-jwt-key", getenv("SECKILL_BUYER_JWT_HMAC_KEY"), "sign each buyer's token with this key, for replicas that verify buyer tokens (SECKILL_BUYER_JWT_HMAC_KEY and its _ISSUER and _AUDIENCE, as the replicas take them; empty: none, user ids are claims)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.targets = cli.SplitList(*targets)
	if *buyerKey != "" {
		c := buyer.Config{HMACKey: []byte(*buyerKey), Issuer: getenv("SECKILL_BUYER_JWT_ISSUER"), Audience: getenv("SECKILL_BUYER_JWT_AUDIENCE"), MaxTTL: buyer.DefaultMaxTTL}
		if v := getenv("SECKILL_BUYER_JWT_MAX_TTL"); v != "" {
			var err error
			if c.MaxTTL, err = time.ParseDuration(v); err != nil || c.MaxTTL <= 0 {
				return nil, fmt.Errorf("SECKILL_BUYER_JWT_MAX_TTL %q: not a positive duration", v)
			}
		}
		s, err := buyer.NewSigner(c)
		if err != nil {
			return nil, fmt.Errorf("-buyer-jwt-key: %w", err)
		}
		o.signer, o.tokenTTL = s, 2*o.maxDuration+o.drainTimeout+10*time.Minute
		// The replicas refuse a token that claims a longer life than their SECKILL_BUYER_JWT_MAX_TTL:
		// better said now than as 401s halfway through the run.
		if o.tokenTTL > c.MaxTTL {
			return nil, fmt.Errorf("-duration and -drain-timeout need buyer tokens valid for %v, over SECKILL_BUYER_JWT_MAX_TTL (%v)", o.tokenTTL, c.MaxTTL)
		}
	}
	o.strategies = cli.SplitList(*strategies)
	if slices.Equal(o.strategies, []string{"all"}) {
		o.strategies = o.strategies[:0]
		for _, st := range sale.Strategies {
			o.strategies = append(o.strategies, string(st))
		}
	}
	if o.zoo {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range map[string]any{"stock": &o.stock, "buyers": &o.buyers, "step": &o.stepFor, "rate": &o.rate, "fault-after": &o.faultAfter} {
			if given[name] {
				continue
			}
			switch p := v.(type) {
			case *int:
				*p = map[string]int{"stock": 1000, "buyers": 4000, "rate": 200}[name]
			case *time.Duration:
				*p = map[string]time.Duration{"step": 12 * time.Second, "fault-after": 2 * time.Second}[name]
			}
		}
		var err error
		if o.zooDir, err = filepath.Abs(o.zooDir); err != nil {
			return nil, err
		}
		o.zooFaults = cli.SplitList(*zooFaultList)
		for _, f := range o.zooFaults {
			if !slices.Contains(zooFaults, f) {
				return nil, fmt.Errorf("-zoo-faults: %q is none of %s", f, strings.Join(zooFaults, ", "))
			}
		}
	}
	var err error
	o.paySkip = cli.SplitList(*paySkip)
	if o.view.counts, err = parseCounts(*viewerCounts); err != nil {
		return nil, err
	}
	if o.view.mode, err = viewers.ParseMode(*view); err != nil {
		return nil, fmt.Errorf("-view: %w", err)
	}
	o.view.targets = cli.SplitList(*viewerTargets)
	if len(o.view.targets) == 0 {
		o.view.targets = defaultViewerTargets(o.view.mode, o.targets, getenv)
	}
	if err := viewers.CheckTargets(o.view.targets); err != nil {
		return nil, fmt.Errorf("-viewer-targets: %w", err)
	}
	if o.adminURL == "" && len(o.targets) > 0 {
		o.adminURL = o.targets[0]
	}
	// The app's Redis (the redis-flush fault empties it), as the app's settings name it.
	if o.redis, err = config.RedisTopology(getenv); err != nil {
		return nil, fmt.Errorf("SECKILL_REDIS_*: %w", err)
	}
	o.zkServers = cli.SplitList(envOr("SECKILL_ZK_SERVERS", "127.0.0.1:2181"))
	if o.faults, err = parseFaults(*faults); err != nil {
		return nil, err
	}
	if len(o.faults) > 0 {
		if o.rate == 0 {
			o.rate = 300
		}
		if o.failpointTrigger, err = filepath.Abs(o.failpointTrigger); err != nil {
			return nil, err
		}
	}
	if o.buyers == 0 {
		o.buyers = 20 * o.stock
	}
	switch {
	case o.auditOnly && o.productID <= 0:
		return nil, errors.New("-audit-only needs -product-id")
	case o.auditOnly:
		return o, nil
	case len(o.targets) == 0 || len(o.strategies) == 0:
		return nil, errors.New("need at least one target and one strategy")
	case o.stock < 1 || o.buyers < 1 || o.attempts < 1 || o.attempts > 3 || o.workers < 1 || o.rate < 0:
		return nil, errors.New("-stock, -buyers and -workers must be positive, -attempts 1 to 3, -rate not negative")
	case o.chaos != "" && o.chaos != "kill":
		return nil, fmt.Errorf("-chaos %q: only kill is known", o.chaos)
	case o.zoo && (len(o.faults) > 0 || o.chaos != "" || o.pay > 0):
		return nil, errors.New("-zoo runs its own faults: not with -faults, -chaos or -pay")
	case o.zoo && (o.zooPause <= o.zooLockTTL || o.zooPause <= o.zooSession):
		return nil, errors.New("-zoo-pause must be longer than -zoo-lock-ttl and -zoo-session: the pause must outlast the leases")
	case o.zoo && (o.zooHold <= 0 || o.zooHold >= o.zooLockTTL):
		return nil, errors.New("-zoo-hold must be shorter than -zoo-lock-ttl: only the restart, not the lease's end, may free the held lock")
	case len(o.faults) > 0 && o.chaos != "":
		return nil, errors.New("-faults and -chaos: one or the other")
	case !(o.pay >= 0 && o.pay <= 1) || o.secondWave < 0 || o.payMaxWait <= 0:
		return nil, errors.New("-pay must be between 0 and 1, -second-wave not negative, -pay-max-wait positive")
	case o.pay > 0 && len(o.faults) > 0:
		return nil, errors.New("-pay and -faults: one or the other")
	case len(o.faults) > 0 && (o.replicas < 1 || o.chaosReplica < 1 || o.chaosReplica > o.replicas || o.termReplica < 1 || o.termReplica > o.replicas):
		return nil, errors.New("-faults: -chaos-replica and -term-replica must be among the -replicas")
	case len(o.faults) > 0 && (o.stepFor <= 0 || o.faultAfter < 0 || o.faultFor < 0):
		return nil, errors.New("-faults: -step must be positive, -fault-after and -fault-for not negative")
	case len(o.view.counts) > 0 && (len(o.faults) > 0 || o.zoo):
		return nil, errors.New("-viewers watch the attacks of the load test: not with -faults or -zoo")
	case o.view.rounds < 1:
		return nil, errors.New("-viewer-rounds must be at least 1")
	case o.view.warmup < 0 || o.view.linger < 0 || o.view.connectFor < 0 || o.view.pollEvery <= 0 || o.view.listEvery <= 0:
		return nil, errors.New("-viewer-warmup, -viewer-linger and -viewer-connect must not be negative, -poll-every and -list-every positive")
	}
	return o, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	o, err := parseOptions(args, getenv, os.Stderr)
	if err != nil {
		return err
	}
	db, err := openDB(o.mysqlDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.auditOnly {
		return auditOnly(ctx, db, o, stdout)
	}
	if len(o.faults) > 0 {
		return faultRun(ctx, db, o, stdout)
	}
	if o.zoo {
		return zooRun(ctx, db, o, stdout)
	}
	rep, err := runAll(ctx, db, o, progress(stdout, o.quiet))
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, markdown(rep))
	if o.outDir != "" {
		files, err := writeReport(o.outDir, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	}
	if !rep.Passed {
		return cli.Failure("invariants broken; see the verdicts above")
	}
	return nil
}

// faultRun is run for -faults: the steps, their report, and exit status 1 if one failed.
func faultRun(ctx context.Context, db *sql.DB, o *options, stdout io.Writer) error {
	rep, err := runFaults(ctx, db, o, progress(stdout, o.quiet))
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, chaosMarkdown(rep))
	if o.outDir != "" {
		files, err := writeChaosReport(o.outDir, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	}
	if !rep.Passed {
		return cli.Failure("a fault broke an invariant or a promise; see the verdicts above")
	}
	return nil
}

// zooRun is run for -zoo: the matrix, its report, and exit status 1 if a cell is not what the
// write-ups say it should be.
func zooRun(ctx context.Context, db *sql.DB, o *options, stdout io.Writer) error {
	rep, err := runZoo(ctx, db, o, progress(stdout, o.quiet))
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, zooMarkdown(rep))
	if o.outDir != "" {
		files, err := writeZooReport(o.outDir, rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	}
	if !rep.Passed {
		return cli.Failure("a strategy did not behave as the write-ups say; see the matrix")
	}
	return nil
}

// progress returns a printf for progress lines (to stdout, before the report).
func progress(w io.Writer, quiet bool) func(format string, args ...any) {
	if quiet {
		return func(string, ...any) {}
	}
	return cli.Progress(w)
}
