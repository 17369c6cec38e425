package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/procstat"
)

// The replicas sweep: the stack of make up restarted with each count of -replicas behind its
// nginx (scripts/down.sh, then scripts/up.sh with SECKILL_REPLICAS), and at each, the replicas'
// idle memory and CPU, then a sale of -buyer-stock units bought by -replica-buyers buyers per
// strategy, judged and audited like the buyers sweep, with the replicas' CPU per 1,000 requests.
// On one machine of two cores the replicas share the same cores (each gets GOMAXPROCS = cores ÷
// replicas, as a container's CPU limit would give it): what the sweep shows is what a replica
// costs, not a gain from scaling out. The stack is left with the count it had before.

// replicasOptions are the replicas sweep's flags.
type replicasOptions struct {
	counts []int
	buyers int
	idle   time.Duration
	pidDir string
	// scripts is the directory of up.sh and down.sh.
	scripts string
}

// replicasReport is the sweep: a point per count of replicas.
type replicasReport struct {
	Stock  int             `json:"stock"`
	Buyers int             `json:"buyers"`
	IdleS  float64         `json:"idle_s"`
	Points []replicasPoint `json:"points"`
}

// replicasPoint is the stack with Replicas replicas.
type replicasPoint struct {
	Replicas int     `json:"replicas"`
	Idle     idleUse `json:"idle"`
	// Sales are the point's sales, one per strategy, with the replicas' CPU over each.
	Sales []replicaSale `json:"sales"`
}

// replicaSale is one strategy's sale at a point.
type replicaSale struct {
	buyersPoint
	// CPUMSPer1k is the replicas' CPU (user + system) over the attack, per 1,000 requests.
	CPUMSPer1k float64 `json:"replica_cpu_ms_per_1k_requests"`
}

// runReplicas restarts the stack with each count and measures it; at the end, the stack gets
// back the count it had.
func runReplicas(ctx context.Context, o replicasOptions, bo buyersOptions, getenv func(string) string, stderr io.Writer, say func(string, ...any)) (_ *replicasReport, err error) {
	before, err := replicaPIDs(o.pidDir)
	if err != nil {
		return nil, fmt.Errorf("the replicas sweep needs the stack of make up: %w", err)
	}
	defer func() {
		say("replicas: the stack back to %d replicas", len(before))
		if rerr := restack(context.WithoutCancel(ctx), o.scripts, len(before), stderr); err == nil {
			err = rerr
		}
	}()
	rep := &replicasReport{Stock: bo.stock, Buyers: o.buyers, IdleS: o.idle.Seconds()}
	for _, n := range o.counts {
		say("replicas: the stack restarted with %d", n)
		if err := restack(ctx, o.scripts, n, stderr); err != nil {
			return nil, err
		}
		pids, err := replicaPIDs(o.pidDir)
		if err != nil {
			return nil, err
		}
		if len(pids) != n {
			return nil, fmt.Errorf("%d replica pid files after starting %d", len(pids), n)
		}
		p := replicasPoint{Replicas: n}
		if p.Idle, err = measureIdle(ctx, pids, o.idle); err != nil {
			return nil, err
		}
		for _, st := range bo.strategies {
			one := bo
			one.strategies = []string{st}
			sr := &buyersReport{Target: bo.target, Stock: bo.stock, Workers: bo.workers, Counts: []int{o.buyers}}
			cpu0, err := replicaCPU(o.pidDir)
			if err != nil {
				return nil, err
			}
			if err := buyEach(ctx, one, sr, "replicas", getenv, stderr, say); err != nil {
				return nil, err
			}
			cpu1, err := replicaCPU(o.pidDir)
			if err != nil {
				return nil, err
			}
			s := replicaSale{buyersPoint: sr.Points[0]}
			s.CPUMSPer1k = float64((cpu1 - cpu0).Milliseconds()) * 1000 / float64(max(s.Requests, 1))
			p.Sales = append(p.Sales, s)
		}
		rep.Points = append(rep.Points, p)
	}
	return rep, nil
}

