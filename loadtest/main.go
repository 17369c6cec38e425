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

// options are what every mode shares: the attack of each strategy and its report.
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
	quiet        bool
	// signer signs each buyer's token when the replicas verify buyer tokens; nil: user ids are
	// claims, as the app's default is.
	signer *buyer.Signer
	// tokenTTL is how long a buyer's token is valid: the whole run.
	tokenTTL time.Duration
	// burstEvery paces the attack in bursts of that period instead of evenly (0: evenly): the
	// fault run sets it for the unsafe control, see burstPacer.
	burstEvery time.Duration
	// during runs beside each attack from its start and returns what it did (nil: nothing):
	// the load test's -chaos kill.
	during func(ctx context.Context, start time.Time, say func(string, ...any)) []Event
}

// runOptions are the load test proper: the attack, and what may ride along with it.
type runOptions struct {
	options
	chaos chaosOptions
	pay   payOptions
	// view is the crowd that watches each attack (-viewers): see viewers.go.
	view viewerOptions
}

// chaosOptions are the replica kill during each attack (-chaos): see chaos.go.
type chaosOptions struct {
	mode    string
	after   time.Duration
	replica int
	script  string
}

// payOptions are the payment phase (-pay): see payment.go.
type payOptions struct {
	share      float64
	skip       []string
	maxWait    time.Duration
	secondWave int
}

// faultRunOptions are the fault run (-faults): see faults.go.
type faultRunOptions struct {
	options
	fault faultOptions
}

// faultOptions are the faults' own settings, which the zoo's steps share.
type faultOptions struct {
	names            []string
	after            time.Duration
	stopFor          time.Duration
	stepFor          time.Duration
	killReplica      int // the replica the kill fault takes
	termReplica      int
	replicas         int
	replicaScript    string
	servicesScript   string
	failpointTrigger string
	redis            redisconn.Topology // the app's, which the redis-flush fault empties
	zkServers        []string           // the app's ZooKeeper servers (SECKILL_ZK_SERVERS)
	// luaReplicated says the replicas wait for a Redis replica before a redis-lua 202
	// (SECKILL_REDISLUA_MIN_REPLICAS > 0): then a Redis failover may lose none of them.
	luaReplicated bool
}

// zooRunOptions are the lock zoo (-zoo): see zoo.go.
type zooRunOptions struct {
	options
	zoo   zooOptions
	fault faultOptions
}

// zooOptions are the zoo's own settings.
type zooOptions struct {
	pause, lockTTL, session time.Duration
	hold                    time.Duration
	dir                     string
	faults                  []string
}

// auditRunOptions are the database audit alone (-audit-only), as make k6 uses it.
type auditRunOptions struct {
	options
	productID int64
	k6Summary string
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

// mode is which run the command line asks for: the flag that names it selects the flags it
// takes, so that each mode parses only its own (and refuses another's).
type mode int

const (
	modeRun mode = iota
	modeFaults
	modeZoo
	modeAudit
)

// modeOf finds the mode's flag in args: -faults with a list, -zoo, -audit-only; else the load
// test proper.
func modeOf(args []string) mode {
	for i, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case name == "zoo" && (!hasVal || val == "true"):
			return modeZoo
		case name == "audit-only" && (!hasVal || val == "true"):
			return modeAudit
		case name == "faults" && hasVal && val != "":
			return modeFaults
		case name == "faults" && !hasVal && i+1 < len(args) && args[i+1] != "":
			return modeFaults
		}
	}
	return modeRun
}

// parseFlags parses args with fs and then runs the flags' finishers (lists split, paths made
// absolute, defaults that depend on other flags), in order: their errors are reported so.
func parseFlags(fs *flag.FlagSet, args []string, finishers ...func() error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, finish := range finishers {
		if err := finish(); err != nil {
			return err
		}
	}
	return nil
}

