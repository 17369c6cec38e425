package fairness

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Options are the waiting-room run (-waiting-room): the attack's shared flags (targets,
// strategies, stock, admin, database, report) and the room's and the crowd's own.
type Options struct {
	attack.Options
	room  roomOptions
	crowd crowdOptions
}

// roomOptions are the admission rule each sale gets.
type roomOptions struct {
	admitRate float64
	session   time.Duration
	abandon   time.Duration
	preQueue  time.Duration // from queue_opens_at to sale_starts_at
	lead      time.Duration // from the sale's reset to queue_opens_at: every replica's board learns of it
	tick      time.Duration // the replicas' SECKILL_WAITROOM_TICK, for the rate's slack
	variants  []string
	fault     string        // -room-fault: played in every sale (fault.go)
	faultAt   time.Duration // after the sale's start
	faultFor  time.Duration // how long a killed replica stays down
}

// crowdOptions are the visitors.
type crowdOptions struct {
	size      int
	botShare  float64
	after     time.Duration // honest arrivals run on this long after the sale starts
	thinkMin  time.Duration
	thinkMax  time.Duration
	botPoll   time.Duration
	botConns  int
	timeout   time.Duration // longest a sale's crowd may take after the sale starts
	seed      int64
	seedGiven bool
}

// The variants of the room: the pre-queue kept in its order of joining, or shuffled at the opening.
const (
	VariantFIFO    = "fifo"
	VariantShuffle = "shuffle"
)

// Parse reads the command line of the waiting-room run.
func Parse(args []string, getenv func(string) string, stderr io.Writer) (*Options, error) {
	o := &Options{}
	fs := cli.NewFlagSet("loadtest", stderr)
	finishers := []func() error{o.AttackFlags(fs, getenv), o.roomFlags(fs)}
	if err := cli.ParseFlags(fs, args, finishers...); err != nil {
		return nil, err
	}
	o.Buyers = o.crowd.size
	if err := o.Options.Validate(); err != nil {
		return nil, err
	}
	return o, o.validate()
}

