package yardstick

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where a run happened, for the header of a report: host, CPUs, OS and Go.
func Machine() string {
	host, _ := os.Hostname()
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s: %d × %s, %s/%s, %s", host, runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