func newFlagSet(stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseRun reads the command line of the load test proper: the attack, -chaos, -pay, -viewers.
func parseRun(args []string, getenv func(string) string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{}
	fs := newFlagSet(stderr)
	finishers := []func() error{o.attackFlags(fs, getenv), o.payFlags(fs), o.viewerFlags(fs, getenv)}
	o.chaosFlags(fs)
	if err := parseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	o.defaultBuyers()
	if err := o.options.validate(); err != nil {
		return nil, err
	}
	if o.chaos.mode == "kill" {
		o.during = o.chaos.killAndRestart
	}
	return o, o.validate()
}

// parseFaultRun reads the command line of the fault run (-faults).
func parseFaultRun(args []string, getenv func(string) string, stderr io.Writer) (*faultRunOptions, error) {
	o := &faultRunOptions{}
	fs := newFlagSet(stderr)
	finishers := []func() error{o.attackFlags(fs, getenv), o.faultFlags(fs, getenv)}
	if err := parseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	o.defaultBuyers()
	if err := o.options.validate(); err != nil {
		return nil, err
	}
	return o, o.fault.validate()
}

// parseZooRun reads the command line of the lock zoo (-zoo).
func parseZooRun(args []string, getenv func(string) string, stderr io.Writer) (*zooRunOptions, error) {
	o := &zooRunOptions{}
	fs := newFlagSet(stderr)
	finishers := []func() error{o.attackFlags(fs, getenv), o.zooFlags(fs), o.fault.stepFlags(fs, getenv)}
	if err := parseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	// After -zoo's defaults, which set -stock.
	o.defaultBuyers()
	if err := o.options.validate(); err != nil {
		return nil, err
	}
	if err := o.fault.validate(); err != nil {
		return nil, err
	}
	return o, o.validate()
}

// parseAuditRun reads the command line of the database audit alone (-audit-only).
func parseAuditRun(args []string, getenv func(string) string, stderr io.Writer) (*auditRunOptions, error) {
	o := &auditRunOptions{}
	fs := newFlagSet(stderr)
	finish := o.attackFlags(fs, getenv)
	fs.Bool("audit-only", true, "only audit -product-id (drain, then check every invariant)")
	fs.Int64Var(&o.productID, "product-id", 0, "product to audit with -audit-only")
	fs.StringVar(&o.k6Summary, "k6-summary", "", "with -audit-only: a k6 summary JSON whose seckill_accepted counter must match")
	if err := parseFlags(fs, args, finish); err != nil {
		return nil, err
	}
	if o.productID <= 0 {
		return nil, errors.New("-audit-only needs -product-id")
	}
	return o, nil
}

// defaultBuyers sets -buyers' default, 20 × -stock, when it was not given.
func (o *options) defaultBuyers() {
	if o.buyers == 0 {
		o.buyers = 20 * o.stock
	}
}

// envOrDefault returns the environment's value of name, or def when it is empty.
func envOrDefault(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// attackFlags declares the flags of the attack and its report, which every mode shares.
func (o *options) attackFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
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
	fs.StringVar(&o.adminToken, "admin-token", envOrDefault(getenv, "SECKILL_ADMIN_TOKEN", "dev-admin-token"), "admin bearer token")
	fs.StringVar(&o.mysqlDSN, "mysql-dsn", envOrDefault(getenv, "SECKILL_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/seckill"), "DSN of the app's database, for the audit; R runs on the same server, in database "+yardstick.DefaultDatabase)
	fs.StringVar(&o.outDir, "out", "loadtest/results", "where the report files go (empty: none)")
	fs.DurationVar(&o.baselineFor, "baseline", 2*time.Second, "how long each yardstick (R, bare gin) is measured, after 0.5 s of warm-up (0: skip them, and the ratios)")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress lines")
	buyerKey := fs.String("buyer-jwt-key", getenv("SECKILL_BUYER_JWT_HMAC_KEY"), "sign each buyer's token with this key, for replicas that verify buyer tokens (SECKILL_BUYER_JWT_HMAC_KEY and its _ISSUER and _AUDIENCE, as the replicas take them; empty: none, user ids are claims)")
	return func() error {
		o.targets = cli.SplitList(*targets)
		if *buyerKey != "" {
			if err := o.newSigner(*buyerKey, getenv); err != nil {
				return err
			}
		}
		o.strategies = cli.SplitList(*strategies)
		if slices.Equal(o.strategies, []string{"all"}) {
			o.strategies = o.strategies[:0]
			for _, st := range sale.Strategies {
				o.strategies = append(o.strategies, string(st))
			}
		}
		if o.adminURL == "" && len(o.targets) > 0 {
			o.adminURL = o.targets[0]
		}
		return nil
	}
}

// newSigner sets the signer of the buyers' tokens, with key and the replicas' other
// SECKILL_BUYER_JWT_* settings, and a token life long enough for the whole run.
func (o *options) newSigner(key string, getenv func(string) string) error {
	c := buyer.Config{HMACKey: []byte(key), Issuer: getenv("SECKILL_BUYER_JWT_ISSUER"), Audience: getenv("SECKILL_BUYER_JWT_AUDIENCE"), MaxTTL: buyer.DefaultMaxTTL}
	if v := getenv("SECKILL_BUYER_JWT_MAX_TTL"); v != "" {
		var err error
		if c.MaxTTL, err = time.ParseDuration(v); err != nil || c.MaxTTL <= 0 {
			return fmt.Errorf("SECKILL_BUYER_JWT_MAX_TTL %q: not a positive duration", v)
		}
	}
	s, err := buyer.NewSigner(c)
	if err != nil {
		return fmt.Errorf("-buyer-jwt-key: %w", err)
	}
	o.signer, o.tokenTTL = s, 2*o.maxDuration+o.drainTimeout+10*time.Minute
	// The replicas refuse a token that claims a longer life than their SECKILL_BUYER_JWT_MAX_TTL:
	// better said now than as 401s halfway through the run.
	if o.tokenTTL > c.MaxTTL {
		return fmt.Errorf("-duration and -drain-timeout need buyer tokens valid for %v, over SECKILL_BUYER_JWT_MAX_TTL (%v)", o.tokenTTL, c.MaxTTL)
	}
	return nil
}

// chaosFlags declares the flags of the replica kill during each attack.
func (o *runOptions) chaosFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.chaos.mode, "chaos", "", "kill: SIGKILL one replica during each attack and restart it")
	fs.DurationVar(&o.chaos.after, "chaos-after", time.Second, "when in the attack the replica is killed")
	fs.IntVar(&o.chaos.replica, "chaos-replica", 2, "which local replica (N of 127.0.0.1:808N) to kill")
	fs.StringVar(&o.chaos.script, "chaos-script", "scripts/replica.sh", "script with `kill N`, `term N`, `alive N` and `start N`")
}

