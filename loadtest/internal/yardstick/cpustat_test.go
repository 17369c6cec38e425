package yardstick

import (
	"math"
	"testing"
)

func TestParseCPULine(t *testing.T) {
	got, err := parseCPULine("cpu  4705 150 1120 16250 520 0 38 2100 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	want := CPUTimes{User: 4705, Nice: 150, System: 1120, Idle: 16250, IOWait: 520, IRQ: 0, SoftIRQ: 38, Steal: 2100}
	if got != want {
		t.Fatalf("parseCPULine = %+v, want %+v", got, want)
	}
	if old, err := parseCPULine("cpu 1 2 3 4"); err != nil || old != (CPUTimes{User: 1, Nice: 2, System: 3, Idle: 4}) {
		t.Fatalf("a kernel without iowait..steal: %+v, %v", old, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5", "cpu 1 2 x 4 5", "intr 1 2 3 4"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("parseCPULine(%q): no error", bad)
		}
	}
}

func TestShareSince(t *testing.T) {
	a := CPUTimes{User: 100, System: 50, Idle: 1000, Steal: 10}
	b := CPUTimes{User: 160, System: 70, Idle: 1060, IOWait: 10, SoftIRQ: 10, Steal: 50}
	s, err := b.ShareSince(a)
	if err != nil {
		t.Fatal(err)
	}
	// 200 ticks in all: busy 60+20+10, steal 40, iowait 10, idle 60.
	for name, c := range map[string][2]float64{"busy": {s.Busy, 0.45}, "steal": {s.Steal, 0.20}, "iowait": {s.IOWait, 0.05}, "idle": {s.Idle, 0.30}} {
		if math.Abs(c[0]-c[1]) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, c[0], c[1])
		}
	}
	if _, err := a.ShareSince(a); err == nil {
		t.Error("no time between two equal readings: no error")
	}
	if _, err := a.ShareSince(b); err == nil {
		t.Error("readings in the wrong order: no error")
	}
}

func TestReadCPUTimes(t *testing.T) {
	c, err := ReadCPUTimes()
	if err != nil {
		t.Skipf("no /proc/stat here: %v", err)
	}
	if c.total() == 0 {
		t.Fatalf("ReadCPUTimes = %+v: no time at all", c)
	}
}
