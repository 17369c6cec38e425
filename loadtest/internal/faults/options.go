package faults

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Options are the fault run (-faults): the attack's, and the faults'.
type Options struct {
	attack.Options
	Fault StepOptions
}

// StepOptions are the faults' own settings, which the zoo's steps share.
type StepOptions struct {
	names []string
	// After is when in each step the fault begins (-fault-after).
	After   time.Duration
	stopFor time.Duration
	// StepFor is the load of one step (-step).
	StepFor     time.Duration
	killReplica int // the replica the kill fault takes
	termReplica int
	// Replicas are the local stack's, 1..N (-replicas).
	Replicas int
	// ReplicaScript kills, stops and starts the stack's replicas (-chaos-script).
	ReplicaScript    string
	servicesScript   string
	failpointTrigger string
	// Redis is the app's, which the redis-flush fault empties.
	Redis     redisconn.Topology
	zkServers []string // the app's ZooKeeper servers (SECKILL_ZK_SERVERS)
	// luaReplicated says the replicas wait for a Redis replica before a redis-lua 202
	// (SECKILL_REDISLUA_MIN_REPLICAS > 0): then a Redis failover may lose none of them.
	luaReplicated bool
}

// Parse reads the command line of the fault run (-faults).
func Parse(args []string, getenv func(string) string, stderr io.Writer) (*Options, error) {
	o := &Options{}
	fs := cli.NewFlagSet("loadtest", stderr)
	finishers := []func() error{o.AttackFlags(fs, getenv), o.faultFlags(fs, getenv)}
	if err := cli.ParseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	o.DefaultBuyers()
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	return o, o.Fault.Validate()
}

// faultFlags declares the flags of the fault run: its list of faults and their settings.
func (o *Options) faultFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
	faults := fs.String("faults", "", "the fault run (make chaos): one step per fault, in order, each under its own paced load of every strategy: "+strings.Join(faultNames, ", ")+", or all")
	finishStep := o.Fault.StepFlags(fs, getenv)
	return func() error {
		var err error
		if o.Fault.names, err = parseFaults(*faults); err != nil {
			return err
		}
		if o.Rate == 0 {
			o.Rate = 300
		}
		return finishStep()
	}
}

// StepFlags declares the flags of a fault's step, which the fault run and the zoo share; its
// finisher also reads the app's Redis and ZooKeeper settings, which the faults stop or empty.
func (f *StepOptions) StepFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
	fs.DurationVar(&f.After, "fault-after", 2*time.Second, "when in each step the fault begins")
	fs.DurationVar(&f.stopFor, "fault-for", 5*time.Second, "how long a stopped service stays stopped")
	fs.DurationVar(&f.StepFor, "step", 20*time.Second, "the load of one step, at -rate (default 300 req/s with -faults)")
	fs.IntVar(&f.killReplica, "chaos-replica", 2, "the replica the kill fault SIGKILLs (N of 127.0.0.1:808N)")
	fs.IntVar(&f.termReplica, "term-replica", 3, "the replica the term fault SIGTERMs")
	fs.IntVar(&f.Replicas, "replicas", 3, "the replicas of the local stack, 1..N (the consumer fault arms them all)")
	fs.StringVar(&f.ReplicaScript, "chaos-script", "scripts/replica.sh", "script with `kill N`, `term N`, `alive N` and `start N`")
	fs.StringVar(&f.servicesScript, "services-script", "scripts/services.sh", "script with `stop NAME` and `start NAME`")
	fs.StringVar(&f.failpointTrigger, "failpoint-trigger", ".run/chaos/consumer-after-commit", "the consumer failpoint's trigger file (see SECKILL_TEST_FAILPOINT); the persister's are beside it")
	return func() error {
		var err error
		// The app's Redis (the redis-flush fault empties it), as the app's settings name it.
		if f.Redis, err = config.RedisTopology(getenv); err != nil {
			return fmt.Errorf("SECKILL_REDIS_*: %w", err)
		}
		f.zkServers = cli.SplitList(cli.EnvOr(getenv, "SECKILL_ZK_SERVERS", "127.0.0.1:2181"))
		f.luaReplicated = cli.EnvOr(getenv, "SECKILL_REDISLUA_MIN_REPLICAS", "0") != "0"
		f.failpointTrigger, err = filepath.Abs(f.failpointTrigger)
		return err
	}
}

// Validate checks the settings of the faults' steps.
func (f *StepOptions) Validate() error {
	switch {
	case f.Replicas < 1 || f.killReplica < 1 || f.killReplica > f.Replicas || f.termReplica < 1 || f.termReplica > f.Replicas:
		return errors.New("-chaos-replica and -term-replica must be among the -replicas")
	case f.StepFor <= 0 || f.After < 0 || f.stopFor < 0:
		return errors.New("-step must be positive, -fault-after and -fault-for not negative")
	}
	return nil
}
