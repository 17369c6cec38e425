package payphase

import (
	"errors"
	"flag"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Options are the payment phase's flags (-pay and its company).
type Options struct {
	// Share of the first wave's winners who pay (0: no payment phase).
	Share float64
	// Skip are the strategies attacked without the payment phase.
	Skip []string
	// MaxWait is the longest payment window the phase waits out.
	MaxWait time.Duration
	// SecondWave is the second wave's buyers (0: 20 × the units that came back, bounded).
	SecondWave int
}

// Flags declares the flags of the payment phase in fs, and returns what finishes them once
// parsed.
func (p *Options) Flags(fs *flag.FlagSet) (finish func() error) {
	fs.Float64Var(&p.Share, "pay", 0, "the payment phase (issue #14), 0 to 1: after the attack this share of the winners pay and the others let the payment window run out; a second wave of new buyers then buys the units that came back, and its winners pay; audited at the end (0: no payment phase). The replicas need a payment window longer than the attack and short enough to wait out: SECKILL_PAYMENT_WINDOW=10s make up")
	paySkip := fs.String("pay-skip", "", "with -pay: strategies attacked without the payment phase, comma-separated")
	fs.DurationVar(&p.MaxWait, "pay-max-wait", 3*time.Minute, "with -pay: the longest payment window the run waits out, per strategy (make up's is 2m: it works, slowly); a longer one (the app's default is 10m) is a setup error")
	fs.IntVar(&p.SecondWave, "second-wave", 0, "with -pay: buyers of the second wave (default 20 × the units that came back, at most -buyers, at least 100)")
	return func() error {
		p.Skip = cli.SplitList(*paySkip)
		return nil
	}
}

// Validate checks the payment phase's flags.
func (p *Options) Validate() error {
	if !(p.Share >= 0 && p.Share <= 1) || p.SecondWave < 0 || p.MaxWait <= 0 {
		return errors.New("-pay must be between 0 and 1, -second-wave not negative, -pay-max-wait positive")
	}
	return nil
}
