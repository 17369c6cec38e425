package stock

import (
	"context"

	"github.com/seckill-go/seckill-go/internal/store"
)

// DisableFence makes the strategy write without claiming or checking the fence: the negative
// control showing that the fence, not luck, refuses a stale holder's write.
func (l *Locked) DisableFence() { l.unfenced = true }

// SetHooks installs functions that run in each transaction attempt of a batch: after its
// reservations are inserted and before its commit.
func (m *MySQL) SetHooks(afterReserve, beforeCommit func(ctx context.Context, tx *store.PurchaseTx) error) {
	m.afterReserve, m.beforeCommit = afterReserve, beforeCommit
}

// SetBeforeWrite installs a function that runs in each try of a deduction between its read and
// its versioned write.
func (v *Optimistic) SetBeforeWrite(f func(ctx context.Context)) { v.beforeWrite = f }