// roomFlags declares the waiting-room run's own flags; its finisher sets -stock's default from
// the crowd when -stock was not given.
func (o *Options) roomFlags(fs *flag.FlagSet) (finish func() error) {
	fs.Bool("waiting-room", true, "the waiting-room run: per strategy, a sale behind a waiting room with a pre-queue, FIFO and shuffled, a crowd of honest buyers and bots; judged for fairness, the admission rate, the ETA and the audit. Sets -stock to 3/8 of -crowd unless given")
	fs.IntVar(&o.crowd.size, "crowd", 400, "with -waiting-room: visitors per sale, bots included")
	fs.Float64Var(&o.crowd.botShare, "bot-share", 0.1, "with -waiting-room: the bots' share of the crowd")
	fs.Float64Var(&o.room.admitRate, "admit-rate", 20, "with -waiting-room: the sale's admit_rate, visitors per second across the replicas")
	fs.DurationVar(&o.room.preQueue, "pre-queue", 6*time.Second, "with -waiting-room: how long the queue is open before the sale starts (queue_opens_at); whole seconds")
	fs.DurationVar(&o.room.lead, "lead", 3*time.Second, "with -waiting-room: from the sale's reset to its queue's opening, for every replica to learn of the new sale")
	fs.DurationVar(&o.room.session, "session", 60*time.Second, "with -waiting-room: the sale's session_seconds")
	fs.DurationVar(&o.room.abandon, "abandon", 10*time.Second, "with -waiting-room: the sale's abandon_seconds")
	fs.DurationVar(&o.room.tick, "room-tick", 100*time.Millisecond, "with -waiting-room: the replicas' SECKILL_WAITROOM_TICK: the admission rate's slack is one tick's worth")
	fs.StringVar(&o.room.fault, "room-fault", "", "with -waiting-room: a fault played in every sale while the crowd waits, -room-fault-at after its start: "+
		FaultKill+" (replica 2 SIGKILLed and started again: every place kept, every pass still buys) or "+
		FaultRedisFailover+" (the room's Redis master SIGKILLed, with REDIS_MODE=sentinel or cluster: places kept but those joined in its last second, passes kept); "+
		"the ETA is then reported, not judged")
	fs.DurationVar(&o.room.faultAt, "room-fault-at", 3*time.Second, "with -room-fault: when it strikes, after the sale's start")
	fs.DurationVar(&o.room.faultFor, "room-fault-for", 3*time.Second, "with -room-fault kill: how long the replica stays down before it is started again")
	variants := fs.String("variants", VariantFIFO+","+VariantShuffle, "with -waiting-room: the rooms to run per strategy: fifo (the pre-queue in order of joining), shuffle (drawn at the opening)")
	fs.DurationVar(&o.crowd.after, "arrive-after", 3*time.Second, "with -waiting-room: honest buyers arrive at random from the queue's opening until this long after the sale starts")
	fs.DurationVar(&o.crowd.thinkMin, "think-min", 500*time.Millisecond, "with -waiting-room: an honest buyer's shortest think time between its admission and its purchase")
	fs.DurationVar(&o.crowd.thinkMax, "think-max", 2*time.Second, "with -waiting-room: its longest")
	fs.DurationVar(&o.crowd.botPoll, "bot-poll", 100*time.Millisecond, "with -waiting-room: how often a bot polls its place")
	fs.IntVar(&o.crowd.botConns, "bot-conns", 4, "with -waiting-room: connections per bot, and the purchases it sends at once")
	fs.DurationVar(&o.crowd.timeout, "crowd-timeout", time.Minute, "with -waiting-room: the longest a sale's crowd may take once the sale starts")
	fs.Int64Var(&o.crowd.seed, "seed", 0, "with -waiting-room: the seed of the arrival times and think times (0: from the clock)")
	return func() error {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		if !given["stock"] {
			o.Stock = o.crowd.size * 3 / 8
		}
		o.crowd.seedGiven = given["seed"]
		if err := validFault(o.room.fault); err != nil {
			return err
		}
		o.room.variants = cli.SplitList(*variants)
		for _, v := range o.room.variants {
			if v != VariantFIFO && v != VariantShuffle {
				return fmt.Errorf("-variants: %q is neither %s nor %s", v, VariantFIFO, VariantShuffle)
			}
		}
		return nil
	}
}

// bots is how many of the crowd are bots: at least one.
func (o *Options) bots() int {
	return max(1, int(math.Round(float64(o.crowd.size)*o.crowd.botShare)))
}

// validate checks the room's and the crowd's flags.
func (o *Options) validate() error {
	c, r := o.crowd, o.room
	switch {
	case len(r.variants) == 0:
		return errors.New("-variants: none given")
	case c.size < 20:
		return errors.New("-crowd must be at least 20: the tests need a pre-queue of a few dozen")
	case !(c.botShare > 0 && c.botShare < 0.5):
		return errors.New("-bot-share must be above 0 and below 0.5: bots are a minority")
	case o.Stock >= c.size:
		return errors.New("-stock must be below -crowd: with a unit for everyone nothing is contested")
	case !(r.admitRate > 0):
		return errors.New("-admit-rate must be positive")
	case r.preQueue < time.Second || r.preQueue%time.Second != 0:
		return errors.New("-pre-queue must be whole seconds, at least 1 s (the API's times are RFC 3339 seconds)")
	case r.session < time.Second || r.session%time.Second != 0 || r.abandon < time.Second || r.abandon%time.Second != 0:
		return errors.New("-session and -abandon must be whole seconds, at least 1 s")
	case c.thinkMin < 0 || c.thinkMax < c.thinkMin:
		return errors.New("-think-min must not be negative nor above -think-max")
	case c.thinkMax >= r.session:
		return errors.New("-think-max must be shorter than -session: an honest buyer buys within its session")
	case c.botPoll <= 0 || c.botConns < 1 || c.after < 0 || c.timeout <= 0 || r.lead < time.Second || r.tick <= 0:
		return errors.New("-bot-poll, -bot-conns, -crowd-timeout, -room-tick must be positive, -lead at least 1 s, -arrive-after not negative")
	}
	return nil
}
