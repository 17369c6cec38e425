// Package redisboard keeps the progress of the demo stampedes in Redis for an hour, so that any
// replica behind the load balancer can answer for a stampede another one runs. It is best
// effort and short-lived, like the live figures: nothing the sale's invariants depend on.
package redisboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/stampede"
)

// Board keeps the progress of every stampede in Redis for an hour, so that any replica behind the
// load balancer answers GET /api/v1/admin/stampedes/{id}, whichever replica runs it.
type Board struct {
	rdb redis.Cmdable
	ttl time.Duration
}

var _ stampede.Board = (*Board)(nil)

// NewBoard returns a Board on rdb; ttl 0 means one hour.
func NewBoard(rdb redis.Cmdable, ttl time.Duration) (*Board, error) {
	if rdb == nil {
		return nil, errors.New("redisboard: a Redis client is required")
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &Board{rdb: rdb, ttl: ttl}, nil
}

// progressRow is a stampede.Progress as stored in Redis.
type progressRow struct {
	ID            string    `json:"id"`
	ProductID     int64     `json:"product_id"`
	Buyers        int       `json:"buyers"`
	Targets       []string  `json:"targets"`
	Sent          int       `json:"sent"`
	Retries       int       `json:"retries"`
	Accepted      int       `json:"accepted"`
	SoldOut       int       `json:"sold_out"`
	LimitReached  int       `json:"limit_reached"`
	RejectedOther int       `json:"rejected_other"`
	Errors        int       `json:"errors"`
	Running       bool      `json:"running"`
	StartedAt     time.Time `json:"started_at"`
	FinishedAt    time.Time `json:"finished_at"`
}

func boardKey(id string) string { return "seckill:stampede:" + id }

// Put stores p, replacing what was there.
func (b *Board) Put(ctx context.Context, p stampede.Progress) error {
	data, err := json.Marshal(progressRow(p))
	if err != nil {
		return fmt.Errorf("encode stampede progress: %w", err)
	}
	if err := b.rdb.Set(ctx, boardKey(p.ID), data, b.ttl).Err(); err != nil {
		return fmt.Errorf("%w: %w", stampede.ErrUnavailable, err)
	}
	return nil
}

// Get returns the stored progress of id, stampede.ErrUnknown when there is none, or an error
// wrapping stampede.ErrUnavailable when Redis does not answer.
func (b *Board) Get(ctx context.Context, id string) (stampede.Progress, error) {
	data, err := b.rdb.Get(ctx, boardKey(id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return stampede.Progress{}, stampede.ErrUnknown
	case err != nil:
		return stampede.Progress{}, fmt.Errorf("%w: %w", stampede.ErrUnavailable, err)
	}
	var row progressRow
	if err := json.Unmarshal(data, &row); err != nil {
		return stampede.Progress{}, fmt.Errorf("%w: stored progress of %s is unreadable: %w", stampede.ErrUnavailable, id, err)
	}
	return stampede.Progress(row), nil
}
