package redisboard

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

func TestBoardAgainstRedis(t *testing.T) {
	rdb := itest.Redis(t)
	b, err := NewBoard(rdb, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := itest.Suffix(12)
	t.Cleanup(func() { rdb.Del(context.Background(), boardKey(id)) })
	if _, err := b.Get(ctx, id); !errors.Is(err, stampede.ErrUnknown) {
		t.Fatalf("Get(absent) = %v, want stampede.ErrUnknown", err)
	}
	p := stampede.Progress{
		ID: id, ProductID: 3, Buyers: 200, Targets: []string{"http://a:1", "http://b:2"},
		Sent: 150, Retries: 4, Accepted: 20, SoldOut: 120, LimitReached: 1, RejectedOther: 2, Errors: 3,
		Running: true, StartedAt: time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC),
	}
	if err := b.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Running, p.Sent, p.FinishedAt = false, 200, p.StartedAt.Add(1500*time.Millisecond)
	if err := b.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	if ttl := rdb.TTL(ctx, boardKey(id)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL = %s, want (0, 1m]", ttl)
	}

	down, _ := NewBoard(redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(itest.FreePort(t)), MaxRetries: -1}), 0)
	if _, err := down.Get(ctx, id); !errors.Is(err, stampede.ErrUnavailable) {
		t.Errorf("Get without Redis = %v, want stampede.ErrUnavailable", err)
	}
}
