package yardstick

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestRateErrorsOfTwoTypes is the test that would have crashed the load test's old baseline
// loop: it kept the first error with atomic.Value.CompareAndSwap, which panics ("compare and
// swap of inconsistently typed value") as soon as a goroutine offers an error of another
// concrete type than the one stored — two failing goroutines were enough.
func TestRateErrorsOfTwoTypes(t *testing.T) {
	errA := errors.New("a")                     // *errors.errorString
	errB := fmt.Errorf("b: %w", os.ErrNotExist) // *fmt.wrapError
	var calls atomic.Int64
	_, err := Rate(context.Background(), 16, 0, time.Second, func(context.Context) error {
		if calls.Add(1)%2 == 0 {
			return errA
		}
		return errB
	})
	if !errors.Is(err, errA) && !errors.Is(err, errB) {
		t.Fatalf("Rate = %v, want one of the op's errors", err)
	}
}

func TestRateStopsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Rate(ctx, 4, time.Second, time.Minute, func(ctx context.Context) error {
		select { // an op blocked in I/O, as a query is
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
			return nil
		}
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Rate = %v, want the context's error", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Rate returned %s after its context ended; it must watch the context, not sleep", el)
	}
}

func TestRateCounts(t *testing.T) {
	// One goroutine, one op per millisecond: about 1,000/s whatever the machine (the sleep is
	// the op), far from it only if Rate miscounts.
	rate, err := Rate(context.Background(), 1, 50*time.Millisecond, time.Second, func(context.Context) error {
		time.Sleep(time.Millisecond)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rate < 200 || rate > 1100 {
		t.Errorf("rate %.0f/s, want about 1,000/s (a 1 ms op)", rate)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 3}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	want := Latency{Count: 100, P50: 50, P95: 95, P99: 99, Max: 100}
	if got := Percentiles(lat); got != want {
		t.Errorf("Percentiles = %+v, want %+v", got, want)
	}
	if got := Percentiles([]time.Duration{1500 * time.Microsecond}); got != (Latency{Count: 1, P50: 1.5, P95: 1.5, P99: 1.5, Max: 1.5}) {
		t.Errorf("Percentiles of one = %+v", got)
	}
	if got := Percentiles(nil); got != (Latency{}) {
		t.Errorf("Percentiles(nil) = %+v, want zero", got)
	}
}
