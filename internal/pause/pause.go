// Package pause waits for a while unless a context ends first: the one sleep of the loops that
// retry, poll or back off. It imports nothing but the standard library, so that any package of
// the module, a domain package included, may use it; it must never learn about anything else.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends: then it returns ctx's error, and nil after the full d. A d of
// zero or less does not wait, and returns ctx's error if ctx has ended already.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