// replicaCPU is the CPU the replicas of make up have used so far.
func replicaCPU(pidDir string) (time.Duration, error) {
	pids, err := replicaPIDs(pidDir)
	if err != nil {
		return 0, err
	}
	return procstat.CPU(pids)
}

// restack stops the app of make up (nginx and the replicas; the services stay) and starts it
// again with n replicas.
func restack(ctx context.Context, scripts string, n int, stderr io.Writer) error {
	for _, c := range []*exec.Cmd{
		exec.CommandContext(ctx, scripts+"/down.sh"),
		exec.CommandContext(ctx, scripts+"/up.sh"),
	} {
		// SECKILL_PEERS follows the count (scripts/env.sh), unless set: it must not be.
		c.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "SECKILL_REPLICAS=") || strings.HasPrefix(kv, "SECKILL_PEERS=")
		}), "SECKILL_REPLICAS="+strconv.Itoa(n))
		c.Stdout, c.Stderr = io.Discard, stderr
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s with %d replicas: %w", c.Path, n, err)
		}
	}
	return nil
}

// passed reports whether every sale PASSed.
func (r *replicasReport) passed() bool {
	for _, p := range r.Points {
		if slices.ContainsFunc(p.Sales, func(s replicaSale) bool { return s.Verdict != "PASS" }) {
			return false
		}
	}
	return true
}

// strategies are the strategies of the points' sales, in their order.
func (r *replicasReport) strategies() []string {
	var out []string
	for _, p := range r.Points {
		for _, s := range p.Sales {
			if !slices.Contains(out, s.Strategy) {
				out = append(out, s.Strategy)
			}
		}
	}
	return out
}

func (r *replicasReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the cost grows with the replicas\n\nThe stack of make up restarted with each count behind its nginx, on this one machine: the replicas share its cores (GOMAXPROCS = cores ÷ replicas), so what grows is what a replica costs, not what it adds. Idle: the replicas' memory and CPU over %.0f s with no sale of the sweep open; then one sale of %s units per strategy to %s buyers, judged and audited by the load test.\n\n",
		r.IdleS, count(float64(r.Stock)), count(float64(r.Buyers)))
	b.WriteString("| replicas | idle RSS (MB) | idle CPU (ms/s) | strategy | verdict | time to sell out | accepted/s | requests/s | p99 (ms) | 5xx | replicas' CPU per 1k requests (ms) |\n|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		for _, s := range p.Sales {
			verdict := s.Verdict
			if len(s.Violations) > 0 {
				verdict += ": " + strings.Join(s.Violations, "; ")
			}
			fmt.Fprintf(b, "| %d | %.0f | %.1f | %s | %s | %.2f s | %.0f | %.0f | %.1f | %d | %.0f |\n", p.Replicas, p.Idle.RSSMB, p.Idle.CPUMSPerS,
				s.Strategy, verdict, s.SellOutS, s.AcceptedPerSec, s.RequestsPerSec, s.P99MS, s.Status5xx, s.CPUMSPer1k)
		}
	}
	b.WriteString("\n")
}

func (r *replicasReport) html(b *strings.Builder) {
	xs := make([]string, len(r.Points))
	for i, p := range r.Points {
		xs[i] = fmt.Sprintf("%d replicas", p.Replicas)
	}
	curves := func(y func(replicaSale) float64) []series {
		var out []series
		for _, st := range r.strategies() {
			s := series{name: st}
			for _, p := range r.Points {
				i := slices.IndexFunc(p.Sales, func(s replicaSale) bool { return s.Strategy == st })
				v := 0.0
				if i >= 0 {
					v = y(p.Sales[i])
				}
				s.ys = append(s.ys, v)
			}
			out = append(out, s)
		}
		return out
	}
	chart(b, "Requests answered per second", xs, curves(func(s replicaSale) float64 { return s.RequestsPerSec }))
	chart(b, "Replicas' CPU per 1,000 requests (ms)", xs, curves(func(s replicaSale) float64 { return s.CPUMSPer1k }))
	idle := series{name: "idle RSS (MB)"}
	for _, p := range r.Points {
		idle.ys = append(idle.ys, p.Idle.RSSMB)
	}
	chart(b, "The replicas' idle memory (MB)", xs, []series{idle})
}
