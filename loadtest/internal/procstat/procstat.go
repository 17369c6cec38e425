// Package procstat reads what processes use from Linux's /proc: their CPU time and their
// resident memory. The bench and make scale weigh the replicas with it.
package procstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times (USER_HZ: 100 on every Linux the
// project runs on).
const clockTicks = 100

// CPU returns the CPU time, user and system, that the processes pids have used so far.
func CPU(pids []int) (time.Duration, error) {
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

// RSS returns the resident memory of the processes pids, in bytes (VmRSS of /proc/<pid>/status).
func RSS(pids []int) (int64, error) {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		kb, err := vmRSS(b)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status: %w", pid, err)
		}
		sum += kb << 10
	}
	return sum, nil
}

// vmRSS reads the VmRSS line of a /proc/<pid>/status, in kB.
func vmRSS(status []byte) (int64, error) {
	s := bufio.NewScanner(bytes.NewReader(status))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS line")
}
