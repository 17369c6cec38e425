package livestats

import "time"

// Rates counts the purchase attempts and the accepted purchases of one product in each of the
// last seconds, across every replica. Requests[i] and Accepted[i] count the second that starts at
// Start + i seconds; the last second counted is complete.
type Rates struct {
	Start    time.Time
	Requests []int64
	Accepted []int64
}

// PerSecond returns the mean attempts and accepted purchases per second over the last window
// seconds of r (all of r when it holds fewer).
func (r Rates) PerSecond(window int) (requests, accepted float64) {
	return meanOfLast(r.Requests, window), meanOfLast(r.Accepted, window)
}

func meanOfLast(xs []int64, n int) float64 {
	if n <= 0 || len(xs) == 0 {
		return 0
	}
	n = min(n, len(xs))
	var sum int64
	for _, x := range xs[len(xs)-n:] {
		sum += x
	}
	return float64(sum) / float64(n)
}
