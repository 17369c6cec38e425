package viewers

import (
	"slices"
	"sort"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Sighting is a viewer's first sight of a stock level: at At it read Stock, lower than any
// stock it had read before.
type Sighting struct {
	At    time.Time
	Stock int
}

// Lows are one viewer's sightings in the order it made them: each lower than the one before.
type Lows []Sighting

// Saw records that the viewer read stock at at; only a new low is kept.
func (l *Lows) Saw(at time.Time, stock int) {
	if n := len(*l); n == 0 || stock < (*l)[n-1].Stock {
		*l = append(*l, Sighting{At: at, Stock: stock})
	}
}

// FirstAtOrBelow is when the viewer first read a stock of at most stock, if it ever did.
func (l Lows) FirstAtOrBelow(stock int) (time.Time, bool) {
	i := sort.Search(len(l), func(i int) bool { return l[i].Stock <= stock })
	if i == len(l) {
		return time.Time{}, false
	}
	return l[i].At, true
}

// LagSamples bounds the units each viewer is timed on: 200 evenly spaced, the last unit among them.
const LagSamples = 200

// Lag is how late viewers learnt of units sold.
type Lag struct {
	// Latency is over viewers × sampled units, in ms; a viewer that read the unit gone before
	// its 202 arrived counts 0 (Early).
	Latency yardstick.Latency `json:"latency"`
	// Units is how many units were sampled (at most LagSamples); Samples = viewers × Units.
	Units   int `json:"units"`
	Samples int `json:"samples"`
	// Early counts the samples where the viewer read the unit gone before its 202 arrived.
	Early int `json:"early"`
	// Missed counts the samples where the viewer never read the unit gone.
	Missed int `json:"missed"`
}

// Lags times how late viewers learnt of each unit sold. For the k-th unit — stock reaching
// initial − k — the moment it was sold is sold[k-1] (sold sorted, one time per unit: the k-th
// 202's arrival, by which k units had been committed, or the k-th send, before which fewer had),
// and a viewer learnt of it when it first read a stock of at most initial − k. Units beyond the
// initial stock (an oversell) are not timed: no viewer can read a stock below zero.
func Lags(initial int, sold []time.Time, viewers []Lows) Lag {
	units := min(len(sold), initial)
	ks := sampleUnits(units, LagSamples)
	var out Lag
	out.Units = len(ks)
	lat := make([]time.Duration, 0, len(ks)*len(viewers))
	for _, lows := range viewers {
		for _, k := range ks {
			out.Samples++
			seen, ok := lows.FirstAtOrBelow(initial - k)
			if !ok {
				out.Missed++
				continue
			}
			d := seen.Sub(sold[k-1])
			if d < 0 {
				out.Early++
				d = 0
			}
			lat = append(lat, d)
		}
	}
	out.Latency = yardstick.Percentiles(lat)
	return out
}

// sampleUnits returns at most n of the units 1..units, evenly spaced, ending with units.
func sampleUnits(units, n int) []int {
	if units <= 0 {
		return nil
	}
	if units <= n {
		ks := make([]int, units)
		for i := range ks {
			ks[i] = i + 1
		}
		return ks
	}
	ks := make([]int, 0, n)
	for i := 1; i <= n; i++ {
		k := (i*units + n - 1) / n // ⌈i·units/n⌉
		if len(ks) == 0 || k != ks[len(ks)-1] {
			ks = append(ks, k)
		}
	}
	return ks
}

// Sorted returns a sorted copy of ts.
func Sorted(ts []time.Time) []time.Time {
	s := slices.Clone(ts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	return s
}
