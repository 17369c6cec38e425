package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ: 100 on every Linux the
// project runs on).
const clockTicks = 100

// procCPU returns the CPU time, user and system, that the processes pids have used so far.
func procCPU(pids []int) (time.Duration, error) {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		t, err := statTicks(string(b))
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// statTicks reads utime + stime from a /proc/<pid>/stat line: the 14th and 15th fields, counted
// after the command's name, which is in parentheses and may hold spaces.
func statTicks(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:]) // f[0] is the 3rd field (the state)
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the name", len(f))
	}
	var sum int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

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
		if c, err := procCPU(pids); err == nil {
			mu.Lock()
			first, ok = c, true
			mu.Unlock()
		}
	})
	return func() time.Duration {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		now, err := procCPU(pids)
		if !ok || err != nil {
			return 0
		}
		return now - first
	}
}
