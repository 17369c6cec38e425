package yardstick

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every platform Go
// runs Linux on.
const clockTicks = 100

// ProcessTimes is one reading of the CPU time of every process on the machine (/proc/<pid>/stat),
// for ProgramsSince: where a measured window's CPU went, the load client's share among the rest.
type ProcessTimes map[int]processTime

type processTime struct {
	comm  string
	ticks uint64 // utime + stime
}

// ReadProcessTimes reads every process's CPU time; processes that vanish while it reads are
// skipped, and where there is no /proc (not Linux) the reading is empty.
func ReadProcessTimes() ProcessTimes {
	out := ProcessTimes{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, comm, ticks, ok := parseProcStat(data)
		if ok {
			out[pid] = processTime{comm: comm, ticks: ticks}
		}
	}
	return out
}

// parseProcStat reads pid, comm and utime + stime from a /proc/<pid>/stat line. comm is in
// parentheses and may hold spaces and parentheses itself: the fields resume after the last ')'.
func parseProcStat(data []byte) (pid int, comm string, ticks uint64, ok bool) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 1 || end < open {
		return 0, "", 0, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(data[:open])))
	if err != nil {
		return 0, "", 0, false
	}
	fields := bytes.Fields(data[end+1:])
	// After comm: state(0) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime(11) stime(12)
	if len(fields) < 13 {
		return 0, "", 0, false
	}
	utime, err1 := strconv.ParseUint(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(fields[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, "", 0, false
	}
	return pid, string(data[open+1 : end]), utime + stime, true
}

// ProgramCPU is the CPU a program's processes used in a window, in cores (1 = one CPU busy
// the whole window).
type ProgramCPU struct {
	Program string  `json:"program"`
	Cores   float64 `json:"cores"`
}

// ProgramsSince groups the CPU time used between an earlier reading and p, d apart, by program,
// the largest first; self (a pid) is named "<comm> (this process)". A process born after the
// earlier reading counts whole; one that ended before p is lost.
func (p ProcessTimes) ProgramsSince(earlier ProcessTimes, d time.Duration, self int) []ProgramCPU {
	if d <= 0 {
		return nil
	}
	by := map[string]uint64{}
	for pid, now := range p {
		before := earlier[pid]
		if before.comm != now.comm || before.ticks > now.ticks {
			before = processTime{} // a new process, perhaps on a reused pid
		}
		name := now.comm
		if pid == self {
			name += " (this process)"
		}
		by[name] += now.ticks - before.ticks
	}
	var out []ProgramCPU
	for name, ticks := range by {
		if ticks > 0 {
			out = append(out, ProgramCPU{Program: name, Cores: float64(ticks) / clockTicks / d.Seconds()})
		}
	}
	slices.SortFunc(out, func(a, b ProgramCPU) int {
		if a.Cores != b.Cores {
			if a.Cores > b.Cores {
				return -1
			}
			return 1
		}
		return bytes.Compare([]byte(a.Program), []byte(b.Program))
	})
	return out
}
