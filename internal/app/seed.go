package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// seed creates the demo products that do not exist yet (matched by name), so that running it
// twice changes nothing.
func seed(ctx context.Context, log *slog.Logger, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	st, err := store.Open(ctx, log, cfg.MySQL.DSN, store.Options{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	now := time.Now()
	for _, np := range demoProducts(now, servedStrategies(cfg)) {
		p, err := st.ProductByName(ctx, np.Name)
		switch {
		case err == nil:
			log.Info("demo product exists", "id", p.ID, "name", p.Name, "stock", p.Stock)
			continue
		case !errors.Is(err, sale.ErrNotFound):
			return err
		}
		if err := np.Validate(); err != nil {
			return err
		}
		p, err = st.CreateProduct(ctx, np, now.UTC())
		if err != nil {
			return err
		}
		log.Info("demo product created", "id", p.ID, "name", p.Name, "strategy", p.Strategy,
			"stock", p.Stock, "sale_starts_at", p.SaleStartsAt)
	}
	return nil
}

// Demo sale parameters used by `seckill seed`.
const (
	demoStock         = 100
	demoLength        = 24 * time.Hour
	demoCountdownWait = 3 * time.Minute
)

// demoProducts returns the products `seckill seed` creates: one open sale per given strategy with
// demoStock units, plus one sale that opens demoCountdownWait after now (for the countdown). Every
// one admits its buyers straight to the purchase path (sale.AdmissionOpen): the demo shows the
// strategies race for the stock, which a waiting room would meter.
func demoProducts(now time.Time, strategies []sale.Strategy) []sale.NewProduct {
	now = now.UTC().Truncate(time.Second)
	var out []sale.NewProduct
	for i, st := range strategies {
		out = append(out, sale.NewProduct{
			Name:         fmt.Sprintf("Demo sale · %s strategy", st),
			PriceCents:   int64(999 + 1000*i),
			Stock:        demoStock,
			Strategy:     st,
			SaleStartsAt: now,
			SaleEndsAt:   now.Add(demoLength),
			PerUserLimit: 1,
			Listed:       true,
			Admission:    sale.AdmissionRule{Mode: sale.AdmissionOpen},
		})
	}
	if len(strategies) > 0 {
		out = append(out, sale.NewProduct{
			Name:         "Demo sale · opens soon",
			PriceCents:   4999,
			Stock:        demoStock,
			Strategy:     strategies[0],
			SaleStartsAt: now.Add(demoCountdownWait),
			SaleEndsAt:   now.Add(demoCountdownWait + demoLength),
			PerUserLimit: 1,
			Listed:       true,
			Admission:    sale.AdmissionRule{Mode: sale.AdmissionOpen},
		})
	}
	return out
}
