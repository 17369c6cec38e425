package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
)

func TestBackoffChecked(t *testing.T) {
	for _, c := range []struct {
		name    string
		in, out lock.Backoff
		fails   bool
	}{
		{"zero: the defaults", lock.Backoff{}, lock.Backoff{Min: lock.DefaultMinBackoff, Max: lock.DefaultMaxBackoff}, false},
		{"given bounds stay", lock.Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}, lock.Backoff{Min: time.Millisecond, Max: 4 * time.Millisecond}, false},
		{"a floor above the default ceiling", lock.Backoff{Min: 200 * time.Millisecond}, lock.Backoff{Min: 200 * time.Millisecond, Max: 200 * time.Millisecond}, false},
		{"crossed", lock.Backoff{Min: time.Second, Max: time.Millisecond}, lock.Backoff{}, true},
		{"negative", lock.Backoff{Min: -time.Millisecond}, lock.Backoff{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.in.Checked()
			if (err != nil) != c.fails || got != c.out {
				t.Fatalf("Checked() = %v, %v; want %v, fails %v", got, err, c.out, c.fails)
			}
		})
	}
}

// TestBackoffsNext: each sleep is drawn from the upper half of a step that starts at Min and
// doubles up to Max.
func TestBackoffsNext(t *testing.T) {
	b := lock.Backoff{Min: 2 * time.Millisecond, Max: 10 * time.Millisecond}
	for range 100 {
		w := b.Start()
		for _, step := range []time.Duration{2, 4, 8, 10, 10} {
			step *= time.Millisecond
			if d := w.Next(); d < step/2 || d > step {
				t.Fatalf("sleep %s outside [%s, %s]", d, step/2, step)
			}
		}
	}
}

func TestBackoffsSleepEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := lock.Backoff{Min: time.Hour, Max: time.Hour}.Start()
	if err := w.Sleep(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want %v", err, context.Canceled)
	}
}

func TestLeaseTTL(t *testing.T) {
	for _, c := range []struct {
		name  string
		ttl   time.Duration
		want  time.Duration
		fails bool
	}{
		{"zero: the default", 0, time.Second, false},
		{"cut to whole units", 1500*time.Millisecond + 700*time.Microsecond, 1500 * time.Millisecond, false},
		{"the least", 10 * time.Millisecond, 10 * time.Millisecond, false},
		{"shorter than the least once cut", 10*time.Millisecond - time.Microsecond, 0, true},
		{"negative", -time.Second, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := lock.LeaseTTL(c.ttl, time.Millisecond, time.Second, 10*time.Millisecond)
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("LeaseTTL(%s) = %s, %v; want %s, fails %v", c.ttl, got, err, c.want, c.fails)
			}
		})
	}
}

func TestNeverLost(t *testing.T) {
	select {
	case <-lock.NeverLost():
		t.Fatal("NeverLost is closed")
	default:
	}
	first, second := lock.NeverLost(), lock.NeverLost()
	if first != second {
		t.Fatal("NeverLost is not one channel")
	}
}
