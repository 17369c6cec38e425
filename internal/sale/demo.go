package sale

import (
	"fmt"
	"time"
)

// Demo sale parameters used by `seckill seed`.
const (
	DemoStock         = 100
	DemoLength        = 24 * time.Hour
	DemoCountdownWait = 3 * time.Minute
)

// DemoProducts returns the products `seckill seed` creates: one open sale per given strategy with
// DemoStock units, plus one sale that opens DemoCountdownWait after now (for the countdown).
func DemoProducts(now time.Time, strategies []Strategy) []NewProduct {
	now = now.UTC().Truncate(time.Second)
	var out []NewProduct
	for i, st := range strategies {
		out = append(out, NewProduct{
			Name:         fmt.Sprintf("Demo sale · %s strategy", st),
			PriceCents:   int64(999 + 1000*i),
			Stock:        DemoStock,
			Strategy:     st,
			SaleStartsAt: now,
			SaleEndsAt:   now.Add(DemoLength),
			PerUserLimit: 1,
			Listed:       true,
		})
	}
	if len(strategies) > 0 {
		out = append(out, NewProduct{
			Name:         "Demo sale · opens soon",
			PriceCents:   4999,
			Stock:        DemoStock,
			Strategy:     strategies[0],
			SaleStartsAt: now.Add(DemoCountdownWait),
			SaleEndsAt:   now.Add(DemoCountdownWait + DemoLength),
			PerUserLimit: 1,
			Listed:       true,
		})
	}
	return out
}
