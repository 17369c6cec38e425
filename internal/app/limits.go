package app

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/ratelimit"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// The abuse limits, shared by every replica through Redis (ratelimit.Shared: leased locally, and
// a local limiter while Redis is away, never no limit). Their keys are named after the database,
// as the replicas of one deployment share it and tests each have their own.

// clientLimit is the per-client limit of purchases (SECKILL_RATE_PER_CLIENT); nil when off.
func (r *resources) clientLimit() (*ratelimit.Shared, error) {
	l := r.cfg.Limits
	return ratelimit.NewShared(r.rdb, ratelimit.Limit{PerSecond: l.PerClientRate, Burst: l.PerClientBurst}, ratelimit.Options{
		Name: r.cfg.DatabaseName() + ":client",
		Log:  r.log.With("component", "ratelimit", "limit", "client"),
	})
}

// userAdmission is sale.Admission over the per-user limit (SECKILL_RATE_PER_USER). It is keyed by
// user, not by product and user: a buyer's attempts are what is limited, and a key per product
// would give a bot one allowance per product on sale; the units a user may hold of one product
// are the product's per_user_limit, which the domain checks on its own.
type userAdmission struct{ limit *ratelimit.Shared }

var _ sale.Admission = userAdmission{}

func (a userAdmission) Admit(ctx context.Context, userID string) error {
	if ok, wait := a.limit.Allow(ctx, userID); !ok {
		return &sale.RateLimitedError{Wait: wait}
	}
	return nil
}

// admission is the per-user limit as the sale service asks it; nil when off.
func (r *resources) admission() (sale.Admission, error) {
	l := r.cfg.Limits
	s, err := ratelimit.NewShared(r.rdb, ratelimit.Limit{PerSecond: l.PerUserRate, Burst: l.PerUserBurst}, ratelimit.Options{
		Name: r.cfg.DatabaseName() + ":user",
		Log:  r.log.With("component", "ratelimit", "limit", "user"),
		// A buyer's first attempt on a replica is not asked of Redis: most buyers of a flash
		// sale try once, and a round trip each cost the accept path dearly (docs/api.md, Abuse limits).
		FirstLocal: true,
	})
	if s == nil || err != nil {
		return nil, err
	}
	return userAdmission{s}, nil
}
