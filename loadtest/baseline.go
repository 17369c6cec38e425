package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
)

// baselineConcurrency is how many goroutines drive each baseline: enough to saturate one hot
// row or one lock on two cores, as the attack does.
const baselineConcurrency = 16

// measureBaselines measures, for each strategy to attack, the raw rate of the operation under
// it, straight through the client library: a conditional UPDATE of one hot row for mysql, an
// acquire and release of one lock for redis and zk.
func measureBaselines(ctx context.Context, db *sql.DB, o *options, admin *adminClient, say func(string, ...any)) ([]Baseline, error) {
	var out []Baseline
	for _, st := range o.strategies {
		var op string
		var fn func(ctx context.Context) error
		var cleanup func()
		switch st {
		case "mysql":
			id, err := admin.saleProduct(ctx, "loadtest · baseline", "mysql", 1_000_000_000)
			if err != nil {
				return nil, err
			}
			op = "UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1 (autocommit, database/sql)"
			fn = func(ctx context.Context) error {
				_, err := db.ExecContext(ctx, "UPDATE products SET stock = stock - 1 WHERE id = ? AND stock >= 1", id)
				return err
			}
			db.SetMaxOpenConns(baselineConcurrency)
			cleanup = func() { db.SetMaxOpenConns(4) }
		case "redis":
			rdb := redis.NewClient(&redis.Options{Addr: o.redisAddr, PoolSize: baselineConcurrency})
			c, err := redislock.New(rdb, redislock.Options{})
			if err != nil {
				return nil, err
			}
			op = "redislock Acquire + Release of one lock"
			fn = lockCycle(c.Locker())
			cleanup = func() { rdb.Close() }
		case "zk":
			c, err := zklock.Connect(ctx, o.zkServers, zklock.Options{})
			if err != nil {
				return nil, fmt.Errorf("zk baseline: %w", err)
			}
			op = "zklock Acquire + Release of one lock"
			fn = lockCycle(c.Locker())
			cleanup = c.Close
		default:
			continue // `none` has nothing underneath but the read and the write
		}
		rate, err := measure(ctx, o.baselineFor, fn)
		cleanup()
		if err != nil {
			return nil, fmt.Errorf("%s baseline: %w", st, err)
		}
		say("baseline %s: %.0f ops/s (%s)", st, rate, op)
		out = append(out, Baseline{Strategy: st, Operation: op, Concurrency: baselineConcurrency, OpsPerSec: rate})
	}
	return out, nil
}

func lockCycle(l lock.Locker) func(ctx context.Context) error {
	name := fmt.Sprintf("loadtest-baseline-%d", time.Now().UnixNano())
	return func(ctx context.Context) error {
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			return err
		}
		return lease.Release(ctx)
	}
}

// measure runs fn from baselineConcurrency goroutines for d, after half a second of warm-up, and
// returns the median of the rates seen in each quarter-second.
func measure(ctx context.Context, d time.Duration, fn func(context.Context) error) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Second)
	defer cancel()
	var done atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range baselineConcurrency {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(ctx); err != nil {
					if ctx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
					}
					return
				}
				done.Add(1)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	var rates []float64
	prev, t := done.Load(), time.Now()
	for range max(1, int(d/(250*time.Millisecond))) {
		time.Sleep(250 * time.Millisecond)
		now, n := time.Now(), done.Load()
		rates = append(rates, float64(n-prev)/now.Sub(t).Seconds())
		prev, t = n, now
	}
	close(stop)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return 0, err
	}
	slices.Sort(rates)
	return rates[len(rates)/2], nil
}
