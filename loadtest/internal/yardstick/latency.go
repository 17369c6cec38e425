package yardstick

import (
	"slices"
	"time"
)

// Latency summarises a set of durations, in milliseconds.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Percentiles summarises lat, which it sorts in place. A percentile q is the element at index
// ⌊q·(n−1)⌋ of the sorted durations: always one that was measured, never an interpolation.
func Percentiles(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
	}
	return Latency{Count: len(lat), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: at(1)}
}
