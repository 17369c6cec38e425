package httpapi

import (
	"net/http"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PlantedSlowdown wraps h so that every request costs the process fraction more CPU than it
// otherwise would: after each request it spins for fraction × the process's recent CPU time
// per request, its own spinning left out. It has one purpose: a known slowdown that `make
// bench-compare` must tell apart from the machine's noise (SECKILL_PLANTED_SLOWDOWN, issue 34);
// nothing else should set it.
//
// The cost per request is re-estimated at most every 200 ms from the process's CPU time
// (getrusage) and request count since the last estimate. A spin is timed by its thread's CPU
// clock, the goroutine locked to that thread meanwhile: timed by the wall clock, a spin that the
// scheduler preempts on a busy machine would spend far less CPU than planned.
func PlantedSlowdown(h http.Handler, fraction float64) http.Handler {
	if fraction <= 0 {
		return h
	}
	s := &slowdown{next: h, fraction: fraction}
	s.last.Store(&cpuSample{at: time.Now(), cpu: processCPU()})
	return s
}

type slowdown struct {
	next     http.Handler
	fraction float64
	requests atomic.Int64 // requests served
	spun     atomic.Int64 // nanoseconds spent spinning
	perReq   atomic.Int64 // the latest estimate of CPU nanoseconds per request, spinning left out
	last     atomic.Pointer[cpuSample]
}

// cpuSample is the process's state at the last estimate.
type cpuSample struct {
	at                  time.Time
	cpu, spun, requests int64
}

func (s *slowdown) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.next.ServeHTTP(w, r)
	n := s.requests.Add(1)
	s.estimate(n)
	d := time.Duration(s.fraction * float64(s.perReq.Load()))
	if d <= 0 {
		return
	}
	s.spun.Add(int64(Spin(d)))
}

// Spin spends d of CPU time on the calling goroutine, locked to its thread meanwhile, and
// returns the CPU time it spent (d or a little more; 0 if the thread's CPU clock cannot be read).
func Spin(d time.Duration) time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := threadCPU()
	if start < 0 {
		return 0
	}
	for {
		if spent := threadCPU() - start; spent >= d {
			return spent
		}
	}
}

// threadCPU returns the CPU time the calling thread has used, or -1 if it cannot be read.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return -1
	}
	return time.Duration(ts.Nano())
}

// estimate refreshes perReq when the last estimate is 200 ms old; one request does it, the
// others go on with the estimate there is.
func (s *slowdown) estimate(requests int64) {
	prev := s.last.Load()
	now := time.Now()
	if now.Sub(prev.at) < 200*time.Millisecond {
		return
	}
	cur := &cpuSample{at: now, cpu: processCPU(), spun: s.spun.Load(), requests: requests}
	if !s.last.CompareAndSwap(prev, cur) {
		return
	}
	served := cur.requests - prev.requests
	work := (cur.cpu - prev.cpu) - (cur.spun - prev.spun)
	if served > 0 && work > 0 {
		s.perReq.Store(work / served)
	}
}

// processCPU returns the CPU time (user and system) this process has used, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
