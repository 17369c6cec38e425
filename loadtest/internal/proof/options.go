package proof

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/payphase"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
)

// Options are the load test proper: the attack, and what may ride along with it.
type Options struct {
	attack.Options
	chaos chaosOptions
	pay   payphase.Options
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

// Parse reads the command line of the load test proper: the attack, -chaos, -pay, -viewers.
func Parse(args []string, getenv func(string) string, stderr io.Writer) (*Options, error) {
	o := &Options{}
	fs := cli.NewFlagSet("loadtest", stderr)
	finishers := []func() error{o.AttackFlags(fs, getenv), o.pay.Flags(fs), o.viewerFlags(fs, getenv)}
	o.chaosFlags(fs)
	if err := cli.ParseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	o.DefaultBuyers()
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	if o.chaos.mode == "kill" {
		o.During = o.chaos.killAndRestart
	}
	return o, o.validate()
}

// chaosFlags declares the flags of the replica kill during each attack.
func (o *Options) chaosFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.chaos.mode, "chaos", "", "kill: SIGKILL one replica during each attack and restart it")
	fs.DurationVar(&o.chaos.after, "chaos-after", time.Second, "when in the attack the replica is killed")
	fs.IntVar(&o.chaos.replica, "chaos-replica", 2, "which local replica (N of 127.0.0.1:808N) to kill")
	fs.StringVar(&o.chaos.script, "chaos-script", "scripts/replica.sh", "script with `kill N`, `term N`, `alive N` and `start N`")
}

// viewerFlags declares the flags of the crowd that watches each attack; its finisher needs the
// attack's -targets, the stream viewers' default.
func (o *Options) viewerFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
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
			o.view.targets = defaultViewerTargets(o.view.mode, o.Targets, getenv)
		}
		if err := viewers.CheckTargets(o.view.targets); err != nil {
			return fmt.Errorf("-viewer-targets: %w", err)
		}
		return nil
	}
}

// validate checks the load test's own flags.
func (o *Options) validate() error {
	switch {
	case o.chaos.mode != "" && o.chaos.mode != "kill":
		return fmt.Errorf("-chaos %q: only kill is known", o.chaos.mode)
	case o.pay.Validate() != nil:
		return o.pay.Validate()
	case o.view.rounds < 1:
		return errors.New("-viewer-rounds must be at least 1")
	case o.view.warmup < 0 || o.view.linger < 0 || o.view.connectFor < 0 || o.view.pollEvery <= 0 || o.view.listEvery <= 0:
		return errors.New("-viewer-warmup, -viewer-linger and -viewer-connect must not be negative, -poll-every and -list-every positive")
	}
	return nil
}