// payFlags declares the flags of the payment phase.
func (o *runOptions) payFlags(fs *flag.FlagSet) (finish func() error) {
	fs.Float64Var(&o.pay.share, "pay", 0, "the payment phase (issue #14), 0 to 1: after the attack this share of the winners pay and the others let the payment window run out; a second wave of new buyers then buys the units that came back, and its winners pay; audited at the end (0: no payment phase). The replicas need a payment window longer than the attack and short enough to wait out: SECKILL_PAYMENT_WINDOW=10s make up")
	paySkip := fs.String("pay-skip", "", "with -pay: strategies attacked without the payment phase, comma-separated")
	fs.DurationVar(&o.pay.maxWait, "pay-max-wait", 3*time.Minute, "with -pay: the longest payment window the run waits out, per strategy (make up's is 2m: it works, slowly); a longer one (the app's default is 10m) is a setup error")
	fs.IntVar(&o.pay.secondWave, "second-wave", 0, "with -pay: buyers of the second wave (default 20 × the units that came back, at most -buyers, at least 100)")
	return func() error {
		o.pay.skip = cli.SplitList(*paySkip)
		return nil
	}
}

// faultFlags declares the flags of the fault run: its list of faults and their settings.
func (o *faultRunOptions) faultFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
	faults := fs.String("faults", "", "the fault run (make chaos): one step per fault, in order, each under its own paced load of every strategy: "+strings.Join(faultNames, ", ")+", or all")
	finishStep := o.fault.stepFlags(fs, getenv)
	return func() error {
		var err error
		if o.fault.names, err = parseFaults(*faults); err != nil {
			return err
		}
		if o.rate == 0 {
			o.rate = 300
		}
		return finishStep()
	}
}

