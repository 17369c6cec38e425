package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// migrate creates the database when it is missing and applies every pending migration.
func migrate(ctx context.Context, log *slog.Logger, cfg *config.Config) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := store.CreateDatabase(ctx, cfg.MySQL.DSN); err != nil {
		return err
	}
	st, err := store.Open(ctx, log, cfg.MySQL.DSN, store.Options{MaxOpenConns: 2})
	if err != nil {
		return err
	}
	defer st.Close()
	return store.Migrate(ctx, log, st.DB())
}

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
	for _, np := range sale.DemoProducts(now, enabledStrategies(cfg)) {
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
