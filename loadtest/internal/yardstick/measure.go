package yardstick

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// sampleEvery is the width of one rate sample of Rate.
const sampleEvery = 250 * time.Millisecond

// Rate runs op from n goroutines, each calling it again as soon as it returns, for warmup and
// then d, and returns the median of the rates seen in each quarter-second of d: the median
// shrugs off the odd sample in which the machine did something else.
//
// The first error of any op ends the run and is returned. When ctx ends first, Rate returns
// ctx's error at once rather than finishing its samples. ctx is passed to op and is cancelled
// when the run ends, so an op blocked in I/O returns promptly.
func Rate(ctx context.Context, n int, warmup, d time.Duration, op func(context.Context) error) (float64, error) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		done     atomic.Int64
		failOnce sync.Once
		firstErr error // written once, under failOnce; read after wg.Wait
		wg       sync.WaitGroup
	)
	for range max(1, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				if err := op(ctx); err != nil {
					if ctx.Err() == nil { // an error caused by the end of the run is no error
						failOnce.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				done.Add(1)
			}
		})
	}

	rates := make([]float64, 0, max(1, int(d/sampleEvery)))
	if sleep(ctx, warmup) {
		ticker := time.NewTicker(sampleEvery)
		prev, t := done.Load(), time.Now()
	sampling:
		for len(rates) < cap(rates) {
			select {
			case <-ctx.Done():
				break sampling
			case now := <-ticker.C:
				n := done.Load()
				rates = append(rates, float64(n-prev)/now.Sub(t).Seconds())
				prev, t = n, now
			}
		}
		ticker.Stop()
	}
	cancel()
	wg.Wait()
	switch {
	case firstErr != nil:
		return 0, firstErr
	case parent.Err() != nil:
		return 0, parent.Err()
	}
	return median(rates), nil
}

// sleep waits for d or for ctx to end, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// median returns the middle value of xs (the upper one of the two middles), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