// stepFlags declares the flags of a fault's step, which the fault run and the zoo share; its
// finisher also reads the app's Redis and ZooKeeper settings, which the faults stop or empty.
func (f *faultOptions) stepFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
	fs.DurationVar(&f.after, "fault-after", 2*time.Second, "when in each step the fault begins")
	fs.DurationVar(&f.stopFor, "fault-for", 5*time.Second, "how long a stopped service stays stopped")
	fs.DurationVar(&f.stepFor, "step", 20*time.Second, "the load of one step, at -rate (default 300 req/s with -faults)")
	fs.IntVar(&f.killReplica, "chaos-replica", 2, "the replica the kill fault SIGKILLs (N of 127.0.0.1:808N)")
	fs.IntVar(&f.termReplica, "term-replica", 3, "the replica the term fault SIGTERMs")
	fs.IntVar(&f.replicas, "replicas", 3, "the replicas of the local stack, 1..N (the consumer fault arms them all)")
	fs.StringVar(&f.replicaScript, "chaos-script", "scripts/replica.sh", "script with `kill N`, `term N`, `alive N` and `start N`")
	fs.StringVar(&f.servicesScript, "services-script", "scripts/services.sh", "script with `stop NAME` and `start NAME`")
	fs.StringVar(&f.failpointTrigger, "failpoint-trigger", ".run/chaos/consumer-after-commit", "the consumer failpoint's trigger file (see SECKILL_TEST_FAILPOINT); the persister's are beside it")
	return func() error {
		var err error
		// The app's Redis (the redis-flush fault empties it), as the app's settings name it.
		if f.redis, err = config.RedisTopology(getenv); err != nil {
			return fmt.Errorf("SECKILL_REDIS_*: %w", err)
		}
		f.zkServers = cli.SplitList(envOrDefault(getenv, "SECKILL_ZK_SERVERS", "127.0.0.1:2181"))
		f.luaReplicated = envOrDefault(getenv, "SECKILL_REDISLUA_MIN_REPLICAS", "0") != "0"
		f.failpointTrigger, err = filepath.Abs(f.failpointTrigger)
		return err
	}
}

// zooFlags declares the flags of the lock zoo; its finisher gives the zoo's load its defaults
// where the flags were not given.
func (o *zooRunOptions) zooFlags(fs *flag.FlagSet) (finish func() error) {
	fs.Bool("zoo", true, "the lock zoo (make zoo): every strategy of -strategies (all: the whole catalog) through the same load, then the pause and kill of its lock holder where it has one; one matrix (zoo.go). Sets -stock 1000, -buyers 4000, -step 12s, -rate 200, -fault-after 2s unless given")
	fs.DurationVar(&o.zoo.pause, "zoo-pause", 6*time.Second, "with -zoo: how long the pause fault stops the lock holder's process; longer than -zoo-lock-ttl and -zoo-session")
	fs.DurationVar(&o.zoo.hold, "zoo-hold", 2*time.Second, "with -zoo: how long the restart fault keeps the lock holder in its critical section (holder-hold) while the lock's servers restart; shorter than -zoo-lock-ttl")
	fs.DurationVar(&o.zoo.lockTTL, "zoo-lock-ttl", 3*time.Second, "with -zoo: the replicas' SECKILL_LOCK_TTL (Redis and lock-table leases)")
	fs.DurationVar(&o.zoo.session, "zoo-session", 4*time.Second, "with -zoo: the replicas' SECKILL_ZK_SESSION_TIMEOUT")
	zooFaultList := fs.String("zoo-faults", strings.Join(zooFaults, ","), "with -zoo: the faults to play, comma-separated (pause, kill, restart); empty: the loads alone, which need no replica started by make up")
	fs.StringVar(&o.zoo.dir, "zoo-dir", ".run/zoo", "with -zoo: where the holder failpoints' trigger files go")
	return func() error {
		o.zooLoadDefaults(fs)
		var err error
		if o.zoo.dir, err = filepath.Abs(o.zoo.dir); err != nil {
			return err
		}
		o.zoo.faults = cli.SplitList(*zooFaultList)
		for _, f := range o.zoo.faults {
			if !slices.Contains(zooFaults, f) {
				return fmt.Errorf("-zoo-faults: %q is none of %s", f, strings.Join(zooFaults, ", "))
			}
		}
		return nil
	}
}

// zooLoadDefaults sets the zoo's load (-stock 1000, -buyers 4000, -step 12s, -rate 200,
// -fault-after 2s) where fs was not given the flag.
func (o *zooRunOptions) zooLoadDefaults(fs *flag.FlagSet) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range map[string]any{"stock": &o.stock, "buyers": &o.buyers, "step": &o.fault.stepFor, "rate": &o.rate, "fault-after": &o.fault.after} {
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
}

