package store

import (
	"context"

	"gorm.io/gorm"
)

// InTx is inTx, for the tests of its retries around a real transaction.
func (s *Store) InTx(ctx context.Context, op string, fn func(tx *gorm.DB) error) error {
	return s.inTx(ctx, op, fn)
}
