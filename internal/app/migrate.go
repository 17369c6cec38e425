package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
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
