package store

import (
	"context"
	"database/sql"

	"gorm.io/gorm"
)

// MarkPublishedOnce is MarkPublished without its retry on a lock conflict.
func (s *Store) MarkPublishedOnce(ctx context.Context, ids []int64) error {
	return s.markOutboxOnce(ctx, reservationsOutbox, ids)
}

// ConfirmOrdersOnce is ConfirmOrders without its retry on a lock conflict.
func (s *Store) ConfirmOrdersOnce(ctx context.Context, orderIDs []string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		n, err = confirmOrders(tx, orderIDs, s.window)
		return err
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	return n, err
}

// Classify is classify, for the table test of what MySQL refuses for its values.
var Classify = classify
