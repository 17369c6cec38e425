package challenge

import (
	"context"
	"sync"
	"time"
)

// MemorySpent is a replay cache in this process's memory. It is right for one replica only:
// behind a load balancer that spreads the joins over N replicas, a solution would pass once on
// each of them, N joins for one proof of work. The app therefore keeps spent challenges in Redis
// (redisspent), shared by every replica; MemorySpent serves the tests and the benchmarks that
// measure the proof of work without the round trip.
type MemorySpent struct {
	now func() time.Time

	mu    sync.Mutex
	until map[string]time.Time
	// sweepAt is the size at which the expired entries are next swept out: twice the size left
	// after the last sweep, so that sweeping costs O(1) per Spend amortized.
	sweepAt int
}

var _ Spent = (*MemorySpent)(nil)

// NewMemorySpent returns an empty cache on now's clock (nil: time.Now).
func NewMemorySpent(now func() time.Time) *MemorySpent {
	if now == nil {
		now = time.Now
	}
	return &MemorySpent{now: now, until: map[string]time.Time{}, sweepAt: 1024}
}

// Spend records id until the given time; false if it is recorded already and has not expired.
func (m *MemorySpent) Spend(_ context.Context, id string, until time.Time) (bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if u, ok := m.until[id]; ok && now.Before(u) {
		return false, nil
	}
	m.until[id] = until
	if len(m.until) >= m.sweepAt {
		for k, u := range m.until {
			if !now.Before(u) {
				delete(m.until, k)
			}
		}
		m.sweepAt = max(1024, 2*len(m.until))
	}
	return true, nil
}

// Len is the number of entries held, expired ones not yet swept included.
func (m *MemorySpent) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.until)
}
