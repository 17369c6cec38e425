package attack

import (
	"fmt"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// ViewersReport is the crowd that watched one attack, and MySQL during it.
type ViewersReport struct {
	viewers.Summary
	// Round is the attack's round of -viewer-rounds (1 and up; 0 with one round).
	Round int `json:"round,omitempty"`
	// AcceptedVsNone is the attack's accepted/s ÷ the same strategy's attack without viewers in
	// this run (with rounds: the median of those attacks; 0 when none ran).
	AcceptedVsNone float64 `json:"accepted_vs_no_viewers"`
	// MySQL is the server's statement rate during the attack (nil when it could not be read).
	MySQL *MySQLRates `json:"mysql,omitempty"`
	// CPU is how the machine's CPU went during the attack, and Programs which programs used it
	// (in cores, the largest few): the viewers' own client (this process) among them, for the
	// load client shares the two cores with the servers it measures.
	CPU      *yardstick.CPUShare    `json:"cpu,omitempty"`
	Programs []yardstick.ProgramCPU `json:"programs,omitempty"`
}

// Label names an attack: its strategy, and its crowd when it had one.
func (sr *StrategyReport) Label() string {
	v := sr.Viewers
	l := sr.Strategy
	if v != nil && v.Viewers > 0 {
		l += fmt.Sprintf(" · %s %s viewers", appapi.Thousands(v.Viewers), v.Mode)
	}
	if v != nil && v.Round > 0 {
		l += fmt.Sprintf(" · round %d", v.Round)
	}
	return l
}

// ---------------------------------------------------------------- MySQL's own counters

// MySQLRates are MySQL statements per second over a window, from SHOW GLOBAL STATUS: server-wide,
// so whatever else uses the server counts too.
type MySQLRates struct {
	Seconds float64 `json:"seconds"`
	// ReadsPerSec are Com_select; WritesPerSec the statements that change rows (writeCounters).
	ReadsPerSec  float64 `json:"reads_per_sec"`
	WritesPerSec float64 `json:"writes_per_sec"`
	// Deltas are the counters' growth over the window.
	Deltas map[string]int64 `json:"deltas"`
}
