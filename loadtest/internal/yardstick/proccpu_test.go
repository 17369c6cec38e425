package yardstick

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseProcStat(t *testing.T) {
	line := []byte("4242 (web (test) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0 123 0 0\n")
	pid, comm, ticks, ok := parseProcStat(line)
	if !ok || pid != 4242 || comm != "web (test) x" || ticks != 325 {
		t.Errorf("got %d %q %d %v; want 4242, \"web (test) x\", 325", pid, comm, ticks, ok)
	}
	if _, _, _, ok := parseProcStat([]byte("12 (x) S 1 2")); ok {
		t.Error("a short line parsed")
	}
}

func TestProgramsSince(t *testing.T) {
	before := ProcessTimes{1: {"seckill", 100}, 2: {"seckill", 50}, 3: {"loadtest", 10}, 4: {"gone", 99}, 5: {"old", 500}}
	after := ProcessTimes{1: {"seckill", 300}, 2: {"seckill", 150}, 3: {"loadtest", 110}, 5: {"new", 40}, 6: {"idle", 0}}
	got := after.ProgramsSince(before, 2*time.Second, 3)
	want := []ProgramCPU{{"seckill", 1.5}, {"loadtest (this process)", 0.5}, {"new", 0.2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("programs (-want +got):\n%s", diff)
	}
}

func TestReadProcessTimes(t *testing.T) {
	p := ReadProcessTimes()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, ok := p[os.Getpid()]; !ok {
		t.Errorf("this process (%d) is not in the reading of %d processes", os.Getpid(), len(p))
	}
}