// viewerFlags declares the flags of the crowd that watches each attack; its finisher needs the
// attack's -targets, the stream viewers' default.
func (o *runOptions) viewerFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
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
	return func() error {
		var err error
		if o.view.counts, err = parseCounts(*viewerCounts); err != nil {
			return err
		}
		if o.view.mode, err = viewers.ParseMode(*view); err != nil {
			return fmt.Errorf("-view: %w", err)
		}
		o.view.targets = cli.SplitList(*viewerTargets)
		if len(o.view.targets) == 0 {
			o.view.targets = defaultViewerTargets(o.view.mode, o.targets, getenv)
		}
		if err := viewers.CheckTargets(o.view.targets); err != nil {
			return fmt.Errorf("-viewer-targets: %w", err)
		}
		return nil
	}
}

// validate checks what every mode needs of the attack.
func (o *options) validate() error {
	switch {
	case len(o.targets) == 0 || len(o.strategies) == 0:
		return errors.New("need at least one target and one strategy")
	case o.stock < 1 || o.buyers < 1 || o.attempts < 1 || o.attempts > 3 || o.workers < 1 || o.rate < 0:
		return errors.New("-stock, -buyers and -workers must be positive, -attempts 1 to 3, -rate not negative")
	}
	return nil
}

// validate checks the load test's own flags.
func (o *runOptions) validate() error {
	switch {
	case o.chaos.mode != "" && o.chaos.mode != "kill":
		return fmt.Errorf("-chaos %q: only kill is known", o.chaos.mode)
	case !(o.pay.share >= 0 && o.pay.share <= 1) || o.pay.secondWave < 0 || o.pay.maxWait <= 0:
		return errors.New("-pay must be between 0 and 1, -second-wave not negative, -pay-max-wait positive")
	case o.view.rounds < 1:
		return errors.New("-viewer-rounds must be at least 1")
	case o.view.warmup < 0 || o.view.linger < 0 || o.view.connectFor < 0 || o.view.pollEvery <= 0 || o.view.listEvery <= 0:
		return errors.New("-viewer-warmup, -viewer-linger and -viewer-connect must not be negative, -poll-every and -list-every positive")
	}
	return nil
}

// validate checks the settings of the faults' steps.
func (f *faultOptions) validate() error {
	switch {
	case f.replicas < 1 || f.killReplica < 1 || f.killReplica > f.replicas || f.termReplica < 1 || f.termReplica > f.replicas:
		return errors.New("-chaos-replica and -term-replica must be among the -replicas")
	case f.stepFor <= 0 || f.after < 0 || f.stopFor < 0:
		return errors.New("-step must be positive, -fault-after and -fault-for not negative")
	}
	return nil
}

// validate checks the zoo's own flags.
func (o *zooRunOptions) validate() error {
	switch {
	case o.zoo.pause <= o.zoo.lockTTL || o.zoo.pause <= o.zoo.session:
		return errors.New("-zoo-pause must be longer than -zoo-lock-ttl and -zoo-session: the pause must outlast the leases")
	case o.zoo.hold <= 0 || o.zoo.hold >= o.zoo.lockTTL:
		return errors.New("-zoo-hold must be shorter than -zoo-lock-ttl: only the restart, not the lease's end, may free the held lock")
	}
	return nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	switch modeOf(args) {
	case modeFaults:
		o, err := parseFaultRun(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.mysqlDSN, func(db *sql.DB) error { return faultRun(ctx, db, o, stdout) })
	case modeZoo:
		o, err := parseZooRun(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.mysqlDSN, func(db *sql.DB) error { return zooRun(ctx, db, o, stdout) })
	case modeAudit:
		o, err := parseAuditRun(args, getenv, os.Stderr)
		if err != nil {
			return err
		}
		return withDB(o.mysqlDSN, func(db *sql.DB) error { return auditOnly(ctx, db, o, stdout) })
	}
	o, err := parseRun(args, getenv, os.Stderr)
	if err != nil {
		return err
	}
	return withDB(o.mysqlDSN, func(db *sql.DB) error { return loadRun(ctx, db, o, stdout) })
}

// withDB opens the app's database for fn and closes it after.
func withDB(dsn string, fn func(*sql.DB) error) error {
	db, err := openDB(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	return fn(db)
}

// loadRun is the load test proper: the attacks, their report, and exit status 1 if an invariant
// broke.
func loadRun(ctx context.Context, db *sql.DB, o *runOptions, stdout io.Writer) error {
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
func faultRun(ctx context.Context, db *sql.DB, o *faultRunOptions, stdout io.Writer) error {
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
func zooRun(ctx context.Context, db *sql.DB, o *zooRunOptions, stdout io.Writer) error {
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
