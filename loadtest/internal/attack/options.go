package attack

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Options are what every mode shares: the attack of each strategy and its report.
type Options struct {
	Targets      []string
	Strategies   []string
	Stock        int
	Buyers       int
	Attempts     int
	Rate         int
	Workers      int
	MaxDuration  time.Duration
	DrainTimeout time.Duration
	AdminURL     string
	AdminToken   string
	MysqlDSN     string
	OutDir       string
	BaselineFor  time.Duration
	Quiet        bool
	// signer signs each buyer's token when the replicas verify buyer tokens; nil: user ids are
	// claims, as the app's default is.
	signer *buyer.Signer
	// tokenTTL is how long a buyer's token is valid: the whole run.
	tokenTTL time.Duration
	// BurstEvery paces the attack in bursts of that period instead of evenly (0: evenly): the
	// fault run sets it for the unsafe control, see burstPacer.
	BurstEvery time.Duration
	// During runs beside each attack from its start and returns what it did (nil: nothing):
	// the load test's -chaos kill.
	During func(ctx context.Context, start time.Time, say func(string, ...any)) []Event
}

// AuditOptions are the database audit alone (-audit-only), as make k6 uses it.
type AuditOptions struct {
	Options
	productID int64
	k6Summary string
}

// buyerToken returns user's token, or "" when the replicas do not verify buyers. A user id of the
// plan is always valid, so signing cannot fail.
func (o *Options) buyerToken(user string) string {
	if o.signer == nil {
		return ""
	}
	tok, err := o.signer.Token(user, o.tokenTTL)
	if err != nil {
		panic(fmt.Sprintf("loadtest: sign %q: %v", user, err))
	}
	return tok
}

// ParseAudit reads the command line of the database audit alone (-audit-only).
func ParseAudit(args []string, getenv func(string) string, stderr io.Writer) (*AuditOptions, error) {
	o := &AuditOptions{}
	fs := cli.NewFlagSet("loadtest", stderr)
	finish := o.AttackFlags(fs, getenv)
	fs.Bool("audit-only", true, "only audit -product-id (drain, then check every invariant)")
	fs.Int64Var(&o.productID, "product-id", 0, "product to audit with -audit-only")
	fs.StringVar(&o.k6Summary, "k6-summary", "", "with -audit-only: a k6 summary JSON whose seckill_accepted counter must match")
	if err := cli.ParseFlags(fs, args, finish); err != nil {
		return nil, err
	}
	if o.productID <= 0 {
		return nil, errors.New("-audit-only needs -product-id")
	}
	return o, nil
}

// DefaultBuyers sets -buyers' default, 20 × -stock, when it was not given.
func (o *Options) DefaultBuyers() {
	if o.Buyers == 0 {
		o.Buyers = 20 * o.Stock
	}
}

// AttackFlags declares the flags of the attack and its report, which every mode shares.
func (o *Options) AttackFlags(fs *flag.FlagSet, getenv func(string) string) (finish func() error) {
	targets := fs.String("targets", "http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083", "replica base URLs, comma-separated; buyers are spread over them round-robin")
	strategies := fs.String("strategies", sale.JoinStrategies(sale.StrategiesWhere(sale.OwnSafe), ","), "strategies to attack, in order; add none for the negative control")
	fs.IntVar(&o.Stock, "stock", 500, "units on sale per strategy")
	fs.IntVar(&o.Buyers, "buyers", 0, "distinct buyers per strategy (default 20 × stock)")
	fs.IntVar(&o.Attempts, "attempts", 3, "requests per buyer: 1 first try, 2 + a retry with the same Idempotency-Key, 3 + a second purchase with a new key")
	fs.IntVar(&o.Rate, "rate", 0, "requests per second; 0 sends as fast as -workers allow")
	fs.IntVar(&o.Workers, "workers", 64, "most requests in flight")
	fs.DurationVar(&o.MaxDuration, "duration", 2*time.Minute, "longest attack per strategy")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 2*time.Minute, "longest wait for the order queue to drain")
	fs.StringVar(&o.AdminURL, "admin", "", "base URL of the admin API (default: the first of -targets; a public load balancer may refuse it)")
	fs.StringVar(&o.AdminToken, "admin-token", cli.EnvOr(getenv, "SECKILL_ADMIN_TOKEN", "dev-admin-token"), "admin bearer token")
	fs.StringVar(&o.MysqlDSN, "mysql-dsn", cli.EnvOr(getenv, "SECKILL_MYSQL_DSN", "root:@tcp(127.0.0.1:3306)/seckill"), "DSN of the app's database, for the audit; R runs on the same server, in database "+yardstick.DefaultDatabase)
	fs.StringVar(&o.OutDir, "out", "loadtest/results", "where the report files go (empty: none)")
	fs.DurationVar(&o.BaselineFor, "baseline", 2*time.Second, "how long each yardstick (R, bare gin) is measured, after 0.5 s of warm-up (0: skip them, and the ratios)")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress lines")
	buyerKey := fs.String("buyer-jwt-key", getenv("SECKILL_BUYER_JWT_HMAC_KEY"), "sign each buyer's token with this key, for replicas that verify buyer tokens (SECKILL_BUYER_JWT_HMAC_KEY and its _ISSUER and _AUDIENCE, as the replicas take them; empty: none, user ids are claims)")
	return func() error {
		o.Targets = cli.SplitList(*targets)
		if *buyerKey != "" {
			if err := o.newSigner(*buyerKey, getenv); err != nil {
				return err
			}
		}
		o.Strategies = cli.SplitList(*strategies)
		if slices.Equal(o.Strategies, []string{"all"}) {
			o.Strategies = o.Strategies[:0]
			for _, st := range sale.Strategies {
				o.Strategies = append(o.Strategies, string(st))
			}
		}
		if o.AdminURL == "" && len(o.Targets) > 0 {
			o.AdminURL = o.Targets[0]
		}
		return nil
	}
}

// newSigner sets the signer of the buyers' tokens, with key and the replicas' other
// SECKILL_BUYER_JWT_* settings, and a token life long enough for the whole run.
func (o *Options) newSigner(key string, getenv func(string) string) error {
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
	o.signer, o.tokenTTL = s, 2*o.MaxDuration+o.DrainTimeout+10*time.Minute
	// The replicas refuse a token that claims a longer life than their SECKILL_BUYER_JWT_MAX_TTL:
	// better said now than as 401s halfway through the run.
	if o.tokenTTL > c.MaxTTL {
		return fmt.Errorf("-duration and -drain-timeout need buyer tokens valid for %v, over SECKILL_BUYER_JWT_MAX_TTL (%v)", o.tokenTTL, c.MaxTTL)
	}
	return nil
}

// Validate checks what every mode needs of the attack.
func (o *Options) Validate() error {
	switch {
	case len(o.Targets) == 0 || len(o.Strategies) == 0:
		return errors.New("need at least one target and one strategy")
	case o.Stock < 1 || o.Buyers < 1 || o.Attempts < 1 || o.Attempts > 3 || o.Workers < 1 || o.Rate < 0:
		return errors.New("-stock, -buyers and -workers must be positive, -attempts 1 to 3, -rate not negative")
	}
	return nil
}
