package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Report is one run, written as Markdown (stdout and results/buckets-<run>.md) and JSON
// (results/buckets-<run>.json).
type Report struct {
	RunID     string    `json:"run_id"`
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`
	Machine   string    `json:"machine"`
	Commit    string    `json:"commit"`
	// LoadAverage is /proc/loadavg's 1, 5 and 15 minute figures at the start.
	LoadAverage string `json:"load_average"`
	// Servers describe each store measured and its durability settings.
	Servers    []string        `json:"servers"`
	Settings   Settings        `json:"settings"`
	Throughput []ThroughputRow `json:"throughput"`
	Tail       []TailRow       `json:"tail"`
	// Aborted is the error that ended the run early, if one did; the rows are those measured.
	Aborted string `json:"aborted,omitempty"`
}

// Settings are the knobs of the run.
type Settings struct {
	Backends   []string `json:"backends"`
	K          []int    `json:"k"`
	Goroutines int      `json:"goroutines"`
	Rounds     int      `json:"rounds"`
	Warmup     string   `json:"warmup"`
	Duration   string   `json:"duration"`
	TailK      int      `json:"tail_k"`
	Units      int      `json:"units"`
	Buyers     int      `json:"buyers"`
	Workers    int      `json:"workers"`
	Replicas   int      `json:"replicas"`
	Skew       float64  `json:"skew"`
	Seed       uint64   `json:"seed"`
	Policies   []string `json:"policies"`
	Arrivals   []string `json:"arrivals"`
	Database   string   `json:"database"`
	Prefix     string   `json:"prefix"`
}

// problems lists every tail run's broken invariants.
func (r *Report) problems() []string {
	var out []string
	for _, t := range r.Tail {
		for _, p := range t.Problems {
			out = append(out, fmt.Sprintf("%s %s %s: %s", t.Backend, t.Arrival, t.Policy, p))
		}
	}
	return out
}

// computeRatios divides every throughput row by its backend's K=1 row.
func computeRatios(rows []ThroughputRow) {
	one := map[string]float64{}
	for _, r := range rows {
		if r.K == 1 {
			one[r.Backend] = r.UnitsPerS
		}
	}
	for i := range rows {
		if y := one[rows[i].Backend]; y > 0 {
			rows[i].Ratio = rows[i].UnitsPerS / y
		}
	}
}

// markdown renders the report.
func markdown(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## seckill-go buckets %s\n\n", r.RunID)
	fmt.Fprintf(&b, "%s · %s · commit %s · run took %s · load average at the start %s\n\n", r.Machine, r.StartedAt.UTC().Format("2006-01-02 15:04 MST"), r.Commit, (time.Duration(r.Seconds) * time.Second).String(), r.LoadAverage)
	if len(r.Servers) > 0 {
		fmt.Fprintf(&b, "%s\n\n", strings.Join(r.Servers, " · "))
	}
	if r.Aborted != "" {
		fmt.Fprintf(&b, "**Run aborted: %s** — the rows below are those measured before.\n\n", strings.Join(strings.Fields(r.Aborted), " "))
	}
	if len(r.Throughput) > 0 {
		writeThroughput(&b, r)
	}
	if len(r.Tail) > 0 {
		writeTail(&b, r)
	}
	return b.String()
}

// writeThroughput renders the table of throughput by K, and how its MySQL counters are read.
func writeThroughput(b *strings.Builder, r *Report) {
	s := r.Settings
	fmt.Fprintf(b, "### Throughput by K\n\nOne sale that never sells out, its stock split in K buckets; %d goroutines, each unit from a bucket picked at random; "+
		"each round the median of the quarter-second rates over %s after %s of warm-up, the figure the mean of %d rounds (every K in each, ascending then descending). MySQL: `%s` on the bucket's row, autocommit (K=1 is R). "+
		"Redis: a Lua GET-and-DECR-if-positive on the bucket's key, each key its own hash tag (masters: the cluster masters holding the K keys).\n\n", s.Goroutines, s.Duration, s.Warmup, s.Rounds, takeStatement)
	b.WriteString("| store | K | masters | units/s | rounds | × K=1 | fsyncs per unit | row-lock waits per unit |\n|---|---:|---:|---:|---|---:|---:|---:|\n")
	for _, t := range r.Throughput {
		fs, lw, masters := "—", "—", "—"
		if t.Masters > 0 {
			masters = strconv.Itoa(t.Masters)
		}
		if t.Backend == "mysql" {
			fs, lw = fmt.Sprintf("%.2f", t.FsyncsPerUnit), fmt.Sprintf("%.2f", t.LockWaitsPerUnit)
		}
		rounds := make([]string, len(t.Rounds))
		for i, x := range t.Rounds {
			rounds[i] = appapi.Thousands(int(x + 0.5))
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %.2f | %s | %s |\n", t.Backend, t.K, masters, appapi.Thousands(int(t.UnitsPerS+0.5)), strings.Join(rounds, " · "), t.Ratio, fs, lw)
	}
	b.WriteString("\nfsyncs and row-lock waits are the server's Innodb_data_fsyncs and Innodb_row_lock_waits over the measurement, warm-up included, " +
		"divided by the units taken then: server-wide counters, so anyone else's work on the server counts too.\n\n")
}

// writeTail renders the table of the tail runs, the demand and what the pinned runs left, and
// how to read them.
func writeTail(b *strings.Builder, r *Report) {
	s := r.Settings
	fmt.Fprintf(b, "### The tail\n\n%s units in %d buckets sold to %s buyers (one unit each), %d in flight; "+
		"skewed: home bucket b drawn with weight 1/(b+1)^%.2g (seed %d); summary: empty flags kept per replica, %d replicas.\n\n",
		appapi.Thousands(s.Units), s.TailK, appapi.Thousands(s.Buyers), s.Workers, s.Skew, s.Seed, s.Replicas)
	b.WriteString("| store | arrival | policy | sold | left unsold | refused | false sold-outs (at least) | calls | extra calls of winners | calls per refused buyer | max calls, one buyer | refused from memory | moves | seconds |\n" +
		"|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, t := range r.Tail {
		sold := appapi.Thousands(t.Sold)
		if len(t.Problems) > 0 {
			sold = "**" + sold + "** (" + strings.Join(t.Problems, "; ") + ")"
		}
		moves := "—"
		if t.Policy == policyRebalance {
			moves = appapi.Thousands(t.Moves)
			if t.GaveUp > 0 {
				moves += fmt.Sprintf(" (%d gave up)", t.GaveUp)
			}
		}
		perRefused := "—"
		if t.Refused > 0 {
			perRefused = fmt.Sprintf("%.2f", float64(t.CallsRefused)/float64(t.Refused))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s | %s | %.1f |\n",
			t.Backend, t.Arrival, t.Policy, sold, appapi.Thousands(int(t.Undersell)), appapi.Thousands(t.Refused), appapi.Thousands(t.FalseSoldOuts),
			appapi.Thousands(t.Calls), appapi.Thousands(t.CallsWinners-t.Sold), perRefused, t.MaxCalls,
			appapi.Thousands(t.RefusedFromMemory), moves, t.Seconds)
	}
	b.WriteString("\nBuyers per home bucket, and the units each bucket held at the end of the pinned runs:\n\n")
	seen := map[string]bool{}
	for _, t := range r.Tail {
		if !seen[t.Arrival] {
			seen[t.Arrival] = true
			fmt.Fprintf(b, "- %s demand: %s (each bucket starts with %s units)\n", t.Arrival, joinInts(t.Demand), appapi.Thousands(t.Units/t.K))
		}
	}
	for _, t := range r.Tail {
		if t.Policy == policyPinned {
			fmt.Fprintf(b, "- %s %s pinned, left: %s\n", t.Backend, t.Arrival, joinInt64s(t.LeftByBucket))
		}
	}
	b.WriteString(`
How to read it: sold must equal the units minus what is left, and never exceed the units (checked:
a run that breaks it is shown in bold and the command exits 1). Left unsold is the undersell: units
still in some bucket when every buyer has been answered. A false sold-out is a buyer refused while a
unit was still in some bucket; counted only where provable (refused before the last winner's call
began, or any refusal when units were left at the end), so a lower bound. Calls are the store
calls: the extra calls of winners are those beyond their one take: takes on other buckets, and for
rebalance the reads of every bucket (one query in MySQL, one GET per bucket in Redis, whose
buckets would sit in different cluster slots) and the moves (one transaction in MySQL, two
scripts in Redis).
`)
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = appapi.Thousands(x)
	}
	return strings.Join(parts, " · ")
}

func joinInt64s(xs []int64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(parts, " · ")
}

// writeReport writes results/buckets-<run>.md and .json and returns their paths.
func writeReport(dir string, r *Report) ([]string, error) {
	return cli.WriteReport(dir, "buckets-"+r.RunID, r, cli.Text{Ext: ".md", Body: markdown(r)})
}
