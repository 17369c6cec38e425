package pause_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/pause"
)

func TestFor(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		d       time.Duration
		want    error
		atLeast time.Duration
	}{
		{"waits the full d", context.Background(), 20 * time.Millisecond, nil, 20 * time.Millisecond},
		{"zero d does not wait", context.Background(), 0, nil, 0},
		{"negative d does not wait", context.Background(), -time.Second, nil, 0},
		{"an ended ctx ends the wait", ended, time.Hour, context.Canceled, 0},
		{"an ended ctx with zero d", ended, 0, context.Canceled, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			err := pause.For(c.ctx, c.d)
			if !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Fatalf("For = %v, want %v", err, c.want)
			}
			if took := time.Since(start); took < c.atLeast || took > c.atLeast+10*time.Second {
				t.Fatalf("For took %s, want %s or a little more", took, c.atLeast)
			}
		})
	}
}

// TestForEndsWithCtx: a ctx that ends during the wait ends it then, with ctx's error.
func TestForEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := pause.For(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("For = %v, want %v", err, context.DeadlineExceeded)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("For took %s after a 20 ms deadline", took)
	}
}
