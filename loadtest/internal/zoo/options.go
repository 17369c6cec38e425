package zoo

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/faults"
)

// Options are the lock zoo (-zoo): see zoo.go.
type Options struct {
	attack.Options
	zoo   zooOptions
	fault faults.StepOptions
}

// zooOptions are the zoo's own settings.
type zooOptions struct {
	pause, lockTTL, session time.Duration
	hold                    time.Duration
	dir                     string
	faults                  []string
}

// Parse reads the command line of the lock zoo (-zoo).
func Parse(args []string, getenv func(string) string, stderr io.Writer) (*Options, error) {
	o := &Options{}
	fs := cli.NewFlagSet("loadtest", stderr)
	finishers := []func() error{o.AttackFlags(fs, getenv), o.zooFlags(fs), o.fault.StepFlags(fs, getenv)}
	if err := cli.ParseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	// After -zoo's defaults, which set -stock.
	o.DefaultBuyers()
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	if err := o.fault.Validate(); err != nil {
		return nil, err
	}
	return o, o.validate()
}

// zooFlags declares the flags of the lock zoo; its finisher gives the zoo's load its defaults
// where the flags were not given.
func (o *Options) zooFlags(fs *flag.FlagSet) (finish func() error) {
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
func (o *Options) zooLoadDefaults(fs *flag.FlagSet) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range map[string]any{"stock": &o.Stock, "buyers": &o.Buyers, "step": &o.fault.StepFor, "rate": &o.Rate, "fault-after": &o.fault.After} {
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

// validate checks the zoo's own flags.
func (o *Options) validate() error {
	switch {
	case o.zoo.pause <= o.zoo.lockTTL || o.zoo.pause <= o.zoo.session:
		return errors.New("-zoo-pause must be longer than -zoo-lock-ttl and -zoo-session: the pause must outlast the leases")
	case o.zoo.hold <= 0 || o.zoo.hold >= o.zoo.lockTTL:
		return errors.New("-zoo-hold must be shorter than -zoo-lock-ttl: only the restart, not the lease's end, may free the held lock")
	}
	return nil
}
