package yardstick

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// CPUTimes is one reading of the machine's CPU time counters: the first line of /proc/stat, in
// clock ticks since boot, summed over every CPU.
type CPUTimes struct {
	User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal uint64
}

// ReadCPUTimes reads /proc/stat. Where there is none (not Linux), it returns an error and the
// reports leave the CPU column empty.
func ReadCPUTimes() (CPUTimes, error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return CPUTimes{}, fmt.Errorf("/proc/stat: %w", err)
	}
	return parseCPULine(line)
}

// parseCPULine parses /proc/stat's "cpu  user nice system idle iowait irq softirq steal …"; the
// fields after steal (guest time, already counted in user) are ignored, and kernels too old to
// have some of the eight count them as 0.
func parseCPULine(line string) (CPUTimes, error) {
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: first line %q is not the cpu line", line)
	}
	var v [8]uint64
	for i := range v {
		if i+1 >= len(fields) {
			break
		}
		n, err := strconv.ParseUint(fields[i+1], 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
		}
		v[i] = n
	}
	return CPUTimes{User: v[0], Nice: v[1], System: v[2], Idle: v[3], IOWait: v[4], IRQ: v[5], SoftIRQ: v[6], Steal: v[7]}, nil
}

func (c CPUTimes) total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// CPUShare is how the machine's CPU time went between two readings, as shares of it (0–1):
// Busy running anything (user, system, interrupts), Steal taken by the hypervisor for other
// guests while this one had work to run, IOWait and Idle with nothing to run.
type CPUShare struct {
	Busy   float64 `json:"busy"`
	Steal  float64 `json:"steal"`
	IOWait float64 `json:"iowait"`
	Idle   float64 `json:"idle"`
}

// ShareSince is how the CPU time between an earlier reading and c went.
func (c CPUTimes) ShareSince(earlier CPUTimes) (CPUShare, error) {
	total := c.total() - earlier.total()
	if c.total() < earlier.total() || total == 0 {
		return CPUShare{}, errors.New("cpu times: no time between the two readings")
	}
	share := func(now, then uint64) float64 { return float64(now-then) / float64(total) }
	return CPUShare{
		Busy:   share(c.User+c.Nice+c.System+c.IRQ+c.SoftIRQ, earlier.User+earlier.Nice+earlier.System+earlier.IRQ+earlier.SoftIRQ),
		Steal:  share(c.Steal, earlier.Steal),
		IOWait: share(c.IOWait, earlier.IOWait),
		Idle:   share(c.Idle, earlier.Idle),
	}, nil
}
