package main

import (
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/procstat"
)

// replicaCPUWindow reads the replicas' CPU time once warmup has passed, when a phase's measured
// window begins, and returns a function that returns what they used since (0 where it cannot be
// read: no pids, not Linux, or the phase ended within its warm-up).
func replicaCPUWindow(warmup time.Duration, pids []int) func() time.Duration {
	if len(pids) == 0 {
		return func() time.Duration { return 0 }
	}
	var (
		mu    sync.Mutex
		first time.Duration
		ok    bool
	)
	t := time.AfterFunc(warmup, func() {
		if c, err := procstat.CPU(pids); err == nil {
			mu.Lock()
			first, ok = c, true
			mu.Unlock()
		}
	})
	return func() time.Duration {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		now, err := procstat.CPU(pids)
		if !ok || err != nil {
			return 0
		}
		return now - first
	}
}
