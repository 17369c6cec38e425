package procstat

import (
	"os"
	"testing"
)

// TestStatTicks: utime + stime of a /proc/<pid>/stat line, whose command name may hold spaces
// and parentheses.
func TestStatTicks(t *testing.T) {
	const line = "4242 (seckill (a) b) S 1 4242 4242 0 -1 4194560 1289 0 0 0 731 269 0 0 20 0 9 0 5151 1450000000 4000 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0"
	if got, err := statTicks(line); err != nil || got != 731+269 {
		t.Fatalf("statTicks = %d, %v; want 1000", got, err)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 4242 4242 0 -1 4194560 1289 0 0 0 seven 269 0"} {
		if _, err := statTicks(bad); err == nil {
			t.Errorf("statTicks(%q): no error", bad)
		}
	}
	if d, err := CPU([]int{os.Getpid()}); err != nil || d < 0 {
		t.Errorf("CPU of this process = %v, %v", d, err)
	}
}

func TestRSS(t *testing.T) {
	if got, err := vmRSS([]byte("Name:\tseckill\nVmPeak:\t  9000 kB\nVmRSS:\t   4096 kB\nThreads:\t9\n")); err != nil || got != 4096 {
		t.Fatalf("vmRSS = %d, %v; want 4096", got, err)
	}
	if _, err := vmRSS([]byte("Name:\tx\n")); err == nil {
		t.Error("vmRSS of a status without VmRSS: no error")
	}
	if n, err := RSS([]int{os.Getpid()}); err != nil || n <= 0 {
		t.Errorf("RSS of this process = %d, %v", n, err)
	}
}
