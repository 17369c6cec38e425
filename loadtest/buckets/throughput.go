package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// ThroughputRow is the rate of one sale split in K buckets, never selling out.
type ThroughputRow struct {
	Backend    string `json:"backend"`
	K          int    `json:"k"`
	Goroutines int    `json:"goroutines"`
	// Masters are the Redis Cluster masters holding the K buckets (1 on one node; 0 for MySQL).
	Masters int `json:"masters,omitempty"`
	// UnitsPerS is the mean of the rounds' rates: each round measures every K, in turn
	// ascending and descending, so that a drift of the machine does not favour one end.
	UnitsPerS float64   `json:"units_per_s"`
	Rounds    []float64 `json:"rounds"`
	// Ratio is UnitsPerS over the same backend's K=1 of this run (for MySQL, K=1 is R).
	Ratio float64 `json:"ratio_to_k1"`
	// Units are every unit taken, warm-up included; FsyncsPerUnit and LockWaitsPerUnit are the
	// server's Innodb_data_fsyncs and Innodb_row_lock_waits over the same time, per unit (MySQL;
	// server-wide counters: anyone else's work on the server counts too).
	Units            int64   `json:"units"`
	Fsyncs           int64   `json:"fsyncs,omitempty"`
	LockWaits        int64   `json:"row_lock_waits,omitempty"`
	FsyncsPerUnit    float64 `json:"fsyncs_per_unit,omitempty"`
	LockWaitsPerUnit float64 `json:"row_lock_waits_per_unit,omitempty"`
}

// merge adds round, a measurement of the same backend and K, to r.
func (r *ThroughputRow) merge(round ThroughputRow) {
	r.Rounds = append(r.Rounds, round.UnitsPerS)
	r.Units += round.Units
	r.Fsyncs += round.Fsyncs
	r.LockWaits += round.LockWaits
	sum := 0.0
	for _, x := range r.Rounds {
		sum += x
	}
	r.UnitsPerS = sum / float64(len(r.Rounds))
	if r.Units > 0 {
		r.FsyncsPerUnit = float64(r.Fsyncs) / float64(r.Units)
		r.LockWaitsPerUnit = float64(r.LockWaits) / float64(r.Units)
	}
}

// measureThroughput takes units from a sale of k buckets from g goroutines, each unit from a
// bucket picked at random, and returns one round: the median rate (yardstick.Rate, as R) and the
// server's counters over it.
func measureThroughput(ctx context.Context, be backend, k, g int, warmup, d time.Duration) (ThroughputRow, error) {
	row := ThroughputRow{Backend: be.Name(), K: k, Goroutines: g}
	units := make([]int64, k)
	for b := range units {
		units[b] = int64(1) << 50 / int64(k)
	}
	s, err := be.NewSale(ctx, units, false)
	if err != nil {
		return row, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.Delete(dctx)
	}()
	var db *sql.DB
	switch s := s.(type) {
	case *mysqlSale:
		db = s.db
	case *redisSale:
		row.Masters = s.masters
	}
	before, err := innodbCounters(ctx, db)
	if err != nil {
		return row, err
	}
	var taken atomic.Int64
	row.UnitsPerS, err = yardstick.Rate(ctx, g, warmup, d, func(ctx context.Context) error {
		ok, err := s.Take(ctx, rand.IntN(k))
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("a bucket of the throughput sale ran out")
		}
		taken.Add(1)
		return nil
	})
	if err != nil {
		return row, fmt.Errorf("%s K=%d: %w", be.Name(), k, err)
	}
	row.Units = taken.Load()
	after, err := innodbCounters(ctx, db)
	if err != nil {
		return row, err
	}
	row.Fsyncs, row.LockWaits = after[0]-before[0], after[1]-before[1]
	return row, nil
}

// innodbCounters reads Innodb_data_fsyncs and Innodb_row_lock_waits; nothing without a db.
func innodbCounters(ctx context.Context, db *sql.DB) ([2]int64, error) {
	var c [2]int64
	if db == nil {
		return c, nil
	}
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_data_fsyncs', 'Innodb_row_lock_waits')")
	if err != nil {
		return c, fmt.Errorf("mysql: status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return c, err
		}
		switch name {
		case "Innodb_data_fsyncs":
			c[0] = v
		case "Innodb_row_lock_waits":
			c[1] = v
		}
	}
	return c, rows.Err()
}
