package main

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// A bound is how much a gauge may grow from the early window after warm-up to the late window at
// the end of the run: late median ≤ early median × (1 + Share) + Floor. Medians, not maxima: a
// heap saws up and down with each GC cycle and a goroutine count with each burst of requests, and
// a window's median is what stays. A leak grows with the time run, so the late window of a long
// run is where it shows; the allowance covers what moves without one.
type bound struct {
	Share float64
	Floor float64
}

// bounds are the soak's, per gauge. Each is as tight as what moves without a leak allows, and
// catches within 30 minutes a leak that would take a replica down within days (TestJudgeGrowth):
//   - heap: a fifth, plus 8 MiB for the board's and the caches' growth with the sales the soak
//     creates (one product per strategy per sale period, each a few KiB rendered);
//   - goroutines: a tenth plus 25, for the event streams and requests in flight at the moment of
//     a sample; a leaked goroutine per request or per stream is thousands an hour;
//   - open files: a tenth plus 10, the sockets of keep-alive connections that come and go;
//   - a replica's MySQL pool and MySQL's connected threads: a quarter plus 5 and 10, the pool
//     opening and idling out connections with the load.
var bounds = map[gauge]bound{
	heap:         {Share: 0.20, Floor: 8 << 20},
	goroutines:   {Share: 0.10, Floor: 25},
	openFiles:    {Share: 0.10, Floor: 10},
	dbConns:      {Share: 0.25, Floor: 5},
	mysqlThreads: {Share: 0.25, Floor: 10},
}

// inRun are the gauges judged over the run; goroutines and open files are judged at rest
// (judgeIdle), for under load they follow the connections open at the moment, which follow how
// busy the machine is.
var inRun = map[gauge]bool{heap: true, dbConns: true, mysqlThreads: true}

// restBounds are the bounds at rest, from the rest after the warm-up to the rest after the run:
// nothing but what the run left behind is then there. A twentieth plus 10 goroutines or 5 files:
// a goroutine or a file left per purchase, per payment, per stream or per sale (there is one sale
// per strategy and period) is past them within the run.
var restBounds = map[gauge]bound{
	goroutines: {Share: 0.05, Floor: 10},
	openFiles:  {Share: 0.05, Floor: 5},
}

// A growth is one gauge of one source over the run after warm-up, judged.
type growth struct {
	// When is "run" (medians of the first and last quarter under load) or "rest" (after the
	// warm-up and after the run, at rest).
	When   string
	Source string
	Gauge  gauge
	// Early and Late are the medians of the first and the last quarter after warm-up; Limit is
	// what Late may reach (bounds).
	Early, Late, Limit float64
	// PerHour is the least-squares slope over the whole run after warm-up, per hour: for the
	// report, not the verdict (a sawtooth fits a slope of its phase).
	PerHour float64
	Samples int
	OK      bool
}

func (g growth) String() string {
	return fmt.Sprintf("%s %s: %s early, %s late (limit %s)", g.Source, g.Gauge, format(g.Gauge, g.Early), format(g.Gauge, g.Late), format(g.Gauge, g.Limit))
}

// judgeGrowth judges every source's gauges in samples from warmEnd on. Each quarter window must
// hold at least two samples: a run too short for that is an error, not a pass.
func judgeGrowth(samples []sample, warmEnd, end time.Time) ([]growth, error) {
	if !end.After(warmEnd) {
		return nil, fmt.Errorf("the run ended (%s) before its warm-up did (%s)", end.Format(time.TimeOnly), warmEnd.Format(time.TimeOnly))
	}
	quarter := end.Sub(warmEnd) / 4
	type key struct {
		source string
		g      gauge
	}
	series := map[key][]sample{}
	var keys []key
	for _, s := range samples {
		if s.At.Before(warmEnd) || s.At.After(end) {
			continue
		}
		for g := range s.Values {
			if !inRun[g] {
				continue
			}
			k := key{s.Source, g}
			if _, seen := series[k]; !seen {
				keys = append(keys, k)
			}
			series[k] = append(series[k], s)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no sample after the warm-up")
	}
	var out []growth
	for _, k := range keys {
		var early, late, xs, ys []float64
		for _, s := range series[k] {
			v := s.Values[k.g]
			switch {
			case s.At.Before(warmEnd.Add(quarter)):
				early = append(early, v)
			case !s.At.Before(end.Add(-quarter)):
				late = append(late, v)
			}
			xs, ys = append(xs, s.At.Sub(warmEnd).Hours()), append(ys, v)
		}
		if len(early) < 2 || len(late) < 2 {
			return nil, fmt.Errorf("%s %s: %d samples in the early quarter and %d in the late one after warm-up, want 2 each: run longer or sample more often",
				k.source, k.g, len(early), len(late))
		}
		b := bounds[k.g]
		gr := growth{When: "run", Source: k.source, Gauge: k.g, Early: median(early), Late: median(late), PerHour: slope(xs, ys), Samples: len(xs)}
		gr.Limit = gr.Early*(1+b.Share) + b.Floor
		gr.OK = gr.Late <= gr.Limit
		out = append(out, gr)
	}
	return out, nil
}

// judgeIdle judges goroutines and open files of each replica at rest after the run (after)
// against the rest after the warm-up (before).
func judgeIdle(before, after []sample) ([]growth, error) {
	if len(before) == 0 || len(before) != len(after) {
		return nil, fmt.Errorf("the replicas did not come to rest (%d and %d samples at rest)", len(before), len(after))
	}
	var out []growth
	for i, b := range before {
		a := after[i]
		if a.Source != b.Source {
			return nil, fmt.Errorf("samples at rest of %s and %s", b.Source, a.Source)
		}
		for _, g := range []gauge{goroutines, openFiles} {
			gr := growth{When: "rest", Source: b.Source, Gauge: g, Early: b.Values[g], Late: a.Values[g], Samples: 2}
			bd := restBounds[g]
			gr.Limit = gr.Early*(1+bd.Share) + bd.Floor
			gr.OK = gr.Late <= gr.Limit
			out = append(out, gr)
		}
	}
	return out, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// slope is the least-squares slope of ys over xs (0 when xs do not vary).
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	d := n*sxx - sx*sx
	if n < 2 || math.Abs(d) < 1e-12 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

// format writes a gauge's value in its unit: MiB for the heap, a count for the rest.
func format(g gauge, v float64) string {
	if g == heap {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}
